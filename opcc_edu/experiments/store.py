"""The results store of one results directory: atomic per run, safe under concurrent writers,
never deleting what it cannot regenerate.

Layout of a results directory (one per profile)::

    records/<run>.json  one record per finished run: its row of runs.csv and every row of
                        results.csv, with a SHA-256 of its content -- the source of truth
    results.csv         exported from the records, rewritten atomically after every run
    runs.csv            exported from the records, one row per finished run
    values/<run>.npz    the run's member values (written before its record)
    meta.json           one session per invocation (command, machine, wall time)
    quarantine/, *.quarantine.csv, *.bak
                        what a repair set aside, never deleted
    .locks/             lock files (git ignores them)

Guarantees:

* **Atomic per run.** A run's rows and its completion are one file, written under a temporary
  name in the same directory, flushed to disk and renamed over its final name. A killed
  process leaves either the whole run or none of it; its temporary files are removed by the
  next call.
* **Safe under concurrent writers.** Several processes may run grids on one directory: a run is
  claimed (an exclusive ``fcntl`` lock on ``.locks/<run>.lock``) before it is computed and its
  record is checked again after the claim, so no run is done twice and no row appears twice.
  Exports and ``meta.json`` are rewritten under one directory lock.
* **Never deleting silently.** The exports are regenerated from the records; a line of
  ``results.csv`` or ``runs.csv`` that the records do not reproduce (torn, unparseable,
  duplicated, or of an unfinished or foreign run) is appended to ``results.quarantine.csv`` /
  ``runs.quarantine.csv`` beside the table, and a table that would shrink is first copied to
  ``<table>.<time>.bak``; a record that fails its checksum is moved to ``quarantine/``. Each
  of these raises a :class:`StoreWarning` naming the file. A directory written before records
  existed (only the two CSV files) is read as it is and converted on the first write
  (:func:`migrate_results`).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import json
import os
import secrets
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .records import (
    RESULT_COLUMNS,
    ROW_KEY,
    RUN_COLUMNS,
    FileLock,
    ResultsStoreError,
    RunRecord,
    StoreWarning,
    atomic_write,
    read_table,
    render_table,
)

__all__ = ["ResultsStore", "migrate_results"]


def _stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------
class ResultsStore:
    """The results of one directory; see the module docstring for the guarantees.

    Reading (:meth:`records`) never writes. Writing starts with :meth:`prepare` (check that the
    directory is writable, clean up after killed processes, repair, export).
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.records_dir = self.directory / "records"
        self.locks_dir = self.directory / ".locks"
        self.quarantine_dir = self.directory / "quarantine"
        self.results_csv = self.directory / "results.csv"
        self.runs_csv = self.directory / "runs.csv"
        self.meta_json = self.directory / "meta.json"
        self._cache: dict[str, tuple[tuple[int, int], RunRecord | str]] = {}
        self._lock_depth = 0
        self._lock: FileLock | None = None

    # reading --------------------------------------------------------------------------------
    def _scan(self) -> tuple[dict[str, RunRecord], dict[Path, str]]:
        """Valid records by run id, and corrupt record files with the reason."""
        valid: dict[str, RunRecord] = {}
        corrupt: dict[Path, str] = {}
        if not self.records_dir.is_dir():
            return valid, corrupt
        for path in sorted(self.records_dir.glob("*.json")):
            try:
                stat = path.stat()
                key = (stat.st_mtime_ns, stat.st_size)
                cached = self._cache.get(path.name)
                if cached is None or cached[0] != key:
                    try:
                        parsed: RunRecord | str = RunRecord.from_json(path.read_bytes(), path.name)
                    except ValueError as exc:
                        parsed = str(exc)
                    self._cache[path.name] = cached = (key, parsed)
            except FileNotFoundError:  # set aside by another process meanwhile
                continue
            if isinstance(cached[1], RunRecord):
                valid[cached[1].run_id] = cached[1]
            else:
                corrupt[path] = cached[1]
        return valid, corrupt

    def _legacy(self, known: Mapping[str, RunRecord], strict: bool = True) -> list[RunRecord]:
        """Runs listed in ``runs.csv`` without a record, with their rows from ``results.csv``.

        Raises:
            ValueError: when a table's header is not the expected one (``strict``; otherwise
                such a table contributes nothing, and the next export sets it aside).
        """
        run_rows, _, runs_ok = read_table(self.runs_csv, RUN_COLUMNS)
        if not runs_ok and strict:
            raise ValueError(f"{self.runs_csv} does not start with the header {','.join(RUN_COLUMNS)}")
        wanted: dict[str, tuple[int, dict[str, str]]] = {}
        for index, fields in enumerate(run_rows):
            run = dict(zip(RUN_COLUMNS, fields, strict=True))
            if run["run_id"] not in known and run["run_id"] not in wanted:
                wanted[run["run_id"]] = (index, run)
        if not wanted:  # every run has its record: results.csv is only an export
            return []
        result_rows, _, results_ok = read_table(self.results_csv, RESULT_COLUMNS)
        if not results_ok and strict:
            raise ValueError(f"{self.results_csv} does not start with the header {','.join(RESULT_COLUMNS)}")
        rows: dict[str, dict[tuple[str, ...], list[str]]] = collections.defaultdict(dict)
        for fields in result_rows:
            named = dict(zip(RESULT_COLUMNS, fields, strict=True))
            if named["run_id"] in wanted:
                rows[named["run_id"]].setdefault(tuple(named[k] for k in ROW_KEY), fields)
        return [RunRecord(run, list(rows[rid].values()), index) for rid, (index, run) in wanted.items() if rows[rid]]

    def records(self, warn: bool = True, strict: bool = True) -> list[RunRecord]:
        """Every finished run, in export order: the records, and runs of a directory written
        before records existed (read from its CSV files). Never writes.

        Args:
            warn: warn about corrupt record files (set aside by the next write).
            strict: raise ValueError for a CSV table with another header (else ignore it).
        """
        valid, corrupt = self._scan()
        if warn:
            for path, reason in corrupt.items():
                warnings.warn(
                    f"ignoring the corrupt run record {path} ({reason}); the next run on "
                    f"this directory moves it to {self.quarantine_dir}",
                    StoreWarning,
                    stacklevel=3,
                )
        found = list(valid.values()) + self._legacy(valid, strict)
        return sorted(found, key=lambda r: (r.sequence, r.run_id))

    def finished_ids(self) -> set[str]:
        """Run ids of the finished runs (valid records only, after :meth:`prepare`)."""
        return set(self._scan()[0])

    def has_record(self, slug: str) -> bool:
        """Whether the run has a valid record; an invalid one is set aside (claim held)."""
        path = self.record_path(slug)
        if not path.exists():
            return False
        try:
            RunRecord.from_json(path.read_bytes(), path.name)
        except ValueError as exc:
            self._set_aside(path, str(exc))
            return False
        return True

    def _set_aside(self, path: Path, reason: str) -> Path:
        """Move a damaged file to ``quarantine/`` with a warning naming where it went."""
        self.quarantine_dir.mkdir(exist_ok=True)
        target = self.quarantine_dir / f"{path.name}.{_stamp()}"
        os.replace(path, target)
        warnings.warn(f"{path} is damaged ({reason}); moved to {target}", StoreWarning, stacklevel=4)
        return target

    def record_path(self, slug: str) -> Path:
        """Path of the record of the run with file-name form ``slug``."""
        return self.records_dir / f"{slug}.json"

    # locking --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory lock (exports, meta.json, repairs); re-entrant in one store."""
        if self._lock_depth == 0:
            self._lock = FileLock(self.locks_dir / "store.lock")
            self._lock.acquire(blocking=True)
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0 and self._lock is not None:
                self._lock.release()
                self._lock = None

    @contextlib.contextmanager
    def claim(self, slug: str) -> Iterator[bool]:
        """Try to claim a run (non-blocking); yields whether this process holds it."""
        lock = FileLock(self.locks_dir / f"{slug}.lock")
        held = lock.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                lock.release()

    # writing --------------------------------------------------------------------------------
    def prepare(self) -> dict[str, int]:
        """Make the directory ready for runs: check it is writable, then :meth:`repair`.

        Raises:
            ResultsStoreError: when the directory cannot be created or written (nothing run).
        """
        try:
            for folder in (self.directory, self.records_dir, self.locks_dir):
                folder.mkdir(parents=True, exist_ok=True)
            for folder in (self.directory, self.records_dir):
                probe = folder / f".probe.{os.getpid()}.{secrets.token_hex(4)}"
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                probe.unlink(missing_ok=True)
            ignore = self.locks_dir / ".gitignore"
            if not ignore.exists():
                atomic_write(ignore, b"*\n")
        except OSError as exc:
            raise ResultsStoreError(
                exc.errno,
                f"the results directory {self.directory} is not writable ({exc.strerror or exc}); no run was started",
            ) from exc
        return self.repair()

    def _clean_temporaries(self) -> int:
        """Remove temporary files of killed writers (the caller holds the directory lock)."""
        removed = 0
        for folder, suffix in (
            (self.directory, None),
            (self.records_dir, ".json."),
            (self.directory / "values", ".npz."),
        ):
            for tmp in folder.glob(".*.tmp") if folder.is_dir() else ():
                if suffix is not None:  # a run's temporary file: stale unless the run is claimed
                    with self.claim(tmp.name[1:].split(suffix)[0]) as free:
                        if free:
                            tmp.unlink(missing_ok=True)
                            removed += 1
                else:  # exports and meta.json are written under the directory lock we hold
                    tmp.unlink(missing_ok=True)
                    removed += 1
        return removed

    def repair(self) -> dict[str, int]:
        """Clean temporaries, set corrupt records aside, convert CSV-only runs, export.

        Returns:
            Counts: ``temporaries`` removed, records ``quarantined``, runs ``converted``.
        """
        with self.locked():
            summary = {"temporaries": self._clean_temporaries(), "quarantined": 0, "converted": 0}
            valid, corrupt = self._scan()
            for path, reason in corrupt.items():
                with self.claim(path.stem) as free:
                    if free:
                        self._set_aside(path, reason)
                        summary["quarantined"] += 1
            for record in self._legacy(self._scan()[0], strict=False):
                with self.claim(record.slug) as free:
                    if free and not self.record_path(record.slug).exists():
                        atomic_write(self.record_path(record.slug), record.to_json())
                        summary["converted"] += 1
            self.export()
        return summary

    def commit(self, record: RunRecord) -> None:
        """Save a finished run (the caller holds its claim), then refresh the exports.

        Raises:
            ResultsStoreError: when the record or the exports cannot be written.
        """
        try:
            atomic_write(self.record_path(record.slug), record.to_json())
        except ResultsStoreError as exc:
            raise ResultsStoreError(
                exc.errno,
                f"run {record.run_id} could not be saved ({exc.strerror}); the finished runs and the tables "
                "are intact, and the next call runs it again",
            ) from exc
        try:
            with self.locked():
                self.export()
        except ResultsStoreError as exc:
            raise ResultsStoreError(
                exc.errno,
                f"run {record.run_id} is saved in {self.record_path(record.slug)}, but the exports could "
                f"not be rewritten ({exc.strerror}); the next call regenerates them",
            ) from exc

    def export(self) -> None:
        """Regenerate ``results.csv`` and ``runs.csv`` from the records (directory lock held)."""
        records = self.records(warn=False, strict=False)
        rows = [row for record in records for row in record.rows]
        self._replace_table(self.results_csv, render_table(RESULT_COLUMNS, rows))
        self._replace_table(
            self.runs_csv, render_table(RUN_COLUMNS, [[r.run[k] for k in RUN_COLUMNS] for r in records])
        )

    def _replace_table(self, path: Path, text: str) -> None:
        """Write an export; lines it drops go to the quarantine file, a shrink to a backup."""
        data = text.encode()
        old = path.read_bytes() if path.exists() else None
        if old == data:
            return
        if old is not None:
            new_lines = collections.Counter(text.split("\n"))
            old_lines = [line for line in old.decode("utf-8", errors="surrogateescape").split("\n") if line]
            leftovers = []
            for line in old_lines:
                if new_lines[line] > 0:
                    new_lines[line] -= 1
                else:
                    leftovers.append(line)
            notes = []
            if len(text.split("\n")) - 2 < len(old_lines) - 1:
                backup = path.with_name(f"{path.name}.{_stamp()}.bak")
                atomic_write(backup, old)
                notes.append(f"the previous table is kept in {backup}")
            if leftovers:
                quarantine = path.with_name(f"{path.stem}.quarantine.csv")
                before = quarantine.read_bytes() if quarantine.exists() else text.split("\n", 1)[0].encode() + b"\n"
                added = "\n".join(leftovers).encode("utf-8", errors="surrogateescape") + b"\n"
                atomic_write(quarantine, before + added)
                notes.insert(
                    0,
                    f"{len(leftovers)} line(s) that no finished run reproduces (torn, duplicated, "
                    f"unparseable or of an unfinished or foreign run) were moved to {quarantine}",
                )
            if notes:
                warnings.warn(f"repairing {path}: " + "; ".join(notes), StoreWarning, stacklevel=4)
        atomic_write(path, data)

    def queries_recipe(self) -> str | None:
        """The recipe of the query sets this directory's runs answered (``meta.json``'s
        ``queries``); ``"hard"`` for a directory with runs written before recipes had names, and
        None for an empty one."""
        meta = self._read_meta()
        if meta.get("queries"):
            return str(meta["queries"])
        return "hard" if self.finished_ids() else None

    def check_queries(self, queries: str) -> None:
        """Record ``queries`` as this directory's recipe, or refuse a recipe other than its own.

        Raises:
            ValueError: the directory holds runs on another recipe's query sets.
        """
        with self.locked():
            recorded = self.queries_recipe()
            if recorded is not None and recorded != queries:
                raise ValueError(
                    f"{self.directory} holds runs on the {recorded!r} query sets, not {queries!r}; one results "
                    f"directory holds one recipe (pass queries={recorded!r}, or another directory)"
                )
            meta = self._read_meta()
            if meta.get("queries") != queries:
                meta["queries"] = queries
                meta.setdefault("sessions", [])
                atomic_write(self.meta_json, (json.dumps(meta, indent=2) + "\n").encode())

    def _read_meta(self) -> dict[str, Any]:
        if not self.meta_json.exists():
            return {}
        try:
            meta = json.loads(self.meta_json.read_text(encoding="utf-8"))
        except ValueError:
            return {}
        return meta if isinstance(meta, dict) else {}

    def update_meta(self, session: Mapping[str, Any]) -> None:
        """Add ``session`` to meta.json, or replace the entry with the same ``id``."""
        with self.locked():
            meta: dict[str, Any] = {"sessions": []}
            if self.meta_json.exists():
                try:
                    meta = json.loads(self.meta_json.read_text(encoding="utf-8"))
                except ValueError:
                    self._set_aside(self.meta_json, "unparseable JSON")
                    meta = {"sessions": []}
            sessions = [
                s for s in meta.setdefault("sessions", []) if s.get("id") is None or s.get("id") != session.get("id")
            ]
            meta["sessions"] = sessions + [dict(session)]
            meta["total_wall_seconds"] = round(sum(float(s.get("wall_seconds", 0.0)) for s in meta["sessions"]), 1)
            atomic_write(self.meta_json, (json.dumps(meta, indent=2) + "\n").encode())


def migrate_results(directory: str | os.PathLike) -> dict[str, int]:
    """Convert a results directory written before run records existed (CSV files only).

    Every run of ``runs.csv`` gets its record (rows from ``results.csv``, in the table's order);
    the exports are then regenerated, byte for byte the same for a table without damaged
    lines. Running it again changes nothing.

    Returns:
        The counts of :meth:`ResultsStore.repair`.
    """
    return ResultsStore(directory).prepare()

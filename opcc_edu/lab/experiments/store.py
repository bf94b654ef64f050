"""The results store of one results directory: atomic per run, safe under concurrent writers,
never deleting what it cannot regenerate.

Layout of a results directory (one per profile)::

    records/<run>.json  one record per finished run: its row of runs.csv and every row of
                        results.csv, with a SHA-256 of its content -- the source of truth
    results.csv         exported from the records, rewritten atomically after every run
    runs.csv            exported from the records, one row per finished run
    values/<run>.npz    the run's member values (written before its record)
    meta.json           one session per invocation (command, machine, wall and CPU time)
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
* **Upgrading, never dropping.** Records and tables written before the tie-fair metrics
  (format ``/1``, columns :data:`~opcc_edu.lab.experiments.records.RESULT_COLUMNS_V1`) are read
  as they are, their tie-fair cells empty, with a :class:`StoreWarning` that names the upgrade.
  The first write (:meth:`ResultsStore.repair`, run by every ``opcc-edu ablation`` and by
  :func:`migrate_results`, or ``python scripts/upgrade_results.py DIR``) upgrades them run
  by run, under the run's claim: it rescores the run's kept member values
  (``values/<run>.npz``) with the package's one scoring function, checks that they reproduce
  every recorded paper metric cell for cell, and only then fills the tie-fair cells; the
  paper's cells are kept verbatim. Each record is rewritten atomically after its old file is
  copied to ``records.<time>.bak/``; the old ``results.csv`` goes to ``results.csv.<time>.bak``,
  and a line of it that the upgraded table does not reproduce (in the old columns) goes to
  ``results.v1.quarantine.csv``. A run whose values are missing or do not reproduce its
  metrics keeps every row, with empty tie-fair cells, and is named in the warning.
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

from ...io import FileLock
from ...names import TIE_FAIR_METRICS
from .records import (
    RECORD_FORMAT,
    RECORD_FORMAT_V1,
    RESULT_COLUMNS,
    RESULT_COLUMNS_V1,
    ROW_KEY,
    RUN_COLUMNS,
    ResultsStoreError,
    RunRecord,
    StoreWarning,
    atomic_write,
    project_row,
    read_table,
    recompute_tie_fair,
    render_table,
    upgrade_row,
)

__all__ = ["ResultsStore", "migrate_results", "recompute_tie_fair"]


def _stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _read_results(path: Path) -> tuple[list[list[str]], bool, bool]:
    """Valid rows of a ``results.csv`` of either format as rows of :data:`RESULT_COLUMNS`:
    ``(rows, header ok, outdated)``; an old-format table's rows come with empty tie-fair cells."""
    rows, _, header_ok = read_table(path, RESULT_COLUMNS)
    if header_ok:
        return rows, True, False
    old_rows, _, old_ok = read_table(path, RESULT_COLUMNS_V1)
    if old_ok:
        return [upgrade_row(row) for row in old_rows], True, True
    return [], False, False


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
        result_rows, results_ok, outdated = _read_results(self.results_csv)
        if not results_ok and strict:
            raise ValueError(
                f"{self.results_csv} does not start with the header {','.join(RESULT_COLUMNS)} "
                f"(or that of format /1, {','.join(RESULT_COLUMNS_V1)})"
            )
        rows: dict[str, dict[tuple[str, ...], list[str]]] = collections.defaultdict(dict)
        for fields in result_rows:
            named = dict(zip(RESULT_COLUMNS, fields, strict=True))
            if named["run_id"] in wanted:
                rows[named["run_id"]].setdefault(tuple(named[k] for k in ROW_KEY), fields)
        return [
            RunRecord(run, list(rows[rid].values()), index, outdated=outdated)
            for rid, (index, run) in wanted.items()
            if rows[rid]
        ]

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
        outdated = sum(record.outdated for record in found)
        if warn and outdated:
            warnings.warn(
                f"{outdated} run(s) of {self.directory} were recorded before the tie-fair metrics "
                f"({RECORD_FORMAT_V1}): their columns {', '.join(TIE_FAIR_METRICS)} are empty (NaN) until the "
                f"directory is upgraded from its values/ -- `python scripts/upgrade_results.py {self.directory}` "
                "(or any `opcc-edu ablation` run on it) does it, keeping backups",
                StoreWarning,
                stacklevel=3,
            )
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
        """Clean temporaries, set corrupt records aside, convert CSV-only runs, upgrade runs of
        format ``/1`` (module docstring), export.

        Returns:
            Counts: ``temporaries`` removed, records ``quarantined``, runs ``converted``, runs
            ``upgraded`` to the current format (those whose tie-fair metrics could not be
            recomputed are named in a :class:`StoreWarning`).
        """
        with self.locked():
            summary = {"temporaries": self._clean_temporaries(), "quarantined": 0, "converted": 0, "upgraded": 0}
            valid, corrupt = self._scan()
            for path, reason in corrupt.items():
                with self.claim(path.stem) as free:
                    if free:
                        self._set_aside(path, reason)
                        summary["quarantined"] += 1
            incomplete: list[str] = []
            for record in self._legacy(self._scan()[0], strict=False):
                with self.claim(record.slug) as free:
                    if free and not self.record_path(record.slug).exists():
                        if record.outdated:
                            record = self._upgraded(record, incomplete)
                            summary["upgraded"] += 1
                        atomic_write(self.record_path(record.slug), record.to_json())
                        summary["converted"] += 1
            backups = self.directory / f"records.{_stamp()}.bak"
            for record in self._scan()[0].values():
                if record.outdated and self._upgrade_record(record, backups, incomplete):
                    summary["upgraded"] += 1
            if summary["upgraded"]:
                message = (
                    f"upgraded {summary['upgraded']} run(s) of {self.directory} to {RECORD_FORMAT} "
                    "(tie-fair metrics recomputed from values/, the paper's cells kept verbatim)"
                )
                if backups.is_dir():
                    message += f"; their previous records are kept in {backups}"
                if incomplete:
                    message += f"; {len(incomplete)} run(s) keep every row with empty tie-fair cells: " + "; ".join(
                        incomplete
                    )
                warnings.warn(message, StoreWarning, stacklevel=3)
            self.export()
        return summary

    def _upgraded(self, record: RunRecord, incomplete: list[str]) -> RunRecord:
        """The run with its tie-fair cells recomputed (or left empty, noted in ``incomplete``)."""
        rows, reason = recompute_tie_fair(record, self.directory / "values" / f"{record.slug}.npz")
        if rows is None:
            incomplete.append(f"{record.run_id} ({reason})")
        return RunRecord(record.run, record.rows if rows is None else rows, record.sequence)

    def _upgrade_record(self, record: RunRecord, backups: Path, incomplete: list[str]) -> bool:
        """Rewrite one outdated record in the current format under its claim, old file backed up."""
        path = self.record_path(record.slug)
        with self.claim(record.slug) as free:
            if not free:
                return False
            try:
                old = path.read_bytes()
                current = RunRecord.from_json(old, path.name)
            except (OSError, ValueError):  # set aside or rewritten meanwhile: the next repair sees it
                return False
            if not current.outdated:
                return False
            upgraded = self._upgraded(current, incomplete)
            backups.mkdir(exist_ok=True)
            atomic_write(backups / path.name, old)
            atomic_write(path, upgraded.to_json())
        return True

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
        previous = {",".join(RESULT_COLUMNS_V1): render_table(RESULT_COLUMNS_V1, [project_row(row) for row in rows])}
        self._replace_table(self.results_csv, render_table(RESULT_COLUMNS, rows), previous)
        self._replace_table(
            self.runs_csv, render_table(RUN_COLUMNS, [[r.run[k] for k in RUN_COLUMNS] for r in records])
        )

    def _replace_table(self, path: Path, text: str, previous: Mapping[str, str] | None = None) -> None:
        """Write an export; lines it drops go to the quarantine file, a shrink to a backup.

        ``previous`` maps the header of an older format of the table to the export rendered in
        that format: an old table with such a header is checked against it (every old line must
        reappear, in the old columns) and always backed up, since its format changes.
        """
        data = text.encode()
        old = path.read_bytes() if path.exists() else None
        if old == data:
            return
        if old is not None:
            old_text = old.decode("utf-8", errors="surrogateescape")
            old_header = old_text.split("\n", 1)[0]
            reformatted = previous is not None and old_header in previous and old_header != text.split("\n", 1)[0]
            compare = previous[old_header] if reformatted and previous is not None else text
            new_lines = collections.Counter(compare.split("\n"))
            old_lines = [line for line in old_text.split("\n") if line]
            leftovers = []
            for line in old_lines:
                if new_lines[line] > 0:
                    new_lines[line] -= 1
                else:
                    leftovers.append(line)
            notes = []
            if reformatted or len(text.split("\n")) - 2 < len(old_lines) - 1:
                backup = path.with_name(f"{path.name}.{_stamp()}.bak")
                atomic_write(backup, old)
                notes.append(f"the previous table is kept in {backup}")
            if leftovers:
                suffix = ".v1.quarantine.csv" if reformatted else ".quarantine.csv"
                quarantine = path.with_name(f"{path.stem}{suffix}")
                before = quarantine.read_bytes() if quarantine.exists() else compare.split("\n", 1)[0].encode() + b"\n"
                added = "\n".join(leftovers).encode("utf-8", errors="surrogateescape") + b"\n"
                atomic_write(quarantine, before + added)
                notes.insert(
                    0,
                    f"{len(leftovers)} line(s) that no finished run reproduces (torn, duplicated, "
                    f"unparseable or of an unfinished or foreign run) were moved to {quarantine}",
                )
            if notes:
                action = "upgrading" if reformatted else "repairing"
                warnings.warn(f"{action} {path}: " + "; ".join(notes), StoreWarning, stacklevel=4)
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

    def sizes(self) -> dict[str, int] | None:
        """The sizes this directory's runs read their data and queries at (``meta.json``'s
        ``sizes``: ``dataset_size``, ``queries_per_env``, ``mc_runs``), or None where none is
        recorded."""
        sizes = self._read_meta().get("sizes")
        return {str(k): int(v) for k, v in sizes.items()} if isinstance(sizes, dict) else None

    def check_sizes(self, sizes: Mapping[str, int]) -> None:
        """Record ``sizes`` as this directory's, or refuse sizes other than its own.

        One directory holds runs of one data size and one query count: a run at other sizes
        would be averaged with them as if it were another seed.

        Raises:
            ValueError: the directory records other sizes (both named).
        """
        sizes = {str(k): int(v) for k, v in sizes.items()}
        with self.locked():
            recorded = self.sizes()
            if recorded is not None and recorded != sizes:
                raise ValueError(
                    f"{self.directory} holds runs at {recorded} (meta.json 'sizes'), not {sizes}; one results "
                    "directory holds one set of sizes (use another directory, or the profile that produced them)"
                )
            if recorded is None:
                meta = self._read_meta()
                meta["sizes"] = sizes
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
        """Add ``session`` to meta.json, or replace the entry with the same ``id``; recompute the
        totals ``total_wall_seconds`` and ``total_cpu_seconds`` (over the sessions that record
        ``cpu_seconds``, counted in ``sessions_with_cpu_seconds``)."""
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
            timed = [s for s in meta["sessions"] if s.get("cpu_seconds") is not None]
            # sessions written before CPU time was recorded have none: the total covers the others
            meta["total_cpu_seconds"] = round(sum(float(s["cpu_seconds"]) for s in timed), 1)
            meta["sessions_with_cpu_seconds"] = len(timed)
            atomic_write(self.meta_json, (json.dumps(meta, indent=2) + "\n").encode())


def migrate_results(directory: str | os.PathLike) -> dict[str, int]:
    """Bring a results directory to the current format: :meth:`ResultsStore.prepare`.

    A directory written before run records existed (CSV files only) gets a record per run of
    ``runs.csv`` (rows from ``results.csv``, in the table's order); runs of format ``/1``,
    written before the tie-fair metrics, are upgraded from their kept member values (see the
    module docstring: old records and table backed up, paper cells verbatim, no row dropped).
    The exports are then regenerated, byte for byte the same for a current table without
    damaged lines. Running it again changes nothing.

    Returns:
        The counts of :meth:`ResultsStore.repair`.
    """
    return ResultsStore(directory).prepare()

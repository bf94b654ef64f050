"""Run records and the files they live in: atomic writes, locks, tolerant CSV tables.

A :class:`RunRecord` is one finished run -- its row of ``runs.csv`` and all its rows of
``results.csv``, as the text of their cells -- saved as one JSON file with the SHA-256 of its
content, so that a run is written in one atomic step and a damaged file is recognised.
:func:`atomic_write` writes a file under a temporary name beside it, flushes it to disk and
renames it (new files get the mode the umask allows, like any other file).

Formats. Records of format ``/2`` (:data:`RECORD_FORMAT`) hold the columns of
:data:`RESULT_COLUMNS`: the paper's metrics and the tie-fair ones
(:data:`opcc_edu.names.TIE_FAIR_METRICS`). Records of format ``/1`` were written before the
tie-fair metrics existed (:data:`RESULT_COLUMNS_V1`); they are still read, their rows padded
with empty tie-fair cells and the record marked :attr:`RunRecord.outdated`, until the store
upgrades them (:meth:`opcc_edu.lab.experiments.store.ResultsStore.repair`). An empty tie-fair cell
means "not computed": the run's member values were not kept, or did not reproduce its
recorded metrics.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...confidence import CONFIDENCE_FUNCTIONS
from ...io import CorruptFileError, atomic_write_bytes, load_npz
from ...names import METRICS, TIE_FAIR_METRICS
from ...scoring import MemberValues, score_answers
from .answers import score_run
from .grid import run_slug

__all__ = [
    "recompute_tie_fair",
    "RESULT_COLUMNS",
    "RESULT_COLUMNS_V1",
    "RUN_COLUMNS",
    "RECORD_FORMAT",
    "RECORD_FORMAT_V1",
    "ROW_KEY",
    "StoreWarning",
    "ResultsStoreError",
    "RunRecord",
    "new_record",
    "upgrade_row",
    "project_row",
    "cell",
    "atomic_write",
    "read_table",
    "render_table",
]

_KEY_COLUMNS = (
    "environment",
    "dataset",
    "seed",
    "configuration",
    "horizon",
    "confidence",
    "ensemble_count",
    "ensemble_size",
)

#: Columns of ``results.csv``, one row per scored subset of one run: the run and subset, the
#: paper's metrics, the tie-fair metrics beside them, the number of queries, profile, run id.
RESULT_COLUMNS: tuple[str, ...] = (*_KEY_COLUMNS, *METRICS, *TIE_FAIR_METRICS, "n", "profile", "run_id")

#: Columns of ``results.csv`` before the tie-fair metrics (tables and records of format ``/1``).
RESULT_COLUMNS_V1: tuple[str, ...] = (*_KEY_COLUMNS, *METRICS, "n", "profile", "run_id")

#: Columns of ``runs.csv``, one row per finished run.
RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "environment",
    "dataset",
    "seed",
    "configuration",
    "profile",
    "n_queries",
    "ensemble_size",
    "seconds",
    "finished",
)

#: ``format`` field of a run record.
RECORD_FORMAT = "opcc_edu.ablation-run/2"

#: ``format`` field of a record written before the tie-fair metrics (columns
#: :data:`RESULT_COLUMNS_V1`); read, and upgraded by the store.
RECORD_FORMAT_V1 = "opcc_edu.ablation-run/1"

_RUN_KEYS = ("environment", "dataset", "seed", "configuration", "profile", "run_id")
ROW_KEY = ("run_id", "horizon", "confidence", "ensemble_count")
_INTEGERS = {"seed", "ensemble_count", "ensemble_size", "n", "n_queries"}
_FLOATS = {*METRICS, "seconds"}
_OPTIONAL_FLOATS = set(TIE_FAIR_METRICS)  # empty: not computed (a run upgraded without its values)


class StoreWarning(UserWarning):
    """Something was set aside (quarantined or backed up); the message names the file."""


class ResultsStoreError(OSError):
    """A results directory cannot be written (read-only, no space left, ...)."""


def cell(value: Any) -> str:
    """Text of a value in a CSV cell, as :mod:`csv` writes it (``repr`` of a float)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _valid_fields(fields: Sequence[str], columns: Sequence[str]) -> bool:
    if len(fields) != len(columns):
        return False
    try:
        for name, text in zip(columns, fields, strict=True):
            if name in _INTEGERS:
                int(text)
            elif name in _FLOATS or (name in _OPTIONAL_FLOATS and text != ""):
                float(text)
    except ValueError:
        return False
    return True


def upgrade_row(row: Sequence[str]) -> list[str]:
    """A row of :data:`RESULT_COLUMNS_V1` as a row of :data:`RESULT_COLUMNS`, tie-fair cells empty."""
    named = dict(zip(RESULT_COLUMNS_V1, row, strict=True))
    return [named.get(column, "") for column in RESULT_COLUMNS]


def project_row(row: Sequence[str], columns: Sequence[str] = RESULT_COLUMNS_V1) -> list[str]:
    """The cells of a :data:`RESULT_COLUMNS` row that ``columns`` (a subset) holds, in their order."""
    named = dict(zip(RESULT_COLUMNS, row, strict=True))
    return [named[column] for column in columns]


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------
class RunRecord:
    """One finished run: its row of ``runs.csv`` and its rows of ``results.csv`` (as text)."""

    def __init__(
        self, run: Mapping[str, str], rows: Sequence[Sequence[str]], sequence: int, outdated: bool = False
    ) -> None:
        self.run = {key: str(run[key]) for key in RUN_COLUMNS}
        self.rows = tuple(tuple(str(v) for v in row) for row in rows)
        self.sequence = int(sequence)
        """Export order: the finishing time in ns (a run's index for converted tables)."""
        self.outdated = bool(outdated)
        """Read from a record or table of format ``/1``: the rows' tie-fair cells are empty
        until the store upgrades the run (:meth:`~opcc_edu.lab.experiments.store.ResultsStore.repair`)."""

    @property
    def tie_fair_missing(self) -> bool:
        """Whether some row has an empty tie-fair cell (outdated, or upgraded without values)."""
        positions = [RESULT_COLUMNS.index(name) for name in TIE_FAIR_METRICS]
        return any(row[i] == "" for row in self.rows for i in positions)

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    @property
    def slug(self) -> str:
        run = self.run
        return run_slug(run["environment"], run["dataset"], run["seed"], run["configuration"])

    def _payload(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "sequence": self.sequence,
            "run": self.run,
            "columns": list(RESULT_COLUMNS),
            "rows": [list(row) for row in self.rows],
        }

    def to_json(self) -> bytes:
        """The record file's bytes: the payload and the SHA-256 of its canonical JSON."""
        payload = self._payload()
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        payload["sha256"] = hashlib.sha256(canonical).hexdigest()
        return (json.dumps(payload, separators=(",", ":")) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, file_name: str) -> RunRecord:
        """Parse and check a record file; ValueError says what is wrong with it."""
        try:
            payload = json.loads(data)
            digest = payload.pop("sha256")
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise ValueError(f"unparseable ({exc.__class__.__name__})") from exc
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        if hashlib.sha256(canonical).hexdigest() != digest:
            raise ValueError("checksum mismatch")
        known = (payload.get("format"), payload.get("columns"))
        if known == (RECORD_FORMAT_V1, list(RESULT_COLUMNS_V1)):
            outdated = True
        elif known == (RECORD_FORMAT, list(RESULT_COLUMNS)):
            outdated = False
        else:
            raise ValueError(f"not a {RECORD_FORMAT} (or {RECORD_FORMAT_V1}) record")
        rows = payload.get("rows")
        if outdated:
            if not isinstance(rows, list) or any(
                not isinstance(row, list) or not _valid_fields(row, RESULT_COLUMNS_V1) for row in rows
            ):
                raise ValueError("malformed result row")
            rows = [upgrade_row([str(v) for v in row]) for row in rows]
        try:
            record = cls(payload["run"], rows, payload["sequence"], outdated=outdated)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed record ({exc.__class__.__name__})") from exc
        run = record.run
        if run["run_id"] != f"{run['environment']}/{run['dataset']}/seed{run['seed']}/{run['configuration']}":
            raise ValueError("run_id does not match its fields")
        if file_name != f"{record.slug}.json":
            raise ValueError(f"foreign record: it holds run {record.run_id}")
        if not _valid_fields([run[k] for k in RUN_COLUMNS], RUN_COLUMNS):
            raise ValueError("malformed run row")
        keys = set()
        for row in record.rows:
            if not _valid_fields(row, RESULT_COLUMNS):
                raise ValueError("malformed result row")
            named = dict(zip(RESULT_COLUMNS, row, strict=True))
            if any(named[k] != run[k] for k in _RUN_KEYS):
                raise ValueError(f"foreign result row (of run {named['run_id']})")
            keys.add(tuple(named[k] for k in ROW_KEY))
        if len(keys) != len(record.rows):
            raise ValueError("duplicated result rows")
        return record


# --------------------------------------------------------------------------------------------
# Files: atomic writes, locks, tolerant CSV reading
# --------------------------------------------------------------------------------------------
def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` by the package's one protocol (:func:`opcc_edu.io.atomic_write_bytes`).

    Raises:
        ResultsStoreError: naming the file and the cause (a full disk said so); ``path`` is left
            as it was.
    """
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            message = f"no space left on the device while writing {path}; it was left as it was"
        else:
            message = f"cannot write {path}: {exc.strerror or exc}"
        raise ResultsStoreError(exc.errno, message) from exc


def read_table(path: Path, columns: Sequence[str]) -> tuple[list[list[str]], list[str], bool]:
    """Lines of a CSV table: ``(valid rows, bad lines, header ok)``.

    A line is bad when it is torn (the last line without its newline), has the wrong number of
    fields or a non-numeric number. Blank lines are ignored.
    """
    if not path.exists():
        return [], [], True
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    tail = lines.pop()
    if not lines:
        return [], [tail] if tail else [], not tail
    header_ok = lines[0] == ",".join(columns)
    good, bad = [], [] if header_ok else [lines[0]]
    for line in lines[1:]:
        if not line:
            continue
        try:
            fields = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            fields = []
        if header_ok and _valid_fields(fields, columns):
            good.append(fields)
        else:
            bad.append(line)
    if tail:
        bad.append(tail)
    return good, bad, header_ok


def render_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """CSV text of ``rows`` under a header, one ``\\n``-terminated line each."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def new_record(run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> RunRecord:
    """A record from a run's ``runs.csv`` row and its ``results.csv`` rows (any values; a row
    without a tie-fair metric leaves its cell empty)."""
    return RunRecord(
        {key: cell(run[key]) for key in RUN_COLUMNS},
        [[cell(row.get(key) if key in _OPTIONAL_FLOATS else row[key]) for key in RESULT_COLUMNS] for row in rows],
        time.time_ns(),
    )


def kept_answers(
    arrays: Mapping[str, np.ndarray], names: Sequence[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """The answers a run of a baseline without members kept, ``name -> (prediction, confidence)``;
    ``None`` for a run that kept member values.

    The one reader of old files too: a run of the no-model heuristic once kept its rule's score
    of each side as (N, 1) "member values"; its answers are rebuilt from them exactly as the rule
    gives them (prediction ``score_a < score_b``, confidence ``|score_a - score_b|``).

    Args:
        arrays: the arrays of ``values/<run>.npz``.
        names: the run's confidence names (its rows').
    """
    if all(f"prediction_{name}" in arrays for name in names):
        return {name: (arrays[f"prediction_{name}"], arrays[f"confidence_{name}"]) for name in names}
    if list(names) == ["heuristic"] and np.shape(arrays.get("values_a", ()))[1:] == (1,):
        score_a, score_b = arrays["values_a"][:, 0], arrays["values_b"][:, 0]
        return {"heuristic": ((score_a < score_b).astype(np.int8), np.abs(score_a - score_b))}
    return None


def recompute_tie_fair(record: RunRecord, values_path: str | os.PathLike) -> tuple[list[list[str]] | None, str]:
    """A run's rows with their tie-fair cells computed from its kept member values (or answers).

    The values are rescored exactly as the runner scored them
    (:func:`opcc_edu.lab.experiments.answers.score_run`); a baseline without members (the no-model
    heuristic) keeps its answers, read back by :func:`kept_answers`. Every recorded paper metric and
    ``n`` must come out cell for cell as recorded, or nothing is filled: values that do not
    reproduce a run's table would give it tie-fair numbers of other answers.

    Args:
        record: the run (its rows in :data:`RESULT_COLUMNS`, tie-fair cells empty or not).
        values_path: its ``values/<run>.npz``.

    Returns:
        ``(rows, "")`` with the paper's cells verbatim and the tie-fair cells filled, or
        ``(None, reason)`` when they cannot be computed.
    """
    path = Path(values_path)
    if not path.exists():
        return None, f"its member values were not kept ({path.name} is missing)"
    rows = [dict(zip(RESULT_COLUMNS, row, strict=True)) for row in record.rows]
    names = list(dict.fromkeys(row["confidence"] for row in rows))
    counts = sorted({int(row["ensemble_count"]) for row in rows})
    try:
        arrays, _ = load_npz(path)
        answers = kept_answers(arrays, names)
        if answers is None and set(names) <= set(CONFIDENCE_FUNCTIONS):
            values = MemberValues(arrays["values_a"], arrays["values_b"], arrays["target"], arrays["horizon"])
    except (CorruptFileError, OSError, KeyError, ValueError) as exc:
        return None, f"its member values cannot be read ({exc.__class__.__name__}: {exc})"
    if answers is not None:
        scored = score_run(score_answers(answers, arrays["target"], arrays["horizon"]))
    elif set(names) <= set(CONFIDENCE_FUNCTIONS):
        scored = score_run(values, confidences=names, ensemble_counts=counts)
    else:
        return None, f"its confidence names {names} cannot be rescored from member values"
    lookup = {(str(row["horizon"]), str(row["confidence"]), str(row["ensemble_count"])): row for row in scored}
    out = []
    for row in rows:
        fresh = lookup.get((row["horizon"], row["confidence"], row["ensemble_count"]))
        if fresh is None:
            return None, f"its values give no row for {row['horizon']}/{row['confidence']}/{row['ensemble_count']}"
        recorded = [row[m] for m in METRICS] + [row["n"], row["ensemble_size"]]
        rescored = [cell(float(fresh[m])) for m in METRICS] + [cell(int(fresh["n"])), cell(int(fresh["ensemble_size"]))]
        if recorded != rescored:
            return None, "its member values do not reproduce its recorded metrics"
        out.append([cell(float(fresh[c])) if c in TIE_FAIR_METRICS else row[c] for c in RESULT_COLUMNS])
    return out, ""

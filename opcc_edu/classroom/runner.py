"""The program that runs a student's code inside the grading sandbox (never the checks).

:mod:`opcc_edu.classroom.grading` starts this file as ``python -I runner.py MODE FD`` in a
private folder (see :mod:`opcc_edu.classroom.sandbox`), with the student's stdout and stderr
thrown away; every message for the grader is one JSON line written to file descriptor ``FD``.
It has two modes:

* ``notebook``: run the code cells the grader sends (exactly those its review read, taken from
  the notebook after nbformat's upgrade to version 4) in an in-process IPython shell (a cell
  that raises does not stop the next), then report the values the grader asked for as plain
  data (:func:`encode`). Messages: ``{"started"}``, ``{"cell": i}`` before each cell,
  ``{"errors": ...}``, ``{"values": ...}``.
* ``functions``: execute only the source the grader sends (the notebook's top-level imports,
  literal constants and ``def`` statements, taken from its syntax tree), then answer call
  requests read from stdin, one at a time: ``{"id", "fn", "args", "kwargs"}`` -> ``{"id",
  "ok", "result" | "error"}``.
* ``probe``: report its uid, pid and capabilities (the grader checks that a sandbox isolates).

Under ``bwrap`` as root it starts with only the capabilities to change uid, and first becomes
the sandbox's uid (``--uid UID`` after ``FD``), before it reads anything; then it makes its
private folders (``HOME``, ``IPYTHONDIR``, the working folder, a copy of the package cache).

Nothing here decides a score: whatever the student's code does to this process (patching NumPy,
the package or this file's functions) changes only the data it sends back, which the grader
compares, in its own process, with expected values computed by trusted code.
"""

from __future__ import annotations

import base64
import json
import os
import sys

#: NumPy dtypes that cross the boundary (anything else is refused).
ARRAY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")


def encode(obj, depth: int = 0):
    """``obj`` as JSON-ready plain data: scalars, strings, lists, tuples, str-keyed dicts, NumPy
    arrays and scalars, pandas DataFrames and Series. Raises TypeError for anything else."""
    if depth > 20:
        raise TypeError("nested too deeply")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj
    module = type(obj).__module__.split(".")[0]
    if module == "numpy":
        import numpy as np

        if isinstance(obj, np.ndarray):
            if obj.dtype.name not in ARRAY_DTYPES:
                if obj.dtype.kind in "OUS":
                    return {"__list__": [encode(x, depth + 1) for x in obj.tolist()]}
                raise TypeError(f"array of dtype {obj.dtype}")
            data = base64.b64encode(np.ascontiguousarray(obj).tobytes()).decode("ascii")
            return {"__nd__": obj.dtype.name, "shape": list(obj.shape), "data": data}
        if isinstance(obj, np.generic):
            return encode(obj.item(), depth + 1)
    if module == "pandas":
        import pandas as pd

        if isinstance(obj, pd.DataFrame):
            columns = [str(c) for c in obj.columns]
            return {"__df__": columns, "data": [encode(obj[c].to_numpy(), depth + 1) for c in obj.columns]}
        if isinstance(obj, pd.Series):
            return encode(obj.to_numpy(), depth + 1)
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(x, depth + 1) for x in obj]}
    if isinstance(obj, list):
        return [encode(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("dict with keys that are not strings")
        return {"__dict__": {k: encode(v, depth + 1) for k, v in obj.items()}}
    raise TypeError(f"cannot send a {type(obj).__name__}")


def decode(obj, depth: int = 0):
    """The inverse of :func:`encode`; builds only plain objects, arrays and DataFrames (no code).

    A ``{"__fn__": NAME, "source": ...}`` (a trusted test helper, sent by the grader) becomes the
    function it defines: the grader decodes only what the sandbox returns, which never has it.
    """
    if depth > 20:
        raise ValueError("nested too deeply")
    if isinstance(obj, list):
        return [decode(x, depth + 1) for x in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        import numpy as np

        if obj["__nd__"] not in ARRAY_DTYPES:
            raise ValueError(f"refused dtype {obj['__nd__']!r}")
        shape = tuple(int(n) for n in obj["shape"])
        return np.frombuffer(base64.b64decode(obj["data"]), dtype=obj["__nd__"]).reshape(shape).copy()
    if "__list__" in obj:
        import numpy as np

        values = [decode(x, depth + 1) for x in obj["__list__"]]
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    if "__df__" in obj:
        import pandas as pd

        return pd.DataFrame(
            {name: decode(col, depth + 1) for name, col in zip(obj["__df__"], obj["data"], strict=True)}
        )
    if "__tuple__" in obj:
        return tuple(decode(x, depth + 1) for x in obj["__tuple__"])
    if "__dict__" in obj:
        return {str(k): decode(v, depth + 1) for k, v in obj["__dict__"].items()}
    if "__fn__" in obj and _ALLOW_CODE:
        namespace: dict = {}
        exec(obj["source"], namespace)  # noqa: S102 - grader-written helper, sandbox side only
        return namespace[obj["__fn__"]]
    raise ValueError(f"unknown object {sorted(obj)[:3]}")


_ALLOW_CODE = False


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:240]}" if text else type(exc).__name__


def _run_notebook(send, request: dict) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    send({"started": True})
    errors = {}
    for i, source in enumerate(request["cells"]):
        send({"cell": i})
        result = shell.run_cell(source, store_history=False, silent=True)
        failure = result.error_before_exec or result.error_in_exec
        if failure is not None:
            errors[str(i)] = _error(failure)
    send({"errors": errors})
    values = {}
    for name in request["values"]:
        if name not in shell.user_ns:
            values[name] = {"__missing__": f"{name} is not defined"}
            continue
        try:
            values[name] = encode(shell.user_ns[name])
        except Exception as exc:  # noqa: BLE001 - any failure: the value is reported missing
            values[name] = {"__missing__": f"{name} cannot be graded ({_error(exc)})"}
    send({"values": values})


def _serve_functions(send, request: dict) -> None:
    import ast

    global _ALLOW_CODE
    _ALLOW_CODE = True
    namespace: dict = {"__name__": "submission"}
    send({"started": True})
    errors = []
    for node in ast.parse(request["source"]).body:
        try:
            code = compile(ast.Module(body=[node], type_ignores=[]), "<submission>", "exec")
            exec(code, namespace)  # noqa: S102 - the student's own code, in the sandbox
        except BaseException as exc:  # noqa: BLE001 - a failing import or def is reported, not fatal
            errors.append(_error(exc))
    send({"ready": True, "errors": errors[:5]})
    for line in sys.stdin:
        call = json.loads(line)
        try:
            fn = namespace[call["fn"]]
            if not callable(fn):
                raise TypeError(f"{call['fn']} is not a function")
            result = fn(*decode(call["args"]), **decode(call["kwargs"]))
            reply = {"id": call["id"], "ok": True, "result": encode(result)}
        except KeyError:
            reply = {"id": call["id"], "ok": False, "error": f"{call['fn']} is not defined"}
        except BaseException as exc:  # noqa: BLE001 - the student's exception is the answer
            reply = {"id": call["id"], "ok": False, "error": _error(exc)}
        send(reply)


def _drop_privileges(uid: int) -> None:
    """Become ``uid`` (and gid ``uid``, no supplementary groups): every capability goes with root."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not change uid")


def _prepare(request: dict) -> None:
    """Make the private folders and copy the package cache (in the sandbox's own /tmp)."""
    import shutil

    for name in ("HOME", "IPYTHONDIR", "TMPDIR", "MPLCONFIGDIR", "OPCC_EDU_CACHE"):
        if os.environ.get(name):
            os.makedirs(os.environ[name], exist_ok=True)
    source = request.get("cache_source")
    if source and os.path.isdir(source):
        try:
            shutil.copytree(
                source, os.environ["OPCC_EDU_CACHE"], dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks")
            )
        except (OSError, shutil.Error):  # no room: start empty, the package computes what it needs
            shutil.rmtree(os.environ["OPCC_EDU_CACHE"], ignore_errors=True)
            os.makedirs(os.environ["OPCC_EDU_CACHE"], exist_ok=True)
    os.makedirs(request["workdir"], exist_ok=True)
    os.chdir(request["workdir"])


def _probe(send) -> None:
    with open("/proc/self/status", encoding="utf-8") as handle:
        status = dict(line.split(":", 1) for line in handle if ":" in line)
    uid = os.getuid()
    send({"probe": {"uid": uid, "euid": os.geteuid(), "pid": os.getpid(), "capabilities": status["CapEff"].strip()}})


def main(argv: list[str]) -> None:
    """``runner.py MODE FD [--uid UID]``: read the request (one JSON line) from stdin, then run MODE."""
    mode, fd = argv[0], int(argv[1])
    if argv[2:3] == ["--uid"]:
        _drop_privileges(int(argv[3]))
    channel = os.fdopen(fd, "w", encoding="utf-8", buffering=1)

    def send(message: dict) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    if mode == "probe":
        _probe(send)
        channel.flush()
        os._exit(0)
    request = json.loads(sys.stdin.readline())
    try:
        _prepare(request)
        (_run_notebook if mode == "notebook" else _serve_functions)(send, request)
    except BaseException as exc:  # noqa: BLE001 - reported to the grader, then exit
        send({"crashed": _error(exc)})
    channel.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])

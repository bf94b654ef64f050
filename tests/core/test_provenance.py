"""The provenance record: command, versions, machine and input checksums."""

import hashlib
import json
import subprocess
import sys

from opcc_edu.provenance import (
    command_line,
    file_checksums,
    machine_description,
    package_versions,
    provenance,
    sha256_file,
)


def test_command_line_names_console_script_and_quotes():
    assert command_line(["/usr/local/bin/opcc-edu", "run", "maze2d-umaze"]) == "opcc-edu run maze2d-umaze"
    assert command_line(["script.py", "a b"]) == "script.py 'a b'"


def test_package_versions_marks_missing_packages():
    versions = package_versions(["numpy", "no-such-package-xyz"])
    assert versions["no-such-package-xyz"] == "not installed"
    import numpy

    assert versions["numpy"] == numpy.__version__


def test_checksums_match_hashlib(tmp_path):
    path = tmp_path / "x.bin"
    payload = bytes(range(256)) * 5000 + b"tail"  # over the 1 MiB read size: several blocks
    path.write_bytes(payload)
    assert sha256_file(path) == hashlib.sha256(payload).hexdigest()
    assert file_checksums({"x": path}) == {"x": hashlib.sha256(payload).hexdigest()}


def test_provenance_is_json_ready_and_keeps_extra_fields(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("data")
    record = provenance(command="opcc-edu build queries hopper", inputs={"in": path}, seed=3)
    assert json.loads(json.dumps(record)) == record
    assert record["command"] == "opcc-edu build queries hopper"
    assert record["seed"] == 3
    assert record["inputs"] == {"in": hashlib.sha256(b"data").hexdigest()}
    assert "Python" in record["machine"]


def test_provenance_module_imports_no_heavy_dependency():
    code = "import sys, opcc_edu.provenance; print('torch' in sys.modules, 'gymnasium' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_machine_description_is_one_line():
    line = machine_description()
    assert "\n" not in line and "CPU cores" in line

#!/usr/bin/env bash
# Download the wheels that benchmarks/device/run.sh needs on a GPU machine that has PyTorch but
# no network: MuJoCo, gymnasium and gymnasium-robotics, uncertainty-toolbox, ipywidgets and
# Jupyter's kernel client (nbclient, ipykernel and their dependencies). CPython 3.12, x86-64
# Linux; each at the version installed here when it is, else the newest. gymnasium-robotics is
# repacked without the meshes of its hand and kitchen tasks (about 45 MB that no OPCC
# environment uses). run.sh installs the folder's wheels when it finds them.
#
#   bash benchmarks/device/wheels.sh [DIR]          # default: .whl at the repository's root
#   PACKAGES="nbclient nbformat" bash benchmarks/device/wheels.sh /tmp/w   # only these
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.whl}"
PY="${PYTHON:-python3}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"
DEFAULT_PACKAGES="mujoco mujoco-core glfw PyOpenGL gymnasium farama-notifications gymnasium-robotics PettingZoo
uncertainty-toolbox ipywidgets widgetsnbextension jupyterlab_widgets comm nbclient nbformat fastjsonschema jsonschema
jsonschema-specifications referencing rpds-py jupyter_client jupyter_core platformdirs pyzmq tornado traitlets ipykernel
debugpy matplotlib-inline nest-asyncio2 ipython ipython-pygments-lexers jedi parso prompt_toolkit wcwidth pexpect
ptyprocess stack-data executing asttokens pure-eval typing-extensions"
PACKAGES="${PACKAGES:-$DEFAULT_PACKAGES}"

platforms=()
for n in 5 12 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

mkdir -p "$DEST"
for name in $PACKAGES; do
    version="$("$PY" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name" 2>/dev/null || true)"
    spec="$name${version:+==$version}"
    echo "$spec"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
        "${platforms[@]}" -d "$DEST" "$spec"
done

# gymnasium-robotics without the assets of tasks the package never makes
"$PY" - "$DEST" <<'EOF'
import sys
import zipfile
from pathlib import Path

DROP = ("/envs/assets/adroit_hand/", "/envs/assets/kitchen_franka/", "/envs/assets/stls/")
for wheel in Path(sys.argv[1]).glob("gymnasium_robotics-*.whl"):
    with zipfile.ZipFile(wheel) as src:
        names = [n for n in src.namelist() if not any(d in n for d in DROP)]
        if len(names) == len(src.namelist()):
            continue
        trimmed = wheel.with_suffix(".trimmed")
        with zipfile.ZipFile(trimmed, "w", zipfile.ZIP_DEFLATED) as dst:
            for n in names:
                data = src.read(n)
                if n.endswith(".dist-info/RECORD"):
                    lines = data.decode().splitlines(keepends=True)
                    data = "".join(line for line in lines if not any(d in "/" + line for d in DROP)).encode()
                dst.writestr(src.getinfo(n), data)
    trimmed.replace(wheel)
    print(f"{wheel.name}: {len(names)} files kept, {wheel.stat().st_size / 1e6:.1f} MB")
EOF
du -sh "$DEST"

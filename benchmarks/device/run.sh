#!/usr/bin/env bash
# One prepared measurement on a GPU (or, small, on a CPU): rollout and training throughput, a
# book chapter executed end to end, and a paper-profile `opcc-edu run`, written to OUTDIR.
#
#   bash benchmarks/device/run.sh OUTDIR [--device cuda|cpu] [--quick] [run.py's other options]
#
# The whole run stays inside --budget-s (default 470 s), counted from the start of this script.
# Wheels in .whl/ at the repository's root (see benchmarks/device/README.md) are installed into
# a private folder first when the packages they hold cannot be imported. Everything else is
# run.py's: `python3 benchmarks/device/run.py --help`.
set -u

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: bash benchmarks/device/run.sh OUTDIR [--device cuda|cpu] [--quick] [options of run.py]" >&2
    exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export OPCC_DEVICE_T0="${OPCC_DEVICE_T0:-$(date +%s.%N)}"
export OPCC_DEVICE_COMMAND="${OPCC_DEVICE_COMMAND:-bash benchmarks/device/run.sh $*}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"

for arg in "$@"; do
    if [ "$arg" = "cpu" ] || [ "$arg" = "--device=cpu" ]; then
        # the CPU measurement must not reach a GPU (training picks CUDA when it sees one)
        export CUDA_VISIBLE_DEVICES=""
    fi
done

# Packages the image may lack (MuJoCo, gymnasium, Jupyter's kernel client, ...), carried as wheels.
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1 &&
    ! "$PY" -c "import mujoco, gymnasium_robotics, uncertainty_toolbox, nbclient, ipykernel, ipywidgets" 2>/dev/null; then
    SITE="${OPCC_DEVICE_SITE:-${TMPDIR:-/tmp}/opcc-device-site}"
    echo "installing $(ls "$ROOT"/.whl/*.whl | wc -l) wheels from .whl/ into $SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$ROOT"/.whl/*.whl ||
        echo "warning: installing the wheels failed; the steps that need them will fail and say so" >&2
    export PYTHONPATH="$SITE:${PYTHONPATH:-}"
    # ipykernel's kernel and nbclient's scripts live there too
    export PATH="$SITE/bin:$PATH"
fi
# The package is imported from this checkout (it need not be installed).
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

cd "$ROOT" || exit 2
exec "$PY" "$HERE/run.py" "$@"

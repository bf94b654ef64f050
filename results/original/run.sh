#!/usr/bin/env bash
# The tiny-profile answers to the original benchmark's queries: the default ensemble of seeds 0, 1
# and 2 and the no-model rule answer every environment's original queries (scored against the
# original targets), one thread each, on the CPU. Each run's results.json and member values
# (results.npz) land in results/original/tiny/<seed0|seed1|seed2|heuristic>/<env>/<dataset>/
# original-queries/ (opcc_edu.build.original_report.load_original_runs reads them).
#
# Usage: bash results/original/run.sh [ENV ...]   (default: all seven environments)
set -euo pipefail
cd "$(dirname "$0")/../.."
export OPCC_EDU_PROFILE=tiny OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
out=results/original/tiny
envs=${*:-maze2d-open maze2d-umaze maze2d-medium maze2d-large halfcheetah hopper walker2d}
for env in $envs; do
  for seed in 0 1 2; do
    opcc-edu run "$env" --queries original --seed "$seed" --threads 1 --device cpu --no-progress --out "$out/seed$seed" >/dev/null
  done
  opcc-edu run "$env" --queries original --baseline heuristic --threads 1 --no-progress --out "$out/heuristic" >/dev/null
  echo "$(date -u +%FT%TZ) $env done"
done
find "$out" -name rcc.png -delete
# The report's answer tables have one writer, benchmarks/original_benchmark.py, which reruns these
# runs itself and records them; a test checks that its record and the runs stored here agree.
python benchmarks/original_benchmark.py --render

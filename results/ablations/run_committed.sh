#!/usr/bin/env bash
# Reproduce the committed ablation results under results/ablations/<recipe>/<profile>/.
#
# Every ablation of the registry (opcc_edu.lab.experiments.ABLATIONS) runs in turn; runs shared by
# several ablations (the default model) are computed once, and an interrupted invocation resumes
# where it stopped (each finished run is one record, written atomically; several invocations may
# share the directory). Each invocation appends its command, machine and wall time to
# <profile>/meta.json; the report at the end puts every table next to the paper's numbers.
#
# Usage: [QUERIES=hard] [DATASETS="random"] [ABLATIONS="horizon ..."] [OUT=dir] [JOBS=n] results/ablations/run_committed.sh [PROFILE [SEEDS [ENV ...]]]
#   QUERIES: the query sets' recipe, paper (default) or hard.
#   OUT: the results root (default results/ablations); runs go to OUT/<recipe>/<profile>. A
#   directory holds runs of one data size and query count (meta.json's "sizes") and refuses a
#   grid at others: paper/classroom's runs read the tiny profile's data and queries, so a
#   classroom grid at the profile's own sizes goes to another OUT.
#   ABLATIONS: run only these ablations (registry keys), in this order.
#   JOBS: runs at once, each in its own worker process of one thread (default 1: one after
#   another in this process); the rows do not depend on it.
#   defaults: tiny, the profile's seed count, the profile's environments, the profile's
#   datasets (DATASETS restricts every environment to those datasets).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
out=${OUT:-results/ablations}
profile=${1:-tiny}
seeds=${2:-}
shift $(( $# > 2 ? 2 : $# ))
command="${ABLATIONS:+ABLATIONS=\"$ABLATIONS\" }${DATASETS:+DATASETS=\"$DATASETS\" }${QUERIES:+QUERIES=$QUERIES }${OUT:+OUT=$OUT }${JOBS:+JOBS=$JOBS }results/ablations/run_committed.sh $profile $seeds $*"
all="horizon confidence ensemble-count prior-scale stochastic model-type normalization clipping termination reward mixture dataset-type"
for name in ${ABLATIONS:-$all}; do
    echo "$(date -u +%FT%TZ) start $name"
    nice -n 10 python - "$name" "$profile" "$seeds" "${DATASETS:-}" "$command" "${QUERIES:-paper}" "$out" "${JOBS:-1}" "$@" <<'PY'
import sys

from opcc_edu.lab.experiments import make_executor, run_ablation

name, profile, seeds, datasets, command, queries, out, jobs, *environments = sys.argv[1:]
run_ablation(
    name,
    out=out,
    queries=queries,
    profile=profile,
    environments=environments or None,
    datasets=datasets.split() or None,
    seeds=int(seeds) if seeds else None,
    progress=False,
    command=f"{command} ({name}, profile {profile})",
    executor=make_executor("local", jobs=int(jobs), cpus_per_run=1 if int(jobs) > 1 else None),
)
PY
done
python - "$out" <<'PY'
import sys

from opcc_edu.lab.experiments import write_report

for fmt in ("markdown", "latex"):
    print("written", write_report(sys.argv[1], fmt=fmt))
PY
echo "$(date -u +%FT%TZ) done"

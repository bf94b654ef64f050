#!/usr/bin/env bash
# Reproduce the committed ablation results under results/ablations/<profile>/.
#
# Every ablation of the registry (opcc_edu.experiments.ABLATIONS) runs in turn; runs shared by
# several ablations (the default model) are computed once, and an interrupted invocation resumes
# where it stopped. Each invocation appends its command, machine and wall time to
# <profile>/meta.json; the report at the end puts every table next to the paper's numbers.
#
# Usage: [DATASETS="random"] results/ablations/run_committed.sh [PROFILE [SEEDS [ENV ...]]]
#   defaults: tiny, the profile's seed count, the profile's environments, the profile's
#   datasets (DATASETS restricts every environment to those datasets).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
profile=${1:-tiny}
seeds=${2:-}
shift $(( $# > 2 ? 2 : $# ))
args=(--profile "$profile" --out results/ablations --no-progress)
if [[ -n $seeds ]]; then args+=(--seeds "$seeds"); fi
if [[ $# -gt 0 ]]; then args+=(--environments "$@"); fi
# shellcheck disable=SC2206
if [[ -n ${DATASETS:-} ]]; then args+=(--datasets $DATASETS); fi
for name in horizon confidence ensemble-count prior-scale stochastic model-type normalization \
    clipping termination mixture dataset-type; do
    echo "$(date -u +%FT%TZ) start $name"
    nice -n 10 opcc-edu ablation "$name" "${args[@]}"
done
opcc-edu report --out results/ablations --format markdown >/dev/null
opcc-edu report --out results/ablations --format latex >/dev/null
echo "$(date -u +%FT%TZ) done"

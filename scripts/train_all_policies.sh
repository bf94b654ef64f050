#!/usr/bin/env bash
# Rebuild every shipped policy of the benchmark: the four query policies of each of the seven
# environments and the medium/expert behaviour policies of the three locomotion datasets.
#
# Each job is one deterministic PPO run (`opcc-edu build policies ENV [--behavior]`, seed 0 for
# query policies, seed 1 for behaviour policies) that writes its weights, its candidate log and
# its rows of policy_table.json / behavior.json under opcc_edu/assets/. Jobs run in two queues
# of one thread each: 90 minutes on two busy CPU cores (measured 1,000-1,700 PPO steps/s for
# locomotion and 1,500-3,500 for the mazes per process while other work shared the cores;
# 4,200 and 7,500 on an idle core).
#
# Usage: scripts/train_all_policies.sh [all|A|B|job ENV query|behavior STEPS CHECKPOINTS [STOP]]
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
LOG_DIR=${LOG_DIR:-runs}
mkdir -p "$LOG_DIR"

# "environment kind PPO-steps candidate-checkpoints [stop-step]"; the two queues take about the
# same time. The open maze learns within ~100k steps, so its run is short with a fine grid of
# candidates (a coarse grid left no checkpoint between "lost" and "solved"). A stop step
# ends a run early: its candidates are the full run's checkpoints up to there (exact, because
# PPO's schedules are constant). The hopper run was cut at 1.36M steps to fit the time budget;
# the walker2d behaviour run at 877k steps because its last checkpoints fall in some episodes
# (2,802 +- 2,064 at 1.0M against 5,097 +- 25 at 877k): an expert must not.
QUEUE_A=(
    "halfcheetah query 2500000 24"
    "maze2d-umaze query 600000 24"
    "maze2d-open query 150000 48"
    "walker2d query 1500000 24"
    "hopper behavior 1200000 24"
)
QUEUE_B=(
    "hopper query 2500000 24 1355776"
    "maze2d-medium query 1000000 24"
    "maze2d-large query 1500000 24"
    "halfcheetah behavior 800000 24"
    "walker2d behavior 1000000 24 876544"
)

run_job() {
    local env=$1 kind=$2 steps=$3 checkpoints=$4 stop=${5:-}
    local extra=()
    if [[ $kind == behavior ]]; then extra+=(--behavior); fi
    if [[ -n $stop ]]; then extra+=(--stop-at "$stop"); fi
    echo "$(date -u +%FT%TZ) start $env $kind $steps"
    nice -n 10 opcc-edu build policies "$env" "${extra[@]}" --steps "$steps" --checkpoints "$checkpoints" \
        >"$LOG_DIR/policies_${env}_${kind}.txt" 2>&1
    echo "$(date -u +%FT%TZ) done  $env $kind"
}

run_queue() {
    local job
    for job in "$@"; do
        # shellcheck disable=SC2086
        run_job $job
    done
}

case ${1:-all} in
    all)
        run_queue "${QUEUE_A[@]}" &
        run_queue "${QUEUE_B[@]}" &
        wait
        ;;
    A) run_queue "${QUEUE_A[@]}" ;;
    B) run_queue "${QUEUE_B[@]}" ;;
    job) shift; run_job "$@" ;;
    *) echo "usage: $0 [all|A|B|job ENV query|behavior STEPS CHECKPOINTS [STOP]]" >&2; exit 2 ;;
esac

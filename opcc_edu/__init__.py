"""opcc_edu: Offline Policy Comparison with Confidence -- benchmark, baselines, metrics, book.

The public API is re-exported here; each subsystem lives in its own module:

* :mod:`opcc_edu.config` -- profiles (``tiny``, ``classroom``, ``paper``).
* :mod:`opcc_edu.envs` -- the seven benchmark environments and termination functions.
* :mod:`opcc_edu.rewards` -- the environments' reward functions, batched torch (PETS-style rollouts).
* :mod:`opcc_edu.mdp` -- exact and Monte-Carlo values on tabular MDPs.
* :mod:`opcc_edu.io` -- atomic, checksummed, pickle-free storage.
* :mod:`opcc_edu.confidence` -- EV, PCI and U-PCI confidences from ensemble value estimates.
* :mod:`opcc_edu.metrics` -- exact risk-coverage metrics (AURCC, RPP, CR_K, AUGRC, ...).
* :mod:`opcc_edu.predictor_metrics` -- the value estimates alone: DOPE's error, rank correlation, regret@1.
* :mod:`opcc_edu.calibration` -- confidence as P(correct) (ECE, Brier, isotonic), interval coverage.
* :mod:`opcc_edu.policies` -- the query and behaviour policies (PPO-trained, exported actors).
* :mod:`opcc_edu.datasets` -- offline datasets in D4RL's format (generated, cached, or loaded).
* :mod:`opcc_edu.simulate` -- exact ground-truth values, many queries batched in the simulator.
* :mod:`opcc_edu.queries` -- policy-comparison query sets: contract, construction, shipped sets.
* :mod:`opcc_edu.plotting` -- maze drawings, query scatter plots, value gaps, query explorer.
* :mod:`opcc_edu.dynamics` -- vectorised dynamics-model ensembles, training, batched rollouts.
* :mod:`opcc_edu.baselines` -- the paper's ensemble baselines end to end (``opcc-edu run``).

Two wings sit beside this core and import it; the core never imports them (a test checks it):

* :mod:`opcc_edu.lab` -- the research machinery: the paper's ablations (grids, the results store,
  executors, reports), verdicts and findings, diagnostics.
* :mod:`opcc_edu.classroom` -- the assignments: student and autograder versions, grading.
* :mod:`opcc_edu.build` -- the asset builders: the query policies and the query sets.
"""

__version__ = "0.1.0"

from .config import PROFILES, Profile, get_profile, set_profile, use_profile
from .utils import cache_dir, get_device, lazy_exports, seed_everything

# Everything else is imported on first use (PEP 562), so that `import opcc_edu.metrics` stays
# light (no torch, no simulator) and one subsystem's optional dependency cannot break another.
# To export a name, add it to its module's list here.
_LAZY_EXPORTS: dict[str, tuple[str, ...]] = {
    "envs": ("ENV_NAMES", "ENV_SPECS", "EnvSpec", "get_spec", "get_state", "make_env", "set_state", "termination_fn"),
    "rewards": ("REWARD_FEATURES", "reward_feature", "reward_fn"),
    "confidence": (
        "CONFIDENCE_FUNCTIONS",
        "compute_confidence",
        "ensemble_voting",
        "oracle_confidence",
        "paired_confidence_interval",
        "random_confidence",
        "unpaired_confidence_interval",
    ),
    "metrics": (
        "augrc",
        "auroc",
        "aurcc",
        "coverage_resolution",
        "evaluate",
        "excess_aurcc",
        "expected_aurcc",
        "expected_random_aurcc",
        "expected_risk_coverage_curve",
        "expected_rpp",
        "mean_confidence_interval",
        "oracle_aurcc",
        "reverse_pair_proportion",
        "risk_coverage_curve",
        "selective_gain",
        "tie_fair_oracle_aurcc",
    ),
    "predictor_metrics": ("normalized_absolute_error", "rank_correlation_by_group", "regret_at_1_by_group"),
    "calibration": (
        "brier_score",
        "expected_calibration_error",
        "interval_coverage",
        "isotonic_calibration",
        "miscalibration_area",
    ),
    "policies": (
        "POLICY_LEVELS",
        "Actor",
        "StackedActors",
        "load_actor",
        "load_behavior_policy",
        "load_policies",
        "load_policy",
        "policy_table",
        "save_actor",
    ),
    "datasets": (
        "DATASET_NAMES",
        "DEFAULT_DATASET",
        "dataset_names",
        "iterate_episodes",
        "load_d4rl_hdf5",
        "load_dataset",
        "query_dataset_distances",
        "summarize_dataset",
    ),
    "simulate": ("BatchSimulator", "monte_carlo_returns", "simulate_trajectories"),
    "queries": ("HORIZONS", "QuerySet", "gap_threshold", "load_queries"),
    "plotting": (
        "draw_maze",
        "plot_gap_histogram",
        "plot_query",
        "plot_risk_coverage",
        "plot_value_scatter",
        "query_explorer",
    ),
    "dynamics": (
        "EnsembleLinear",
        "ModelSpec",
        "build_ensemble",
        "load_ensemble",
        "rollout_values",
        "save_ensemble",
        "train_dynamics",
    ),
    "baselines": (
        "Answers",
        "EnsembleConfig",
        "answer_queries",
        "estimate_values",
        "get_or_train_ensemble",
        "train_ensemble",
    ),
}
_NAME_TO_MODULE = {name: module for module, names in _LAZY_EXPORTS.items() for name in names}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _NAME_TO_MODULE)

__all__ = [
    "__version__",
    "PROFILES",
    "Profile",
    "get_profile",
    "set_profile",
    "use_profile",
    "cache_dir",
    "get_device",
    "seed_everything",
    *_NAME_TO_MODULE,
]

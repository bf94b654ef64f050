"""The paper's Table 9 next to ours, and the policies' section of ``opcc-edu info``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opcc_edu.build.evaluation import EVAL_EPISODES
from opcc_edu.envs import ENV_NAMES, LOCOMOTION_NAMES
from opcc_edu.policies.assets import POLICY_LEVELS, behavior_info, policy_table
from opcc_edu.utils import check_choice

if TYPE_CHECKING:
    import pandas as pd

PAPER_TABLE9: dict[str, tuple[tuple[float, float], ...]] = {
    "maze2d-open": ((122, 10), (104, 22), (18, 14), (4, 8)),
    "maze2d-umaze": ((245, 272), (203, 252), (256, 260), (258, 262)),
    "maze2d-medium": ((235, 35), (197, 58), (23, 73), (3, 9)),
    "maze2d-large": ((231, 268), (160, 201), (50, 76), (9, 9)),
    "halfcheetah": ((1168, 80), (1044, 112), (785, 303), (94, 40)),
    "hopper": ((1195, 794), (1466, 487), (1832, 560), (236, 1)),
    "walker2d": ((2506, 698), (811, 321), (387, 42), (162, 102)),
}
"""(mean, std) return of policies 1..4 in the original benchmark (Koul et al., Table 9; D4RL
environments on mujoco-py, so only the spread of quality is comparable, not the values)."""


def paper_policy_table(env_name: str | None = None) -> pd.DataFrame:
    """The paper's Table 9 as a DataFrame with the columns of :func:`policy_table`
    (``train_step`` is missing: the paper does not report it)."""
    import pandas as pd

    rows = [
        {"env": env, "level": level, "mean_return": float(m), "std_return": float(sd), "episodes": EVAL_EPISODES}
        for env, cells in PAPER_TABLE9.items()
        for level, (m, sd) in zip(POLICY_LEVELS, cells, strict=True)
    ]
    frame = pd.DataFrame(rows)
    if env_name is not None:
        check_choice(env_name, ENV_NAMES, "env_name")
        frame = frame[frame["env"] == env_name].reset_index(drop=True)
    return frame


def info_lines() -> list[str]:
    """Lines for ``opcc-edu info``: the Table 9 analogue and the behaviour policies."""
    table = policy_table()
    lines = [f"Query policies (paper Table 9 analogue; mean ± std return over {EVAL_EPISODES} episodes):"]
    lines.append(f"  {'env':<15}" + "".join(f"{'level ' + str(k):>19}" for k in POLICY_LEVELS))
    for name in ENV_NAMES:
        rows = table[table["env"] == name].set_index("level")
        cells = [
            f"{rows.loc[k, 'mean_return']:.1f} ± {rows.loc[k, 'std_return']:.1f}" if k in rows.index else "not built"
            for k in POLICY_LEVELS
        ]
        lines.append(f"  {name:<15}" + "".join(f"{c:>19}" for c in cells))
    behaviour = behavior_info()["environments"]
    lines.append("Behaviour policies of the locomotion datasets (medium / expert mean return):")
    for name in LOCOMOTION_NAMES:
        if name in behaviour:
            e = behaviour[name]
            lines.append(
                f"  {name:<15} medium {e['medium_mean_return']:>8.1f} (step {e['medium_step']}), "
                f"expert {e['expert_mean_return']:>8.1f} (step {e['expert_step']})"
            )
        else:
            lines.append(f"  {name:<15} not built")
    return lines

"""opcc_edu: Offline Policy Comparison with Confidence -- benchmark, baselines, metrics, book.

The public API is re-exported here; each subsystem lives in its own module:

* :mod:`opcc_edu.config` -- profiles (``tiny``, ``classroom``, ``paper``).
* :mod:`opcc_edu.envs` -- the seven benchmark environments and termination functions.
* :mod:`opcc_edu.mdp` -- exact and Monte-Carlo values on tabular MDPs.
* :mod:`opcc_edu.io` -- atomic, checksummed, pickle-free storage.
"""

__version__ = "0.1.0"

from .config import PROFILES, Profile, get_profile, set_profile, use_profile
from .envs import ENV_NAMES, ENV_SPECS, EnvSpec, get_spec, get_state, make_env, set_state, termination_fn
from .utils import cache_dir, get_device, seed_everything

__all__ = [
    "__version__",
    "PROFILES",
    "Profile",
    "get_profile",
    "set_profile",
    "use_profile",
    "ENV_NAMES",
    "ENV_SPECS",
    "EnvSpec",
    "get_spec",
    "get_state",
    "make_env",
    "set_state",
    "termination_fn",
    "cache_dir",
    "get_device",
    "seed_everything",
]

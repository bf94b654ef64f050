"""Test-session setup shared by unit tests and nbval notebook runs.

The book's chapters run in the ``tiny`` profile under CI; notebook kernels inherit this
process's environment, so the profile is set before any kernel starts. MuJoCo writes
MUJOCO_LOG.TXT into the working directory on errors; keep caches out of the user's home.
"""

import os
import tempfile

os.environ.setdefault("OPCC_EDU_PROFILE", "tiny")
os.environ.setdefault("MPLBACKEND", "Agg")
# Hidden check cells run in the test suite; a reader's notebook skips them (opcc_edu.display).
os.environ.setdefault("OPCC_EDU_CHECKS", "1")
os.environ.setdefault("OPCC_EDU_CACHE", os.path.join(tempfile.gettempdir(), "opcc_edu_test_cache"))

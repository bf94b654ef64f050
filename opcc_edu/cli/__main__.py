"""``python -m opcc_edu.cli``: the same as the ``opcc-edu`` command."""

import sys

from . import main

sys.exit(main())

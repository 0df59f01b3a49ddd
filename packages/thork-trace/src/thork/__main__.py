"""``python -m thork``: the ``thork`` command (the same as the console script)."""

import sys

from thork_core.cli import main

sys.exit(main())

"""``python -m thork_core``: the ``thork`` command."""

import sys

from ._cli import main

sys.exit(main())

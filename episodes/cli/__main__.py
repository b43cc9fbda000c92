"""``python -m episodes.cli``: the same command line as ``episodes`` and ``python -m episodes``."""

import sys

from episodes.cli import main

sys.exit(main())

"""``python -m episodes``: the command line."""

import sys

from episodes.cli import main

sys.exit(main())

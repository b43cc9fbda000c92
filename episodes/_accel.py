"""The optional C accelerator (``episodes/_csrc/``), or None.

The compiled module speeds up the per-step paths (``add_env_step``, small Box checks, stacking
rows in ``to_numpy``); the pure-Python code it mirrors stays the reference and runs wherever
the extension was not built. ``EPISODES_PURE_PYTHON=1`` in the environment turns it off.

Example:
    >>> speedups is None or hasattr(speedups, "join_rows")
    True
"""

from __future__ import annotations

import os
from types import ModuleType

speedups: ModuleType | None
if os.environ.get("EPISODES_PURE_PYTHON", "") not in ("", "0"):
    speedups = None
else:
    try:
        from episodes import _speedups as speedups
    except ImportError:  # not built (no compiler at install time): the Python paths run
        speedups = None

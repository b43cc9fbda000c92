"""Runs the command line in a subprocess, as a user would (``python -m episodes ...``)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def run(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python -m episodes *args``, output captured as text, at most 300 s."""
    return subprocess.run(
        [sys.executable, "-m", "episodes", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )

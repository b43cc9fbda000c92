"""Ray installed but failing to import (Ray 2.60 under ``python -OO``) is an ImportError.

Ray reads its own docstrings as it imports; ``-OO`` strips them and its import raised a bare
``AttributeError`` from deep inside Ray, not the ``ImportError`` ``require_ray`` promises.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
try:  # the package itself requires Ray when imported
    from episodes.distributed.require import require_ray

    require_ray()
except ImportError as error:
    print("ImportError:", error)
else:
    print("imported")
"""


def test_ray_failing_to_import_under_python_OO_is_an_import_error():
    pytest.importorskip("ray")
    done = subprocess.run(
        [sys.executable, "-OO", "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    if done.stdout.startswith("imported"):  # a Ray that imports under -OO needs nothing
        return
    assert done.stdout.startswith("ImportError: Ray is installed but cannot be imported")
    assert "python -OO" in done.stdout

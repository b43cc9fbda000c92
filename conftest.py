"""Collection rules for the whole run (pyproject's testpaths: ``tests`` and ``episodes``).

Without the optional Ray extra, the modules that need Ray at import (``episodes.distributed``
and the tests' Ray env factories) are left out of the doctest collection, as the tests that
import them are (``tests/conftest.py``), rather than stopping the run.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _has_ray() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except ValueError:  # a module set to None in sys.modules: not importable
        return False


_HAS_RAY = _has_ray()
_ROOT = Path(__file__).resolve().parent
_NEEDS_RAY = (_ROOT / "episodes" / "distributed", _ROOT / "tests" / "distributed" / "_envs.py")


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """Leaves out the Ray-needing modules when Ray is not installed."""
    if _HAS_RAY:
        return None
    path = collection_path.resolve()
    return True if any(path == p or p in path.parents for p in _NEEDS_RAY) else None

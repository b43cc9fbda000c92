"""Hypothesis profiles for the whole suite.

Select one with the ``HYPOTHESIS_PROFILE`` environment variable (default ``"default"``):

- ``ci``: derandomised (same examples on every run), few examples so the suite stays fast on
  two cores, no per-example deadline (shared CI machines have noisy timing), and failures print
  a reproduction blob.
- ``dev``: many more examples, for hunting bugs locally.
- ``default``: hypothesis' defaults with no deadline.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path

import gymnasium
import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, max_examples=25, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=500, deadline=None, print_blob=True)
settings.register_profile("default", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Modules that import episodes.distributed at their top need Ray (an optional extra); without
# it they are left out rather than failing to import (CI installs Ray, so they run there).
_HAS_RAY = importlib.util.find_spec("ray") is not None
_GYMNASIUM_1_4 = tuple(int(p) for p in gymnasium.__version__.split(".")[:2]) >= (1, 4)
# Read without importing torch (torch 2.3 added the uint16-64 dtypes).
_TORCH_VERSION = re.findall(r"\d+", importlib.metadata.version("torch"))
_TORCH_2_3 = tuple(int(p) for p in _TORCH_VERSION[:2]) >= (2, 3)
_IMPORTS_DISTRIBUTED = re.compile(r"^from episodes\.distributed[. ]", re.M)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Tests that pin gymnasium 1.4's answers (its space checks, nested Graph spaces), or use
    # torch 2.3's dtypes (uint16-64, uint4, float8 fills), skip on the older versions the
    # package allows.
    needs = {"gymnasium_1_4": _GYMNASIUM_1_4, "torch_2_3": _TORCH_2_3}
    for marker, present in needs.items():
        if present:
            continue
        skip = pytest.mark.skip(reason=f"needs {marker.replace('_', ' ', 1).replace('_', '.')}")
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if _HAS_RAY or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _IMPORTS_DISTRIBUTED.search(collection_path.read_text()) else None

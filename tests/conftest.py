"""Hypothesis profiles for the whole suite.

Select one with the ``HYPOTHESIS_PROFILE`` environment variable (default ``"default"``):

- ``ci``: derandomised (same examples on every run), few examples so the suite stays fast on
  two cores, no per-example deadline (shared CI machines have noisy timing), and failures print
  a reproduction blob.
- ``dev``: many more examples, for hunting bugs locally.
- ``default``: hypothesis' defaults with no deadline.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, max_examples=25, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=500, deadline=None, print_blob=True)
settings.register_profile("default", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

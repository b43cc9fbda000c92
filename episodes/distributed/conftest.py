"""Doctest collection: without Ray installed, this package's modules cannot be imported."""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("ray") else ["*.py"]

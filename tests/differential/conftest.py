"""Differential tests run in the reference venv only (``make differential``: ``.venv-ref``).

The project's own venv may hold ``ray`` (the ``ray`` extra), which ships RLlib's sources but
not RLlib's dependencies nor the gymnasium version it pins; rsl_rl is installed in the
reference venv alone, so its presence says which venv this is.
"""

from importlib.util import find_spec

collect_ignore_glob = [] if find_spec("rsl_rl") is not None else ["test_*.py"]

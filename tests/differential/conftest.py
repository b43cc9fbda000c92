"""Differential tests run in the reference venv only (``make differential``: ``.venv-ref``).

The project's own venv may hold ``ray`` (the ``ray`` extra), which ships RLlib's sources but
not RLlib's dependencies nor the gymnasium version it pins; rsl_rl is installed in the
reference venv alone, so its presence says which venv this is (as does the venv's own name).

In the reference venv both references must import: a module-level ``importorskip`` would
otherwise turn a broken RLlib install into hundreds of silently skipped comparisons, so a
failing import here stops the run with the import's own error.
"""

import importlib
import sys
from importlib.util import find_spec
from pathlib import Path

REFERENCES = ("rsl_rl", "ray.rllib")
_REFERENCE_VENV = find_spec("rsl_rl") is not None or Path(sys.prefix).name == ".venv-ref"

if _REFERENCE_VENV:
    for _name in REFERENCES:
        try:
            importlib.import_module(_name)
        except Exception as err:
            raise RuntimeError(
                f"the reference venv ({sys.prefix}) cannot import {_name}, which the "
                f"differential tests compare against: {type(err).__name__}: {err}"
            ) from err

# _rllib_ops.py imports RLlib at its top: --doctest-modules would import it here too.
collect_ignore_glob = [] if _REFERENCE_VENV else ["test_*.py", "_rllib_ops.py"]

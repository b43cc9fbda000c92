"""Running a script where torch (or other packages) cannot be imported, as on an install
without them: the torch-free tests (tests/test_session54_notorch.py, test_session54_docclaims.py)
share it.

The script runs in a fresh interpreter whose import system refuses the named packages as an
uninstalled package would: ``ModuleNotFoundError`` with the module's name. The repository comes
first on its path, so it imports this checkout's ``episodes``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Put first on sys.meta_path, so it answers before any finder that would find the package.
REFUSE = """
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {missing!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Refuse())
"""


def run_refusing(
    script: str, missing: tuple[str, ...] = ("torch",), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` (dedented already) where ``missing`` cannot be imported.

    Returns the completed process, its output captured as text; ``cwd`` defaults to the
    repository's root.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", REFUSE.format(missing=set(missing)) + script],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=60,
    )

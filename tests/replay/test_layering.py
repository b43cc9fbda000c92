"""episodes.replay imports no heavy package and only public names of other episodes packages."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPLAY = Path(__file__).resolve().parents[2] / "episodes" / "replay"


def test_import_replay_does_not_import_torch():
    code = (
        "import sys, episodes.replay\n"
        "print(','.join(m for m in ('torch', 'ray', 'pyarrow', 'hypothesis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_only_public_names_from_other_packages():
    for path in sorted(REPLAY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("episodes")
            ):
                if node.module.startswith("episodes.replay"):
                    continue
                assert not any(p.startswith("_") for p in node.module.split(".")), (
                    path,
                    node.module,
                )
                for alias in node.names:
                    assert not alias.name.startswith("_"), (path.name, node.module, alias.name)

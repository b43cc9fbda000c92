"""Every ```python block in README.md and docs/*.md runs (docs/testing.md has its own test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"testing.md"}
FILES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in SKIP)]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
# A block that uses an optional extra runs where the extra is installed (CI installs them all).
EXTRAS = {
    "episodes.distributed": "ray",
    "import ray": "ray",
    "minari": "minari",
    "matplotlib": "matplotlib",
}


def _blocks():
    for path in FILES:
        for i, block in enumerate(BLOCK.findall(path.read_text())):
            yield pytest.param(block, id=f"{path.name}-{i}")


@pytest.mark.parametrize("code", list(_blocks()))
def test_doc_block_runs(code, tmp_path, monkeypatch):
    for marker, module in EXTRAS.items():
        if marker in code:
            pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})

"""Every ```python block of docs/testing.md runs (in order, sharing one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_doc_has_python_blocks():
    assert len(BLOCK.findall(DOC.read_text())) >= 2


def test_python_blocks_run():
    namespace: dict = {"__name__": "docs_testing"}
    for i, block in enumerate(BLOCK.findall(DOC.read_text())):
        exec(compile(block, f"{DOC}:block{i}", "exec"), namespace)
    # Run the documented mixin's tests too.
    suite = namespace["TestFrameStack"]()
    for name in dir(suite):
        if name.startswith("test_"):
            getattr(suite, name)()

"""Every public name of every public package appears in docs/api.md, the map of the API.

A name counts as documented when some code span of docs/api.md contains it as a word
(`` `map_leaves(fn, item)` `` documents ``map_leaves``). The public names are a package's
``__all__``; a module without one (``episodes.indexing``) contributes the public functions and
classes it defines itself.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"

# (package, what it needs beyond the core dependencies: skipped where that is missing).
PACKAGES = [
    ("episodes", None),
    ("episodes.spaces", None),
    ("episodes.indexing", None),
    ("episodes.seeds", None),
    ("episodes.buffer", None),
    ("episodes.episode", None),
    ("episodes.connectors", None),
    ("episodes.io", None),
    ("episodes.runner", None),
    ("episodes.replay", None),
    ("episodes.testing", "hypothesis"),
    ("episodes.testing.strategies", "hypothesis"),
    ("episodes.rollout", "torch"),
    ("episodes.converter", "torch"),
    # Importing it checks that Ray is installed; it does not start Ray.
    ("episodes.distributed", "ray"),
]


def public_names(module: ModuleType) -> list[str]:
    """``module.__all__``, or the public functions and classes it defines without one."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    )


def code_spans(text: str) -> list[str]:
    """The inline code spans of markdown ``text`` (fenced blocks are examples, not the map)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return prose.split("`")[1::2]  # a span may wrap onto the next line


def undocumented(names: list[str], text: str) -> list[str]:
    """The names no code span of ``text`` mentions."""
    spans = code_spans(text)
    return [
        name
        for name in names
        if not any(re.search(rf"\b{re.escape(name)}\b", span) for span in spans)
    ]


@pytest.mark.parametrize(("package", "needs"), PACKAGES, ids=[p for p, _ in PACKAGES])
def test_public_names_are_in_api_md(package: str, needs: str | None) -> None:
    if needs is not None:
        pytest.importorskip(needs)
    module = importlib.import_module(package)
    names = public_names(module)
    assert names, f"{package} exports nothing"
    missing = undocumented(names, API_MD.read_text())
    assert not missing, f"{package} exports names docs/api.md does not mention: {missing}"


def test_undocumented_counts_only_code_spans() -> None:
    text = (
        "map_leaves in prose, `is_flat(item)` in code, `map_leaves_with_space(fn,\n"
        "struct, space)` wrapped, and\n```python\nsliding_rows(x, 2)\n```\n"
    )
    names = ["map_leaves", "is_flat", "map_leaves_with_space", "sliding_rows"]
    assert undocumented(names, text) == ["map_leaves", "sliding_rows"]

"""The package's shape, pinned: layers, private names, module sizes, no compiled code.

Walks every module of ``episodes/`` with ``ast``:

- a package imports only the layers before it (the order in docs/index.md); ``rollout``
  knows nothing of episodes;
- no module imports another package's underscored name or private module;
- no module grows past about 500 lines, not counting the lines of its docstring examples
  (every public name carries one; documenting a function must not force a split), and none
  past 700 lines with them;
- the package holds no C sources and no compiled extension.
"""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "episodes"
MAX_LINES = 500
MAX_LINES_WITH_EXAMPLES = 700

# Each group may import itself and every group before it.
LAYERS: list[set[str]] = [
    {"spaces", "indexing", "arguments", "structs", "shapes", "envs", "seeds", "errors"},
    {"buffer"},
    {"episode"},
    {"connectors"},
    {"io"},
    {"runner"},
    {"replay"},
    {"testing"},
    {"rollout"},
    {"converter"},
    {"distributed", "minari"},
    {"cli", "__main__", "__init__"},
]
# rollout works on tensors only: it may use the pure helpers and nothing that knows episodes.
ONLY = {"rollout": {"rollout", "spaces", "indexing", "arguments", "structs", "shapes", "errors"}}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _layer_of(package: str) -> int:
    for i, group in enumerate(LAYERS):
        if package in group:
            return i
    raise AssertionError(f"episodes.{package} is in no layer: add it to LAYERS and docs/index.md")


def _imports(path: Path) -> list[tuple[list[str], list[str]]]:
    """(module path parts after ``episodes``, imported names) for every absolute import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] == "episodes":
                found.append((parts[1:], [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "episodes":
                    found.append((parts[1:], []))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layers_and_private_names(path: Path) -> None:
    own = _package_of(path)
    own_layer = _layer_of(own)
    for parts, names in _imports(path):
        if not parts:
            # ``from episodes import X``: a top-level name or subpackage.
            parts = [names[0]] if names else []
            names = names[1:] if len(names) > 1 else []
        if not parts:
            continue
        target = parts[0]
        if target.startswith("__") and target != "__main__":
            continue  # package metadata such as ``__version__``
        allowed = ONLY.get(own)
        if allowed is not None:
            assert target in allowed, f"{path.name}: episodes.{own} may not import {target}"
        assert _layer_of(target) <= own_layer, (
            f"{path.relative_to(PACKAGE)} (layer {own}) imports episodes.{target}, a later layer"
        )
        if target == own:
            continue
        private = [p for p in parts[1:] if p.startswith("_")] + [
            n for n in names if n.startswith("_") and not n.startswith("__")
        ]
        assert not private, f"{path.relative_to(PACKAGE)} imports private {private} of {target}"


def _example_lines(source: str) -> int:
    """Lines taken by the doctest examples (prompts, continuations, expected output)."""
    parser = doctest.DocTestParser()
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            for example in parser.get_examples(doc or ""):
                count += example.source.count("\n") + example.want.count("\n")
    return count


def test_example_lines_are_counted():
    source = '''def f():
    """Doc.

    >>> 1 + 1
    2
    >>> for i in []:
    ...     pass
    """
'''
    assert _example_lines(source) == 4


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path: Path) -> None:
    source = path.read_text()
    lines = len(source.splitlines())
    own = lines - _example_lines(source)
    name = path.relative_to(PACKAGE)
    assert own <= MAX_LINES, f"{name} has {own} lines besides its examples: split it"
    assert lines <= MAX_LINES_WITH_EXAMPLES, f"{name} has {lines} lines: split it"


def test_no_compiled_code() -> None:
    compiled = [
        p for p in PACKAGE.rglob("*") if p.suffix in {".c", ".h", ".cpp", ".pyx", ".so", ".pyd"}
    ]
    assert not compiled, f"compiled code in the package: {compiled}"

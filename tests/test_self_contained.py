"""The repository stands on its own: no doc, comment or test points at anything outside it.

The behavioural contract lives in docs/contract.md and is cited as "docs/contract.md §N". This
test walks the repository's text files (README.md, docs/*.md, the package, tests, examples,
benchmarks, scripts) and fails on a reference to the old out-of-tree specification file or its
sections, on a path into a ``shared`` folder outside the repository, and on a Markdown link that
leaves the repository or points to a file (or heading) that does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = (
    "docs/*.md",
    "episodes/**/*.py",
    "tests/**/*.py",
    "examples/**/*.py",
    "benchmarks/**/*.py",
    "scripts/*",
)

# Built from pieces so that this file does not trip its own checks.
_WORD = "SP" + "EC"
_SHARED = "shar" + "ed/"
FORBIDDEN = {
    f"the out-of-tree {_WORD}.md": re.compile(re.escape(_WORD) + r"\.md"),
    # "<word> section 8", "<word> 3.2", "per <word>", "the <word>": the word alone, any use.
    f"a {_WORD} (section) reference": re.compile(r"(?<![\w])" + _WORD + r"(?![\w])"),
    f"a path into a {_SHARED} folder outside the repository": re.compile(r"(?<![\w-])" + _SHARED),
}

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
INLINE_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def text_files() -> list[Path]:
    """README.md plus every file matched by PATTERNS, virtualenvs and caches left out."""
    found = {ROOT / "README.md"}
    for pattern in PATTERNS:
        found.update(p for p in ROOT.glob(pattern) if p.is_file())
    return sorted(
        p
        for p in found
        if p.exists()
        and not any(
            part.startswith(".") or part == "__pycache__" for part in p.relative_to(ROOT).parts
        )
    )


def markdown_files() -> list[Path]:
    return [p for p in text_files() if p.suffix == ".md"]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _prose(markdown: str) -> str:
    """The Markdown with code blocks and inline code blanked out (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", markdown))


def links(markdown: str) -> list[str]:
    prose = _prose(markdown)
    return INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def test_the_walk_finds_the_files():
    names = {_rel(p) for p in text_files()}
    assert {"README.md", "docs/contract.md", "episodes/indexing.py"} <= names
    assert "tests/test_self_contained.py" in names


@pytest.mark.parametrize("path", text_files(), ids=_rel)
def test_no_reference_outside_the_repository(path):
    problems = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            if pattern.search(line):
                problems.append(f"{_rel(path)}:{number}: {what}: {line.strip()}")
    assert not problems, (
        "cite docs/contract.md §N instead of anything outside the repository:\n"
        + "\n".join(problems)
    )


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_markdown_links_stay_inside_and_resolve(path):
    problems = []
    for target in links(path.read_text()):
        if is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = file_part.split("?", 1)[0]
        resolved = (path.parent / file_part).resolve() if file_part else path
        if ROOT not in resolved.parents and resolved != ROOT:
            problems.append(f"{target}: leaves the repository")
        elif not resolved.exists():
            problems.append(f"{target}: {_rel(resolved)} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            problems.append(f"{target}: no heading #{anchor} in {_rel(resolved)}")
    assert not problems, f"bad links in {_rel(path)}:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "line",
    [
        f"see the {_WORD}, section 8",
        f"# {_WORD} 3.2: clipped",
        f"as {_WORD}.md says",
        f"/work/{_SHARED}notes.md",
        f"[contract](../../{_SHARED}x.md)",
    ],
)
def test_the_checks_catch_what_they_should(line):
    assert any(pattern.search(line) for pattern in FORBIDDEN.values())


def test_the_checks_let_ordinary_text_through():
    ordinary = [
        "docs/contract.md §3.4",
        f"{_WORD}_TABLE = []",
        "a shared_memory buffer; unshared/ is fine",
        "specification",
    ]
    assert not [line for line in ordinary if any(p.search(line) for p in FORBIDDEN.values())]
    assert links("[a](b.md) `[c](d.md)`\n```\n[e](f.md)\n```\n[g]: h.md\n") == ["b.md", "h.md"]
    assert slug("2. `InfiniteLookbackBuffer`: storage and writing") == (
        "2-infinitelookbackbuffer-storage-and-writing"
    )

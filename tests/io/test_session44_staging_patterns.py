"""Cleaning staged directories compiles no pattern per destination.

``remove_stale`` (every dataset copy and replay ``save`` calls it for its destination) built a
regular expression from each destination's name; ``re`` keeps up to 512 compiled patterns in
a module-wide cache, so a training job saving checkpoints to new directories filled it (one
``re.Pattern`` per directory, pushing out other code's patterns). The staged names it removes
or keeps are unchanged.
"""

from __future__ import annotations

import gc
import os
import re
from pathlib import Path

import pytest

from episodes.io.staging import remove_stale, stage

# A pid no process has here (above the kernel's pid_max, which is at most 2**22).
GONE = 2**30 + 7


def _patterns() -> int:
    return sum(isinstance(obj, re.Pattern) for obj in gc.get_objects())


def test_cleaning_new_destinations_adds_no_compiled_patterns(tmp_path):
    remove_stale(tmp_path / "warm-up")
    before = _patterns()
    for i in range(60):
        remove_stale(tmp_path / f"checkpoint-{i:04d}")
    assert _patterns() - before < 10  # it was one more per destination


NAMES = [
    # name beside "dst", removed?
    ("its own staged directory, writer gone", f".dst.partial-{GONE}-0123456789abcdef", True),
    ("another destination's", f".dstx.partial-{GONE}-0123456789abcdef", False),
    ("a prefix of the name only", f".ds.partial-{GONE}-0123456789abcdef", False),
    ("a short random part", f".dst.partial-{GONE}-0123456789abcde", False),
    ("an upper-case random part", f".dst.partial-{GONE}-0123456789ABCDEF", False),
    ("no leading dot", f"dst.partial-{GONE}-0123456789abcdef", False),
    ("something after the random part", f".dst.partial-{GONE}-0123456789abcdef.x", False),
    ("a writer alive (another process)", f".dst.partial-{os.getppid()}-0123456789abcdef", False),
]


@pytest.mark.parametrize(("name", "removed"), [c[1:] for c in NAMES], ids=[c[0] for c in NAMES])
def test_staged_directories_beside_the_destination(tmp_path, name, removed):
    (tmp_path / name).mkdir()
    got = remove_stale(tmp_path / "dst")
    assert got == ([name] if removed else [])
    assert (tmp_path / name).exists() is not removed


def test_staged_directories_inside_the_destination_and_a_live_stage(tmp_path):
    final = tmp_path / "dst"
    final.mkdir()
    stale = final / f".old.partial-{GONE}-0123456789abcdef"  # made by a copy into dst
    stale.mkdir()
    assert remove_stale(final) == [stale.name]
    assert not stale.exists()
    live = stage(final)  # this process holds it: never removed
    assert remove_stale(final) == [] and Path(live.path).exists()

"""``episodes record`` into a dataset of the other format names the ``--format`` to pass.

The writers' refusals name their classes (``use DatasetWriter``), which a command-line user
never sees; the dataset is left as it was, and other refusals keep their words.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from episodes.cli import main

pytest.importorskip("gymnasium")


def _record(out: Path, *flags: str) -> list[str]:
    return ["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--out", str(out), *flags]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(
    ("made_with", "appended_with", "said"),
    [
        ([], ["--format", "1"], "is a format v2 dataset; pass --format 2 to append to it"),
        (["--format", "1"], [], "is a format v1 dataset; pass --format 1 to append to it"),
        (["--format", "1"], ["--format", "2"], "is a format v1 dataset; pass --format 1"),
    ],
    ids=["v2 given --format 1", "v1 given the default", "v1 given --format 2"],
)
def test_the_other_format_names_the_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    made_with: list[str],
    appended_with: list[str],
    said: str,
) -> None:
    out = tmp_path / "ds"
    assert main(_record(out, *made_with)) == 0
    before = _tree(out)
    capsys.readouterr()
    assert main(_record(out, *appended_with)) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error: ") and said in err
    assert "Writer" not in err  # no class a CLI user does not call
    assert len(err.strip().splitlines()) == 1
    assert _tree(out) == before  # refused before anything was written


@pytest.mark.parametrize("fmt", ["1", "2"])
def test_a_foreign_directory_keeps_its_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out = tmp_path / "junk"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(_record(out, "--format", fmt)) == 1
    err = capsys.readouterr().err
    assert "is not empty and not an episodes dataset" in err and "--format" not in err
    assert os.listdir(out) == ["notes.txt"]


@pytest.mark.parametrize("fmt", ["1", "2"])
def test_the_same_format_still_appends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out = tmp_path / "ds"
    assert main(_record(out, "--format", fmt)) == 0
    assert main(_record(out, "--format", fmt, "--seed", "1")) == 0
    assert "recorded 20 steps" in capsys.readouterr().out

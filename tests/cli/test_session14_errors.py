"""CLI error lines and the env-id messages they quote (each test failed before its fix).

A dataset's strings (its metadata env id) reach error messages; printed raw, an escape
sequence or a newline in them forges terminal lines (``episodes info`` escapes them). An
empty path argument would name the current directory (``Path("")`` is ``.``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetError, DatasetMetadata, DatasetWriter, merge
from episodes.io.tools import other_env_problem

EVIL = "X-v0\x1b[2K\r\x1b[32mok: 100 episode pieces verified\x1b[0m\nforged second line"
ESCAPED = r"X-v0\x1b[2K\r\x1b[32mok: 100 episode pieces verified\x1b[0m\nforged second line"


def _dataset(path: Path, env_id: str) -> Path:
    with DatasetWriter(path, metadata=DatasetMetadata(env_id=env_id)) as w:
        w.write(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0]))
    return path


def _no_control_characters(text: str) -> None:
    assert not any(c in text for c in "\x1b\r\n\x00"), repr(text)


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "evil", EVIL)


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "plain", "Y-v0")


def test_record_error_line_escapes_the_datasets_env_id(evil: Path, capsys):
    assert main(["record", "CartPole-v1", "--steps", "1", "--out", str(evil)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("episodes: error: ")
    _no_control_characters(err[:-1])
    assert f"is a dataset of {ESCAPED}; record CartPole-v1" in err


def test_merge_error_line_escapes_the_datasets_env_id(evil: Path, plain: Path, tmp_path, capsys):
    assert main(["merge", str(plain), str(evil), "--out", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    _no_control_characters(err[:-1])
    assert f"env ids Y-v0 and {ESCAPED}" in err
    assert not (tmp_path / "m").exists()


def test_api_messages_escape_the_datasets_env_id(evil: Path, plain: Path, tmp_path: Path):
    problem = other_env_problem(evil, "CartPole-v1", None, None)
    _no_control_characters(problem)
    assert f"is a dataset of {ESCAPED};" in problem
    with pytest.raises(DatasetError) as info:
        merge([evil, plain], tmp_path / "m")
    _no_control_characters(str(info.value))
    assert f"env ids {ESCAPED} and Y-v0" in str(info.value)


def test_ordinary_env_ids_read_as_before(plain: Path):
    from episodes.io.reader import printable  # new with the fix

    assert "is a dataset of Y-v0; record CartPole-v1" in other_env_problem(
        plain, "CartPole-v1", None, None
    )
    assert printable("CartPole-v1") == "CartPole-v1"
    assert printable("é\u202e") == "é\\u202e"  # a bidi override is a control (Cf) too


def test_any_error_line_escapes_control_characters(tmp_path: Path, capsys):
    missing = tmp_path / "two\nlines\x1b[31m"
    assert main(["info", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    _no_control_characters(err[:-1])
    assert "two\\nlines\\x1b[31m" in err


EMPTY = {
    "info": (["info", ""], "DIR"),
    "validate": (["validate", ""], "DIR"),
    "plot": (["plot", "", "--out", "p.png"], "DIR"),
    "record --out": (["record", "CartPole-v1", "--steps", "2", "--out", ""], "--out"),
    "migrate DST": (["migrate", "{src}", ""], "DST"),
    "merge SRC": (["merge", "{src}", "", "--out", "m"], "SRC"),
    "merge --out": (["merge", "{src}", "--out", ""], "--out"),
    "split --val": (["split", "{src}", "--train", "t", "--val", ""], "--val"),
    "filter --out": (["filter", "{src}", "--out", ""], "--out"),
}


@pytest.mark.parametrize("name", list(EMPTY), ids=str)
def test_an_empty_path_argument_is_refused(
    name: str, plain: Path, tmp_path: Path, capsys, monkeypatch
):
    argv, what = EMPTY[name]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    code = main([a.format(src=plain) for a in argv])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err == f"episodes: error: {what} is empty (give . for the current directory)\n"
    assert list(cwd.iterdir()) == []  # nothing was made in the current directory

"""Command-line and io-tool pins for session 18's hunt: records of two envs racing into one
directory, a killed v1 record's directory, ``.`` as a copy's destination, a Minari
``total_episodes`` past its episodes, destinations below a symlink loop, a closed stderr, and
header fields of the wrong type.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import episodes.io.tools as tools
from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    migrate,
    read_episodes,
    validate_dataset,
)
from episodes.io.manifest_lines import seal_lines, unseal_line
from tests.cli._cli import run


def episode(id_: str, obs_shape: tuple[int, ...] = ()) -> SingleAgentEpisode:
    obs = np.zeros((2, *obs_shape), np.float32)
    space = gym.spaces.Box(-1.0, 1.0, obs_shape, np.float32)
    return SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
    )


def small(path: Path, n: int = 4) -> Path:
    with DatasetWriter(path, sync=False) as writer:
        writer.write_many(episode(f"e{i}") for i in range(n))
    return path


# ------------------------------------------- 1. two records of different envs, one directory
def _cartpole_dataset(path: Path, fmt: int, with_episode: bool) -> None:
    """What a `record CartPole-v1` that won the race has made at `path`."""
    if fmt == 1:
        with EpisodeWriter(path) as writer:
            writer.write(episode("cart", (4,)))
        return
    with DatasetWriter(path, metadata=DatasetMetadata(env_id="CartPole-v1")) as writer:
        if with_episode:
            writer.write(episode("cart", (4,)))


@pytest.mark.parametrize(
    "fmt, with_episode, refusal",
    [
        (2, False, "is a dataset of CartPole-v1"),  # the winner's header, no episode yet
        (2, True, "is a dataset of CartPole-v1"),
        (1, True, "holds episodes of other spaces"),  # v1 names no env: its spaces do
    ],
    ids=["v2-header-only", "v2-with-episode", "v1"],
)
def test_record_refuses_a_dataset_another_env_made_after_its_first_check(
    tmp_path, monkeypatch, capsys, fmt, with_episode, refusal
):
    # The winner makes the dataset between the loser's first check (a new directory then)
    # and the loser's writer opening it: the loser must refuse, write nothing, remove nothing.
    import episodes.io as io

    record_module = sys.modules["episodes.cli.record"]  # episodes.cli.record is the function
    out = tmp_path / "ds"
    name = "EpisodeWriter" if fmt == 1 else "DatasetWriter"
    module = record_module if fmt == 1 else io
    real = getattr(module, name)

    def opened_after_the_winner(path, **kwargs):
        _cartpole_dataset(Path(path), fmt, with_episode)
        return real(path, **kwargs)

    monkeypatch.setattr(module, name, opened_after_the_winner)
    argv = ["record", "MountainCar-v0", "--steps", "30", "--seed", "1", "--out", str(out)]
    assert main([*argv, "--format", str(fmt)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error: ") and refusal in err, err
    assert err.count("\n") == 1
    # The winner's dataset is as it made it: its header, its episode, no MountainCar step.
    info = dataset_info(out)
    assert info.num_episodes == (1 if with_episode else 0)
    if fmt == 2:
        assert info.metadata["env_id"] == "CartPole-v1"
    assert {e.observation_space.shape for e in read_episodes(out)} <= {(4,)}
    assert validate_dataset(out).ok


def test_record_of_the_same_env_into_a_dataset_made_meanwhile_appends(tmp_path, monkeypatch):
    import episodes.io as io

    out = tmp_path / "ds"
    real = io.DatasetWriter

    def opened_after_the_winner(path, **kwargs):
        with real(path, metadata=DatasetMetadata(env_id="CartPole-v1")):
            pass
        return real(path, **kwargs)

    monkeypatch.setattr(io, "DatasetWriter", opened_after_the_winner)
    assert main(["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--out", str(out)]) == 0
    assert dataset_info(out).num_steps == 20


# ------------------------------------------------- 2. the directory a killed v1 record left
@pytest.mark.parametrize(
    "left",
    [
        ["chunks/", ".lock", "manifest.jsonl"],
        [".lock"],
        ["chunks/", ".lock"],
        ["manifest.jsonl"],
        ["chunks/", ".lock", "manifest.jsonl", ".tmp-format.json"],
    ],
    ids=["chunks-lock-manifest", "lock", "chunks-lock", "manifest", "with-tmp-format"],
)
def test_record_format_1_restarts_what_a_killed_v1_record_left(tmp_path, capsys, left):
    out = tmp_path / "ds"
    out.mkdir()
    for name in left:
        if name.endswith("/"):
            (out / name).mkdir()
        else:
            (out / name).write_bytes(b"")
    argv = ["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--format", "1"]
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    info = dataset_info(out)
    assert (info.version, info.num_steps) == (1, 20)


def test_a_manifest_with_lines_but_no_format_file_is_still_refused(tmp_path, capsys):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "manifest.jsonl").write_text('{"chunk": "chunks/x"}\n')
    argv = ["record", "CartPole-v1", "--steps", "5", "--format", "1", "--out", str(out)]
    assert main(argv) == 1
    assert "no format v2 manifest.jsonl, no v1 format.json" in capsys.readouterr().err


# ---------------------------------------------------- 3. "." (and the cwd) as the destination
COPIES = {
    "migrate": lambda src, dst: ["migrate", src, dst],
    "filter": lambda src, dst: ["filter", src, "--out", dst],
    "merge": lambda src, dst: ["merge", src, "--out", dst],
    "split-train": lambda src, dst: ["split", src, "--train", dst, "--val", "../val"],
    "split-val": lambda src, dst: ["split", src, "--train", "../train", "--val", dst],
}


@pytest.mark.parametrize("command", sorted(COPIES))
@pytest.mark.parametrize("spelling", [".", "./", "../here", "HERE"])
def test_a_copy_into_the_current_directory_fills_it_in_place(
    tmp_path, monkeypatch, capsys, command, spelling
):
    src = small(tmp_path / "src")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    inode = os.stat(".").st_ino
    dst = str(here) if spelling == "HERE" else spelling
    assert main(COPIES[command](str(src), dst)) == 0, capsys.readouterr().err
    # Filled in place: a shell sitting in it sees the dataset (a rename over it would leave
    # the shell in a removed directory).
    assert os.stat(".").st_ino == inode
    assert sorted(os.listdir(".")) == ["manifest.jsonl", "shards"]
    assert validate_dataset(".").ok
    pieces, made = dataset_info(".").num_chunks, ["here", "src"]
    if command.startswith("split"):
        other = "val" if command == "split-train" else "train"
        pieces += dataset_info(tmp_path / other).num_chunks
        made.append(other)
    assert pieces == 4
    assert sorted(os.listdir(tmp_path)) == sorted(made)  # no staged directory left beside it


def test_a_copy_into_a_non_empty_current_directory_is_refused(tmp_path, monkeypatch, capsys):
    src = small(tmp_path / "src")
    here = tmp_path / "here"
    here.mkdir()
    (here / "keep.txt").write_text("mine")
    monkeypatch.chdir(here)
    assert main(["migrate", str(src), "."]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    assert os.listdir(".") == ["keep.txt"]


def test_a_split_that_fails_placing_val_takes_train_back_out_of_the_cwd(tmp_path, monkeypatch):
    src = small(tmp_path / "src")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    real, calls = tools.place, []

    def place(staged, final):
        calls.append(final)
        if len(calls) == 2:
            raise OSError(errno.EIO, "disk gone", str(final))
        return real(staged, final)

    monkeypatch.setattr(tools, "place", place)
    with pytest.raises(OSError, match="disk gone"):
        tools.split(src, ".", tmp_path / "val", fraction=0.5)
    assert os.listdir(".") == []  # train went back out: a retry is not refused
    assert sorted(os.listdir(tmp_path)) == ["here", "src"]


def test_an_empty_existing_destination_filled_by_another_copy_meanwhile_is_refused(tmp_path):
    from episodes.io.staging import place

    staged, final = tmp_path / "staged", tmp_path / "final"
    staged.mkdir()
    (staged / "manifest.jsonl").write_text("")
    final.mkdir()
    (final / "manifest.jsonl").write_text("theirs")  # filled after the copy's first check
    with pytest.raises(DatasetError, match="exists and is not empty"):
        place(staged, final)
    assert (final / "manifest.jsonl").read_text() == "theirs"
    assert os.listdir(staged) == ["manifest.jsonl"]


# ------------------------------------------- 4. Minari total_episodes beyond what is stored
@pytest.mark.parametrize(
    "total", [10**12, 2, -1, 1.0, "1", True, None], ids=lambda v: f"{type(v).__name__}-{v}"
)
def test_import_minari_refuses_a_total_episodes_its_episodes_do_not_hold(tmp_path, capsys, total):
    pytest.importorskip("minari")
    from episodes.io import export_minari, import_minari

    with DatasetWriter(tmp_path / "ours") as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=[0, 1, 0],
                actions=[1, 0],
                rewards=[1.0, 1.0],
                terminated=True,
                observation_space=gym.spaces.Discrete(2),
                action_space=gym.spaces.Discrete(2),
                len_lookback_buffer=0,
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_minari(tmp_path / "ours", "toy/ours-v0", root=tmp_path / "minari")
    data = tmp_path / "minari" / "toy" / "ours-v0" / "data"
    meta = json.loads((data / "metadata.json").read_text())
    if total is None:
        del meta["total_episodes"]
    else:
        meta["total_episodes"] = total
    (data / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="cannot read Minari dataset .*total_episodes"):
        import_minari(data, tmp_path / "imported")
    assert not (tmp_path / "imported").exists()
    assert main(["import", "minari", str(data), "--out", str(tmp_path / "cli")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error: cannot read Minari dataset") and "total_episodes" in err
    assert "Traceback" not in err


# ------------------------------------------------------- 5. a destination below a symlink loop
@pytest.mark.parametrize(
    "argv",
    [
        ["migrate", "SRC", "loop/x"],
        ["filter", "SRC", "--out", "loop/x"],
        ["merge", "SRC", "--out", "loop/x"],
        ["split", "SRC", "--train", "loop/x", "--val", "v"],
        ["split", "SRC", "--train", "t", "--val", "loop/x"],
    ],
    ids=["migrate", "filter", "merge", "split-train", "split-val"],
)
def test_a_destination_below_a_symlink_loop_is_one_error_line(tmp_path, monkeypatch, capsys, argv):
    src = small(tmp_path / "src")
    monkeypatch.chdir(tmp_path)
    Path("loop").symlink_to("loop")
    assert main([str(src) if a == "SRC" else a for a in argv]) == 1
    err = capsys.readouterr().err
    assert err == "episodes: error: [Errno 40] Too many levels of symbolic links: 'loop/x'\n"
    assert sorted(os.listdir(".")) == ["loop", "src"]


def test_the_library_raises_an_eloop_oserror_naming_the_path(tmp_path):
    src = small(tmp_path / "src")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OSError) as raised:
        migrate(src, tmp_path / "loop" / "x")
    assert raised.value.errno == errno.ELOOP
    assert raised.value.filename == str(tmp_path / "loop" / "x")


# ------------------------------------------------------------------- 6. stderr closed (2>&-)
def _stderr_closed() -> None:
    os.close(2)


def test_validate_and_record_work_with_stderr_closed(tmp_path):
    out = tmp_path / "ds"
    done = run("record", "CartPole-v1", "--steps", "50", "--out", out, preexec_fn=_stderr_closed)
    assert done.returncode == 0
    assert done.stdout.startswith("recorded 50 steps")
    assert dataset_info(out).num_steps == 50
    done = run("validate", out, preexec_fn=_stderr_closed)
    assert done.returncode == 0 and done.stdout.startswith("ok: "), done.stdout


def test_an_error_with_stderr_closed_exits_1_and_keeps_stdout_clean(tmp_path):
    done = run("info", tmp_path / "nothing", preexec_fn=_stderr_closed)
    assert (done.returncode, done.stdout) == (1, "")


def test_progress_with_no_stderr_shows_nothing(monkeypatch):
    from episodes.cli.errors import progress

    monkeypatch.setattr(sys, "stderr", None)
    with progress(None, "validate") as bar:
        bar.update(3)  # raised AttributeError ('NoneType' object has no attribute 'write')
    assert bar.disable


# --------------------------------------------------- 7. header fields of the wrong type
def _with_header(path: Path, **fields) -> None:
    lines = (path / "manifest.jsonl").read_bytes().split(b"\n")[:-1]
    objs = [unseal_line(line, "test") for line in lines]
    for key, value in fields.items():
        if value is _ABSENT:
            objs[0].pop(key)
        else:
            objs[0][key] = value
    for obj in objs[1:]:
        obj.pop("prev", None)  # seal_lines chains them again
    (path / "manifest.jsonl").write_bytes(seal_lines(objs))


_ABSENT = object()


@pytest.mark.parametrize("key", ["created_utc", "library_version"])
@pytest.mark.parametrize("value", [[1, 2], {"evil": True}, 5, 1.5, False])
def test_a_header_field_of_the_wrong_type_is_corruption_naming_it(tmp_path, capsys, key, value):
    path = small(tmp_path / "ds", 1)
    _with_header(path, **{key: value})
    with pytest.raises(CorruptDatasetError, match=f"header '{key}' must be a string"):
        dataset_info(path)
    assert main(["info", str(path)]) == 1
    assert f"'{key}'" in capsys.readouterr().err
    with pytest.raises(CorruptDatasetError, match=key):
        DatasetWriter(path).close()  # nor is it appended to


@pytest.mark.parametrize("value", [None, _ABSENT], ids=["null", "absent"])
def test_header_strings_may_be_null_or_absent(tmp_path, value):
    path = small(tmp_path / "ds", 1)
    _with_header(path, created_utc=value, library_version=value)
    info = dataset_info(path)
    assert (info.created, info.library_version, info.num_episodes) == (None, None, 1)

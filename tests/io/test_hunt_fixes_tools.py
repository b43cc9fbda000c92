"""Library-level pins for a bug hunt's findings in the copies, the v1 writer, Minari interop,
the manifest parser and the validator (each test failed before its fix)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnsafeDataError,
    dataset_info,
    load_episode,
    read_episodes,
    validate_dataset,
)


def episode(name: str, n: int = 2, obs=None) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name,
        observations=obs if obs is not None else [np.float32(i) for i in range(n + 1)],
        actions=[i % 2 for i in range(n)],
        rewards=[1.0] * n,
        terminated=True,
        observation_space=gym.spaces.Box(0, 100, (), np.float32),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


def v2(path: Path, count: int = 4, **kwargs) -> Path:
    with DatasetWriter(path, sync=False, **kwargs) as writer:
        writer.write_many(episode(f"e{i}", n=i + 1) for i in range(count))
    return path


def damaged(path: Path) -> Path:
    """A v2 dataset whose shard data no longer matches its checksums."""
    v2(path)
    shard = next((path / "shards").glob("*.arrow"))
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(data)
    return path


# ------------------------------------------------------------- 2: v1 writer and symlinks
def _v1_victim(tmp_path: Path) -> tuple[Path, list[str]]:
    victim = tmp_path / "victim"
    with EpisodeWriter(victim, sync=False) as writer:
        writer.write(episode("v"))
    return victim, sorted(os.listdir(victim / "chunks"))


def test_the_v1_writer_refuses_a_symlinked_chunks_directory(tmp_path):
    # It followed the link and deleted the victim's chunk folders as "unlisted leftovers".
    victim, before = _v1_victim(tmp_path)
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "format.json").write_text('{"format": "episodes-dataset", "version": 1}')
    (evil / "manifest.jsonl").write_text("")
    (evil / "chunks").symlink_to(victim / "chunks")
    with pytest.raises(NotADatasetError, match="symlink"):
        EpisodeWriter(evil)
    assert sorted(os.listdir(victim / "chunks")) == before
    assert validate_dataset(victim).ok


def test_the_v1_writer_refuses_a_symlinked_lock(tmp_path):
    # The lock was opened through the link with O_CREAT: a file made where the link points.
    path = tmp_path / "ds"
    EpisodeWriter(path).close()
    (path / ".lock").unlink()
    (path / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotADatasetError, match="symlink"):
        EpisodeWriter(path)
    assert not (tmp_path / "elsewhere").exists()


# ------------------------------------------------------- 3: manifest data_format types
@pytest.mark.parametrize("value", [["arrow"], {"arrow": 1}], ids=["list", "dict"])
def test_an_unhashable_data_format_is_corruption(tmp_path, value):
    # `value not in DATA_SUFFIX` raised TypeError (unhashable), a traceback from the CLI.
    from episodes.io.shards import seal_line

    path = v2(tmp_path / "ds")
    header, shard = (
        json.loads(line) for line in (path / "manifest.jsonl").read_bytes().split(b"\n")[:2]
    )
    header.pop("crc32")
    shard.pop("crc32")
    shard["data_format"] = value
    (path / "manifest.jsonl").write_bytes(seal_line(header) + seal_line(shard))
    with pytest.raises(CorruptDatasetError, match="data_format"):
        dataset_info(path)
    with pytest.raises(CorruptDatasetError, match="data_format"):
        validate_dataset(path)


# ------------------------------------------------------------ 4: split, both or neither
def test_split_refuses_a_symlinked_destination(tmp_path):
    # Accepted, then the rename failed with a raw ENOTDIR after train was renamed in.
    from episodes.io import split

    src = v2(tmp_path / "src", 20)
    (tmp_path / "empty").mkdir()
    (tmp_path / "val").symlink_to(tmp_path / "empty")
    with pytest.raises(DatasetError, match="symbolic link"):
        split(src, tmp_path / "train", tmp_path / "val", fraction=0.5)
    assert sorted(os.listdir(tmp_path)) == ["empty", "src", "val"]


@pytest.mark.parametrize("train_was_empty_dir", [False, True])
def test_split_takes_train_back_when_val_cannot_be_renamed_in(
    tmp_path, monkeypatch, train_was_empty_dir
):
    from episodes.io import split

    src = v2(tmp_path / "src", 20)
    if train_was_empty_dir:
        (tmp_path / "train").mkdir()
    real = os.replace

    def replace(a, b, *args, **kwargs):
        if Path(b) == tmp_path / "val":
            raise OSError("the rename into val failed")
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="rename into val"):
        split(src, tmp_path / "train", tmp_path / "val", fraction=0.5)
    monkeypatch.undo()
    expected = ["src", "train"] if train_was_empty_dir else ["src"]
    assert sorted(os.listdir(tmp_path)) == expected
    if train_was_empty_dir:
        assert os.listdir(tmp_path / "train") == []
    assert sum(split(src, tmp_path / "train", tmp_path / "val", fraction=0.5)) == 20  # retry


# ------------------------------------------------- 9: failed copies leave no parents
COPIES = {
    "migrate": lambda tools, src, root: tools.migrate(src, root / "out/a/b/dst"),
    "filter": lambda tools, src, root: tools.filter_dataset(src, root / "out/a/dst"),
    "merge": lambda tools, src, root: tools.merge([src], root / "out/a/dst"),
    "split": lambda tools, src, root: tools.split(src, root / "t1/t2/train", root / "v1/v2/val"),
    "split_shared_parent": lambda tools, src, root: tools.split(
        src, root / "x/a/train", root / "x/b/val"
    ),
}


@pytest.mark.parametrize("copy", COPIES.values(), ids=COPIES.keys())
def test_a_failed_copy_removes_the_parent_directories_it_made(tmp_path, copy):
    from episodes.io import tools

    src = damaged(tmp_path / "src")
    with pytest.raises(DatasetError, match="CRC"):
        copy(tools, src, tmp_path)
    assert os.listdir(tmp_path) == ["src"]


def test_a_failed_copy_keeps_parents_that_existed(tmp_path):
    from episodes.io import migrate

    src = damaged(tmp_path / "src")
    (tmp_path / "out").mkdir()
    with pytest.raises(DatasetError, match="CRC"):
        migrate(src, tmp_path / "out/a/dst")
    assert sorted(os.listdir(tmp_path)) == ["out", "src"] and os.listdir(tmp_path / "out") == []


# ---------------------------------------------- 5: a failed record and another writer
@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
def test_a_failed_block_keeps_a_dataset_another_writer_has_open(tmp_path, writer):
    # The failing `episodes record` removed the directory it made while another writer was
    # still writing into it: that writer's episodes were lost.
    from episodes.io.tools import removed_if_failed

    out = tmp_path / "new" / "ds"
    others = []
    with pytest.raises(RuntimeError, match="env failed"):
        with removed_if_failed(out):
            writer(out, sync=False).close()  # this block's writer, closed as record's is
            others.append(writer(out, sync=False))  # another process's, still open
            raise RuntimeError("the env failed")
    other = others[0]
    other.write(episode("kept"))
    other.close()
    assert [e.id_ for e in read_episodes(out)] == ["kept"]


def test_a_failed_block_alone_still_removes_what_it_made(tmp_path):
    from episodes.io.tools import removed_if_failed

    with pytest.raises(RuntimeError), removed_if_failed(tmp_path / "new" / "ds"):
        DatasetWriter(tmp_path / "new" / "ds").close()
        raise RuntimeError("the env failed")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------- 7: env id of an empty dataset
def test_an_empty_v2_dataset_takes_only_its_header_env(tmp_path):
    from episodes.io.tools import other_env_problem

    path = tmp_path / "ds"
    DatasetWriter(path, metadata=DatasetMetadata(env_id="Pendulum-v1")).close()
    assert "Pendulum-v1" in other_env_problem(path, "CartPole-v1", None, None)
    assert other_env_problem(path, "Pendulum-v1", None, None) == ""
    DatasetWriter(tmp_path / "anon").close()  # no env id: any env
    assert other_env_problem(tmp_path / "anon", "CartPole-v1", None, None) == ""


# ------------------------------------------------------- 8: --custom keys given twice
def test_parse_custom_data_refuses_a_key_given_twice():
    from episodes.io.tools import parse_custom_data

    assert parse_custom_data(["a=1", "b=x", "c=-Infinity"]) == {"a": 1, "b": "x", "c": -np.inf}
    with pytest.raises(ValueError, match="given twice"):
        parse_custom_data(["a=1", "a=2"])
    with pytest.raises(ValueError, match="NaN"):
        parse_custom_data(["a=[0, NaN]"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_custom_data(["oops"])


# -------------------------------------------------- 12: pieces without observations
PIECES = {
    "empty_empty": ["empty", "empty"],
    "obs_empty": ["obs", "empty"],
    "empty_obs": ["empty", "obs"],
}


def _piece(kind: str) -> SingleAgentEpisode:
    if kind == "empty":
        return SingleAgentEpisode("x")
    return SingleAgentEpisode("x", observations=[np.zeros(2, np.float32)], len_lookback_buffer=0)


@pytest.mark.parametrize("kinds", PIECES.values(), ids=PIECES.keys())
def test_validate_reports_pieces_without_observations_as_load_episode_fails(tmp_path, kinds):
    # validate_dataset raised IndexError; load_episode refuses the join (CorruptDatasetError).
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write_many(_piece(kind) for kind in kinds)
    with pytest.raises(CorruptDatasetError, match="at least one observation"):
        load_episode(tmp_path / "ds", "x")
    report = validate_dataset(tmp_path / "ds")
    assert not report.ok
    assert report.problems == [
        "episode 'x': piece at t=0 does not join its predecessor: both need at least one "
        "observation"
    ]


def test_one_piece_without_observations_is_valid(tmp_path):
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write(SingleAgentEpisode("x"))
    assert validate_dataset(tmp_path / "ds").ok
    assert load_episode(tmp_path / "ds", "x") == SingleAgentEpisode("x")


# ---------------------------------------------------------------- 1, 6: Minari interop
def _exported(tmp_path: Path) -> Path:
    pytest.importorskip("minari")
    from episodes.io import export_minari

    export_minari(v2(tmp_path / "ours"), "toy/ours-v0", root=tmp_path / "minari")
    return tmp_path / "minari/toy/ours-v0"


def test_import_refuses_minari_metadata_without_spaces(tmp_path):
    # Minari makes the env its env_spec names to get a missing space: gym.make ran
    # os.system with the dataset's command.
    from episodes.io import import_minari

    dataset = _exported(tmp_path)
    meta_path = dataset / "data/metadata.json"
    meta = json.loads(meta_path.read_text())
    del meta["observation_space"]
    marker = tmp_path / "PWNED"
    meta["env_spec"] = json.dumps(
        {
            "id": "Evil-v0",
            "entry_point": "os:system",
            "reward_threshold": None,
            "nondeterministic": False,
            "max_episode_steps": None,
            "order_enforce": False,
            "disable_env_checker": True,
            "kwargs": {"command": f"touch {marker}"},
            "additional_wrappers": [],
            "vector_entry_point": None,
        }
    )
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(UnsafeDataError, match="does not store both spaces"):
        import_minari(dataset, tmp_path / "back")
    assert not marker.exists()
    assert not (tmp_path / "back").exists()


def test_import_refuses_a_symlinked_minari_metadata_file(tmp_path):
    from episodes.io import import_minari

    dataset = _exported(tmp_path)
    meta_path = dataset / "data/metadata.json"
    os.replace(meta_path, tmp_path / "metadata.json")
    meta_path.symlink_to(tmp_path / "metadata.json")
    with pytest.raises(UnsafeDataError, match="symlink"):
        import_minari(dataset, tmp_path / "back")


def test_import_still_reads_a_checked_dataset(tmp_path):
    from episodes.io import import_minari

    assert import_minari(_exported(tmp_path), tmp_path / "back") == 4
    assert dataset_info(tmp_path / "back").num_steps == 10


def test_a_refused_export_is_a_dataset_error_and_leaves_no_namespace(tmp_path):
    # Observations of another shape than the space: Minari's IndexError escaped (a traceback
    # from the CLI), and the namespace and dataset directories it had made stayed, so a
    # retry under the same id was refused.
    pytest.importorskip("minari")
    from episodes.io import export_minari

    bad = SingleAgentEpisode(
        "a",
        observations=[{"x": np.float32(0.5)}] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        observation_space=gym.spaces.Box(0, 1, (), np.float32),
        action_space=gym.spaces.Discrete(2),
    )
    with DatasetWriter(tmp_path / "bad") as writer:
        writer.write(bad)
    with pytest.raises(DatasetError, match="Minari refused"):
        export_minari(tmp_path / "bad", "tt/d-v0", root=tmp_path / "mn")
    assert not (tmp_path / "mn").exists()
    assert export_minari(v2(tmp_path / "ok"), "tt/d-v0", root=tmp_path / "mn") == 4


def test_a_dataset_of_the_same_env_id_but_other_spaces_is_refused(tmp_path):
    """A wrapper (hidden velocities, dict views) keeps the env id but changes the spaces."""
    import gymnasium as gym

    from episodes import SingleAgentEpisode
    from episodes.io.tools import other_env_problem

    env = gym.make("CartPole-v1")
    obs_space, act_space = env.observation_space, env.action_space
    path = tmp_path / "ds"
    with DatasetWriter(path, metadata=DatasetMetadata(env_id="CartPole-v1")) as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=[obs_space.sample()],
                observation_space=obs_space,
                action_space=act_space,
            )
        )
    assert other_env_problem(path, "CartPole-v1", obs_space, act_space) == ""
    hidden = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert "other spaces" in other_env_problem(path, "CartPole-v1", hidden, act_space)

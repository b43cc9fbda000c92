"""Dataset edge cases a bug hunt found: whole-dataset copies that fail part-way, ids that
Python's ``==`` confuses, dtypes that did not round-trip, writers racing to create a dataset.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    load_episode,
    merge,
    migrate,
    read_episodes,
    split,
)


def episode(id_, obs=(0.0, 1.0), **kwargs):
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        **kwargs,
    )


def write(path, episodes, v1=False):
    with EpisodeWriter(path) if v1 else DatasetWriter(path) as writer:
        writer.write_many(episodes)
    return path


def test_split_refuses_before_writing_either_half(tmp_path):
    src = write(tmp_path / "src", [episode(str(i)) for i in range(20)])
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "keep.txt").write_text("x")
    with pytest.raises(DatasetError, match="not empty"):
        split(src, tmp_path / "train", tmp_path / "val", fraction=0.5)
    assert not (tmp_path / "train").exists()
    with pytest.raises(ValueError, match="same directory"):
        split(src, tmp_path / "both", tmp_path / "both")
    assert not (tmp_path / "both").exists()


@pytest.mark.parametrize("tool", ["migrate", "merge", "split"])
def test_a_copy_failing_part_way_leaves_no_destination(tmp_path, tool):
    src = write(tmp_path / "src", [episode(str(i), obs=(0.0, 1.0, 2.0)) for i in range(5)], v1=True)
    victim = sorted((src / "chunks").iterdir())[3]
    saved = tmp_path / "saved"
    shutil.copytree(victim, saved)
    for npy in victim.glob("*.npy"):
        npy.unlink()  # the fourth piece cannot be read
    run = {
        "migrate": lambda: migrate(src, tmp_path / "out"),
        "merge": lambda: merge([src], tmp_path / "out"),
        "split": lambda: split(src, tmp_path / "out", tmp_path / "out_val"),
    }[tool]
    with pytest.raises(DatasetError):
        run()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved", "src"]
    shutil.rmtree(victim)
    shutil.copytree(saved, victim)
    run()  # the retry is not refused by a half-made destination
    assert (tmp_path / "out").exists()


def test_an_empty_destination_directory_is_used():
    import tempfile

    root = tempfile.mkdtemp()
    src = write(os.path.join(root, "src"), [episode("a")])
    os.mkdir(os.path.join(root, "out"))
    assert migrate(src, os.path.join(root, "out")) == 1
    assert [ep.id_ for ep in read_episodes(os.path.join(root, "out"))] == ["a"]


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_ids_equal_by_python_but_not_by_type_stay_apart(tmp_path, v1):
    path = write(tmp_path / "ds", [episode(1, obs=(0.0, 1.0)), episode(True, obs=(5.0, 6.0))], v1)
    assert [ep.id_ for ep in read_episodes(path, ids=[1])] == [1]
    assert [ep.id_ for ep in read_episodes(path, ids=[True])] == [True]
    assert list(load_episode(path, 1).get_observations()) == [0.0, 1.0]
    assert list(load_episode(path, True).get_observations()) == [5.0, 6.0]


@pytest.mark.parametrize(
    "id_", [(7, "run"), float("inf"), 3], ids=["tuple", "infinite float", "int"]
)
def test_a_v1_dataset_merged_with_its_migrated_copy_is_refused(tmp_path, id_):
    v1 = write(tmp_path / "v1", [episode(id_)], v1=True)
    migrate(v1, tmp_path / "v2")
    with pytest.raises(DatasetError, match="stored twice"):
        merge([v1, tmp_path / "v2"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
@pytest.mark.parametrize("dtype", [">i4", ">f8", "<f2", np.longdouble], ids=str)
def test_list_mode_items_keep_their_dtype(tmp_path, v1, dtype):
    obs = [np.arange(3).astype(dtype), (np.arange(3) + 1).astype(dtype)]
    ep = SingleAgentEpisode(
        "a", observations=obs, actions=[np.array(1, dtype)], rewards=[1.0], len_lookback_buffer=0
    )
    back = next(read_episodes(write(tmp_path / "ds", [ep], v1)))
    for got, want in zip(back.get_observations(), obs):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert back.get_actions()[0].dtype == np.dtype(dtype)


def test_writers_opening_a_new_dataset_together_both_succeed(tmp_path, monkeypatch):
    """A writer that finds itself alone cleans up temporary files; one that was still
    creating the manifest must not fail because its temporary file went."""
    path = tmp_path / "ds"
    real_link = os.link
    state = {"inside": False}

    def link(src, dst, *args, **kwargs):
        if not state["inside"]:
            state["inside"] = True
            DatasetWriter(path).close()  # another writer opens the new dataset right now
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    with DatasetWriter(path) as writer:
        writer.write(episode("a"))
    assert [ep.id_ for ep in read_episodes(path)] == ["a"]


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
@pytest.mark.parametrize(
    "bad",
    [
        lambda: _with_custom(episode("x"), {"n": 10**5000}),
        lambda: episode("a\udc80b"),
        lambda: SingleAgentEpisode(
            "s",
            observations=[0, 1],
            observation_space=_Unknown(),
            actions=[0],
            rewards=[1.0],
            len_lookback_buffer=0,
        ),
    ],
    ids=["huge_int", "lone_surrogate", "unknown_space"],
)
def test_unstorable_values_are_refused_and_the_writer_goes_on(tmp_path, v1, bad):
    from episodes.io import UnstorableValueError

    with EpisodeWriter(tmp_path / "ds") if v1 else DatasetWriter(tmp_path / "ds") as writer:
        with pytest.raises(UnstorableValueError):
            writer.write(bad())
        writer.write(episode("good"))
    assert [ep.id_ for ep in read_episodes(tmp_path / "ds")] == ["good"]


def _with_custom(ep, data):
    ep.custom_data.update(data)
    return ep


class _Unknown(__import__("gymnasium").spaces.Space):
    """A space kind the format cannot describe."""

    def contains(self, x):
        return True


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_returns_that_are_not_finite_are_json_null(tmp_path, v1):
    import json

    from episodes.io import dataset_info

    eps = [
        SingleAgentEpisode(
            "nan",
            observations=[0.0, 1.0],
            actions=[0],
            rewards=[float("nan")],
            len_lookback_buffer=0,
        ),
        SingleAgentEpisode(
            "big", observations=[0.0, 1.0], actions=[0], rewards=[10**400], len_lookback_buffer=0
        ),
    ]
    path = write(tmp_path / "ds", eps, v1)
    for line in (path / "manifest.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda token: pytest.fail(f"non-JSON token {token}"))
    summaries = dataset_info(path).episodes
    assert [np.isnan(s.ret) for s in summaries] == [True, True]
    assert list(read_episodes(path))[1].get_rewards() == [10**400]


@pytest.mark.parametrize(
    "user",
    [
        {1: "a", "1": "b"},
        {"t": (1, 2)},
        {"x": np.float64(0.5)},
        {None: 1},
        {"f": float("inf")},
        {"x": 2**20000},  # json.dumps refuses an int this long (a bare ValueError, a stray file)
    ],
    ids=["int_key", "tuple", "numpy_float", "none_key", "infinite", "int_too_long_for_text"],
)
def test_metadata_that_would_not_come_back_as_it_is_is_refused(tmp_path, user):
    from episodes.io import DatasetMetadata, UnstorableValueError

    with pytest.raises(UnstorableValueError, match="plain JSON"):
        DatasetWriter(tmp_path / "ds", metadata=DatasetMetadata(user=user))
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").iterdir())


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
@pytest.mark.parametrize(
    "t_started",
    [-3, 2**63 - 2, 2**70],
    ids=["negative (the readers refuse it)", "steps past int64", "far past int64"],
)
def test_time_steps_a_dataset_cannot_hold_are_refused_before_writing(tmp_path, v1, t_started):
    from episodes.io import EpisodeWriter, UnstorableValueError

    good = SingleAgentEpisode("good", observations=[0, 1], actions=[0], rewards=[1.0])
    bad = SingleAgentEpisode(
        "bad",
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        t_started=t_started,
        len_lookback_buffer=0,
    )
    writer = EpisodeWriter(tmp_path / "ds") if v1 else DatasetWriter(tmp_path / "ds")
    with writer:
        writer.write(good)
        if v1 and t_started > 0:  # v1 stores t as JSON: any int reads back
            writer.write(bad)
        else:
            with pytest.raises(UnstorableValueError, match="t_started|int64"):
                writer.write(bad)
    assert [e.id_ for e in read_episodes(tmp_path / "ds")][0] == "good"


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_filter_by_return_reads_an_infinite_return_from_the_rewards(tmp_path, v1):
    """The manifest holds no inf: the summary said NaN, and min_return=0 dropped the episode."""
    from episodes.io import filter_dataset

    infinite = SingleAgentEpisode(
        "inf", observations=[0.0, 1.0], actions=[0], rewards=[float("inf")], len_lookback_buffer=0
    )
    eps = [infinite, episode("one")]
    src = write(tmp_path / "src", eps, v1)
    assert filter_dataset(src, tmp_path / "hi", min_return=5.0) == 1
    assert [ep.id_ for ep in read_episodes(tmp_path / "hi")] == ["inf"]
    assert filter_dataset(src, tmp_path / "lo", max_return=5.0) == 1


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_filter_by_custom_data_merges_pieces_as_load_episode_does(tmp_path, v1):
    """A piece without steps written after its successor won in filter (sorted by t_started
    only), while load_episode puts it first ((t_started, t))."""
    from episodes.io import filter_dataset

    first = SingleAgentEpisode("e")
    first.add_env_reset(0)
    for i in range(3):
        first.add_env_step(i + 1, 0, 1.0)
    empty = first.cut()
    last = empty.cut()
    last.add_env_step(9, 0, 1.0)
    for k, piece in enumerate((first, empty, last), start=1):
        piece.custom_data["k"] = k
    src = write(tmp_path / "src", [first, last, empty], v1)
    assert load_episode(src, "e").custom_data == {"k": 3}
    assert filter_dataset(src, tmp_path / "k3", custom_data={"k": 3}) == 3
    assert filter_dataset(src, tmp_path / "k2", custom_data={"k": 2}) == 0


def test_a_written_episode_changed_afterwards_is_stored_as_written(tmp_path):
    """The observations column was a zero-copy view of the episode's array until flush."""
    ep = SingleAgentEpisode(
        "a",
        observations=[np.full(2, i, np.float32) for i in range(3)],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
    ).to_numpy()
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(ep)
        ep.get_observations()[...] = -1.0  # e.g. normalised in place
    stored = list(read_episodes(tmp_path / "ds"))[0]
    assert np.asarray(stored.get_observations())[:, 0].tolist() == [0.0, 1.0, 2.0]


def test_bad_episode_index_and_single_ids_are_clear_errors(tmp_path):
    from episodes.io import Dataset

    path = write(tmp_path / "ds", [episode("a")])
    with pytest.raises(IndexError, match="out of range"):
        Dataset(path).steps(1, 0, 1)  # was a bare "list index out of range"
    with pytest.raises(TypeError, match="single id 0"):
        list(read_episodes(path, ids=0))  # was "'int' object is not iterable"


def test_a_shard_is_cut_at_about_shard_bytes_of_buffered_memory(tmp_path):
    """Only observations, actions and rewards were counted: short episodes buffered 7-145x
    shard_bytes (per-row ids, infos and t, index entries) before a flush."""
    from episodes.io import Dataset

    with DatasetWriter(tmp_path / "ds", shard_bytes=64 << 10, sync=False) as writer:
        writer.write_many(episode(f"e{i}", obs=(0.0,) * 6) for i in range(60))
    assert len(Dataset(tmp_path / "ds").shards) >= 5


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_copies_reused_across_shards_store_each_episode_as_written(tmp_path, data_format):
    """Arrow shards take each episode at write(); Parquet copies into reused blocks."""
    import copy

    episodes = [
        SingleAgentEpisode(
            f"e{i}",
            observations=[np.full(3, 10 * i + t, np.float32) for t in range(5)],
            actions=[0] * 4,
            rewards=[1.0] * 4,
            len_lookback_buffer=0,
        ).to_numpy()
        for i in range(12)
    ]
    snapshots = copy.deepcopy(episodes)
    with DatasetWriter(
        tmp_path / "ds", shard_bytes=40 << 10, sync=False, data_format=data_format
    ) as writer:
        for ep in episodes:
            writer.write(ep)
            ep.get_observations()[...] = -1.0  # changed after write: must not reach the file
    stored = sorted(read_episodes(tmp_path / "ds"), key=lambda ep: int(ep.id_[1:]))
    assert stored == snapshots
    from episodes.io import Dataset

    assert len(Dataset(tmp_path / "ds").shards) >= 3

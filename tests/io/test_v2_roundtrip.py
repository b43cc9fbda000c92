"""Format v2 (sharded Arrow/Parquet): round trips, random access, metadata, files per dataset."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest
from _gen import ACTION_SPACES, SPACES, make_episode
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetMetadata,
    DatasetWriter,
    EpisodeNotFoundError,
    NotADatasetError,
    UnstorableValueError,
    UnsupportedVersionError,
    dataset_info,
    load_episode,
    read_episodes,
)

FORMATS = [
    pytest.param({"data_format": "arrow"}, id="arrow"),
    pytest.param({"data_format": "arrow", "compression": "zstd"}, id="arrow-zstd"),
    pytest.param({"data_format": "parquet", "compression": "zstd"}, id="parquet-zstd"),
]


def write(path, episodes, **kwargs):
    with DatasetWriter(path, **kwargs) as writer:
        writer.write_many(episodes)
    return path


@pytest.mark.parametrize("kwargs", FORMATS)
@pytest.mark.parametrize("obs_space", sorted(SPACES))
@pytest.mark.parametrize("numpy", [False, True])
def test_every_space_kind_round_trips(tmp_path, obs_space, numpy, kwargs):
    episodes = [
        make_episode(seed, obs_space=obs_space, act_space=act, numpy=numpy)
        for seed, act in enumerate(sorted(ACTION_SPACES))
    ]
    back = list(read_episodes(write(tmp_path / "ds", episodes, **kwargs), verify=True))
    assert back == episodes
    for a, b in zip(back, episodes, strict=True):
        assert a.is_numpy == b.is_numpy
        assert a.get_duration_s() == b.get_duration_s()
        assert a.observations.lookback == b.observations.lookback == 2
        assert a.observation_space == b.observation_space
        assert list(a.extra_model_outputs) == list(b.extra_model_outputs)
        assert a.custom_data["tags"] == b.custom_data["tags"]


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    obs_space=st.sampled_from(sorted(SPACES)),
    act_space=st.sampled_from(sorted(ACTION_SPACES)),
    steps=st.integers(0, 6),
    lookback=st.integers(0, 4),
    numpy=st.booleans(),
    extra=st.booleans(),
    flags=st.sampled_from([(False, False), (True, False), (False, True)]),
    shard_bytes=st.sampled_from([1, 1 << 20]),
)
def test_generated_episodes_round_trip_and_random_access(
    tmp_path_factory, seed, obs_space, act_space, steps, lookback, numpy, extra, flags, shard_bytes
):
    episodes = [
        make_episode(
            seed + k,
            obs_space=obs_space,
            act_space=act_space,
            steps=steps + k,
            lookback=lookback,
            numpy=numpy,
            extra=extra,
            terminated=flags[0],
            truncated=flags[1],
        )
        for k in range(3)
    ]
    path = write(tmp_path_factory.mktemp("rt") / "ds", episodes, shard_bytes=shard_bytes)
    ds = Dataset(path)
    assert len(ds) == 3
    for i in (2, 0, 1):
        assert ds.episode(i) == episodes[i]
    ep = episodes[1]
    n = len(ep)
    for a, b in [(0, n), (0, 0), (n // 2, n), (1, max(1, n - 1))]:
        if not a <= b <= n:
            continue
        got = ds.steps(1, a, b)
        if ep.is_numpy:
            want_obs = ep.get_observations(slice(a, b + 1))
            np.testing.assert_equal(_plain(got["observations"]), _plain(want_obs))
        if b > a:
            want_actions = ep.get_actions(slice(a, b))  # flat action spaces only
            np.testing.assert_equal(np.asarray(got["actions"]), np.asarray(want_actions))
            np.testing.assert_equal(_plain(got["rewards"]), np.asarray(ep.get_rewards(slice(a, b))))
        else:
            assert len(got["rewards"]) == 0
        assert got["terminated"] == (b == n and ep.is_terminated)


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return {str(i): _plain(v) for i, v in enumerate(x)}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return np.asarray(x)


def test_steps_are_views_for_uncompressed_arrow(tmp_path):
    obs = [np.full((8, 8, 3), i, np.uint8) for i in range(11)]
    ep = SingleAgentEpisode(
        "img", observations=obs, actions=list(range(10)), rewards=[1.0] * 10, len_lookback_buffer=0
    )
    ep.to_numpy()
    ds = Dataset(write(tmp_path / "ds", [ep]))
    got = ds.steps(0, 3, 7)
    assert got["observations"].shape == (5, 8, 8, 3)
    assert got["observations"][:, 0, 0, 0].tolist() == [3, 4, 5, 6, 7]
    assert not got["observations"].flags.owndata  # a view into the memory map
    assert got["actions"].tolist() == [3, 4, 5, 6]


@pytest.mark.parametrize("kwargs", FORMATS)
@pytest.mark.parametrize("frames", [3, 40])  # 40 frames: leaves over 1 MiB, mapped copy-on-write
def test_decoded_episode_can_be_modified(tmp_path, kwargs, frames):
    rng = np.random.default_rng(frames)
    obs = list(rng.integers(0, 256, (frames + 1, 84, 84, 3), dtype=np.uint8))
    ep = SingleAgentEpisode(
        "img",
        observations=obs,
        actions=[0] * frames,
        rewards=[0.0] * frames,
        len_lookback_buffer=0,
    ).to_numpy()
    path = write(tmp_path / "ds", [ep, ep], **kwargs)
    back = Dataset(path).episode(1)
    assert back == ep
    back.observations[-1] = np.zeros((84, 84, 3), np.uint8)  # no read-only memory leaks out
    assert Dataset(path).episode(1) == ep  # the file never changes


def test_many_episodes_make_few_files(tmp_path):
    rng = np.random.default_rng(0)
    episodes = []
    for k in range(400):
        n = int(rng.integers(5, 60))
        ep = SingleAgentEpisode(
            f"e{k}",
            observations=list(rng.normal(size=(n + 1, 4)).astype(np.float32)),
            actions=list(rng.integers(0, 2, n)),
            rewards=[1.0] * n,
            terminated=True,
            len_lookback_buffer=0,
        )
        episodes.append(ep)
    path = write(tmp_path / "ds", episodes)
    files = [p for p in path.rglob("*") if p.is_file()]
    assert len(files) == 3  # manifest + one shard (data + index)
    assert sorted(p.suffix for p in files) == [".arrow", ".json", ".jsonl"]
    info = dataset_info(path)
    assert info.num_shards == 1 and info.num_chunks == 400 and info.version == 2
    assert info.num_steps == sum(len(e) for e in episodes)


def test_shards_split_by_target_size(tmp_path):
    episodes = [make_episode(k, obs_space="box_u8", numpy=True, steps=20) for k in range(10)]
    from episodes.io.shard_codec import encode_rows

    size = encode_rows(episodes[0]).nbytes  # what buffering one episode counts
    path = write(tmp_path / "ds", episodes, shard_bytes=3 * size)
    info = dataset_info(path)
    assert 2 <= info.num_shards <= 5
    assert list(read_episodes(path)) == episodes


def test_other_tools_read_the_columns(tmp_path):
    ep = make_episode(3, obs_space="dict", numpy=True, lookback=0, steps=4)
    path = write(tmp_path / "ds", [ep])
    (data,) = sorted((path / "shards").glob("*.arrow"))
    table = pa.ipc.open_file(str(data)).read_all()
    assert table.num_rows == 5  # one per observation
    assert table.schema.field("observations").type.get_field_index("pos") >= 0
    pos = table.column("observations").combine_chunks().field("pos")
    assert np.allclose(np.asarray(pos.to_pylist()), ep.get_observations()["pos"])
    rewards = table.column("rewards").to_pylist()
    assert rewards[:4] == list(ep.get_rewards()) and rewards[4] is None
    infos = table.column("infos").to_pylist()
    assert all(isinstance(json.loads(t), dict) for t in infos)
    path2 = write(tmp_path / "pq", [ep], data_format="parquet")
    (pfile,) = sorted((path2 / "shards").glob("*.parquet"))
    assert pq.read_table(pfile).column("t").to_pylist() == [0, 1, 2, 3, 4]


def test_metadata_is_stored_and_shown(tmp_path):
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    meta = DatasetMetadata.from_env(
        env, seeds=[7], policy="random", policy_version="1", user={"note": "x"}
    )
    path = write(tmp_path / "ds", [make_episode(1)], metadata=meta)
    ds = Dataset(path)
    assert ds.metadata == meta and ds.metadata.env_spec["id"] == "CartPole-v1"
    info = dataset_info(path)
    assert info.metadata["seeds"] == [7] and info.library_version and info.created
    index = json.loads(next((path / "shards").glob("*.json")).read_text())
    entry = index["episodes"][0]
    assert entry["wall_start"] > 1e9 and entry["wall_end"] >= entry["wall_start"]


def test_unstorable_metadata_is_refused(tmp_path):
    with pytest.raises(UnstorableValueError):
        DatasetWriter(tmp_path / "ds", metadata=DatasetMetadata(user={"x": object()}))


def test_load_episode_joins_pieces(tmp_path):
    ep = SingleAgentEpisode("e")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0)
    nxt = ep.cut(len_lookback_buffer=1)
    nxt.add_env_step(2, 1, 1.0, terminated=True)
    path = write(tmp_path / "ds", [ep, nxt], shard_bytes=1)
    joined = load_episode(path, "e")
    assert len(joined) == 2 and joined.is_terminated
    with pytest.raises(EpisodeNotFoundError):
        load_episode(path, "nope")
    assert [e.id_ for e in read_episodes(path, ids=["e"], start=1)] == ["e"]


@pytest.mark.parametrize("chunks", [0, 1], ids=["empty v1", "v1 with a chunk"])
def test_random_access_names_a_v1_dataset_as_such(tmp_path, chunks):
    # It said "corrupt" (it parsed the v1 manifest as a v2 one), of a dataset validate calls OK.
    from episodes.io import EpisodeWriter

    with EpisodeWriter(tmp_path / "v1") as writer:
        for _ in range(chunks):
            writer.write(make_episode(1))
    with pytest.raises(UnsupportedVersionError, match="format v1 dataset"):
        Dataset(tmp_path / "v1")


def test_v1_and_v2_writers_refuse_each_other(tmp_path):
    from episodes.io import EpisodeWriter

    EpisodeWriter(tmp_path / "v1").close()
    with pytest.raises(UnsupportedVersionError):
        DatasetWriter(tmp_path / "v1")
    write(tmp_path / "v2", [make_episode(1)])
    with pytest.raises(NotADatasetError):
        EpisodeWriter(tmp_path / "v2")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    with pytest.raises(NotADatasetError):
        DatasetWriter(tmp_path / "junk")


def test_a_schema_change_starts_a_new_shard(tmp_path):
    a = make_episode(1, obs_space="box_f32", numpy=True)
    b = make_episode(2, obs_space="discrete", numpy=True)
    path = write(tmp_path / "ds", [a, b, a])
    assert dataset_info(path).num_shards == 3
    assert list(read_episodes(path)) == [a, b, a]


def test_import_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, episodes, episodes.io\n"
        "from episodes.io import read_episodes, dataset_info, EpisodeWriter\n"
        "print(','.join(m for m in ('pyarrow', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_steps_of_json_stored_columns(tmp_path):
    info = {"arr": np.arange(3)}
    ep = SingleAgentEpisode(
        "m",
        observations=[0, 1, 2],
        infos=[{}, info, {}],
        actions=[0, 1],
        rewards=[1, 2.5],  # an int and a float: stored as JSON items
        len_lookback_buffer=0,
    )
    ds = Dataset(write(tmp_path / "ds", [ep]))
    got = ds.steps(0, 0, 2)
    assert got["rewards"] == [1, 2.5] and type(got["rewards"][0]) is int
    assert got["observations"].tolist() == [0, 1, 2]
    with pytest.raises(IndexError):
        ds.steps(0, 1, 3)
    assert ds.episode(0).get_infos(1)["arr"].tolist() == [0, 1, 2]


def test_open_shards_stay_within_max_open_shards(tmp_path):
    with DatasetWriter(tmp_path / "ds", shard_bytes=1) as writer:
        writer.write_many([make_episode(k) for k in range(5)])
    ds = Dataset(tmp_path / "ds", max_open_shards=2)
    shards = [ds.locate(i)[0] for i in range(5)]
    assert ds.open_shards() == shards[-2:] and ds.evictions == 3

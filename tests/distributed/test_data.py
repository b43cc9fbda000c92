"""Ray Data over ``episodes.io`` datasets: one read task per shard; round trips keep every step."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    EpisodeDatasource,
    nstep_columns,
    read_episodes,
    read_steps,
    read_transitions,
    step_columns,
    write_episodes,
)
from episodes.io import DatasetWriter, EpisodeWriter, dataset_info  # noqa: E402
from episodes.io import read_episodes as read_local  # noqa: E402
from episodes.runner import EnvRunner, RandomPolicy  # noqa: E402


def recorded_chunks(num_steps: int = 40, rounds: int = 3) -> list[SingleAgentEpisode]:
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    out = []
    for _ in range(rounds):
        for chunk in runner.sample(num_steps):
            chunk.extra_model_outputs  # noqa: B018
            out.append(SingleAgentEpisode.from_state(chunk.get_state()))
    return out


@pytest.fixture(scope="module")
def chunks() -> list[SingleAgentEpisode]:
    return recorded_chunks()


@pytest.fixture(scope="module")
def v2_path(tmp_path_factory, chunks) -> Path:
    path = tmp_path_factory.mktemp("v2") / "data"
    with DatasetWriter(path, shard_bytes=4096, sync=False) as writer:
        writer.write_many(chunks)
    return path


def by_step(columns: dict[str, np.ndarray]) -> dict[tuple[str, int], dict[str, object]]:
    n = len(columns["t"])
    return {
        (str(columns["episode_id"][k]), int(columns["t"][k])): {
            name: np.asarray(col[k]).tolist() for name, col in columns.items()
        }
        for k in range(n)
    }


def test_read_steps_gives_every_step_once_one_task_per_shard(ray_local, v2_path, chunks):
    from episodes.io import Dataset

    num_shards = len(Dataset(v2_path).shards)
    assert num_shards > 1
    source = EpisodeDatasource(v2_path, "steps")
    assert len(source.get_read_tasks(parallelism=1)) == num_shards
    ds = read_steps(v2_path).materialize()
    assert ds.num_blocks() == num_shards  # one block per task: Ray does not slice them
    assert read_steps(v2_path, override_num_blocks=2 * num_shards).materialize().num_blocks() > (
        num_shards
    )
    rows = ds.take_all()
    assert len(rows) == sum(len(c) for c in chunks) == ds.count()
    got = by_step({name: np.array([r[name] for r in rows], dtype=object) for name in rows[0]})
    want: dict = {}
    for chunk in chunks:
        want.update(by_step(step_columns(chunk)))
    assert got.keys() == want.keys()
    for key, row in want.items():
        other = got[key]
        for name, value in row.items():
            if name == "episode_id":
                assert other[name] == value
                continue
            assert np.allclose(np.asarray(other[name], dtype=float), np.asarray(value, dtype=float))


def test_read_transitions_matches_the_local_columns(ray_local, v2_path, chunks):
    rows = read_transitions(v2_path, n_step=3, gamma=0.9).take_all()
    from episodes.io import load_episode

    want: dict = {}  # the episodes written whole: horizons reach across a runner's chunks
    for id_ in {str(chunk.id_) for chunk in chunks}:
        want.update(by_step(nstep_columns(load_episode(v2_path, id_).to_numpy(), 3, 0.9)))
    assert len(rows) == len(want)
    for r in rows:
        other = want[(str(r["episode_id"]), int(r["t"]))]
        assert r["reward"] == pytest.approx(other["reward"])
        assert np.allclose(r["next_obs"], other["next_obs"])
        assert (r["n_steps"], bool(r["terminated"])) == (other["n_steps"], other["terminated"])
    with pytest.raises(ValueError, match="n_step"):
        read_transitions(v2_path, n_step=0)


def test_episode_round_trip_through_ray_data_keeps_every_step(ray_local, v2_path, chunks, tmp_path):
    ds = read_episodes(v2_path)
    assert ds.count() == len(chunks)
    written = write_episodes(ds, tmp_path / "copy")
    assert written == len(chunks)
    back = list(read_local(tmp_path / "copy", numpy=True))
    original = {(c.id_, c.t_started): c for c in chunks}
    assert sorted((c.id_, c.t_started) for c in back) == sorted(original)
    assert all(c == original[(c.id_, c.t_started)] for c in back)


def test_episode_rows_carry_each_chunk_as_stored(ray_local, tmp_path):
    """List-mode chunks come back as ``episodes.io`` reads them: not numpy'd, ragged ones too."""
    stored = [
        SingleAgentEpisode(
            "plain",
            observations=[0, 1, 2],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
        ),
        SingleAgentEpisode(  # observations of varying length: list mode only
            "ragged",
            observations=[[1], [1, 2], [1, 2, 3]],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
        ),
    ]
    path = tmp_path / "lists"
    with DatasetWriter(path, sync=False) as writer:
        writer.write_many(stored)
    want = {chunk.id_: chunk for chunk in read_local(path)}
    got = {row["id"]: row["episode"] for row in read_episodes(path).take_all()}
    assert got.keys() == want.keys() == {"plain", "ragged"}
    for key, chunk in want.items():
        assert not chunk.is_numpy
        assert not got[key].is_numpy and got[key] == chunk, key


def test_step_rows_sort_and_group_by_episode_id_across_shards(ray_local, tmp_path):
    """``episode_id`` is a plain string column: Ray Data sorts it and groups it across blocks."""
    path = tmp_path / "two_shards"
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:  # one chunk per shard
        writer.write_many(
            [
                SingleAgentEpisode(
                    x,
                    observations=[0.0, 1.0, 2.0],
                    actions=[0, 1],
                    rewards=[1.0, 2.0],
                    len_lookback_buffer=0,
                )
                for x in "ba"
            ]
        )
    for ds in (read_steps(path), read_transitions(path, n_step=2)):
        assert ds.schema().base_schema.field("episode_id").type == pa.string()
    steps = read_steps(path)
    rows = steps.sort(["episode_id", "t"]).take_all()
    assert [(r["episode_id"], r["t"]) for r in rows] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    counts = steps.groupby("episode_id").count().take_all()
    assert {r["episode_id"]: r["count()"] for r in counts} == {"a": 2, "b": 2}


def test_copying_an_empty_dataset_gives_an_empty_dataset(ray_local, tmp_path):
    """A Ray dataset without blocks (Ray then never starts the sink) still makes a dataset."""
    DatasetWriter(tmp_path / "empty").close()
    assert write_episodes(read_episodes(tmp_path / "empty"), tmp_path / "copy") == 0
    info = dataset_info(tmp_path / "copy")
    assert (info.version, info.num_chunks) == (2, 0)
    assert list(read_local(tmp_path / "copy")) == []


def test_v1_datasets_read_in_parallel_ranges(ray_local, tmp_path, chunks):
    path = tmp_path / "v1"
    with EpisodeWriter(path, sync=False) as writer:
        writer.write_many(chunks[:10])
    source = EpisodeDatasource(path, "episodes")
    tasks = source.get_read_tasks(parallelism=3)
    assert len(tasks) == 3 and sum(t.metadata.num_rows for t in tasks) == 10
    # Rows come in Ray Data's order (read tasks finish in any order), not the manifest's.
    rows = sorted(read_episodes(path).take_all(), key=lambda r: (r["id"], r["t_started"]))
    want = sorted(chunks[:10], key=lambda c: (str(c.id_), c.t_started))
    assert [r["episode"] for r in rows] == want
    assert [r["length"] for r in rows] == [len(c) for c in want]


def test_bad_input_is_refused(ray_local, v2_path, tmp_path):
    with pytest.raises(ValueError, match="kind"):
        EpisodeDatasource(v2_path, "frames")
    from episodes.io import DatasetError

    with pytest.raises(DatasetError):
        EpisodeDatasource(tmp_path / "missing")
    with pytest.raises(ValueError, match="numpy"):
        step_columns(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0]))


def test_step_blocks_have_the_types_and_values_ray_would_give_them(ray_local, tmp_path):
    from ray.data.block import BlockAccessor

    rng = np.random.default_rng(0)
    n = 30
    chunk = SingleAgentEpisode(
        "nested",
        observations=[
            {"img": rng.random((3, 4), dtype=np.float32), "pos": rng.random(2)}
            for _ in range(n + 1)
        ],
        actions=list(rng.integers(0, 3, n)),
        rewards=list(rng.random(n)),
        terminated=True,
        len_lookback_buffer=0,
    ).to_numpy()
    with DatasetWriter(tmp_path / "nested", sync=False) as writer:
        writer.write(chunk)
    ds = read_steps(tmp_path / "nested").materialize()
    columns = step_columns(chunk)
    del columns["episode_id"]
    want = BlockAccessor.batch_to_block(columns).schema
    got = ds.schema().base_schema
    assert {f.name: f.type for f in want} == {f.name: got.field(f.name).type for f in want}
    batch = ds.take_batch(n, batch_format="numpy")
    for name, column in columns.items():
        assert batch[name].shape == column.shape and np.array_equal(batch[name], column), name

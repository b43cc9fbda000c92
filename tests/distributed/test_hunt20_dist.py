"""Hunt 20 fixes of episodes.distributed: infos holding containers of arrays come back from a
remote sample as writeable copies that hold nothing of the segment; a v1 read task whose chunks
differ in a step column's dtype kind or row shape is refused by name, not promoted."""

from __future__ import annotations

import copy
import gc
import pickle
from collections import namedtuple
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    EpisodeDatasource,
    RunnerActor,
    RunnerContext,
    RunnerGroup,
    read_steps,
    read_transitions,
)
from episodes.distributed.shared_memory import SlotSegments  # noqa: E402
from episodes.io import EpisodeWriter, UnstorableValueError, read_episodes  # noqa: E402
from episodes.runner.row_infos import RowInfos  # noqa: E402

Pair = namedtuple("Pair", "a b")


# ------------------------------------------------------------------- infos: copies at any depth
def _list(t: int) -> Any:
    return [np.full(3, t, np.float32)]


def _tuple_with_dict(t: int) -> Any:
    return (np.full(3, t, np.float32), {"q": np.full(2, t, np.float64)})


def _dict_in_list(t: int) -> Any:
    return [{"q": np.full(2, t, np.int64)}]


def _namedtuple(t: int) -> Any:
    return Pair(np.full(2, t, np.float32), [np.full(1, t, np.int64)])


def _nested_object_array(t: int) -> Any:
    inner = np.empty(1, dtype=object)
    inner[0] = np.full(2, t, np.float32)
    return [inner]


SHAPES = {
    "list": _list,
    "tuple-with-dict": _tuple_with_dict,
    "dict-in-list": _dict_in_list,
    "namedtuple": _namedtuple,
    "object-array-in-list": _nested_object_array,
}


def _arrays(value: Any) -> list[np.ndarray]:
    """Every numeric array inside ``value``, at any depth."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [a for item in value.ravel().tolist() for a in _arrays(item)]
        return [value]
    if isinstance(value, dict):
        return [a for item in value.values() for a in _arrays(item)]
    if isinstance(value, (list, tuple)):
        return [a for item in value for a in _arrays(item)]
    return []


class ShapeEnv(gym.Env):
    """An env whose info ``pts`` is ``SHAPES[config["shape"]](t)``."""

    observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, shape: str):
        self.make = SHAPES[shape]
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {"pts": self.make(0)}

    def step(self, action):
        self.t += 1
        obs = np.full(2, self.t, np.float32)
        return obs, 1.0, self.t >= 50, False, {"pts": self.make(self.t)}


def shape_env(ctx: RunnerContext) -> gym.vector.VectorEnv:
    shape = ctx.config.get("shape", "list")
    return gym.vector.SyncVectorEnv([lambda: ShapeEnv(shape)] * 2)


def zero_policy(env: gym.vector.VectorEnv, ctx: RunnerContext):
    return lambda obs: (np.zeros(len(obs), np.int64), {})


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("read_before", [False, True], ids=["split-here", "split-there"])
def test_unpickled_infos_split_out_writeable_copies_at_any_depth(shape, read_before):
    # The stream's buffers are read-only, as a segment's mapping or Ray's object store is.
    infos = RowInfos()
    make = SHAPES[shape]
    infos.add(0, {"pts": [make(1), make(2)], "x": np.ones((2, 2))}, np.array([True, True]))
    if read_before:  # split in the sending process: those dicts travel too
        infos.get((0, 1))
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(infos, protocol=5, buffer_callback=buffers.append)
    frozen = [memoryview(bytes(b.raw())) for b in buffers]
    back = pickle.loads(stream, buffers=frozen)
    info = back.get((0, 1))
    got = _arrays(info["pts"]) + [info["x"]]
    assert len(got) == len(_arrays(make(2))) + 1
    assert type(info["pts"]) is type(make(2))
    for array in got:
        assert array.flags.writeable
        assert not any(np.shares_memory(array, np.frombuffer(f, np.uint8)) for f in frozen)
    assert all(np.all(a == 2) for a in _arrays(info["pts"]))
    assert back.get((0, 1)) is info  # still split once


def test_a_deep_copy_of_unpickled_infos_splits_writeable_copies():
    infos = RowInfos()
    infos.add(0, {"pts": [_list(1), _list(2)]}, np.array([True, True]))
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(infos, protocol=5, buffer_callback=buffers.append)
    back = pickle.loads(stream, buffers=[memoryview(bytes(b.raw())) for b in buffers])
    twin = copy.deepcopy(back)
    assert twin.get((0, 0))["pts"][0].flags.writeable
    assert back.get((0, 0))["pts"][0].flags.writeable


@pytest.mark.parametrize("shape", ["list", "tuple-with-dict", "namedtuple"])
def test_kept_infos_of_a_shared_memory_sample_are_copies_and_free_the_segment(shape):
    ctx = RunnerContext.create(seed=0, index=0, config={"shape": shape})
    actor = RunnerActor(shape_env, zero_policy, ctx)
    slot = SlotSegments(hints={"sample": 1 << 16})
    try:
        request, lease = slot.request()
        reply = pickle.loads(pickle.dumps(actor.sample(4, request=0, shared=request)))
        assert reply.stream is not None  # it came through the segment
        sample = slot.receive(reply, lease)
        kept = sample.episodes[0].get_infos()
        del sample, reply
        gc.collect()
        assert not lease.leased  # the infos hold nothing of the segment
        arrays = _arrays(kept[2]["pts"])
        assert arrays and all(a.flags.writeable for a in arrays)
        arrays[0][...] = 7  # and they are the chunk's own
        assert np.all(arrays[0] == 7)
    finally:
        slot.close()


@pytest.mark.parametrize("shared_memory", [True, False], ids=["segment", "object-store"])
def test_a_group_samples_infos_with_arrays_in_lists_as_writeable_copies(ray_local, shared_memory):
    group = RunnerGroup(
        shape_env,
        zero_policy,
        num_runners=1,
        seed=0,
        config={"shape": "tuple-with-dict"},
        num_cpus_per_runner=0.5,
        shared_memory=shared_memory,
    )
    try:
        group.sample(4)  # the first sample sizes the segment
        sample = group.sample(4)
        infos = sample[0].get_infos()
        del sample
        gc.collect()
        arrays = _arrays(infos[1]["pts"])
        assert len(arrays) == 2 and all(a.flags.writeable for a in arrays)
        if shared_memory:
            assert group.get_metrics()["num_shared_memory_samples"] >= 1
            segments = group._slots[0].segments._segments
            assert not any(s.leased for s in segments)
    finally:
        group.stop()


# ------------------------------------------------------------------- v1 blocks keep the values
T0 = 1_700_000_000_123_456_789  # a nanosecond timestamp: no float64 holds it


def _episode(name: str, obs: list[Any], actions: list[Any]) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name,
        observations=obs,
        actions=actions,
        rewards=[0.0] * len(actions),
        terminated=True,
        len_lookback_buffer=0,
    )


def _v1(path, episodes: list[SingleAgentEpisode]) -> str:
    with EpisodeWriter(str(path)) as writer:  # format v1: one range of chunks per read task
        for ep in episodes:
            writer.write(ep.to_numpy())
    return str(path)


INT_OBS = [np.array([T0 + t], np.int64) for t in range(3)]
FLOAT_OBS = [np.array([t], np.float32) for t in range(3)]
REFUSED = {
    "int64-then-float32-obs": (
        [_episode("a", INT_OBS, [0, 1]), _episode("b", FLOAT_OBS, [0, 1])],
        r"'obs': int64 rows of shape \(1,\) in episode 'a'(?: \(chunk \d+\))?, float32 rows",
    ),
    "bool-then-int-actions": (
        [_episode("a", FLOAT_OBS, [True, False]), _episode("b", FLOAT_OBS, [3, 4])],
        r"'action': bool rows of shape \(\) in episode 'a'(?: \(chunk \d+\))?, int64 rows",
    ),
    "other-obs-shape": (
        [
            _episode("a", [np.zeros(2, np.float32)] * 3, [0, 0]),
            _episode("b", [np.zeros(3, np.float32)] * 3, [0, 0]),
        ],
        r"'obs': float32 rows of shape \(2,\) in episode 'a'(?: \(chunk \d+\))?, float32 rows "
        r"of shape \(3,\)",
    ),
    "uint64-then-int64-obs": (
        [
            _episode("a", [np.array([2**63 + t], np.uint64) for t in range(3)], [0, 1]),
            _episode("b", INT_OBS, [0, 1]),
        ],
        r"'obs': uint64 rows of shape \(1,\) in episode 'a'(?: \(chunk \d+\))?, int64 rows",
    ),
    "uint8-int64-then-uint64": (
        [
            _episode("a", [np.array([t], np.uint8) for t in range(3)], [0, 1]),
            _episode("b", INT_OBS, [0, 1]),
            _episode("c", [np.array([2**63 + t], np.uint64) for t in range(3)], [0, 1]),
        ],
        r"'obs': int64 rows of shape \(1,\) in episode 'b'(?: \(chunk \d+\))?, uint64 rows of "
        r"shape \(1,\) in episode 'c'(?: \(chunk \d+\))?",
    ),
}


def _run_tasks(source: EpisodeDatasource) -> list[Any]:
    return [block for task in source.get_read_tasks(1) for block in task()]


@pytest.mark.parametrize("kind", ["steps", "transitions"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_v1_read_task_refuses_chunks_whose_column_types_differ(tmp_path, case, kind):
    episodes, message = REFUSED[case]
    path = _v1(tmp_path / "v1", episodes)
    with pytest.raises(ValueError, match=r"chunks 0-\d of .* do not share the type of the step"):
        _run_tasks(EpisodeDatasource(path, kind))
    with pytest.raises(ValueError, match=message):
        _run_tasks(EpisodeDatasource(path, kind))


def test_read_steps_and_transitions_refuse_mixed_v1_chunks_through_ray(ray_local, tmp_path):
    episodes, message = REFUSED["int64-then-float32-obs"]
    path = _v1(tmp_path / "v1", episodes)
    with pytest.raises(ValueError, match=message):
        read_steps(path, override_num_blocks=1).take_all()
    with pytest.raises(ValueError, match=message):
        read_transitions(path, n_step=2, override_num_blocks=1).take_all()


JOINED = {
    "int8-then-int64": ([np.array([t], np.int8) for t in range(3)], INT_OBS),
    "uint8-then-int64": ([np.array([250 + t], np.uint8) for t in range(3)], INT_OBS),
    "uint8-then-uint64": (
        [np.array([250 + t], np.uint8) for t in range(3)],
        [np.array([2**64 - 1 - t], np.uint64) for t in range(3)],
    ),
    "uint32-then-int8": (
        [np.array([2**32 - 1 - t], np.uint32) for t in range(3)],
        [np.array([-t], np.int8) for t in range(3)],
    ),
    "float32-then-float64": (
        [np.array([t + 0.1], np.float32) for t in range(3)],
        [np.array([t + 0.1], np.float64) for t in range(3)],
    ),
}


@pytest.mark.parametrize("case", list(JOINED))
def test_dtypes_of_one_kind_still_join_with_their_values(tmp_path, case):
    # As a runner widens a column: one block, every stored value exactly.
    first, second = JOINED[case]
    path = _v1(tmp_path / "v1", [_episode("a", first, [0, 1]), _episode("b", second, [0, 1])])
    (block,) = _run_tasks(EpisodeDatasource(path))
    got = block.column("obs").to_numpy(zero_copy_only=False)
    stored = [o[0].item() for e in read_episodes(path) for o in e.get_observations()[:2]]
    assert [row[0].item() for row in got] == stored


# ------------------------------------------------------------ episode rows: rewards no float sums
def test_an_episode_row_of_complex_rewards_carries_a_nan_return() -> None:
    from episodes.distributed.rows import episode_from_row, episode_row

    ep = SingleAgentEpisode(
        "c", observations=[0, 1, 2], actions=[0, 1], rewards=[1 + 2j, 3.0], len_lookback_buffer=0
    )
    row = episode_row(ep)
    assert np.isnan(row["return"]) and row["length"] == 2
    assert episode_from_row(row) is ep
    real = SingleAgentEpisode(
        "r", observations=[0, 1], actions=[0], rewards=[2.5], len_lookback_buffer=0
    )
    assert episode_row(real)["return"] == 2.5


# ------------------------------------------ step rows: float64 rewards in every block, exact
def _rewarded(name: str, rewards: list[Any]) -> SingleAgentEpisode:
    obs = [np.zeros(1, np.float32)] * (len(rewards) + 1)
    return SingleAgentEpisode(
        name,
        observations=obs,
        actions=[0] * len(rewards),
        rewards=rewards,
        terminated=True,
        len_lookback_buffer=0,
    )


REWARDS = {
    "ints then floats": ([1, 2], [0.5, 1.5]),
    "bools then floats": ([True, False], [0.5, 1.5]),
    "bools then ints": ([True, False], [3, 4]),
}


@pytest.mark.parametrize("case", list(REWARDS))
def test_rewards_are_float64_in_one_block(tmp_path, case) -> None:
    first, second = REWARDS[case]
    path = _v1(tmp_path / "v1", [_rewarded("a", first), _rewarded("b", second)])
    (block,) = _run_tasks(EpisodeDatasource(path))
    got = block.column("reward").to_numpy()
    assert got.dtype == np.float64 and got.tolist() == [float(r) for r in first + second]


@pytest.mark.parametrize("case", list(REWARDS))
def test_rewards_of_blocks_of_other_dtypes_batch_through_ray(ray_local, tmp_path, case) -> None:
    # One block per read task: Arrow cannot join a bool block with a float one.
    first, second = REWARDS[case]
    path = _v1(tmp_path / "v1", [_rewarded("a", first), _rewarded("b", second)])
    rows = read_steps(path, override_num_blocks=2).sort(["episode_id", "t"]).take_all()
    assert [row["reward"] for row in rows] == [float(r) for r in first + second]


def test_int_rewards_float64_cannot_hold_are_refused(tmp_path) -> None:
    path = _v1(tmp_path / "v1", [_rewarded("a", [2**53 + 1, 0])])
    with pytest.raises(UnstorableValueError, match=r"episode 'a': int rewards beyond 2\*\*53"):
        _run_tasks(EpisodeDatasource(path))

"""Cases found by mutation testing of the modules of session 53 (rollouts as arrays, loads of
many episodes, episode ids, dtype handling): each fails on a small change to the code that the
earlier tests let through."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.rollout_arrays import read_rollouts


class _Unreadable:
    """An array-like whose conversion fails with words of its own (as a GPU tensor's does)."""

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("cannot be read on the host")


def _arrays(**changed: Any) -> dict[str, Any]:
    base = {
        "observations": np.zeros((2, 3)),
        "actions": np.zeros((2, 2)),
        "rewards": np.zeros((2, 2)),
    }
    return {**base, **changed}


@pytest.mark.parametrize(
    ("changed", "error", "words"),
    [
        pytest.param({"observations": np.zeros(3)}, ValueError, "observations: expected shape",
                     id="1-d observations"),
        pytest.param({"observations": {}}, ValueError, "observations: every leaf",
                     id="empty dict observations"),
        pytest.param({"observations": {"a": np.zeros(2)}}, ValueError, "observations: every leaf",
                     id="dict of 1-d leaves"),
        pytest.param({"observations": {"a": np.zeros((2, 3)), "b": np.zeros((2, 4))}},
                     ValueError, r"observations: every leaf .*\(2, 4\)",
                     id="leaves of two horizons"),
        pytest.param({"lengths": np.array([True, True])}, TypeError, "lengths: expected ints",
                     id="bool lengths"),
        pytest.param({"lengths": np.ones((2, 1), int)}, ValueError,
                     r"lengths: expected shape \[B\]", id="lengths of shape [B, 1]"),
        pytest.param({"rewards": _Unreadable()}, TypeError, "rewards: cannot be read",
                     id="rewards whose conversion fails"),
    ],
)  # fmt: skip
def test_read_rollouts_refuses_by_name(changed: dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        read_rollouts(**_arrays(**changed))


@pytest.mark.parametrize("dtype", [np.uint64, np.uint8, np.int32])
def test_lengths_of_any_int_dtype_cut_the_rollouts(dtype: Any) -> None:
    got = read_rollouts(**_arrays(observations=np.arange(6.0).reshape(2, 3)),
                        lengths=np.array([1, 2], dtype))  # fmt: skip
    assert got.n.dtype == np.int64 and got.n.tolist() == [1, 2]
    assert got.last_obs.tolist() == [1.0, 5.0]


@pytest.mark.parametrize(
    ("ids", "error", "words"),
    [
        pytest.param(
            ["a", "b", "c"], ValueError, "expected B = 2 episode ids, got 3", id="too many"
        ),
        pytest.param(["a"], ValueError, "expected B = 2 episode ids, got 1", id="too few"),
        pytest.param([None, "b"], ValueError, r"ids\[0\] is None", id="first None"),
        pytest.param(["a", None], ValueError, r"ids\[1\] is None", id="second None"),
    ],
)
def test_add_rollouts_refuses_ids_and_stores_nothing(
    ids: list[Any], error: type, words: str
) -> None:
    buf = EpisodeReplayBuffer(100, seed=0)
    with pytest.raises(error, match=words):
        buf.add_rollouts(**_arrays(), ids=ids)
    assert buf.get_episode_ids() == [] and buf.get_num_timesteps() == 0


def test_add_rollouts_counts_every_new_step_at_max_priority() -> None:
    """Each of the N new steps adds max_priority to the sum: N of them can overflow it."""
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add_rollouts(np.zeros((1, 2, 1)), np.zeros((1, 1)), np.ones((1, 1)), ids=["a"])
    buf.update_priorities(np.array([5e307]), buf.sample(1)["indices"])
    state = buf.get_state()
    with pytest.raises(ValueError, match="sum of all priorities infinite"):
        buf.add_rollouts(np.zeros((1, 5, 1)), np.zeros((1, 4)), np.ones((1, 4)), ids=["b"])
    assert buf.get_episode_ids() == ["a"] and buf.get_state().keys() == state.keys()
    assert buf.get_num_timesteps() == 1


# ---------------------------------------------------------------- a first agent of numpy type
@pytest.mark.parametrize(
    ("agent", "plain"),
    [
        pytest.param(np.int64(7), 7, id="int64"),
        pytest.param(np.str_("B"), "B", id="str_"),
        pytest.param((np.str_("B"), np.int64(2)), ("B", 2), id="tuple of numpy scalars"),
        pytest.param(np.bool_(True), True, id="bool_"),
    ],
)
def test_a_first_agent_taken_from_an_array_is_saved_as_its_value(tmp_path, agent, plain) -> None:
    from episodes import SingleAgentEpisode

    def chunk(agent_id: Any, t0: int) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            "g",
            observations=[np.full(1, t, np.float32) for t in range(t0, t0 + 3)],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            agent_id=agent_id,
            t_started=t0,
            len_lookback_buffer=0,
        )

    buf = EpisodeReplayBuffer(100)
    buf.add([chunk(None, 0), chunk(agent, 2)])
    buf.save(tmp_path / "saved")
    (loaded,) = EpisodeReplayBuffer.load(tmp_path / "saved").get_state()["episodes"]["first_agent"]
    assert loaded == plain and type(loaded) is type(plain)


# ----------------------------------------------------------------- dtypes of retyped spaces
@pytest.mark.parametrize(
    ("space", "retyped", "text"),
    [
        pytest.param(lambda g: g.Box(0, 1, (2,)), np.float32, "float32", id="Box"),
        pytest.param(lambda g: g.Discrete(3), np.int64, "int64", id="Discrete"),
        pytest.param(lambda g: g.MultiDiscrete([2, 3]), np.int64, "int64", id="MultiDiscrete"),
        pytest.param(lambda g: g.MultiBinary(3), np.int8, "int8", id="MultiBinary"),
    ],
)
def test_a_space_retyped_with_a_scalar_type_saves_its_dtype_name(space, retyped, text) -> None:
    """A script may set ``space.dtype = np.float32`` (a type, not a dtype): saved by name."""
    import gymnasium as gym

    from episodes.spaces import space_from_dict, space_to_dict

    made = space(gym.spaces)
    made.dtype = retyped
    encoded = space_to_dict(made)
    assert encoded["dtype"] == text
    assert space_from_dict(encoded).dtype == np.dtype(retyped)


def test_a_long_double_box_writes_plain_float_bounds() -> None:
    import json

    import gymnasium as gym

    from episodes.spaces import space_to_dict

    box = gym.spaces.Box(
        np.zeros(2, np.longdouble), np.full(2, 0.5, np.longdouble), dtype=np.longdouble
    )
    encoded = space_to_dict(box)
    assert encoded["dtype"] == np.dtype(np.longdouble).name
    assert json.loads(json.dumps(encoded))["high"] == [0.5, 0.5]
    assert all(type(x) is float for x in encoded["low"] + encoded["high"])


# ------------------------------------------------------------------- fast membership checks
@pytest.mark.parametrize(
    ("space", "item", "expected"),
    [
        pytest.param(lambda g: g.Box(0, 10, (100,), np.int64), np.full(100, 11), False,
                     id="big int box, above high"),
        pytest.param(lambda g: g.Box(0, 10, (100,), np.int64), np.full(100, 10), True,
                     id="big int box, at high"),
        pytest.param(lambda g: g.Box(0, 10, (), np.uint8), np.uint8(20), False,
                     id="uint8 scalar box, numpy scalar above high"),
        pytest.param(lambda g: g.Box(0, 10, (), np.uint8), np.uint8(7), True,
                     id="uint8 scalar box, numpy scalar inside"),
        pytest.param(lambda g: g.Box(0, 10, (2,), np.int64), [10**400, 0], False,
                     id="int too big for the dtype in a list"),
    ],
)  # fmt: skip
def test_the_checker_judges_by_the_box_dtype_and_bounds(space, item, expected) -> None:
    import gymnasium as gym

    from episodes.spaces.contains import checker_for

    made = space(gym.spaces)
    assert checker_for(made)(item) is expected


# ------------------------------------------------------------ the rewards column's NaN rule
def _retyped(dtype: Any) -> Any:
    import gymnasium as gym

    box = gym.spaces.Box(-np.inf, np.inf, (), np.float32)
    box.dtype = dtype
    return box


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        pytest.param(lambda: _retyped(np.float32), True, id="retyped with a scalar type"),
        pytest.param(lambda: _retyped(None), False, id="retyped to None"),
        pytest.param(lambda: __import__("gymnasium").spaces.Box(-np.inf, np.inf, (), np.int64),
                     False, id="unbounded int box"),
    ],
)  # fmt: skip
def test_unbounded_scalar_needs_a_float_dtype(space, expected) -> None:
    from episodes.buffer.space_checks import unbounded_scalar

    assert unbounded_scalar(space()) is expected


@pytest.mark.parametrize(
    ("item", "taken"),
    [
        pytest.param(np.array(4), True, id="0-d int array"),
        pytest.param(np.array(True), True, id="0-d bool array"),
        pytest.param(np.float16("nan"), True, id="float16 NaN"),
        pytest.param(np.array([np.nan]), False, id="1-d array of NaN"),
        pytest.param(np.array(4 + 0j), False, id="0-d complex array"),
    ],
)
def test_an_unbounded_float_box_takes_numbers_of_any_real_kind_and_nan(item, taken) -> None:
    import gymnasium as gym

    from episodes.buffer.space_checks import check_in_space
    from episodes.spaces.contains import checker_for

    box = gym.spaces.Box(-np.inf, np.inf, (), np.float32)
    if taken:
        check_in_space(box, [item], checker_for(box))
    else:
        with pytest.raises(ValueError, match="is not in the buffer's space"):
            check_in_space(box, [item], checker_for(box))


# ------------------------------------------------------------------ loads of many episodes
@pytest.mark.parametrize("writer", ["EpisodeWriter", "DatasetWriter"])
@pytest.mark.parametrize(("numpy", "is_numpy"), [(True, True), (None, False), (False, False)])
def test_numpy_true_numpys_the_joined_episode_not_each_piece(tmp_path, writer, numpy, is_numpy):
    """Int rewards in the first piece, a float one in the next: one float column when joined."""
    import episodes.io as eio
    from episodes import SingleAgentEpisode

    first = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1],
                               len_lookback_buffer=0)  # fmt: skip
    second = first.cut()
    second.add_env_step(2, 1, 2.5, terminated=True)
    with getattr(eio, writer)(tmp_path / "d") as w:
        w.write_many([second, first])
    (got,) = eio.load_episodes(tmp_path / "d", ["a"], numpy=numpy)
    assert got.is_numpy is is_numpy and got.is_terminated
    assert list(got.get_rewards()) == [1, 2.5] and list(got.get_observations()) == [0, 1, 2]


@pytest.mark.parametrize("damaged_t", [0, 1], ids=["first piece", "second piece"])
def test_verify_checks_every_piece_of_every_episode(tmp_path, damaged_t) -> None:
    """A flipped bit in a reward of either piece: verify=True refuses, verify=False reads it."""
    import json

    from episodes import SingleAgentEpisode
    from episodes.io import CorruptDatasetError, EpisodeWriter, load_episodes

    first = SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0],
                               len_lookback_buffer=0)  # fmt: skip
    second = first.cut()
    second.add_env_step(2.0, 1, 2.5)
    with EpisodeWriter(tmp_path / "d") as w:
        w.write_many([second, first, SingleAgentEpisode("b", observations=[0])])
    lines = (tmp_path / "d" / "manifest.jsonl").read_text().splitlines()
    (entry,) = [e for e in map(json.loads, lines) if e["id"] == "a" and e["t_started"] == damaged_t]
    rewards = tmp_path / "d" / entry["chunk"] / "rew.0.npy"
    data = bytearray(rewards.read_bytes())
    data[-1] ^= 0x01  # the last byte of the one float64 reward: still a valid array
    rewards.write_bytes(bytes(data))
    assert len(load_episodes(tmp_path / "d", ["b", "a"], verify=False)[1]) == 2
    with pytest.raises(CorruptDatasetError):
        load_episodes(tmp_path / "d", ["b", "a"], verify=True)


def test_verify_checks_the_shards_of_a_v2_dataset(tmp_path) -> None:
    import struct

    from episodes import SingleAgentEpisode
    from episodes.io import CorruptDatasetError, DatasetWriter, load_episodes

    reward = 1234.5678
    with DatasetWriter(tmp_path / "d") as w:
        w.write_many([SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0],
                                         rewards=[reward], len_lookback_buffer=0),
                      SingleAgentEpisode("b", observations=[0])])  # fmt: skip
    flipped = 0
    for shard in (tmp_path / "d" / "shards").glob("*.arrow"):
        data = bytearray(shard.read_bytes())
        at = data.find(struct.pack("<d", reward))
        if at >= 0:
            data[at] ^= 0x01  # the reward's lowest mantissa bit: the shard still reads
            shard.write_bytes(bytes(data))
            flipped += 1
    assert flipped == 1
    assert load_episodes(tmp_path / "d", ["b", "a"])[1].get_rewards() != [reward]
    with pytest.raises(CorruptDatasetError, match="CRC-32"):
        load_episodes(tmp_path / "d", ["b", "a"], verify=True)


@pytest.mark.parametrize("writer", ["EpisodeWriter", "DatasetWriter"])
def test_numpy_pieces_whose_columns_do_not_join_are_a_corrupt_dataset(tmp_path, writer) -> None:
    """Int actions stored, then a float one: the join's ValueError is named as the dataset's."""
    import episodes.io as eio
    from episodes import SingleAgentEpisode

    def piece(t0: int, action: Any) -> SingleAgentEpisode:
        one = SingleAgentEpisode("a", observations=[np.ones(2), np.ones(2)], actions=[action],
                                 rewards=[1.0], t_started=t0, len_lookback_buffer=0)  # fmt: skip
        return one.to_numpy()

    with getattr(eio, writer)(tmp_path / "d") as w:
        w.write_many([piece(0, 0), piece(1, 0.5)])
    with pytest.raises(eio.CorruptDatasetError, match="'a' do not join at t=1"):
        eio.load_episodes(tmp_path / "d", ["a"])


def test_an_id_not_found_points_at_unlisted_shards(tmp_path) -> None:
    import os

    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, EpisodeNotFoundError, load_episodes

    with DatasetWriter(tmp_path / "d") as w:
        w.write_many([SingleAgentEpisode("a", observations=[0])])
    os.makedirs(tmp_path / "d" / "unlisted" / "shards")
    (tmp_path / "d" / "unlisted" / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
    with pytest.raises(EpisodeNotFoundError, match="`episodes relist"):
        load_episodes(tmp_path / "d", ["a", "b"])


# ------------------------------------------------------------------------------- episode ids
@pytest.mark.parametrize(
    ("id_", "words"),
    [
        pytest.param(lambda t: t.tensor(3), r"is an array \(Tensor\)", id="tensor"),
        pytest.param(lambda t: ("run", t.tensor(3)), r"is a tuple holding an array \(Tensor\)",
                     id="tuple, tensor second"),
        pytest.param(lambda t: (("run", 1), ("x", t.tensor(3))),
                     r"is a tuple holding an array \(Tensor\)", id="tensor in a nested tuple"),
    ],
)  # fmt: skip
def test_an_id_holding_a_tensor_is_refused_by_add_rollouts(id_, words) -> None:
    torch = pytest.importorskip("torch")
    from episodes.replay.episode_ids import check_episode_id

    with pytest.raises(TypeError, match=words):
        check_episode_id(id_(torch))
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError, match=r"ids\[1\]: episode id .*" + words):
        buf.add_rollouts(**_arrays(), ids=["a", id_(torch)])
    assert buf.get_episode_ids() == []

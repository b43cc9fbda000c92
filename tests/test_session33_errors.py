"""Error messages stay short, and one bad count type raises one exception type everywhere.

- An out-of-range gather or write of 200,000 indices names the first few as plain ints and how
  many there are, not every one of them (messages of several MB before); a refused flag names a
  cut repr of what it got.
- ``EnvRunner(len_lookback_buffer=...)`` refuses what the episode refuses, with the same types.
- A numpy'd buffer's ``extend`` of a non-list raises the list-mode ``TypeError``.
- ``filler_batch`` checks its count ``n`` before the fill.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer.lookback_buffer import InfiniteLookbackBuffer
from episodes.indexing import listed_indices
from episodes.runner import EnvRunner, RandomPolicy
from episodes.spaces.filler import filler_batch

MANY = 200_000
IDX = np.arange(MANY) + 1  # all but the first 100 (or 99) are out of range


def _episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[0] * 101, actions=[0] * 100, rewards=[1.0] * 100, len_lookback_buffer=0
    )
    return ep.to_numpy() if numpy else ep


def _state(ep: SingleAgentEpisode) -> tuple:
    return len(ep), list(ep.get_rewards()), list(ep.get_observations()), ep.is_done


# (name, call, first bad index, count of bad indices, items in the buffer)
BIG_CALLS = [
    ("get_observations array", lambda ep: ep.get_observations(IDX), 101, MANY - 100, 101),
    ("get_rewards list of np ints", lambda ep: ep.get_rewards(list(IDX)), 100, MANY - 99, 100),
    ("get_actions list of ints", lambda ep: ep.get_actions(IDX.tolist()), 100, MANY - 99, 100),
    (
        "set_rewards array",
        lambda ep: ep.set_rewards(new_data=[0.0] * MANY, at_indices=IDX),
        100,
        MANY - 99,
        100,
    ),
    (
        "set_rewards list of np ints",
        lambda ep: ep.set_rewards(new_data=[0.0] * MANY, at_indices=list(IDX)),
        100,
        MANY - 99,
        100,
    ),
]


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("call", "first", "count", "items"),
    [row[1:] for row in BIG_CALLS],
    ids=[row[0] for row in BIG_CALLS],
)
def test_out_of_range_messages_stay_short(numpy, call, first, count, items):
    ep = _episode(numpy)
    before = _state(ep)
    with pytest.raises(IndexError) as info:
        call(ep)
    message = str(info.value)
    assert len(message) < 1000, len(message)
    assert f"[{first}, {first + 1}, " in message  # the first bad ones, as plain ints
    assert "np.int64" not in message
    assert f"({count} indices)" in message
    assert f"buffer with {items} items and a lookback of 0" in message
    assert _state(ep) == before  # a refused write changes nothing


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda ep: ep.get_observations([1, 200, 300]),
            "indices [200, 300] are out of range for a buffer with 101 items and a lookback of 0",
        ),
        (
            lambda ep: ep.set_rewards(new_data=[0.0, 0.0], at_indices=np.array([3, 100])),
            "cannot set at indices [100]: out of range for a buffer with 100 items and a "
            "lookback of 0 (neg_index_as_lookback=False)",
        ),
        (
            lambda ep: ep.set_rewards(new_data=0.0, at_indices=1000),
            "cannot set at index 1000: out of range for a buffer with 100 items and a "
            "lookback of 0 (neg_index_as_lookback=False)",
        ),
    ],
)
def test_few_bad_indices_are_all_named(call, message):
    ep = _episode(numpy=False)
    with pytest.raises(IndexError) as info:
        call(ep)
    assert str(info.value) == message


def test_buffer_reads_and_writes_name_few_indices():
    buf = InfiniteLookbackBuffer(list(range(10)), lookback=2)
    bad = np.arange(MANY, dtype=np.int64)
    for call in (lambda: buf.get(bad), lambda: buf.set([0] * MANY, at_indices=bad)):
        with pytest.raises(IndexError) as info:
            call()
        assert len(str(info.value)) < 1000
        assert f"[8, 9, 10, 11, 12, 13, 14, 15, ...] ({MANY - 8} indices)" in str(info.value)
    assert buf.get() == list(range(2, 10))


@pytest.mark.parametrize("name", ["terminated", "truncated"])
def test_refused_flag_message_is_cut(name):
    ep = _episode(numpy=False)
    with pytest.raises(TypeError, match=f"{name} must be a bool, got list") as info:
        ep.add_env_step(0, 0, 1.0, **{name: [False] * MANY})
    assert len(str(info.value)) < 1000
    assert len(ep) == 100


def test_listed_indices_table():
    assert listed_indices([np.int64(4), 5], [False, False]) == "[4, 5]"
    assert listed_indices(np.arange(3), [True, False, True]) == "[1]"
    assert listed_indices(range(9), [False] * 9) == "[0, 1, 2, 3, 4, 5, 6, 7, ...] (9 indices)"
    assert listed_indices(np.array([2**64 - 1], np.uint64), [False]) == f"[{2**64 - 1}]"


# (value, exception type the episode and the runner both raise)
LOOKBACKS = [
    (True, TypeError),
    (np.True_, TypeError),
    (2.0, TypeError),
    ("2", TypeError),
    (None, TypeError),
    (np.array(2), TypeError),
    (-1, ValueError),
    (np.int64(-1), ValueError),
]


@pytest.mark.parametrize(("value", "error"), LOOKBACKS, ids=repr)
def test_runner_lookback_refused_as_by_episode(value, error):
    with pytest.raises(error, match="len_lookback_buffer"):
        SingleAgentEpisode(observations=[0], len_lookback_buffer=value)
    env = gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")
    with pytest.raises(error, match="len_lookback_buffer"):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), len_lookback_buffer=value)
    env.close()


@pytest.mark.parametrize("value", [0, 3, np.int64(2), 10**30])
def test_runner_lookback_ints_taken(value):
    env = gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), len_lookback_buffer=value)
    assert runner.len_lookback_buffer == min(int(value), 2**63 - 1)
    env.close()


@pytest.mark.parametrize("items", [0, 1.5, None, True, np.int64(3), np.array(3)], ids=repr)
def test_numpy_buffer_extend_of_a_non_list_is_a_type_error(items):
    buf = InfiniteLookbackBuffer([1, 2, 3])
    buf.finalize()
    kind = type(items).__name__
    with pytest.raises(
        TypeError, match=rf"^extend: items must be a list \(or iterable\) of items, got {kind}$"
    ):
        buf.extend(items)
    np.testing.assert_array_equal(buf.get(), [1, 2, 3])


@pytest.mark.parametrize("items", [0, 1.5, None, True], ids=repr)
def test_extend_refusal_same_in_both_modes(items):
    errors = []
    for numpy in (False, True):
        buf = InfiniteLookbackBuffer([1, 2, 3])
        if numpy:
            buf.finalize()
        with pytest.raises(Exception) as info:
            buf.extend(items)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize(
    ("space", "fill", "n", "error", "match"),
    [
        (gym.spaces.Discrete(2), 0, 2.0, TypeError, r"^n must be an int, got float \(2.0\)$"),
        (gym.spaces.Discrete(2), 0, True, TypeError, r"^n must be an int, got bool \(True\)$"),
        (gym.spaces.Text(3), "a", 2.0, TypeError, r"^n must be an int, got float"),
        (gym.spaces.Discrete(2), 0, "3", TypeError, r"^n must be an int, got str"),
        (None, 0, np.float64(1.0), TypeError, r"^n must be an int, got float64"),
        (None, 0, np.array(2), TypeError, r"^n must be an int, got ndarray"),
        (gym.spaces.Discrete(2), 0, -1, ValueError, r"^n must be non-negative, got -1$"),
        (gym.spaces.Discrete(2), 0, np.int64(-2), ValueError, r"^n must be non-negative, got -2$"),
    ],
)
def test_filler_batch_checks_n_first(space, fill, n, error, match):
    with pytest.raises(error, match=match):
        filler_batch(space, fill, n)


@pytest.mark.parametrize("n", [0, 2, np.int64(2), np.uint8(2)], ids=repr)
def test_filler_batch_takes_int_counts(n):
    np.testing.assert_array_equal(filler_batch(gym.spaces.Discrete(4), -1, n), [-1] * int(n))
    np.testing.assert_array_equal(filler_batch(None, 1.5, n), [1.5] * int(n))

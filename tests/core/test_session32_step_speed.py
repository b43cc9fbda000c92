"""Fast paths of numpy'd add_env_step, ep[a:b] and range copies agree with the general paths.

add_env_step skips ``is_real`` for rewards of a few exact classes and checks the spaces inline;
slice_episode takes in-range int bounds as they are; copy_range / copy_tail build the copy
inline. Each is compared here with what the general path gives for the same (odd) input.
"""

from __future__ import annotations

import decimal
import fractions

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import recording
from episodes.episode.reward_values import is_real

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)


def _numpyd(steps: int = 3, lookback: int = 0) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(np.zeros(2, np.float32))
    for i in range(steps):
        ep.add_env_step(np.full(2, 0.1 * i, np.float32), i % 2, float(i), extra_model_outputs={})
    return ep.to_numpy()


@pytest.mark.parametrize("cls", sorted(recording._PLAIN_REALS, key=lambda c: c.__name__))
def test_every_class_that_skips_is_real_is_real(cls):
    # The skip is exact only if is_real accepts every value of these classes.
    for value in (0, 1, True, False):
        assert is_real(cls(value))
    if cls not in (bool, int):
        assert is_real(cls("nan")) and is_real(cls("inf"))


REWARDS = [
    1.5,
    -0.0,
    float("nan"),
    7,
    2**40,
    True,
    np.float64(2.5),
    np.float32(0.25),
    np.int64(3),
    np.int8(-2),
    np.bool_(True),
    fractions.Fraction(1, 2),
    decimal.Decimal("0.5"),
    np.array(1.25),
]


def _step_outcome(reward, open_column: bool):
    if open_column:  # numpy'd before its first step: the rewards column has no dtype yet
        ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
        ep.add_env_reset(np.zeros(2, np.float32))
        ep.to_numpy()
    else:
        ep = _numpyd()
    try:
        ep.add_env_step(np.zeros(2, np.float32), 1, reward)
    except Exception as error:  # noqa: BLE001 - the refusal is part of the outcome
        return type(error), str(error), _columns(ep)
    return np.asarray(ep.get_rewards()).tolist(), np.asarray(ep.get_rewards()).dtype, _columns(ep)


@pytest.mark.parametrize("open_column", [False, True])
@pytest.mark.parametrize("reward", [*REWARDS, "2.5", None, [1.0], 1j], ids=repr)
def test_numpyd_step_rewards_fast_path_equals_general_path(reward, open_column, monkeypatch):
    fast = _step_outcome(reward, open_column)
    monkeypatch.setattr(recording, "_PLAIN_REALS", frozenset())  # every reward asks is_real
    general = _step_outcome(reward, open_column)
    assert repr(fast) == repr(general)


@pytest.mark.parametrize("reward", ["2.5", None, [1.0], {"r": 1.0}, 1j], ids=repr)
def test_non_real_rewards_are_refused_unchanged_in_an_open_column(reward):
    # An untyped rewards column (numpy'd before its first step) needs the real check.
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.to_numpy()
    with pytest.raises(ValueError, match="no real number"):
        ep.add_env_step(np.zeros(2, np.float32), 0, reward)
    assert (len(ep), len(ep.get_observations()), ep.t) == (0, 1, 0)


STEP_REFUSALS = [
    # observation, action, error, message
    (np.full(2, 5.0, np.float32), 0, ValueError, "observation .* is not in the episode's"),
    (np.zeros(2, np.float32), 7, ValueError, "action 7 is not in the episode's action space"),
    (np.zeros(3, np.float32), 0, ValueError, "observation"),
]


@pytest.mark.parametrize("obs, action, error, message", STEP_REFUSALS)
def test_numpyd_step_refusals_leave_the_episode_unchanged(obs, action, error, message):
    ep = _numpyd()
    with pytest.raises(error, match=message):
        ep.add_env_step(obs, action, 1.0)
    assert len(ep) == 3 and ep.t == 3
    assert _columns(ep) == _columns(_numpyd())


def test_step_on_a_numpyd_episode_without_reset_is_refused():
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE).to_numpy()
    with pytest.raises(AssertionError, match="needs add_env_reset"):
        ep.add_env_step(np.zeros(2, np.float32), 0, 1.0)
    # The reset check still goes first: an observation outside the space is not what it names.
    with pytest.raises(AssertionError, match="needs add_env_reset"):
        ep.add_env_step(np.full(2, 9.0, np.float32), 9, "x")


def test_the_error_text_matches_add_env_reset():
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE).to_numpy()
    with pytest.raises(ValueError) as reset_error:
        ep.add_env_reset(np.full(2, 5.0, np.float32))
    ep.add_env_reset(np.zeros(2, np.float32))
    with pytest.raises(ValueError) as step_error:
        ep.add_env_step(np.full(2, 5.0, np.float32), 0, 1.0)
    assert str(reset_error.value) == str(step_error.value)


BOUNDS = st.one_of(st.none(), st.integers(-12, 12))


def _columns(part: SingleAgentEpisode) -> tuple:
    return (
        part.t_started,
        part.t,
        [
            np.asarray(part.observations.store.get(i)).tolist()
            for i in range(len(part.observations.store))
        ],
        np.asarray(part.get_observations()).tolist(),
        part.observations.lookback,
        part.actions.lookback,
        np.asarray(part.get_actions()).tolist(),
        np.asarray(part.get_rewards()).tolist(),
        part.is_terminated,
    )


@settings(max_examples=150, deadline=None)
@given(start=BOUNDS, stop=BOUNDS, lookback=st.integers(0, 3), done=st.booleans())
def test_int_slice_bounds_equal_the_resolved_numpy_int_bounds(start, stop, lookback, done):
    # numpy ints take the general resolving path; plain ints in range take the fast one.
    ep = _numpyd(6)
    if lookback:
        ep = SingleAgentEpisode(
            observations=list(np.arange(8, dtype=np.float32).reshape(4, 2) / 10),
            actions=[0, 1, 0],
            rewards=[1.0, 2.0, 3.0],
            observation_space=OBS_SPACE,
            action_space=ACT_SPACE,
            len_lookback_buffer=lookback - 1,
            terminated=done,
        ).to_numpy()
    general = ep[
        None if start is None else np.int64(start) : None if stop is None else np.int64(stop)
    ]
    fast = ep[start:stop]
    assert _columns(fast) == _columns(general)
    steps = list(range(len(ep)))[start:stop]
    assert fast.t_started == ep.t_started + (steps[0] if steps else fast.t_started - ep.t_started)
    assert len(fast) == len(steps)


@pytest.mark.parametrize("bound", [True, 1.0, "1"])
def test_slice_bounds_of_other_types_are_still_refused(bound):
    ep = _numpyd(4)
    with pytest.raises(TypeError, match="slice bound must be an int"):
        ep[bound:3]
    with pytest.raises(TypeError, match="slice bound must be an int"):
        ep[1:bound]


def _reference_range(items: list, start: int, stop: int, lookback: int) -> tuple[list, int]:
    total = len(items)
    start = min(max(start, 0), total)
    stop = min(max(stop, start), total)
    return items[start:stop], max(0, min(lookback, stop - start))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 6),
    start=st.integers(-8, 8),
    stop=st.integers(-8, 8),
    lookback=st.integers(-3, 8),
    numpy=st.booleans(),
    np_ints=st.booleans(),
)
def test_copy_range_equals_its_reference(n, start, stop, lookback, numpy, np_ints):
    items = [float(i) for i in range(n)]
    buffer = InfiniteLookbackBuffer(items, lookback=0)
    if numpy:
        buffer.finalize()
    args = (start, stop, lookback)
    copy = buffer.copy_range(*(map(np.int64, args) if np_ints else args))
    expected, expected_lookback = _reference_range(items, *args)
    assert copy.lookback == expected_lookback
    assert [float(copy.store.get(i)) for i in range(len(copy.store))] == expected
    assert copy.store is not buffer.store and copy._space is buffer._space
    assert copy.store.is_numpy == numpy


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 6), count=st.integers(0, 8), visible=st.integers(0, 8), numpy=st.booleans())
def test_copy_tail_equals_its_reference(n, count, visible, numpy):
    items = [float(i) for i in range(n)]
    buffer = InfiniteLookbackBuffer(items, lookback=0)
    if numpy:
        buffer.finalize()
    tail = buffer.copy_tail(count, visible)
    kept = items[max(n - count, 0) :]
    assert tail.lookback == max(len(kept) - visible, 0)
    assert [float(tail.store.get(i)) for i in range(len(tail.store))] == kept
    assert tail.store is not buffer.store and tail.store.is_numpy == numpy

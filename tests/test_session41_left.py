"""Left-alone items of session 41: tuple equality of rollout layouts, arrays of episodes for
the connectors, and the cost of a list-mode return."""

from __future__ import annotations

import copy
import math
import pickle
import warnings
from decimal import Decimal
from fractions import Fraction
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    check_episodes,
)
from episodes.episode import returns
from episodes.episode.returns import reward_sum
from episodes.rollout import CircularBuffer, HistoryWindows, TrajectoryLayout
from episodes.rollout.trajectories import trajectory_layout
from episodes.testing.compare import outputs_equal

# ------------------------------------------------ 1. named tuples of tensors compare by identity

DONES = [[0, 0], [1, 0], [0, 0]]


def _layout() -> TrajectoryLayout:
    return trajectory_layout(torch.tensor(DONES))


def _windows() -> HistoryWindows:
    buf = CircularBuffer(3, 2)
    for v in range(3):
        buf.append(torch.tensor([v, 10 + v]))
    gen = torch.Generator().manual_seed(0)
    return next(buf.mini_batch_generator(2, batch_size=4, num_batches=1, generator=gen))


MAKERS = {"layout": _layout, "windows": _windows}

# name -> (the other side made from x, equal?)
EQUALITY_CASES = {
    "itself": (lambda x: x, True),
    "a _replace() copy": (lambda x: x._replace(), True),
    "a plain tuple of its items": (lambda x: tuple(x), True),
    "rebuilt from its items": (lambda x: type(x)(*x), True),
    "made again from the same input": (lambda x: type(x)(*[_clone(v) for v in x]), False),
    "one tensor cloned": (lambda x: x._replace(**{x._fields[-1]: x[-1].clone()}), False),
    "a deep copy": (copy.deepcopy, False),
    "a pickle round trip": (lambda x: pickle.loads(pickle.dumps(x)), False),
    "a shorter tuple": (lambda x: tuple(x)[:-1], False),
    "not a tuple": (lambda x: 3, False),
}


def _clone(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("case", list(EQUALITY_CASES))
@pytest.mark.parametrize("kind", list(MAKERS))
def test_layout_tuples_compare_tensors_by_identity(kind: str, case: str) -> None:
    x = MAKERS[kind]()
    other_of, equal = EQUALITY_CASES[case]
    other = other_of(x)
    assert (x == other) is equal and (other == x) is equal
    assert (x != other) is (not equal) and (other != x) is (not equal)
    if equal:
        assert hash(x) == hash(other)
    assert (other in [x]) is equal and x in {x: 1}


@pytest.mark.parametrize("kind", list(MAKERS))
def test_layout_tuples_still_unpack_index_and_name_fields(kind: str) -> None:
    x = MAKERS[kind]()
    first, *rest = x
    assert first is x[0] is getattr(x, x._fields[0])
    assert len(rest) == len(x._fields) - 1 and isinstance(x, tuple)
    assert list(x._asdict()) == list(x._fields)


def test_a_layout_made_twice_is_two_layouts_with_equal_fields() -> None:
    a, b = _layout(), _layout()
    assert a != b  # before: RuntimeError "Boolean value of Tensor ... is ambiguous"
    assert all(torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v for u, v in zip(a, b))


# -------------------------------------------------- 2. connectors take an array of episodes


def _episode(seed: int) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    n = 3 + seed
    return SingleAgentEpisode(
        observations=[rng.random(2).astype(np.float32) for _ in range(n + 1)],
        actions=[int(a) for a in rng.integers(0, 2, n)],
        rewards=[float(r) for r in rng.random(n)],
        observation_space=gym.spaces.Box(0, 1, (2,), np.float32),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


EPISODES = [_episode(s) for s in range(3)]

CONNECTORS = {
    "flatten": FlattenObservations,
    "frame-stack": lambda: FrameStack(2),
    "prev": lambda: PrevActionsPrevRewards(1, 1),
    "learner": AddLearnerColumns,
    "pipeline": lambda: ConnectorPipeline([FrameStack(2), AddLearnerColumns()]),
}

ARRAYS = {
    "np.array": lambda eps: np.array(eps),
    "permutation": lambda eps: np.random.default_rng(1).permutation(eps),
    "choice": lambda eps: np.random.default_rng(2).choice(eps, 2, replace=False),
}


@pytest.mark.parametrize("how", list(ARRAYS))
@pytest.mark.parametrize("connector", list(CONNECTORS))
def test_connectors_take_a_1d_array_of_episodes_as_its_list(connector: str, how: str) -> None:
    array = ARRAYS[how](EPISODES)
    assert array.dtype == object and array.ndim == 1
    got = CONNECTORS[connector]()(array, {})
    want = CONNECTORS[connector]()(array.tolist(), {})
    assert outputs_equal(got, want, check_dtype=True)


@pytest.mark.parametrize("connector", list(CONNECTORS))
def test_an_empty_array_is_no_episodes(connector: str) -> None:
    for empty in (np.array([]), np.array([], dtype=object)):
        assert outputs_equal(CONNECTORS[connector]()(empty, {}), CONNECTORS[connector]()([], {}))


# name -> (array, words of the TypeError)
REFUSED_ARRAYS = {
    "2-d object": (lambda: np.array([[EPISODES[0]], [EPISODES[1]]]), "2-d numpy array (object"),
    "0-d (np.asarray(ep))": (lambda: np.asarray(EPISODES[0]), "0-d numpy array (object"),
    "floats": (lambda: np.array([1.0, 2.0]), "1-d numpy array (float64, shape (2,))"),
    "ints": (lambda: np.arange(3), "1-d numpy array (int64"),
    "an object among episodes": (
        lambda: np.array([EPISODES[0], 3], dtype=object),
        "got item 1: 3 (int)",
    ),
}


@pytest.mark.parametrize("connector", list(CONNECTORS))
@pytest.mark.parametrize("case", list(REFUSED_ARRAYS))
def test_other_arrays_are_refused_naming_them(case: str, connector: str) -> None:
    make, words = REFUSED_ARRAYS[case]
    with pytest.raises(TypeError, match="connectors take a list of SingleAgentEpisode") as info:
        CONNECTORS[connector]()(make(), {})
    assert words in str(info.value)


def test_check_episodes_gives_an_arrays_episodes_as_a_list() -> None:
    got = check_episodes(np.array(EPISODES), "FrameStack")
    assert type(got) is list and all(a is b for a, b in zip(got, EPISODES))
    given = (EPISODES[0],)
    assert check_episodes(given, "FrameStack") is given  # other sequences as they are


# ------------------------------------------------ 3. list-mode returns: same floats, less cost

_NUMBERS = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, width=64),
    st.integers(-(2**20), 2**20),
    st.booleans(),
    st.floats(-1e6, 1e6, width=64).map(np.float64),
    st.floats(-1e6, 1e6, width=32).map(np.float32),
)


def _float64_sum(rewards: list[Any]) -> float:
    return float(np.add.reduce(np.array([float(r) for r in rewards], dtype=np.float64)))


@settings(max_examples=150, deadline=None)
@given(
    first=st.sampled_from(["float", "int", "any"]),
    rewards=st.lists(_NUMBERS, max_size=300),
)
def test_list_mode_numpy_mode_and_the_float64_sum_agree(first: str, rewards: list[Any]) -> None:
    if rewards and first != "any":  # the fast paths key on the first reward's type
        rewards[0] = float(rewards[0]) if first == "float" else int(rewards[0])
    n = len(rewards)
    ep = SingleAgentEpisode(
        observations=[0] * (n + 1), actions=[0] * n, rewards=rewards, len_lookback_buffer=0
    )
    listed = ep.get_return()
    ep.to_numpy()
    assert listed == ep.get_return() == _float64_sum(rewards)


_ODD = st.one_of(
    _NUMBERS,
    st.floats(allow_nan=False),  # infinities and sums past float max
    st.integers(-(2**70), 2**70),  # ints no float or int64 holds
    st.fractions(max_denominator=10),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
)


def _outcome(rewards: Any) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            total = reward_sum(rewards)
        except (TypeError, ValueError) as error:  # a tuple's message quotes numpy's text
            total = type(error)
    assert not caught, [str(w.message) for w in caught]  # numpy scalars overflowing, say
    return "nan" if isinstance(total, float) and math.isnan(total) else total


@settings(max_examples=200, deadline=None)
@given(
    first=st.sampled_from([1.5, 2, True, None]), rewards=st.lists(_ODD, min_size=1, max_size=200)
)
def test_a_list_sums_as_the_tuple_of_its_rewards(first: Any, rewards: list[Any]) -> None:
    # A tuple does not take the int path: numpy's, as lists did.
    if first is not None:
        rewards[0] = first
    assert _outcome(rewards) == _outcome(tuple(rewards))


# name -> rewards: long lists whose first reward is a float or an int, with others later
ODD_LATER = {
    "an int": [0.5] * 60 + [3],
    "a huge int": [0.5] * 60 + [2**70],
    "a bool": [0.5] * 60 + [True],
    "a numpy float64": [0.1] * 60 + [np.float64(0.2)],
    "a numpy float32": [0.1] * 60 + [np.float32(0.2)],
    "a Fraction": [0.1] * 60 + [Fraction(1, 3)],
    "a Decimal": [0.1] * 60 + [Decimal("0.1")],
    "a float subclass": [0.1] * 60 + [type("F", (float,), {})(0.25)],
    "a string": [0.5] * 60 + ["1.5"],
    "None": [0.5] * 60 + [None],
    "an array": [0.5] * 60 + [np.array([1.0, 2.0])],
    "a NaN": [0.5] * 60 + [math.nan],
    "opposite infinities": [math.inf] * 30 + [-math.inf] * 31,
    "-0.0 only": [-0.0] * 60,
    "floats past float max": [1.7e308] * 60,
    "ints, then a float": [1] * 60 + [0.5],
    "ints, then ints no int64 holds": [1] * 60 + [2**70, -(2**70) + 3],
    "ints, then int64s that wrap": [1] * 60 + [np.int64(2**62)] * 3,
    "ints, then float64s past float max": [1] * 60 + [np.float64(1e308)] * 3,
    "ints, then None": [1] * 60 + [None],
    "ints, then a string": [1] * 60 + ["x"],
    "ints, then a Fraction": [1] * 60 + [Fraction(1, 3)],
    "ints, then a Decimal": [1] * 60 + [Decimal("0.1")],
    "ints, then an array": [1] * 60 + [np.array([1.0, 2.0])],
    "ints past float range": [10**400, 1] * 30,
    "bools": [True, False] * 30,
}


@pytest.mark.parametrize("case", list(ODD_LATER))
def test_long_float_lists_with_odd_items_sum_as_before(case: str) -> None:
    rewards = ODD_LATER[case]
    assert _outcome(rewards) == _outcome(tuple(rewards))


class _NumpyWithoutAsarray:
    """numpy, but ``asarray`` fails: the paths that should not need it."""

    def __getattr__(self, name: str) -> Any:
        if name == "asarray":
            raise AssertionError("np.asarray was called")
        return getattr(np, name)


@pytest.mark.parametrize(
    "rewards",
    [[1, -2, 3] * 100, [True, 2] * 50, list(range(1000))],
    ids=["ints", "bools-and-ints", "1000-ints"],
)
def test_long_int_lists_skip_numpys_type_discovery(
    monkeypatch: pytest.MonkeyPatch, rewards: list[Any]
) -> None:
    want = reward_sum(tuple(rewards))
    monkeypatch.setattr(returns, "np", _NumpyWithoutAsarray())
    assert reward_sum(rewards) == want

"""A rewards column holds numbers: ``concat_episode`` and ``to_numpy`` keep strings out.

Contract §4.4, §6.3, §7.1 and §8; deviations numpy-step-misfit and to_numpy-partial.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode


def _untyped() -> SingleAgentEpisode:
    """numpy'd before its first step: the rewards column's dtype is still open."""
    ep = SingleAgentEpisode("a")
    ep.add_env_reset(0.0)
    return ep.to_numpy()


def _objects() -> SingleAgentEpisode:
    """numpy'd with ints beyond int64: a rewards column of Python objects."""
    return SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 0],
        rewards=[2**70, 1],
        len_lookback_buffer=0,
    ).to_numpy()


def _successor(episode: SingleAgentEpisode, rewards: list[Any]) -> SingleAgentEpisode:
    n = len(rewards)
    last = float(episode.get_observations(-1))
    return SingleAgentEpisode(
        "a",
        observations=[last + i for i in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        t_started=episode.t,
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------------ concat_episode refuses
CONCAT_MISFITS: dict[str, tuple[Callable[[], SingleAgentEpisode], list[Any]]] = {
    "open dtype, strings": (_untyped, ["2.5", "x"]),
    "open dtype, None": (_untyped, [1.0, None]),
    "open dtype, a dict": (_untyped, [{"k": 1.0}, 1.0]),
    "open dtype, complex": (_untyped, [1.0, 1 + 1j]),
    "objects, a string and None": (_objects, ["x", None]),
    "objects, a string after numbers": (_objects, [1.5, "2.5"]),
    "objects, a dict": (_objects, [{"k": 1.0}, 1.0]),
    "objects, an array": (_objects, [np.array([1.0, 2.0]), 1.0]),
    "objects, complex": (_objects, [1.0, 1 + 1j]),
}


@pytest.mark.parametrize("make, rewards", CONCAT_MISFITS.values(), ids=CONCAT_MISFITS.keys())
def test_concat_refuses_rewards_that_are_no_numbers(
    make: Callable[[], SingleAgentEpisode], rewards: list[Any]
) -> None:  # "numpy-step-misfit"
    ep = make()
    other = _successor(ep, rewards)
    before = copy.deepcopy(ep)
    dtype = ep.get_rewards().dtype
    with pytest.raises(ValueError, match="rewards") as caught:
        ep.concat_episode(other)
    assert "numpy column" in str(caught.value)
    assert ep == before and ep.t == before.t
    assert ep.get_rewards().dtype == dtype
    # The episode is not stuck: a successor of numbers still joins.
    ep.concat_episode(_successor(ep, [2.0, 3.0]))
    assert ep.get_rewards().tolist()[-2:] == [2.0, 3.0]


CONCAT_FITS: dict[str, tuple[Callable[[], SingleAgentEpisode], list[Any], str]] = {
    "open dtype, floats and ints": (_untyped, [1.0, 2], "f"),
    "open dtype, numpy scalars and bools": (_untyped, [np.float32(1.5), True], "f"),
    "open dtype, NaN": (_untyped, [math.nan, 1.0], "f"),
    "objects, ints beyond int64": (_objects, [2**71, -(2**70)], "O"),
    "objects, floats and 0-d arrays": (_objects, [1.5, np.array(2.5)], "O"),
    "objects, bools": (_objects, [True, np.bool_(False)], "O"),
}


@pytest.mark.parametrize("make, rewards, kind", CONCAT_FITS.values(), ids=CONCAT_FITS.keys())
def test_concat_takes_numbers(
    make: Callable[[], SingleAgentEpisode], rewards: list[Any], kind: str
) -> None:
    ep = make()
    n = len(ep)
    ep.concat_episode(_successor(ep, rewards))
    got = ep.get_rewards()
    assert got.dtype.kind == kind and len(got) == n + 2
    if kind == "f":  # NaN equals NaN here
        np.testing.assert_array_equal(got[n:], np.asarray(rewards, dtype=np.float64))
    else:  # exact: ints beyond int64 stay Python ints
        assert got[n:].tolist() == [v.item() if isinstance(v, np.generic) else v for v in rewards]


def test_concat_of_a_numpyd_successor_of_numbers_is_unchanged() -> None:
    ep = _objects()
    other = _successor(ep, [3, 4]).to_numpy()
    ep.concat_episode(other)
    assert ep.get_rewards().tolist() == [2**70, 1, 3, 4]


# ------------------------------------------------------------------------ to_numpy refuses
TO_NUMPY_MISFITS: dict[str, tuple[list[Any], int]] = {
    "a string after a float": ([1.0, "x"], 0),
    "numeric strings": (["2.5", "1"], 0),
    "None": ([1.0, None], 0),
    "dicts": ([{"k": 1.0}, {"k": 2.0}], 0),
    "a string next to an int beyond int64": ([2**70, "x"], 0),
    "None next to an int beyond int64": ([2**70, None], 0),
    "a string in the lookback": (["x", 1.0, 2.0], 1),
}


@pytest.mark.parametrize(
    "rewards, lookback", TO_NUMPY_MISFITS.values(), ids=TO_NUMPY_MISFITS.keys()
)
def test_to_numpy_refuses_rewards_that_are_no_numbers(
    rewards: list[Any], lookback: int
) -> None:  # "to_numpy-partial"
    n = len(rewards)
    ep = SingleAgentEpisode(
        "a",
        observations=[float(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        len_lookback_buffer=lookback,
    )
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="rewards"):
        ep.to_numpy()
    # RLlib 2.60 numpys [1.0, "x"] into strings ("1.0"); here the episode stays as it was.
    assert not ep.is_numpy and ep == before
    assert ep.get_rewards() == before.get_rewards()
    assert not ep.observations.finalized and not ep.actions.finalized
    # Not stuck: the episode still records a numeric reward.
    ep.add_env_step(float(n + 1), 0, 2.0)
    assert ep.get_rewards(-1) == 2.0


TO_NUMPY_FITS: dict[str, tuple[list[Any], str, list[Any]]] = {
    "floats": ([1.0, 2.5], "float64", [1.0, 2.5]),
    "ints": ([1, 2], "int64", [1, 2]),
    "ints beyond int64": ([2**70, 1], "object", [2**70, 1]),
    "bools": ([True, False], "bool", [True, False]),
    "float32 scalars": ([np.float32(1.5)] * 2, "float32", [1.5, 1.5]),
    "uint64 beyond int64": ([np.uint64(2**64 - 1)] * 2, "uint64", [2**64 - 1] * 2),
    "0-d arrays and ints": ([np.array(2.0), 3], "float64", [2.0, 3.0]),
    "ints and floats": ([1, 2.5], "float64", [1.0, 2.5]),
}


@pytest.mark.parametrize("rewards, dtype, values", TO_NUMPY_FITS.values(), ids=TO_NUMPY_FITS.keys())
def test_to_numpy_keeps_numeric_rewards(rewards: list[Any], dtype: str, values: list[Any]) -> None:
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=rewards, len_lookback_buffer=0
    ).to_numpy()
    got = ep.get_rewards()
    assert ep.is_numpy and got.dtype == np.dtype(dtype) and got.tolist() == values


def test_to_numpy_keeps_nan_and_vector_rewards() -> None:
    nan = SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 0],
        rewards=[1.0, math.nan],
        len_lookback_buffer=0,
    ).to_numpy()
    assert nan.get_rewards().dtype == np.float64 and math.isnan(nan.get_rewards(1))
    vector = SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 0],
        rewards=[np.array([1.0, 10.0]), np.array([2.0, 20.0])],
        len_lookback_buffer=0,
    ).to_numpy()
    assert vector.get_rewards().shape == (2, 2)
    assert vector.get_rewards().tolist() == [[1.0, 10.0], [2.0, 20.0]]


def test_rllib_numpys_a_string_reward_into_strings() -> None:  # "to_numpy-partial"
    rllib = pytest.importorskip("ray.rllib.env.single_agent_episode")  # the reference venv
    ref = rllib.SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=[1.0, "x"], len_lookback_buffer=0
    )
    ref.to_numpy()
    assert ref.get_rewards().tolist() == ["1.0", "x"]  # ours: ValueError, still list mode

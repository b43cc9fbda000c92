"""Differential pins of session 19: how ``to_numpy`` joins items of different dtypes, and reads
of spaces without a numpy layout (Sequence, OneOf, Graph) and of MultiDiscrete with ``start``.

Arrays of different dtypes in one list-mode column: RLlib 2.60 casts every item into the first
item's dtype (wrapping or overflowing), ours promote as numpy does, so the values are kept.
Numbers alone (no arrays) are promoted by both alike, rounding ints beyond 2**53 next to
floats. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session19.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


def _numpyd(cls: Any, observations: list[Any]) -> list[Any]:
    episode = cls("x")
    episode.add_env_reset(observations[0])
    for obs in observations[1:]:
        episode.add_env_step(obs, 0, 0.0)
    episode.to_numpy()
    column = np.asarray(episode.get_observations())
    return [column.dtype, column.tolist()]


ARRAYS = {
    "uint8 then int64": (
        [np.array([5], np.uint8), np.array([300]), np.array([-1])],
        [np.dtype(np.int64), [[5], [300], [-1]]],
        [np.dtype(np.uint8), [[5], [44], [255]]],
    ),
    "float32 then float64": (
        [np.array([1.0], np.float32), np.array([0.5]), np.array([1e39])],
        [np.dtype(np.float64), [[1.0], [0.5], [1e39]]],
        [np.dtype(np.float32), [[1.0], [0.5], [np.inf]]],
    ),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_arrays_of_different_dtypes_are_promoted(name: str) -> None:  # "to_numpy-array-dtypes"
    observations, ours, theirs = ARRAYS[name]
    assert _numpyd(OSAE, observations) == ours
    assert _numpyd(RSAE, observations) == theirs


NUMBERS = {
    "int64 beyond 2**53 next to a float": [np.int64(2**53 + 1), np.float64(0.5), np.int64(0)],
    # Ints alone that no one int dtype holds: deviation to_numpy-exact-ints (session 30).
}


@pytest.mark.parametrize("name", list(NUMBERS))
def test_numbers_of_different_dtypes_are_promoted_alike(name: str) -> None:
    ours, theirs = _numpyd(OSAE, NUMBERS[name]), _numpyd(RSAE, NUMBERS[name])
    assert ours == theirs
    assert ours[0] == np.dtype(np.float64)


def _read(cls: Any, space: Any, items: list[Any], **kwargs: Any) -> Any:
    episode = cls(
        observations=list(items),
        actions=[0] * (len(items) - 1),
        rewards=[0.0] * (len(items) - 1),
        len_lookback_buffer=0,
        observation_space=space,
    )
    return episode.get_observations(**kwargs)


def test_multidiscrete_one_hot_respects_start() -> None:  # "one-hot-start"
    space = gym.spaces.MultiDiscrete([3, 2], start=[-1, 2])
    items = [np.array([-1, 3]), np.array([1, 2])]
    ours = _read(OSAE, space, items, indices=0, one_hot_discrete=True)
    assert np.asarray(ours).tolist() == [1, 0, 0, 0, 1]
    with pytest.raises(AssertionError):
        _read(RSAE, space, items, indices=0, one_hot_discrete=True)


UNLAID = {
    "Sequence": (gym.spaces.Sequence(gym.spaces.Discrete(3)), [(1, 2), (0,)]),
    "OneOf": (
        gym.spaces.OneOf((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (2,)))),
        [(0, np.int64(1)), (1, np.zeros(2, np.float32))],
    ),
}


@pytest.mark.parametrize("name", list(UNLAID))
def test_fill_on_spaces_without_a_layout_is_fill_itself(name: str) -> None:  # "fill-unlaid-spaces"
    space, items = UNLAID[name]
    assert _read(OSAE, space, items, indices=5, fill=0) == 0
    with pytest.raises(TypeError):
        _read(RSAE, space, items, indices=5, fill=0)


def test_one_hot_leaves_sequence_and_graph_items_unchanged() -> None:  # "one-hot-unlaid-spaces"
    sequence = gym.spaces.Sequence(gym.spaces.Discrete(3))
    assert _read(OSAE, sequence, [(1, 2), (0,)], indices=0, one_hot_discrete=True) == (1, 2)
    with pytest.raises(ValueError):
        _read(RSAE, sequence, [(1, 2), (0,)], indices=0, one_hot_discrete=True)
    graph = gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None)
    graph.seed(0)
    items = [graph.sample(), graph.sample()]
    ours = _read(OSAE, graph, items, indices=0, one_hot_discrete=True)
    assert np.array_equal(ours.nodes, items[0].nodes)
    with pytest.raises(ValueError):
        _read(RSAE, graph, items, indices=0, one_hot_discrete=True)

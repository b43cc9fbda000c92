"""Session 18: list-mode one-hot reads encode a flat window in one numpy call, or not at all.

A list-mode ``get(..., one_hot_discrete=True)`` walked every item through ``one_hot`` unless the
space was a plain ``Discrete``: a Box, which has nothing to encode, paid a Python call per item,
and so did ``FlattenObservations`` (one-hot by default) and ``PrevActionsPrevRewards`` over
MultiDiscrete actions. The work tests count ``one_hot`` calls (never timings); the behaviour
tests pin list mode == numpy mode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.buffer import list_store

F32 = np.float32

CASES = {
    "box": (gym.spaces.Box(-1.0, 1.0, (3,), F32), lambda t: np.full(3, t / 10, F32)),
    "multibinary": (gym.spaces.MultiBinary(4), lambda t: np.array([t % 2, 1, 0, 1], np.int8)),
    "multidiscrete": (
        gym.spaces.MultiDiscrete([3, 4], start=[1, -1]),
        lambda t: np.array([1 + t % 3, -1 + t % 4], np.int64),
    ),
    "discrete": (gym.spaces.Discrete(5, start=2), lambda t: 2 + t % 5),
}


def _buffer(name: str, n: int = 9, lookback: int = 2) -> InfiniteLookbackBuffer:
    space, item = CASES[name]
    return InfiniteLookbackBuffer([item(t) for t in range(n)], lookback=lookback, space=space)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="all"),
        pytest.param({"indices": slice(-4, None)}, id="slice"),
        pytest.param({"indices": slice(-3, 9), "fill": 0}, id="slice-fill"),
        pytest.param({"indices": [0, -1, 3]}, id="list"),
        pytest.param({"indices": -1, "neg_index_as_lookback": True}, id="lookback"),
    ],
)
def test_list_mode_one_hot_equals_numpy_mode(name: str, kwargs: dict[str, Any]) -> None:
    listed, numpyd = _buffer(name), _buffer(name)
    numpyd.finalize()
    got = listed.get(one_hot_discrete=True, **kwargs)
    want = numpyd.get(one_hot_discrete=True, **kwargs)
    if isinstance(got, list):
        got = np.stack(got)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "name, calls",
    [("box", 0), ("multibinary", 0), ("multidiscrete", 1), ("discrete", 1)],  # at most
)
def test_a_flat_window_costs_at_most_one_encode(monkeypatch, name: str, calls: int) -> None:
    seen = []
    real = list_store.one_hot

    def counting(value: Any, space: Any) -> Any:
        seen.append(space)
        return real(value, space)

    monkeypatch.setattr(list_store, "one_hot", counting)
    buffer = _buffer(name, n=200)
    window = buffer.get(one_hot_discrete=True)
    assert len(window) == 198 and len(seen) <= calls


def test_box_items_come_back_as_the_stored_objects() -> None:
    buffer = _buffer("box", n=4, lookback=0)
    stored = buffer.get()
    assert all(a is b for a, b in zip(buffer.get(one_hot_discrete=True), stored))


def test_ragged_multidiscrete_items_still_encode_one_by_one() -> None:
    space = gym.spaces.MultiDiscrete([3, 3])
    buffer = InfiniteLookbackBuffer([np.array([0, 1]), [2, 0]], space=space)
    got = buffer.get(one_hot_discrete=True)
    assert [row.tolist() for row in got] == [[1, 0, 0, 0, 1, 0], [0, 0, 1, 1, 0, 0]]


def test_an_out_of_range_multidiscrete_item_is_refused() -> None:
    window = [np.array([0, 1]), np.array([3, 0])]
    with pytest.raises(ValueError, match="out of range"):
        list_store.ListStore.encode_one_hot(window, gym.spaces.MultiDiscrete([3, 3]))


def test_multidiscrete_items_off_the_space_are_refused_by_a_window_read() -> None:
    """Scalars recorded for a MultiDiscrete([3, 3]): a two-step window stacks to the space's
    shape, but is no item; refused as an index read refuses each."""
    buffer = InfiniteLookbackBuffer([1, 2], space=gym.spaces.MultiDiscrete([3, 3]))
    for read in (
        lambda: buffer.get(slice(0, 2), one_hot_discrete=True),
        lambda: buffer.get(0, one_hot_discrete=True),
    ):
        with pytest.raises(ValueError, match="expects values ending in shape"):
            read()

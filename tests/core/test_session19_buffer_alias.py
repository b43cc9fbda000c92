"""Numpy'd buffers and aliasing (session 19 hunt): copies where asked, handed-out arrays kept.

- ``np.array(buf)`` / ``np.array(buf, copy=True)`` returned a view of the column (numpy 2 trusts
  ``__array__`` to honour ``copy``): writing into "the copy" changed the buffer, the episode, or
  a runner chunk's block. ``np.asarray(buf)`` stays zero-copy; ``copy=False`` refuses a copy.
- ``pop``/``truncate`` shifted or reused memory that earlier reads (views, contract §3.1) and the
  caller's own array still point to. They now leave every array handed out before alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.runner import EnvRunner, RandomPolicy

# np.asarray(..., copy=) and np.array(..., copy=None) are numpy 2's (the copy keyword of
# __array__); numpy 1.x has neither.
NUMPY_2 = pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0", reason="numpy 2 API")


def _numpy_buffer(data: Any = None, lookback: int = 1) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([1.0, 2.0, 3.0] if data is None else data, lookback=lookback)
    buf.finalize()
    return buf


# ------------------------------------------------------------------ np.array / np.asarray
# name -> (make the result from a numpy'd buffer [1., 2., 3.] with lookback 1)
COPIES: dict[str, Callable[[InfiniteLookbackBuffer], np.ndarray]] = {
    "np.array(buf)": lambda buf: np.array(buf),
    "np.array(buf, copy=True)": lambda buf: np.array(buf, copy=True),
    "np.array(buf, dtype=float64)": lambda buf: np.array(buf, dtype=np.float64),
    "np.asarray(buf, copy=True)": lambda buf: np.asarray(buf, copy=True),
    "np.asarray(buf, dtype=float32)": lambda buf: np.asarray(buf, dtype=np.float32),
    "buf.__array__(copy=True)": lambda buf: buf.__array__(copy=True),
}


@NUMPY_2
@pytest.mark.parametrize("make", COPIES.values(), ids=list(COPIES))
def test_a_copy_request_gives_an_independent_array(make: Callable[..., np.ndarray]) -> None:
    buf = _numpy_buffer()
    result = make(buf)
    assert result.tolist() == [2.0, 3.0]
    assert not np.shares_memory(result, buf.data)
    result[:] = -1.0
    assert buf.get().tolist() == [2.0, 3.0]


VIEWS: dict[str, Callable[[InfiniteLookbackBuffer], np.ndarray]] = {
    "np.asarray(buf)": lambda buf: np.asarray(buf),
    "np.asarray(buf, copy=False)": lambda buf: np.asarray(buf, copy=False),
    "np.asarray(buf, dtype=float64, copy=False)": lambda buf: np.asarray(
        buf, dtype=np.float64, copy=False
    ),
    "np.array(buf, copy=None)": lambda buf: np.array(buf, copy=None),
    "buf.__array__() (numpy 1.x call)": lambda buf: buf.__array__(),
    "buf.__array__(float64) (numpy 1.x call)": lambda buf: buf.__array__(np.float64),
}


@NUMPY_2
@pytest.mark.parametrize("make", VIEWS.values(), ids=list(VIEWS))
def test_asarray_stays_zero_copy(make: Callable[..., np.ndarray]) -> None:
    buf = _numpy_buffer()
    result = make(buf)
    assert result.tolist() == [2.0, 3.0]
    assert np.shares_memory(result, buf.data)


REFUSED: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], Any]] = {
    "list mode": (lambda: InfiniteLookbackBuffer([1.0, 2.0, 3.0], lookback=1), None),
    "list mode, dtype given": (lambda: InfiniteLookbackBuffer([1.0, 2.0]), np.float64),
    "numpy'd, dtype conversion": (_numpy_buffer, np.float32),
}


@NUMPY_2
@pytest.mark.parametrize(("make", "dtype"), REFUSED.values(), ids=list(REFUSED))
def test_copy_false_refuses_a_copy(make: Callable[[], InfiniteLookbackBuffer], dtype: Any) -> None:
    buf = make()
    before = buf.get()
    with pytest.raises(ValueError, match="copy"):
        np.asarray(buf, dtype=dtype, copy=False)
    assert buf == make() and np.array_equal(buf.get(), before)


def test_list_mode_and_dtype_are_honoured() -> None:
    items = [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)]
    buf = InfiniteLookbackBuffer(items)
    result = np.array(buf, dtype=np.float64)
    assert result.dtype == np.float64 and result.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    result[:] = 0.0
    assert items[0].tolist() == [1.0, 2.0]
    assert np.asarray(buf).dtype == np.float32


def test_np_array_of_episode_rewards_is_a_copy() -> None:
    ep = SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    ).to_numpy()
    rewards = np.array(ep.rewards)
    rewards *= 100
    assert ep.get_rewards().tolist() == [1.0, 1.0]


def test_np_array_of_a_runner_chunk_column_leaves_the_blocks_alone() -> None:
    env = gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")
    sample = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(4)
    chunk = sample[0]
    before = chunk.get_observations().copy()
    observations = np.array(chunk.observations)
    observations[:] = 123.0
    assert np.array_equal(chunk.get_observations(), before)
    assert sample.unchanged()


# ------------------------------------------------------------------ pop / truncate
def _grow(buf: InfiniteLookbackBuffer, item: Any) -> None:
    buf.append(item)


def _extend(buf: InfiniteLookbackBuffer, item: Any) -> None:
    buf.extend([item, item])


# name -> (change, how the Python list of items changes the same way)
CHANGES: dict[str, tuple[Callable[[InfiniteLookbackBuffer, Any], None], Callable[..., None]]] = {
    "pop(0)": (lambda b, x: b.pop(0), lambda items, x: items.pop(0)),
    "pop(1) (middle)": (lambda b, x: b.pop(1), lambda items, x: items.pop(1)),
    "pop() then append": (
        lambda b, x: (b.pop(), _grow(b, x)),
        lambda items, x: (items.pop(), items.append(x)),
    ),
    "pop(-2) then append": (
        lambda b, x: (b.pop(-2), _grow(b, x)),
        lambda items, x: (items.pop(-2), items.append(x)),
    ),
    "pop() then extend": (
        lambda b, x: (b.pop(), _extend(b, x)),
        lambda items, x: (items.pop(), items.extend([x, x])),
    ),
    "truncate(2) then append": (
        lambda b, x: (b.truncate(2), _grow(b, x)),
        lambda items, x: (items.__delitem__(slice(2, None)), items.append(x)),
    ),
    "truncate(0) then append": (
        lambda b, x: (b.truncate(0), _grow(b, x)),
        lambda items, x: (items.clear(), items.append(x)),
    ),
    "truncate(3) then extend": (
        lambda b, x: (b.truncate(3), _extend(b, x)),
        lambda items, x: (items.__delitem__(slice(3, None)), items.extend([x, x])),
    ),
    "append, pop() then append (pending rows)": (
        lambda b, x: (_grow(b, x), b.pop(), _grow(b, x)),
        lambda items, x: (items.append(x), items.pop(), items.append(x)),
    ),
}

# name -> (items, the item appended by the changes)
COLUMNS: dict[str, tuple[list[Any], Any]] = {
    "ints": ([10, 11, 12, 13], 99),
    "floats (pending numbers)": ([10.0, 11.0, 12.0, 13.0], 99.0),
    "rows (pending rows)": (
        [np.full(2, float(i), np.float32) for i in range(4)],
        np.full(2, 99.0, np.float32),
    ),
    "dicts": (
        [{"a": i, "b": np.full(2, float(i))} for i in range(4)],
        {"a": 99, "b": np.full(2, 99.0)},
    ),
}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return np.asarray(value).tolist()


def _stacked(items: list[Any]) -> Any:
    buf = InfiniteLookbackBuffer(list(items))
    buf.finalize()
    return _plain(buf.get())


def _grown(items: list[Any]) -> InfiniteLookbackBuffer:
    # Leaves grown by appends: arrays the store allocated and owns (finalize may stack a view).
    buf = _numpy_buffer(items[:1], lookback=0)
    for item in items[1:]:
        buf.append(item)
    buf.get()
    return buf


BUILDS: dict[str, Callable[[list[Any]], InfiniteLookbackBuffer]] = {
    "finalized": lambda items: _numpy_buffer(items, lookback=0),
    "grown by appends": _grown,
}

# name -> a read that holds on to the buffer's memory while it changes
HOLDERS: dict[str, Callable[[InfiniteLookbackBuffer], Any]] = {
    "get()": lambda buf: buf.get(),
    "np.asarray(buf)": lambda buf: np.asarray(buf) if buf.store.structure is None else buf.get(),
    "get(slice(1, 3))": lambda buf: buf.get(slice(1, 3)),
    "get(-1)": lambda buf: buf.get(-1),
}


@pytest.mark.parametrize("holder", HOLDERS.values(), ids=list(HOLDERS))
@pytest.mark.parametrize("build", BUILDS.values(), ids=list(BUILDS))
@pytest.mark.parametrize("column", COLUMNS.values(), ids=list(COLUMNS))
@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_pop_and_truncate_leave_earlier_reads_alone(
    change: tuple[Any, Any], column: tuple[Any, Any], build: Any, holder: Any
) -> None:
    items, new = column
    buf = build(items)
    earlier = holder(buf)  # a view (contract §3.1)
    snapshot = _plain(earlier)
    expected = list(items)
    change[1](expected, new)
    change[0](buf, new)
    assert _plain(buf.get()) == _stacked(expected)  # read first: it writes pending items
    assert _plain(earlier) == snapshot


@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_pop_and_truncate_leave_the_callers_array_alone(change: tuple[Any, Any]) -> None:
    mine = np.array([10, 11, 12, 13])
    buf = InfiniteLookbackBuffer(mine)  # wraps the array without copying
    expected = [10, 11, 12, 13]
    change[1](expected, 99)
    change[0](buf, 99)
    assert buf.get().tolist() == expected  # read first: it writes pending items
    assert mine.tolist() == [10, 11, 12, 13]


def test_appends_after_a_truncate_regain_spare_capacity() -> None:
    buf = _numpy_buffer(list(range(100)), lookback=0)
    buf.truncate(50)
    buf.append(7)
    leaf = buf.store.leaves[0]
    assert len(leaf) >= 2 * 50  # grown by capacity: the next appends write in place
    before = leaf
    for value in range(10):
        buf.append(value)
    assert buf.store.leaves[0] is before
    assert buf.get().tolist() == [*range(50), 7, *range(10)]


def test_episode_concat_leaves_earlier_reads_alone() -> None:
    def episode(start: float) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            observations=[start, start + 1.0, start + 2.0],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
        ).to_numpy()

    first = episode(0.0)
    second = first.cut()
    second.add_env_step(5.0, 0, 3.0)
    observations = first.get_observations()
    first.concat_episode(second)
    assert observations.tolist() == [0.0, 1.0, 2.0]
    assert first.get_observations().tolist() == [0.0, 1.0, 2.0, 5.0]


@pytest.mark.parametrize("column", COLUMNS.values(), ids=list(COLUMNS))
@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_pop_and_truncate_without_earlier_reads(
    change: tuple[Any, Any], column: tuple[Any, Any]
) -> None:
    # Nothing else sees the leaves: they may change in place, and must still read right.
    items, new = column
    buf = _grown(items)
    expected = list(items)
    change[1](expected, new)
    change[0](buf, new)
    assert _plain(buf.get()) == _stacked(expected)


@pytest.mark.parametrize("change", ["pop()", "pop(0)", "truncate(3)"])
def test_unseen_leaves_keep_their_spare_capacity(change: str) -> None:
    # Joining chunks pops the last observation, then appends: amortised O(1) when no read of
    # the column is alive.
    buf = _grown([float(i) for i in range(5)])
    leaf = buf.store.leaves[0]
    assert len(leaf) > 5
    del leaf
    if change == "truncate(3)":
        buf.truncate(3)
    else:
        buf.pop(0 if change == "pop(0)" else -1)
    before = buf.store.leaves[0]
    buf.append(9.0)
    buf.get()
    assert buf.store.leaves[0] is before


def test_a_memoryview_of_a_read_is_left_alone() -> None:
    buf = _grown([float(i) for i in range(5)])
    held = memoryview(np.asarray(buf))
    buf.pop()
    buf.append(9.0)
    buf.pop(0)
    assert buf.get().tolist() == [1.0, 2.0, 3.0, 9.0]
    assert held.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_numpyd_column_nothing_else_sees_pops_in_place():
    # to_numpy may give a leaf that views an array made for it alone (a stacked column
    # reshaped): with no read held, a pop shifts it in place, as joining chunks relies on.
    from episodes import SingleAgentEpisode

    episode = SingleAgentEpisode(observations=[np.zeros(4, np.float32)], len_lookback_buffer=0)
    for i in range(1, 6):
        episode.add_env_step(np.full(4, i, np.float32), 1, 0.5)
    episode.to_numpy()
    store = episode.observations.store
    assert len(store.leaves[0]) == 6  # held no longer: a reference would make it shared
    episode.observations.pop()
    assert len(store) == 5 and len(store.leaves[0]) == 6  # shifted in place, room kept
    assert episode.get_observations().tolist() == [[float(i)] * 4 for i in range(5)]

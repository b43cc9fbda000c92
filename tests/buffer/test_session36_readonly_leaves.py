"""Numpy columns over read-only arrays, and padded reads of record-dtype columns.

* A numpy'd buffer keeps a given array without a copy, read-only ones too (frozen arrays,
  ``np.broadcast_to`` and ``np.frombuffer`` views, arrays unpickled from read-only out-of-band
  buffers, as ``ray.get`` gives them). It never writes into such a leaf: the first write into
  stored rows copies it (copy on write, as for a store ``copy.copy`` shares), and ``pop`` and
  ``truncate`` treat it as shared whatever its reference count. So every setter, append,
  extend, pop, truncate, ``cut`` and ``concat_episode`` works on it as on a writeable copy,
  and the given array never changes. ``set`` used to fail part way (a dict column half
  written), and a truncate then an append left a pending row no read could flush.
* ``fill=`` that does not join a record (structured) dtype column is the documented
  ``ValueError``, not numpy's ``DTypePromotionError``.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer.array_batches import join
from episodes.buffer.array_store import ArrayStore
from episodes.structs import data_equal


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def _out_of_band(a: np.ndarray) -> np.ndarray:
    # As ray.get gives arrays: pickle protocol 5 with read-only out-of-band buffers.
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(np.array(a), protocol=5, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=[memoryview(b.raw()).toreadonly() for b in buffers])


#: Read-only forms of an array of at least one row: (name, build from an array).
READ_ONLY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "frozen": _frozen,
    "broadcast_to": lambda a: np.broadcast_to(a[:1], a.shape),
    "frombuffer": lambda a: np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape),
    "pickle 5 out of band": _out_of_band,
}


def _source(kind: str, n: int = 6, shape: tuple[int, ...] = ()) -> np.ndarray:
    a = np.arange(n * int(np.prod(shape)), dtype=np.float64).reshape(n, *shape)
    out = READ_ONLY[kind](a)
    assert not out.flags.writeable
    return out


# ------------------------------------------------------------------ 1. buffer operations

#: name -> an operation on a buffer holding at least 4 float items, with the value it returns.
OPERATIONS: dict[str, Callable[[InfiniteLookbackBuffer], Any]] = {
    "set one": lambda b: b.set(7.0, at_indices=1),
    "set a slice": lambda b: b.set(np.array([7.0, 8.0]), at_indices=slice(1, 3)),
    "set a list": lambda b: b.set([7.0, 8.0], at_indices=[0, 2]),
    "pop first": lambda b: b.pop(0),
    "pop middle": lambda b: b.pop(2),
    "pop last": lambda b: b.pop(),
    "truncate, append": lambda b: (b.truncate(3), b.append(9.0)),
    "truncate, extend": lambda b: (b.truncate(2), b.extend([9.0, 10.0])),
    "pop, append": lambda b: (b.pop(0), b.append(9.0), b.append(10.0)),
    "pop, set": lambda b: (b.pop(0), b.set(7.0, at_indices=0)),
}


def _all_reads(buf: InfiniteLookbackBuffer) -> Any:
    state = buf.get_state()
    return buf.get(), buf.get(0), buf.get(slice(-2, 10), fill=-1.0), np.asarray(buf), state["data"]


@pytest.mark.parametrize("held", [True, False], ids=["array held", "array dropped"])
@pytest.mark.parametrize("kind", list(READ_ONLY))
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_an_operation_on_a_read_only_leaf_works_as_on_a_copy(op: str, kind: str, held: bool):
    source = _source(kind)
    expected_source = source.copy()
    reference = InfiniteLookbackBuffer(source.copy())
    buf = InfiniteLookbackBuffer(source)
    if not held:  # nothing but the buffer references it: pop and truncate chose in-place paths
        del source
    out = OPERATIONS[op](buf)
    assert data_equal(out, OPERATIONS[op](reference))
    assert len(buf) == len(reference)
    assert data_equal(_all_reads(buf), _all_reads(reference))
    buf.append(11.0)
    reference.append(11.0)
    assert data_equal(buf.get(), reference.get())
    if held:
        np.testing.assert_array_equal(source, expected_source)
        assert not source.flags.writeable


@pytest.mark.parametrize("kind", list(READ_ONLY))
def test_set_of_a_dict_item_writes_every_leaf(kind: str):
    # Used to write "pos", then refuse at "rgb": a refused set that changed the column.
    frames = READ_ONLY[kind](np.arange(8, dtype=np.float32).reshape(4, 2))
    pos = np.zeros((4, 2))
    buf = InfiniteLookbackBuffer({"pos": pos, "rgb": frames})
    buf.set({"pos": np.ones(2), "rgb": np.full(2, 5, np.float32)}, at_indices=0)
    item = buf.get(0)
    assert item["pos"].tolist() == [1.0, 1.0] and item["rgb"].tolist() == [5.0, 5.0]
    assert not frames.flags.writeable and frames[0].tolist() != [5.0, 5.0]
    assert pos[0].tolist() == [1.0, 1.0]  # a writeable given leaf is written in place, as ever
    assert buf.get(1)["rgb"].tolist() == frames[1].tolist()


def test_a_truncated_read_only_leaf_takes_appends_and_stays_readable():
    a = np.arange(6.0)
    a.flags.writeable = False
    buf = InfiniteLookbackBuffer(a)
    del a
    buf.truncate(3)
    buf.append(9.0)
    assert buf.get().tolist() == [0.0, 1.0, 2.0, 9.0]
    assert buf.get_state()["data"].tolist() == [0.0, 1.0, 2.0, 9.0]
    assert float(buf.pop()) == 9.0 and len(buf) == 3


# ------------------------------------------------------------------ 2. the helpers


def test_the_helpers_treat_read_only_leaves_as_shared():
    from episodes.buffer.row_drops import unshared, writeable, writeable_leaves

    frozen = _frozen(np.zeros(3))
    assert writeable([np.zeros(2)]) and not writeable([np.zeros(2), frozen])
    assert unshared([np.zeros(3)]) and not unshared([_frozen(np.zeros(3))])
    store = ArrayStore.from_batch({"a": frozen, "b": np.ones(3)})
    given_b = store.leaves[1]
    a, b = writeable_leaves(store)
    assert a.flags.writeable and not np.shares_memory(a, frozen) and b is given_b
    assert len(a) == len(b)  # one capacity for every leaf
    assert writeable_leaves(store)[0] is a  # copied once
    # copy.copy marks both stores shared: each copies the leaves before its first write.
    store = ArrayStore.from_batch(_frozen(np.arange(3.0)))
    clone = copy.copy(store)
    clone.set([0], [5.0])
    store.set([1], [6.0])
    assert clone.data.tolist() == [5.0, 1.0, 2.0] and store.data.tolist() == [0.0, 6.0, 2.0]


# ------------------------------------------------------------------ 3. episodes


def _episode(make: Callable[[np.ndarray], np.ndarray]) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "e",
        observations=InfiniteLookbackBuffer(make(np.arange(8.0, dtype=np.float32).reshape(4, 2))),
        actions=InfiniteLookbackBuffer(make(np.array([0, 1, 0]))),
        rewards=InfiniteLookbackBuffer(make(np.array([1.0, 2.0, 3.0]))),
        extra_model_outputs={"vf": InfiniteLookbackBuffer(make(np.ones(3, np.float32)))},
        infos=[{}] * 4,
        len_lookback_buffer=0,
    )


def _step(ep: SingleAgentEpisode) -> None:
    ep.add_env_step(np.full(2, 5, np.float32), 1, 4.0, extra_model_outputs={"vf": np.float32(2)})


def _concat(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    successor = ep.cut(1)
    _step(successor)
    ep.concat_episode(successor)
    return ep


def _refused_step(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    with pytest.raises(ValueError):  # the action does not fit: the columns written are popped
        ep.add_env_step(np.ones(2, np.float32), [1, 1], 1.0, extra_model_outputs={"vf": 0.0})
    _step(ep)
    return ep


def _pickled(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    ep = _out_of_band_episode(ep)
    ep.set_rewards(new_data=9.0, at_indices=0)
    ep.set_observations(new_data=np.full(2, 9, np.float32), at_indices=-1)
    return _concat(ep)


def _out_of_band_episode(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(ep, protocol=5, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=[memoryview(b.raw()).toreadonly() for b in buffers])


EPISODE_OPERATIONS: dict[str, Callable[[SingleAgentEpisode], Any]] = {
    "concat_episode": _concat,
    "refused step, step": _refused_step,
    "set every column": lambda ep: (
        ep.set_observations(new_data=np.full(2, 7, np.float32), at_indices=0),
        ep.set_actions(new_data=1, at_indices=1),
        ep.set_rewards(new_data=np.array([7.0, 8.0]), at_indices=slice(0, 2)),
        ep.set_extra_model_outputs(key="vf", new_data=7.0, at_indices=2),
        ep,
    )[-1],
    "pickled out of band, set, concat": _pickled,
}


def _state(ep: SingleAgentEpisode) -> dict[str, Any]:
    state = ep.get_state()
    del state["start_time"], state["last_step_time"]  # clocks
    return state


@pytest.mark.parametrize("held", [True, False], ids=["arrays held", "arrays dropped"])
@pytest.mark.parametrize("kind", list(READ_ONLY))
@pytest.mark.parametrize("op", list(EPISODE_OPERATIONS))
def test_an_episode_over_read_only_arrays_works_as_over_copies(op: str, kind: str, held: bool):
    kept: list[np.ndarray] = []

    def make(a: np.ndarray) -> np.ndarray:
        out = READ_ONLY[kind](a)
        if held:
            kept.append(out)
        return out

    ep = _episode(make)
    originals = [a.copy() for a in kept]
    got = EPISODE_OPERATIONS[op](ep)
    expected = EPISODE_OPERATIONS[op](_episode(lambda a: np.array(READ_ONLY[kind](a))))
    assert data_equal(_state(got), _state(expected))
    got.validate()
    for a, before in zip(kept, originals):
        np.testing.assert_array_equal(a, before)


def test_an_episode_unpickled_with_read_only_buffers_takes_setters():
    ep = _episode(np.array)
    ep.to_numpy()
    loaded = _out_of_band_episode(ep)
    assert not loaded.rewards.store.leaves[0].flags.writeable
    loaded.set_rewards(new_data=2.0, at_indices=0)
    assert loaded.get_rewards().tolist() == [2.0, 2.0, 3.0]


# ------------------------------------------------------------------ 4. a property


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.floats(-5, 5, allow_nan=False)),
        st.tuples(st.just("extend"), st.lists(st.floats(-5, 5, allow_nan=False), max_size=3)),
        st.tuples(st.just("set"), st.integers(-8, 8), st.floats(-5, 5, allow_nan=False)),
        st.tuples(st.just("set slice"), st.integers(0, 8), st.integers(0, 8)),
        st.tuples(st.just("pop"), st.integers(-8, 8)),
        st.tuples(st.just("truncate"), st.integers(0, 10)),
    ),
    max_size=12,
)


def _apply(buf: InfiniteLookbackBuffer, op: tuple[Any, ...], nested: bool) -> Any:
    def item(x: Any) -> Any:  # a dict column's item: the same value at both leaves
        return {"r": x, "w": x} if nested else x

    name = op[0]
    if name == "append":
        return buf.append(item(op[1]))
    if name == "extend":
        return buf.extend([item(x) for x in op[1]])
    if name == "set":
        return buf.set(item(op[2]), at_indices=op[1])
    if name == "set slice":
        stop = max(op[1], op[2])
        values = np.arange(op[1], stop, dtype=np.float64) * -1
        return buf.set(item(values), at_indices=slice(op[1], stop))
    if name == "pop":
        return buf.pop(op[1])
    return buf.truncate(op[1])


def _outcome(buf: InfiniteLookbackBuffer, op: tuple[Any, ...], nested: bool) -> Any:
    try:
        return ("ok", _apply(buf, op, nested))
    except (IndexError, ValueError) as error:
        return (type(error).__name__, str(error))


@settings(max_examples=60)
@given(
    kind=st.sampled_from(list(READ_ONLY)),
    nested=st.booleans(),
    held=st.booleans(),
    lookback=st.integers(0, 2),
    ops=OPS,
)
def test_a_read_only_array_behaves_as_a_writeable_copy(kind, nested, held, lookback, ops):
    given_array = _source(kind, 5)
    before = given_array.copy()
    if nested:  # beside a writeable leaf of the buffer's own
        data: Any = {"r": given_array, "w": np.arange(5.0) * 10}
        reference_data: Any = {"r": given_array.copy(), "w": np.arange(5.0) * 10}
    else:
        data, reference_data = given_array, given_array.copy()
    buf = InfiniteLookbackBuffer(data, lookback=lookback)
    reference = InfiniteLookbackBuffer(reference_data, lookback=lookback)
    del data
    kept = given_array if held else None
    del given_array
    for op in ops:
        assert data_equal(_outcome(buf, op, nested), _outcome(reference, op, nested)), op
        assert data_equal(buf.get(), reference.get()), op
        assert len(buf) == len(reference)
    assert data_equal(buf.get_state(), reference.get_state())
    if kept is not None:
        np.testing.assert_array_equal(kept, before)


# ------------------------------------------------------------------ 5. fill= of record columns

RECORD = np.dtype([("x", "f4"), ("y", "i8")])


#: indices -> what a fill of the column's own record dtype (zeros) pads them to.
PADDED = {
    "right": (slice(0, 3), [(1.0, 1), (0.0, 0), (0.0, 0)]),
    "left": (slice(-2, 1), [(0.0, 0), (0.0, 0), (1.0, 1)]),
    "both, step": (slice(-2, 3, 2), [(0.0, 0), (1.0, 1), (0.0, 0)]),
}


@pytest.mark.parametrize("fill", [0, 0.5, "a", True, np.zeros((), RECORD)], ids=repr)
@pytest.mark.parametrize("read", list(PADDED))
def test_a_fill_that_does_not_join_a_record_column_is_a_value_error(read: str, fill: Any):
    buf = InfiniteLookbackBuffer(np.array([(1.0, 1)], dtype=RECORD))
    indices, padded = PADDED[read]
    if isinstance(fill, np.ndarray):  # a fill of the column's record dtype pads it
        out = buf.get(indices, fill=fill, neg_index_as_lookback=True)
        assert out.dtype == RECORD and out.tolist() == padded
        return
    with pytest.raises(ValueError, match=f"fill={fill!r} cannot pad this buffer's items"):
        buf.get(indices, fill=fill, neg_index_as_lookback=True)


def test_join_of_leaves_without_a_common_dtype_is_a_value_error():
    with pytest.raises(ValueError, match="no common dtype"):
        join([np.zeros(1, RECORD), np.zeros(2)])
    assert join([np.zeros(1, RECORD), np.ones(1, RECORD)]).tolist() == [(0.0, 0), (1.0, 1)]

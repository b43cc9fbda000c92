"""Per-call fast paths of the episode's micro-operations give what the general paths give.

- ``InfiniteLookbackBuffer.get`` of one exact ``int`` (no fill, no one-hot) resolves and reads
  the position inline, and ``get()`` (no one-hot) is the store's window; ``set`` of
  one exact ``int`` on a list store writes the list inline (a list column checks no space).
- ``InfiniteLookbackBuffer.extend`` hands an exact array with rows on a numpy'd buffer straight
  to the store's ``extend_batch``; ``batch_leaves`` of such an array is the array itself.
- The buffer's constructor takes a list (and an exact ``int`` lookback) first; setting the space
  of a list-store buffer keeps its store without asking ``respaced``.
- The constructor's generated field assignment skips the check of a value of exactly the class
  the check returns unchanged, and assigns with ``episode.slot = value`` for a class that
  keeps ``object``'s ``__setattr__``.
- ``get_sample_batch`` skips the text-from-numbers walk of a flat array of no text, reads a
  Box, Discrete or MultiDiscrete space as flat without the (ABC) isinstance of Dict and Tuple,
  and takes ids of one exact builtin type as one kind without the walk over type families.

Each property holds the fast path equal to the general one (forced here with a numpy int
index, a list subclass, or the general code itself): the same result, or the same error
(type and message), and the same buffer afterwards. Each ``*_takes_the_fast_path`` test
pins the path itself: it fails where the general code still runs.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode, indexing
from episodes.buffer import InfiniteLookbackBuffer, lookback_buffer, reading, value_fit
from episodes.buffer.plain_arrays import plain_leaves
from episodes.buffer.set_items import extend_items
from episodes.episode import sample_batch, state
from episodes.episode.fields import FIELDS
from episodes.structs import data_equal
from tests.core._helpers import outcome

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _same(a: Any, b: Any) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return a == b
    x, y = a[1], b[1]
    return (
        type(x) is type(y)
        and getattr(x, "dtype", None) == getattr(y, "dtype", None)
        and (x is y or data_equal(x, y))
    )


def _buffer(kind: str, size: int, lookback: int) -> InfiniteLookbackBuffer:
    if kind == "list":
        return InfiniteLookbackBuffer([f"item{i}" for i in range(size)], lookback=lookback)
    if kind == "floats":
        buf = InfiniteLookbackBuffer([float(i) for i in range(size)], lookback=lookback)
    else:  # rows of a Box space, numpy'd, with a pending append
        rows = [np.full(2, i, np.float32) for i in range(size)]
        buf = InfiniteLookbackBuffer(rows, lookback=lookback, space=BOX)
    buf.finalize()
    if size:
        buf.append(buf.get(-1) if kind == "floats" else np.zeros(2, np.float32))
    return buf


KINDS = st.sampled_from(["list", "floats", "rows"])


# ------------------------------------------------------------------------- get and set of an int
@settings(max_examples=400, deadline=None)
@given(
    kind=KINDS,
    size=st.integers(0, 6),
    lookback=st.integers(0, 6),
    index=st.integers(-9, 9),
    neg=st.sampled_from([False, True, np.True_, np.False_]),
)
def test_an_int_read_equals_the_general_read(
    kind: str, size: int, lookback: int, index: int, neg: Any
) -> None:
    buf = _buffer(kind, size, lookback)
    fast = outcome(lambda: buf.get(index, neg_index_as_lookback=neg))
    general = outcome(lambda: buf.get(np.int64(index), neg_index_as_lookback=neg))
    assert _same(fast, general), (fast, general)


@settings(max_examples=300, deadline=None)
@given(
    kind=KINDS,
    size=st.integers(0, 6),
    lookback=st.integers(0, 6),
    fill=st.sampled_from([None, 0, "x"]),
    hot=st.booleans(),
)
def test_an_everything_read_equals_the_general_read(
    kind: str, size: int, lookback: int, fill: Any, hot: bool
) -> None:
    buf = _buffer(kind, size, lookback)
    if kind == "list" and hot:
        buf.space = gym.spaces.Discrete(3)  # items outside it: the one-hot read refuses them
    plan = indexing.SlicePlan(0, buf.lookback, len(buf.store), 0, 1)
    fast = outcome(lambda: buf.get(None, fill=fill, one_hot_discrete=hot))
    general = outcome(lambda: reading.read_plan(buf.store, buf.space, plan, fill, hot))
    if hot and buf.space is None:
        general = (
            "error",
            ValueError,
            "one_hot_discrete=True needs the buffer's space, but none was set",
        )
    assert _same(fast, general), (fast, general)
    if fast[0] == "ok" and isinstance(fast[1], list):
        assert fast[1] is not buf.store.pylist  # a new list, as the window is


@pytest.mark.parametrize("kind", ["list", "rows"])
def test_an_everything_read_words_a_memory_error_as_the_general_read(kind: str) -> None:
    buf = _buffer(kind, 3, 1)

    def no_memory(*args: Any) -> Any:
        raise MemoryError("no room")

    plan = indexing.SlicePlan(0, buf.lookback, len(buf.store), 0, 1)
    with mock.patch.object(type(buf.store), "window", no_memory):
        fast = outcome(buf.get)
        general = outcome(lambda: reading.read_plan(buf.store, buf.space, plan, None, False))
    assert fast == general and "cannot be read: no room" in fast[2]


@settings(max_examples=400, deadline=None)
@given(
    size=st.integers(0, 6),
    lookback=st.integers(0, 6),
    index=st.integers(-9, 9),
    neg=st.sampled_from([False, True, np.True_, 1, None]),
    value=st.sampled_from([7, "x", None, (1, 2), [3]]),
    space=st.sampled_from([None, gym.spaces.Discrete(2)]),  # a list column checks none
)
def test_an_int_write_to_a_list_equals_the_general_write(
    size: int, lookback: int, index: int, neg: Any, value: Any, space: Any
) -> None:
    fast_buf = InfiniteLookbackBuffer(list(range(size)), lookback=lookback, space=space)
    general_buf = InfiniteLookbackBuffer(list(range(size)), lookback=lookback, space=space)
    fast = outcome(lambda: fast_buf.set(value, at_indices=index, neg_index_as_lookback=neg))
    general = outcome(
        lambda: general_buf.set(value, at_indices=np.int64(index), neg_index_as_lookback=neg)
    )
    assert fast == general
    assert fast_buf.data == general_buf.data and fast_buf.lookback == general_buf.lookback


def test_the_episode_setters_name_a_refused_int_write() -> None:
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    with pytest.raises(IndexError, match="cannot set at index 5: out of range"):
        ep.set_rewards(new_data=2.0, at_indices=5)
    ep.set_rewards(new_data=2.0, at_indices=-1)
    assert ep.get_rewards() == [2.0]


# ------------------------------------------------------------------------------------ extend
def _general_extend(buf: InfiniteLookbackBuffer, items: Any) -> None:
    """``extend`` as it was before its array fast path."""
    items = extend_items(buf.store, buf.space, items)
    if isinstance(items, list) or not buf.store.is_numpy:
        buf.store.extend(items)
    else:
        buf.store.extend_batch(items)


ARRAYS = [
    np.zeros((3, 2), np.float32),
    np.ones((2, 2), np.float64),  # another dtype: cast where it fits
    np.full((1, 2), 1e40),  # overflows float32
    np.zeros((0, 2), np.float32),
    np.zeros((2, 3), np.float32),  # another row shape
    np.zeros(2, np.float32),  # rows of no shape
    np.array(["a", "b"]),
    np.array([{"a": 1}], dtype=object),
]


@settings(max_examples=300, deadline=None)
@given(kind=KINDS, size=st.integers(0, 4), items=st.sampled_from(range(len(ARRAYS))))
def test_an_array_extend_equals_the_general_extend(kind: str, size: int, items: int) -> None:
    fast_buf, general_buf = _buffer(kind, size, 0), _buffer(kind, size, 0)
    array = ARRAYS[items]
    with np.errstate(all="ignore"):
        fast = outcome(lambda: fast_buf.extend(array.copy()))
        general = outcome(lambda: _general_extend(general_buf, array.copy()))
    assert fast == general
    assert fast_buf == general_buf


@pytest.mark.parametrize("batch", [*ARRAYS, np.zeros(()), {"x": np.zeros(2)}, (np.zeros(2),)])
def test_batch_leaves_of_an_array_equal_the_general_ones(batch: Any) -> None:
    def general() -> Any:
        arrays, structure = plain_leaves(batch)
        if any(a.ndim == 0 for a in arrays) or len({len(a) for a in arrays}) > 1:
            raise ValueError("refused")
        return arrays, structure

    got, expected = outcome(lambda: value_fit.batch_leaves(batch)), outcome(general)
    assert got[0] == expected[0]
    if got[0] == "ok":
        assert all(a is b for a, b in zip(got[1][0], expected[1][0]))
        assert got[1][1] == expected[1][1] or got[1][1] is expected[1][1]


# ------------------------------------------------------------------------------ constructors
class ListOfItems(list):  # noqa: FURB189 - a list subclass takes the general branch
    pass


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(st.integers(0, 3), max_size=4),
    lookback=st.sampled_from([0, 1, 3, 9, -1, True, 1.0, np.int64(2)]),
    space=st.sampled_from([None, gym.spaces.Discrete(4), "Discrete(4)"]),
)
def test_a_list_buffer_equals_the_general_branch(
    data: list[int], lookback: Any, space: Any
) -> None:
    def state_of(items: list[int]) -> Any:
        buf = InfiniteLookbackBuffer(items, lookback=lookback, space=space)
        buf.space = gym.spaces.Discrete(5)  # a list store is kept as it is
        return buf.get_state(), type(buf.store), buf.store.pylist is items

    fast = outcome(lambda: state_of(list(data)))
    general = outcome(lambda: state_of(ListOfItems(data)))
    assert fast == general


def _reference_assign(episode: Any, values: dict[str, Any]) -> None:
    # The loop the generated code replaces.
    for field in FIELDS:
        value = state.field_value(field, values.get(field.name, field.default))
        object.__setattr__(episode, field.slot, value)


def _numpy_infos() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([1, 2])
    buf.finalize()
    return buf


# Per field: values its check takes unchanged, converts, or refuses.
FIELD_VALUES: dict[str, list[Any]] = {
    "id_": ["a", None, 3],
    "observations": [None, InfiniteLookbackBuffer([0, 1]), [0, 1], _numpy_infos()],
    "infos": [None, InfiniteLookbackBuffer([{}]), _numpy_infos(), [{}]],
    "extra_model_outputs": [None, {}, {"v": InfiniteLookbackBuffer([1.0])}, {"v": [1.0]}, []],
    "is_terminated": [False, True, np.bool_(True), 1, "no"],
    "t_started": [0, 3, np.int64(3), True, 1.5, None],
    "t": [0, 4, np.int64(4), 1.5],
    "start_time": [None, 1, 2.5, np.float32(2.5), "x", float("inf")],
    "custom_data": [None, {}, {"k": [1]}, [1]],
    "observation_space": [None, gym.spaces.Discrete(2)],
}


def _slots(episode: Any, values: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for field in FIELDS:
        value = getattr(episode, field.slot, "<unset>")
        given = value is values.get(field.name)  # taken over, not rebuilt
        if isinstance(value, InfiniteLookbackBuffer):
            value = ("buffer", given, value.finalized or value.get_state()["data"])
        elif isinstance(value, dict):
            value = ("dict", given, sorted(map(str, value)))
        found[field.slot] = (type(value), repr(value))
    return found


def _assigned(assign: Any, values: dict[str, Any]) -> Any:
    episode = SingleAgentEpisode.__new__(SingleAgentEpisode)
    return outcome(lambda: assign(episode, values)), _slots(episode, values)


@settings(max_examples=500, deadline=None)
@given(st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in FIELD_VALUES.items()}))
def test_generated_assignment_equals_the_field_loop(values: dict[str, Any]) -> None:
    expected = _assigned(_reference_assign, values)
    assert _assigned(state.assign_fields, values) == expected
    assert _assigned(state._assign_fields, values) == expected  # the object.__setattr__ one


def test_a_subclass_setattr_is_bypassed_as_before() -> None:
    calls: list[str] = []

    class Watched(SingleAgentEpisode):
        def __setattr__(self, name: str, value: Any) -> None:
            calls.append(name)
            super().__setattr__(name, value)

    episode = Watched.__new__(Watched)
    state.assign_fields(episode, {"id_": "a", "t": 2})
    assert calls == [] and episode.id_ == "a" and episode.t == 2


# ---------------------------------------------------------------------------- sample batches
def _general_column(key: str, value: Any, rows: Any, batched: bool, space: Any) -> Any:
    column = sample_batch._stacked_column(key, value, rows, batched, space)
    if isinstance(value, list) and key != "eps_id":
        sample_batch._check_no_text_from_numbers(key, value, column)
    return column


ROW_VALUES = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.booleans(),
    st.sampled_from(["a", b"b", None, (1, 2), {"k": 1}, np.zeros(2), np.array(["t", "u"])]),
)


@settings(max_examples=500, deadline=None)
@given(
    key=st.sampled_from(["rewards", "obs", "eps_id"]),
    value=st.one_of(st.lists(ROW_VALUES, max_size=4), ROW_VALUES),
    space=st.sampled_from([None, gym.spaces.Discrete(3), gym.spaces.Tuple([BOX])]),
)
def test_a_column_equals_the_general_column(key: str, value: Any, space: Any) -> None:
    rows = len(value) if isinstance(value, list) else None
    with np.errstate(all="ignore"):
        fast = outcome(lambda: sample_batch._as_column(key, value, rows, False, space))
        general = outcome(lambda: _general_column(key, value, rows, False, space))
    assert fast[0] == general[0]
    if fast[0] == "error":
        assert fast == general
    else:
        assert repr(fast[1]) == repr(general[1])


def test_the_flat_space_classes_are_no_nested_ones() -> None:
    # _stacked_column reads these exact classes as flat without the (slow) ABC isinstance.
    assert not any(issubclass(cls, sample_batch._NESTED_SPACES) for cls in sample_batch._FLAT)


def _general_one_kind(ids: list[Any]) -> bool:
    kinds = set()
    for kind in set(map(type, ids)):
        for family in (str, bytes, bool, np.bool_, int, np.integer, float, np.floating):
            if issubclass(kind, family):
                kinds.add({np.bool_: bool, np.integer: int, np.floating: float}.get(family, family))
                break
        else:
            return False
    return len(kinds) <= 1


ID_VALUES = ["a", b"a", 1, 1.5, True, np.int64(1), np.str_("a"), np.float32(1), None, (1,)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ID_VALUES), max_size=4))
def test_one_kind_of_ids_equals_the_general_answer(ids: list[Any]) -> None:
    assert sample_batch._one_kind(ids) == _general_one_kind(ids)


# ------------------------------------------------------------------------ the paths themselves
def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the general path ran")


def test_an_int_set_on_a_list_takes_the_fast_path() -> None:
    buf = InfiniteLookbackBuffer([0, 1, 2], lookback=1)
    with mock.patch.object(indexing, "set_positions", _refuse):
        buf.set(9, at_indices=-1)
    assert buf.get() == [1, 9]


def test_an_int_get_takes_the_fast_path() -> None:
    bufs = [InfiniteLookbackBuffer([0, 1, 2], lookback=1), _buffer("rows", 3, 1)]
    with mock.patch.object(indexing, "resolve_int", _refuse):
        assert bufs[0].get(0) == 1 and bufs[1].get(-1).tolist() == [0.0, 0.0]


def test_an_everything_get_takes_the_fast_path() -> None:
    buf, rows = InfiniteLookbackBuffer([0, 1, 2], lookback=1), _buffer("rows", 2, 1)
    with mock.patch.object(reading, "read_plan", _refuse):
        assert buf.get() == [1, 2] and buf.get(fill=0) == [1, 2]
        assert rows.get().tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_an_array_extend_takes_the_fast_path() -> None:
    buf = _buffer("rows", 2, 0)
    with (
        mock.patch.object(lookback_buffer, "extend_items", _refuse),
        mock.patch.object(value_fit, "plain_leaves", _refuse),
    ):
        buf.extend(np.ones((2, 2), np.float32))
    assert len(buf) == 5


def test_a_list_buffer_takes_the_fast_path() -> None:
    with mock.patch.object(indexing, "as_int", _refuse):
        assert InfiniteLookbackBuffer([0, 1], lookback=5).lookback == 2


def test_a_plain_episode_takes_the_plain_assignment() -> None:
    with mock.patch.object(state, "_assign_fields", _refuse):
        episode = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
    assert len(episode) == 0 and episode.get_rewards(-1) == 1.0


def test_a_number_batch_takes_no_text_walk() -> None:
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with mock.patch.object(sample_batch, "_check_no_text_from_numbers", _refuse):
        batch = episode.get_sample_batch()
    assert batch["rewards"].tolist() == [1.0, 2.0]


def test_ids_of_one_builtin_type_take_the_fast_path() -> None:
    with mock.patch.object(sample_batch, "issubclass", _refuse, create=True):
        assert sample_batch._one_kind(["a", "b"]) and sample_batch._one_kind([1, 2])


def test_a_list_store_keeps_its_store_without_respaced() -> None:
    buf = InfiniteLookbackBuffer([0, 1])
    store = buf.store
    with mock.patch.object(lookback_buffer, "respaced", _refuse):
        buf.space = gym.spaces.Discrete(2)
    assert buf.store is store and buf.space == gym.spaces.Discrete(2)

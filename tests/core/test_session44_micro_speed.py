"""Fast paths of ``get_sample_batch`` and a numpy store's ``extend_batch`` equal the general ones.

- ``SampleBatch`` makes a list column whose first row is a Python number or a plain array
  (beside no space or a flat one) with one ``np.array`` call, keeping it where the general path
  keeps just that array (no text, no objects, no floats after a first int, no leaf arrays);
  and an id column of one string (no trailing NUL) the same way.
- ``data_dict`` cuts a list store's observations and infos (up to the last observation after
  the lookback) directly, without planning the slice read.
- ``ArrayStore.extend_batch`` writes an exact array of a flat column's very dtype and row shape
  without the leaf walk and the misfit checks (nothing to check), pending items first.

Each property holds the fast path equal to the general one (the general code itself, or the
code before the fast path, written out here): the same result or the same error (type and
message), and the same store afterwards. Each ``*_takes_the_fast_path`` test pins the path.
"""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode, indexing
from episodes.buffer import InfiniteLookbackBuffer, array_store, value_fit
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.nesting_errors import nesting_mismatch
from episodes.buffer.view_store import ViewStore
from episodes.episode import sample_batch
from episodes.structs import data_equal, same_nesting
from tests.core._helpers import outcome

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the general path ran")


# --------------------------------------------------------------------------- sample batch columns
def _general_column(key: str, value: Any, rows: Any, batched: bool, space: Any) -> Any:
    column = sample_batch._stacked_column(key, value, rows, batched, space)
    if isinstance(value, list) and key != "eps_id":
        sample_batch._check_no_text_from_numbers(key, value, column)
    return column


FIRST_ROWS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**63, 2**64, -(2**63) - 1]),  # uint64, objects, floats after an int
    st.floats(allow_nan=False),
    st.booleans(),
    st.sampled_from(
        [
            np.zeros(2, np.float32),
            np.arange(3),
            np.array([1, 2]),  # a Tuple item recorded as an array: a tuple beside its space
            np.ones((2, 2)),
            np.array(["t", "u"]),
            np.array([{"a": 1}, None], dtype=object),
            np.float64(1.5),  # an array scalar: no plain row
            np.ma.masked_array([1.0, 2.0], mask=[0, 1]),  # no plain array either
            "a",
        ]
    ),
)
LATER_ROWS = st.one_of(
    FIRST_ROWS,
    st.sampled_from([None, (1, 2), {"k": 1}, [1, 2], 1j, np.bool_(True), np.int8(3), b"b"]),
)
SPACES = st.sampled_from(
    [
        None,
        gym.spaces.Discrete(3),
        BOX,
        gym.spaces.MultiDiscrete([2, 2]),
        gym.spaces.MultiBinary(2),
        gym.spaces.Tuple([BOX]),
        gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Discrete(3)]),
        gym.spaces.Tuple([]),  # an empty Tuple space is falsy: still a nested one
        gym.spaces.Dict({"a": BOX}),
    ]
)


@settings(max_examples=600, deadline=None)
@given(
    key=st.sampled_from(["rewards", "obs", "t"]),
    first=FIRST_ROWS,
    later=st.lists(LATER_ROWS, max_size=3),
    same=st.booleans(),
    rows=st.sampled_from([None, "len", "len+1", 2, 3]),
    batched=st.booleans(),
    space=SPACES,
)
def test_a_plain_list_column_equals_the_general_column(
    key: str, first: Any, later: list[Any], same: bool, rows: Any, batched: bool, space: Any
) -> None:
    value = [first, *([first] * len(later) if same else later)]
    count = {"len": len(value), "len+1": len(value) + 1}.get(rows, rows)
    with np.errstate(all="ignore"):
        fast = outcome(lambda: sample_batch._as_column(key, value, count, batched, space))
        general = outcome(lambda: _general_column(key, value, count, batched, space))
    assert fast[0] == general[0], (fast, general)
    if fast[0] == "error":
        assert fast == general
    else:
        x, y = fast[1], general[1]
        assert type(x) is type(y) and getattr(x, "dtype", None) == getattr(y, "dtype", None)
        assert repr(x) == repr(y) and (x is value) == (y is value)


IDS = [
    ["a", "a", "a"],
    ["a"],
    ["", ""],
    ["a\0", "a\0"],  # a NUL numpy would cut: objects
    ["a", "b"],
    ["a", np.str_("a")],
    [np.str_("a"), "a"],
    ["a", np.array(["a", "b"])],  # an array's == with a string is no bool
    ["a", np.array("a")],
    ["a", 1],
    ["1", 1],
    [b"a", b"a"],
    [("run", 1), ("run", 1)],
    [1, 1],
    [True, 1],
]


@pytest.mark.parametrize("ids", IDS, ids=[repr(i) for i in IDS])
def test_an_id_column_equals_the_general_column(ids: list[Any]) -> None:
    fast = outcome(lambda: sample_batch._as_column("eps_id", ids, len(ids), False))
    general = outcome(lambda: _general_column("eps_id", ids, len(ids), False, None))
    assert fast[0] == general[0] == "ok"
    assert fast[1].dtype == general[1].dtype and repr(fast[1]) == repr(general[1])


def test_plain_columns_take_the_fast_path() -> None:
    with mock.patch.object(sample_batch, "_stacked_column", _refuse):
        assert sample_batch._as_column("rewards", [1.0, 2.0], 2, False).tolist() == [1.0, 2.0]
        assert sample_batch._as_column("actions", [1, 0], 2, False, gym.spaces.Discrete(2)).dtype
        assert sample_batch._as_column("obs", [np.zeros(2)] * 3, 3, False, BOX).shape == (3, 2)
        assert sample_batch._as_column("eps_id", ["ab"] * 2, 2, False).tolist() == ["ab", "ab"]


def test_an_episode_batch_of_numbers_takes_the_fast_path() -> None:
    episode = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=BOX,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    with mock.patch.object(sample_batch, "_stacked_column", _refuse):
        batch = episode.get_sample_batch()
    assert batch["obs"].shape == (2, 2) and batch["t"].tolist() == [0, 1]
    assert batch["eps_id"].tolist() == [episode.id_] * 2


# ---------------------------------------------------------------------- observations but the last
class ListOfItems(list):  # noqa: FURB189 - a list whose slices run out of memory
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            raise MemoryError("no room")
        return super().__getitem__(index)


@settings(max_examples=400, deadline=None)
@given(
    size=st.integers(0, 6),
    lookback=st.integers(0, 7),
    stop=st.integers(-3, 8),
    kind=st.sampled_from(["list", "numpy", "no memory"]),
)
def test_a_read_up_to_equals_the_slice_read(size: int, lookback: int, stop: int, kind: str) -> None:
    items = [{"i": i} for i in range(size)] if kind == "list" else list(range(size))
    buffer = InfiniteLookbackBuffer(
        ListOfItems(items) if kind == "no memory" else items, lookback=lookback
    )
    if kind == "numpy" and size:
        buffer.finalize()
    fast = outcome(lambda: sample_batch._read_to(buffer, stop))
    general = outcome(lambda: buffer.get(slice(None, stop)))
    assert fast[0] == general[0] and type(fast[1]) is type(general[1])
    assert fast == general if fast[0] == "error" else data_equal(fast[1], general[1])
    if isinstance(fast[1], list):
        assert fast[1] is not buffer.store.pylist  # a new list, as the slice read gives


def test_infos_are_cut_where_the_observations_end() -> None:
    # As before: a row per observation but the last, an info appended past them left out.
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    episode.infos.append({"extra": True})
    assert sample_batch.data_dict(episode)["infos"] == [{}, {}]


def test_a_list_episodes_rows_take_the_fast_path() -> None:
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=1
    )
    with mock.patch.object(indexing, "plan_slice", _refuse):
        columns = sample_batch.data_dict(episode)
    assert columns["obs"] == [1] and columns["infos"] == [{}]


# ------------------------------------------------------------------------------- extend_batch
def _before_extend_batch(store: ArrayStore, batch: Any, count: int | None = None) -> None:
    """``ArrayStore.extend_batch`` as it was before its exact-array fast path."""
    arrays, structure = value_fit.batch_leaves(batch)
    n = len(arrays[0]) if arrays else 0
    if count is not None and n != count:
        raise ValueError(
            f"{count} items hold no values a numpy column can store (empty dicts, lists or tuples)"
        )
    if n == 0:
        return
    if not store.typed:
        store._adopt_layout([(a.shape[1:], a.dtype) for a in arrays], structure)
    elif len(arrays) != len(store.leaves) or not same_nesting(store.structure, batch):
        raise nesting_mismatch(store.structure, store.leaves, structure, arrays)
    for column, leaf in zip(store.leaves, arrays):
        same = leaf.dtype == column.dtype and leaf.shape[1:] == column.shape[1:]
        if not (same and len(leaf) == n) and (error := value_fit.batch_misfit(column, leaf, n)):
            store._forget_adopted_layout()
            raise error
    try:
        store._reserve(store.size + n)
        for column, leaf in zip(store._leaves, arrays):
            try:
                value_fit.write_rows(column, slice(store.size, store.size + n), leaf)
            except value_fit.MISFIT_ERRORS as error:
                raise value_fit.misfit(leaf, column, error) from error
    except BaseException:
        store._forget_adopted_layout()
        raise
    store.size += n


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _frozen_with_room() -> ArrayStore:
    store = ArrayStore.from_batch(np.zeros(3))
    store.append(1.0)  # grown: room for 4 more
    _read_only(store.leaves[0])  # numpy refuses the write into the room left
    return store


STORES: dict[str, Any] = {
    "rows": lambda: ArrayStore.from_batch(np.zeros((3, 2), np.float32)),
    "floats": lambda: ArrayStore.from_batch(np.zeros(3)),
    "int8": lambda: ArrayStore.from_batch(np.zeros(2, np.int8)),
    "bools": lambda: ArrayStore.from_batch(np.zeros(2, bool)),
    "objects": lambda: ArrayStore.from_batch(np.array([None, {}], dtype=object)),
    "records": lambda: ArrayStore.from_batch(np.zeros(2, [("x", "f4")])),
    "text": lambda: ArrayStore.from_batch(np.array(["ab", "c"])),
    "untyped": ArrayStore.untyped,
    "empty rows": lambda: ArrayStore.from_batch(np.zeros((0, 2), np.float32)),
    "nested": lambda: ArrayStore.from_batch({"a": np.zeros(2, np.float32)}),
    "tuple": lambda: ArrayStore.from_batch((np.zeros(2), np.zeros(2))),
    "read-only": lambda: ArrayStore.from_batch(_read_only(np.zeros(2))),
    "read-only with room": _frozen_with_room,
}


def _with_spare_room(store: ArrayStore) -> ArrayStore:
    if len(store):
        store.truncate(len(store) - 1)  # room left in the leaves: no growth before the write
    return store


def _with_pending(store: ArrayStore) -> ArrayStore:
    if store.typed and store.structure is None and len(store) and store.leaves[0].flags.writeable:
        store.append(store.get(0))  # numbers and rows of the stored dtype wait in a list
    return store


BATCHES = [
    np.ones((2, 2), np.float32),
    np.ones((2, 2), np.float64),
    np.ones((1, 3), np.float32),
    np.ones(2),
    np.full(2, 1e40),
    np.ones(2, np.int8),
    np.full(2, 300),
    np.ones(2, bool),
    np.zeros((0, 2), np.float32),
    np.zeros(0),
    np.zeros(()),
    np.array([1, None], dtype=object),
    np.ones(2, [("x", "f4")]),
    np.array(["abc", "d"]),
    np.array(["e", "f"]),
    np.zeros((2, 0), np.float32),
]


@settings(max_examples=600, deadline=None)
@given(
    kind=st.sampled_from(sorted(STORES)),
    shape=st.sampled_from(["as built", "spare room", "pending", "shared"]),
    batch=st.sampled_from(range(len(BATCHES))),
    count=st.sampled_from([None, "len", 5]),
)
def test_an_array_extend_batch_equals_the_code_before(
    kind: str, shape: str, batch: int, count: Any
) -> None:
    stores, siblings = [], []
    for _ in range(2):
        store = STORES[kind]()
        store = {"spare room": _with_spare_room, "pending": _with_pending}.get(shape, lambda s: s)(
            store
        )
        siblings.append(copy.copy(store) if shape == "shared" else None)
        stores.append(store)
    given = BATCHES[batch]
    rows = len(given) if count == "len" and given.ndim else (None if count == "len" else count)
    with np.errstate(all="ignore"):
        fast = outcome(lambda: stores[0].extend_batch(given.copy(), rows))
        before = outcome(lambda: _before_extend_batch(stores[1], given.copy(), rows))
    assert fast == before
    for x, y in [stores, siblings] if siblings[0] is not None else [stores]:
        assert len(x) == len(y) and x.typed == y.typed and repr(x.structure) == repr(y.structure)
        assert [leaf.dtype for leaf in x.leaf_views()] == [leaf.dtype for leaf in y.leaf_views()]
        assert data_equal(x.data, y.data)  # (a sibling sharing the rows sees none of the write)


def test_a_view_store_extends_a_copy_on_the_fast_path() -> None:
    block = np.zeros((3, 2), np.float32)
    store = ViewStore.from_batch(block[:, 1])
    with mock.patch.object(array_store, "batch_leaves", _refuse):
        store.extend_batch(np.ones(2, np.float32))
    assert store.data.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0] and not block.any()


def test_an_exact_array_extend_batch_takes_the_fast_path() -> None:
    store = ArrayStore.from_batch(np.zeros((2, 2), np.float32))
    with (
        mock.patch.object(array_store, "batch_leaves", _refuse),
        mock.patch.object(ArrayStore, "_write_batch", _refuse),
    ):
        store.extend_batch(np.full((2, 2), 2, np.float32))  # grown
        store.append(np.ones(2, np.float32))  # pending: written before the next batch
        store.extend_batch(np.full((1, 2), 3, np.float32))  # into the room left
    assert store.data[:, 0].tolist() == [0.0, 0.0, 2.0, 2.0, 1.0, 3.0]


def test_a_refused_fast_write_is_worded_as_the_checked_one() -> None:
    store = _frozen_with_room()
    with pytest.raises(ValueError, match="does not fit a numpy column of dtype float64"):
        store.extend_batch(np.ones(2))
    assert store.data.tolist() == [0.0, 0.0, 0.0, 1.0]

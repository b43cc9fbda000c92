"""Behaviour that hand-made mutants of ``episodes.buffer.array_store``,
``episodes.buffer.list_store``, ``episodes.buffer.set_items``, ``episodes.buffer.row_drops`` and
``episodes.buffer.batch_writes`` showed no test pinned (session 48, second batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
buffers are driven through their getters, setters, ``extend``, ``append``, ``pop``, ``truncate``
and ``finalize`` (the stores through ``items``), and what they give is compared with plain
Python lists kept beside them.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore

# ----------------------------------------------------- a Text column is as wide as its space

TEXT_COLUMNS = [
    # mutant: ListStore.stacked gives an empty Text column typed=False (the first string
    # decides its width, so one longer than the space widens it)
    ("numpy'd before the first item", []),
    ("numpy'd after the first item", ["ab"]),
]


@pytest.mark.parametrize("first", [c[1] for c in TEXT_COLUMNS], ids=[c[0] for c in TEXT_COLUMNS])
def test_a_numpy_text_column_refuses_strings_longer_than_its_space(first: list[str]):
    """A Text(4) column holds 4 characters, numpy'd before its first string or after."""
    buf = InfiniteLookbackBuffer(list(first), space=gym.spaces.Text(4))
    buf.finalize()
    assert buf.get_state()["typed"] is True
    with pytest.raises(ValueError, match="does not fit"):
        buf.append("abcdefgh")
    assert buf.get().tolist() == first
    buf.append("abcd")
    buf.append("x")
    assert buf.get().tolist() == [*first, "abcd", "x"]
    assert buf.get().dtype == np.dtype("<U4")


# --------------------------------------------------------- the stores' items(start, stop)

ITEM_RANGES = [(0, None), (1, 3), (2, 2), (0, 5), (4, None), (3, 4)]


# mutant: ArrayStore.items ignores ``stop`` (every item from ``start`` on)
@pytest.mark.parametrize("start, stop", ITEM_RANGES, ids=[f"{a}:{b}" for a, b in ITEM_RANGES])
def test_both_stores_give_the_items_of_a_range(start: int, stop: int | None):
    """``items(start, stop)`` of a numpy and of a list store are the list's slice."""
    ref = [{"x": float(i), "y": [i, -i]} for i in range(5)]
    stores = [
        ListStore([copy.deepcopy(item) for item in ref]),
        ArrayStore.from_batch({"x": np.arange(5.0), "y": np.array([[i, -i] for i in range(5)])}),
    ]
    for store in stores:
        got = store.items(start, stop)
        assert [{"x": float(g["x"]), "y": list(map(int, g["y"]))} for g in got] == ref[start:stop]


# ------------------------------------------ pop never shifts memory something else holds

WRAPPED = [
    # mutant: unshared() takes a leaf viewing an array that views other memory (a bytearray)
    # as the buffer's own, and pop shifts the rows in place
    ("a view of np.frombuffer", lambda raw: np.frombuffer(raw, np.float64)[:], 6),
    ("np.frombuffer reshaped", lambda raw: np.frombuffer(raw, np.float64).reshape(3, 2), 3),
]
POPS = [0, 1, -1]


@pytest.mark.parametrize("position", POPS, ids=[f"pop({p})" for p in POPS])
@pytest.mark.parametrize("make, rows", [c[1:] for c in WRAPPED], ids=[c[0] for c in WRAPPED])
def test_pop_leaves_the_memory_a_wrapped_array_views_unchanged(make: Any, rows: int, position: int):
    """A buffer over a bytearray's memory pops and appends without writing into that memory."""
    raw = bytearray(np.arange(6.0).tobytes())
    buf = InfiniteLookbackBuffer(make(raw))
    ref = np.arange(6.0).reshape(rows, -1).tolist()
    if rows == 6:
        ref = [row[0] for row in ref]
    assert np.asarray(buf.pop(position)).tolist() == ref.pop(position)
    filler = -1.0 if rows == 6 else [-1.0, -1.0]
    buf.append(np.asarray(filler))
    ref.append(filler)
    assert buf.get().tolist() == ref
    assert np.frombuffer(raw, np.float64).tolist() == list(np.arange(6.0))


# ---------------------------------------------------- a batch of no items for no positions

EMPTY_BATCHES = [
    # mutant: item_list judges a tuple or dict batch against an unknown nesting (no items)
    ("a tuple of empty arrays", (np.zeros(0), np.zeros(0, np.int64))),
    ("a dict holding a tuple of empty arrays", {"a": (np.zeros(0), np.zeros(0))}),
]


@pytest.mark.parametrize("finalized", [False, True], ids=["list mode", "numpy'd"])
@pytest.mark.parametrize("batch", [c[1] for c in EMPTY_BATCHES], ids=[c[0] for c in EMPTY_BATCHES])
def test_an_empty_batch_sets_an_empty_buffer_as_an_empty_list_does(batch: Any, finalized: bool):
    """With no item stored, an empty slice takes a batch of no items, as it takes ``[]``."""
    buf = InfiniteLookbackBuffer()
    if finalized:
        buf.finalize()
    buf.set([], at_indices=slice(0, 0))
    buf.set(batch, at_indices=slice(0, 0))
    buf.set(batch)
    assert len(buf) == 0
    assert list(buf.get()) == []


# ---------------------------------------------------------- arrays of bytes are text

BYTES_ITEMS = [
    # mutant: a bytes ("S") array item is not taken as text (only str ones are)
    ("bytes rows", [np.array([b"ab"]), np.array([b"cd"])], [[b"ab"], [b"cd"]]),
    ("0-d bytes arrays", [np.array(b"ab"), np.array(b"xyz")], [b"ab", b"xyz"]),
    ("bytes rows in dicts", [{"a": np.array([b"ab"])}, {"a": np.array([b"c"])}], [[b"ab"], [b"c"]]),
]


@pytest.mark.parametrize(
    "items, expected", [c[1:] for c in BYTES_ITEMS], ids=[c[0] for c in BYTES_ITEMS]
)
def test_numpy_takes_array_items_of_bytes(items: list[Any], expected: list[Any]):
    """Arrays of bytes are text: a column of them numpy's into a bytes column."""
    buf = InfiniteLookbackBuffer(list(items))
    buf.finalize()
    got = buf.get()
    got = got["a"] if isinstance(got, dict) else got
    assert got.dtype.kind == "S"
    assert got.tolist() == expected


# ------------------------------------- a batch nested like an item whose last part is a tuple

PAIR_SPACE = gym.spaces.Tuple(
    (
        gym.spaces.Box(-9, 9, ()),
        gym.spaces.Tuple((gym.spaces.Discrete(9, start=-4), gym.spaces.Box(-9, 9, ()))),
    )
)
NESTED_LAST = [
    # mutant: _splits_values pairs a batch's last part with no nesting (a tuple there refused)
    ("Tuple items, no space", False, None),
    ("Tuple items, Tuple space", False, PAIR_SPACE),
    ("dicts of Tuple items", True, None),
]


@pytest.mark.parametrize("finalized", [False, True], ids=["list mode", "numpy'd"])
@pytest.mark.parametrize(
    "keyed, space", [c[1:] for c in NESTED_LAST], ids=[c[0] for c in NESTED_LAST]
)
def test_a_batch_nested_like_the_items_sets_them(keyed: bool, space: Any, finalized: bool):
    """A tuple batch whose last part is itself a tuple (as the items') writes item by item."""

    def wrap(item: Any) -> Any:
        return {"p": item} if keyed else item

    ref = [wrap((float(i), (i, float(-i)))) for i in range(3)]
    buf = InfiniteLookbackBuffer(copy.deepcopy(ref), space=None if keyed else space)
    if finalized:
        buf.finalize()
    batch = (np.array([5.0, 6.0]), (np.array([1, 2]), np.array([-1.0, -2.0])))
    buf.set(wrap(batch), at_indices=slice(1, 3))
    ref[1:3] = [wrap((5.0, (1, -1.0))), wrap((6.0, (2, -2.0)))]
    assert _plain([buf.get(i) for i in range(3)]) == _plain(ref)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and 0-d arrays as Python numbers, tuples as lists."""
    if isinstance(value, dict):
        return {key: _plain(part) for key, part in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(part) for part in value]
    return np.asarray(value).tolist()


# --------------------------------------- setting the space of a column its items laid out

RESPACED = [
    # mutant: respaced() rebuilds every empty numpy column from the new space, also one whose
    # layout its items chose (emptied by truncate or pop)
    ("truncated", lambda buf: buf.truncate(0)),
    ("popped", lambda buf: (buf.pop(), buf.pop())),
]


@pytest.mark.parametrize("empty", [c[1] for c in RESPACED], ids=[c[0] for c in RESPACED])
def test_a_new_space_keeps_the_layout_of_an_emptied_numpy_column(empty: Any):
    """A column whose items chose its layout keeps it when its space is set, emptied or not."""
    buf = InfiniteLookbackBuffer(np.zeros((2, 3), np.float32))
    empty(buf)
    buf.space = gym.spaces.Box(-1, 1, (3,), np.float64)
    assert buf.get().shape == (0, 3)
    assert buf.get().dtype == np.float32
    buf.append(np.array([0.5, 0.25, 1.0]))
    assert buf.get().dtype == np.float32
    assert buf.get().tolist() == [[0.5, 0.25, 1.0]]


# ------------------------- a space with a part of no fixed nesting: the first item's nesting

SEQUENCE_PARTS = [
    # mutant: _space_nesting of a Dict is unknown only when every part's is (a Sequence part
    # then stands as a value, and a tuple batch there is refused)
    (
        "Dict with a Sequence part",
        gym.spaces.Dict(
            {"s": gym.spaces.Sequence(gym.spaces.Discrete(3)), "x": gym.spaces.Box(-1, 1, ())}
        ),
        lambda s, x: {"s": s, "x": x},
    ),
    (
        "Tuple with a Sequence part",
        gym.spaces.Tuple((gym.spaces.Sequence(gym.spaces.Discrete(3)), gym.spaces.Box(-1, 1, ()))),
        lambda s, x: (s, x),
    ),
]


@pytest.mark.parametrize(
    "space, make", [c[1:] for c in SEQUENCE_PARTS], ids=[c[0] for c in SEQUENCE_PARTS]
)
def test_a_batch_sets_items_whose_space_has_a_sequence_part(space: Any, make: Any):
    """Without a fixed nesting from the space, the first item's nesting judges the batch."""
    ref = [make((1, 2), 0.5), make((0, 0), 0.0), make((2, 1), -0.5)]
    buf = InfiniteLookbackBuffer(copy.deepcopy(ref), space=space)
    buf.set(
        make((np.array([2, 1]), np.array([0, 2])), np.array([0.25, -0.25])), at_indices=slice(1, 3)
    )
    ref[1:3] = [make((2, 0), 0.25), make((1, 2), -0.25)]
    assert _plain(buf.get()) == _plain(ref)


# ----------------------------------------- extend with rows of another shape is refused

OTHER_ROWS = [
    # mutant: extend's fast path for arrays of the column's dtype skips the row-shape check
    # (numpy broadcasts (n, 1) rows into (n, 3))
    ("(2, 1) rows", np.ones((2, 1))),
    ("(1, 1) rows", np.ones((1, 1))),
    ("(2, 1, 3) rows", np.ones((2, 1, 3))),
]


@pytest.mark.parametrize("batch", [c[1] for c in OTHER_ROWS], ids=[c[0] for c in OTHER_ROWS])
def test_extend_refuses_rows_of_another_shape(batch: np.ndarray):
    """A numpy'd column of (3,) rows refuses a batch of other rows, and is left unchanged."""
    ref = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    buf = InfiniteLookbackBuffer(np.array(ref))
    with pytest.raises(ValueError, match="does not fit"):
        buf.extend(batch)
    assert buf.get().tolist() == ref
    buf.extend(np.full((1, 3), 7.0))
    assert buf.get().tolist() == [*ref, [7.0, 7.0, 7.0]]


# -------------------------------------------------- extend of one 0-d value: a TypeError

ZERO_D = [
    # mutant: a numpy'd buffer takes a 0-d value for a batch (a ValueError, not list mode's
    # TypeError)
    ("np.int64", np.int64(0)),
    ("0-d array", np.array(0.0)),
    ("np.float32", np.float32(1.5)),
]


@pytest.mark.parametrize("finalized", [False, True], ids=["list mode", "numpy'd"])
@pytest.mark.parametrize("value", [c[1] for c in ZERO_D], ids=[c[0] for c in ZERO_D])
def test_extend_refuses_one_zero_d_value_with_a_type_error(value: Any, finalized: bool):
    """One 0-d value is no list of items, in both modes alike, and nothing is appended."""
    buf = InfiniteLookbackBuffer([1.0, 2.0])
    if finalized:
        buf.finalize()
    with pytest.raises(TypeError):
        buf.extend(value)
    assert list(buf.get()) == [1.0, 2.0]

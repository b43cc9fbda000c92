"""Behaviour that hand-made mutants of ``episodes.buffer.array_store``,
``episodes.buffer.list_store``, ``episodes.buffer.set_items``, ``episodes.buffer.row_drops`` and
``episodes.buffer.batch_writes`` showed no test pinned (session 48, fourth batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
buffers are driven through their getters, setters, ``extend``, ``append`` and ``finalize``, and
what they give is compared with plain Python lists kept beside them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.buffer import InfiniteLookbackBuffer

# ------------------------------- items of no fixed layout stay in list mode, even if they stack

NO_LAYOUT = [
    # mutant: ListStore.stacked stacks items all of one class (arrays, floats, ints) whatever
    # the space, so equal-length Sequence items are numpy'd and a longer one is refused later
    (
        "Sequence, equal-length arrays",
        gym.spaces.Sequence(gym.spaces.Discrete(3), stack=True),
        [np.array([1, 2]), np.array([0, 1])],
        np.array([2, 0, 1]),
    ),
    (
        "OneOf, ints",
        gym.spaces.OneOf([gym.spaces.Discrete(3), gym.spaces.Box(0, 5, ())]),
        [1, 2],
        0,
    ),
]


@pytest.mark.parametrize(
    "space, items, later", [c[1:] for c in NO_LAYOUT], ids=[c[0] for c in NO_LAYOUT]
)
def test_items_of_a_space_with_no_fixed_layout_are_not_numpyd(
    space: Any, items: list[Any], later: Any
):
    """finalize refuses such a column and leaves it in list mode, its items as they were."""
    buf = InfiniteLookbackBuffer(list(items), space=space)
    with pytest.raises(ValueError, match="no fixed layout"):
        buf.finalize()
    assert buf.finalized is False
    assert isinstance(buf.get(), list)
    buf.append(later)
    ref = [*items, later]
    assert [np.asarray(x).tolist() for x in buf.get()] == [np.asarray(x).tolist() for x in ref]


# ---------------------- a list holding a 0-d array is no batch laid out as the Tuple items

ZERO_D_PARTS = [
    # mutant: list_batch takes a list of arrays, 0-d ones too, for a batch (and len() of a 0-d
    # array raises a TypeError)
    ("two 0-d arrays", [np.array(5.0), np.array(7)]),
    ("a row, then a 0-d array", [np.array([5.0, 6.0]), np.array(7)]),
    ("a 0-d array, then a row", [np.array(5.0), np.array([7, 8])]),
]


@pytest.mark.parametrize("new", [c[1] for c in ZERO_D_PARTS], ids=[c[0] for c in ZERO_D_PARTS])
def test_a_numpy_tuple_column_refuses_a_list_holding_a_0d_array(new: list[Any]):
    """Two 0-d arrays are two items that are no tuples: refused, and nothing changes."""
    ref = [(0.0, 0), (1.0, 1), (2.0, 2)]
    buf = InfiniteLookbackBuffer(list(ref))
    buf.finalize()
    with pytest.raises(ValueError, match="structure"):
        buf.set(new, at_indices=slice(1, 3))
    assert [(float(a), int(b)) for a, b in (buf.get(i) for i in range(3))] == ref


# ---------------------------- a list batch whose length differs from its part count is no item

LIST_BATCHES = [
    # mutant: _may_be_items takes any list of 1-d arrays for items too (not only a square one,
    # as many arrays as parts, each of that leading length), and refuses it as ambiguous
    ("3 items", slice(0, 3), [np.array([5.0, 6.0, 7.0]), np.array([4, 5, 6])]),
    ("1 item", slice(1, 2), [np.array([5.0]), np.array([4])]),
]


@pytest.mark.parametrize(
    "where, batch", [c[1:] for c in LIST_BATCHES], ids=[c[0] for c in LIST_BATCHES]
)
def test_a_list_batch_of_other_than_two_items_sets_a_pair_column(where: slice, batch: list[Any]):
    """A numpy'd (float, int) column takes a list of two arrays of n != 2 rows as n items."""
    ref = [(0.0, 0), (1.0, 1), (2.0, 2)]
    buf = InfiniteLookbackBuffer(list(ref))
    buf.finalize()
    buf.set(batch, at_indices=where)
    ref[where] = [(float(x), int(k)) for x, k in zip(*batch)]
    assert [(float(a), int(b)) for a, b in (buf.get(i) for i in range(3))] == ref


# --------------------------- list mode: a tuple not nested like the Tuple items is its items

TUPLES_OF_ITEMS = [
    # mutant: extend_items in list mode takes any tuple for a batch where the items are tuples,
    # also one that does not nest like an item
    ("three pairs", ((3.0, 4), (5.0, 6), (7.0, 8))),
    ("two pairs", ((3.0, 4), (5.0, 6))),
    ("one pair", ((3.0, 4),)),
]


@pytest.mark.parametrize(
    "new", [c[1] for c in TUPLES_OF_ITEMS], ids=[c[0] for c in TUPLES_OF_ITEMS]
)
def test_list_mode_extends_pairs_by_a_tuple_of_pairs(new: tuple[Any, ...]):
    """A tuple of (float, int) items appends those items to a list-mode column of such pairs."""
    ref = [(0.0, 0), (1.0, 1)]
    buf = InfiniteLookbackBuffer(list(ref))
    buf.extend(new)
    assert buf.get() == [*ref, *new]


# ---------------------------------- a square list of 2-d arrays is a batch of misfit rows

SQUARE_ROWS = [
    # mutant: _may_be_items without a space takes a square list of 2-d arrays for items too,
    # and refuses it as ambiguous rather than as rows that do not fit the scalar leaves
    ("(2, 1) arrays", [np.zeros((2, 1)), np.zeros((2, 1), np.int64)]),
    ("(2, 3) arrays", [np.zeros((2, 3)), np.zeros((2, 3), np.int64)]),
]


@pytest.mark.parametrize("batch", [c[1] for c in SQUARE_ROWS], ids=[c[0] for c in SQUARE_ROWS])
def test_a_square_list_of_2d_arrays_is_refused_as_rows_that_do_not_fit(
    batch: list[Any],
):
    """A (float, int) column refuses two arrays of two rows each as misfit rows, unchanged."""
    ref = [(1.0, 2), (3.0, 4)]
    buf = InfiniteLookbackBuffer(list(ref))
    buf.finalize()
    with pytest.raises(ValueError, match="does not fit"):
        buf.set(batch, at_indices=slice(0, 2))
    assert [(float(a), int(b)) for a, b in (buf.get(i) for i in range(2))] == ref


# ------------------------------------------------ a dict batch of no values appends nothing

EMPTY_DICTS = [
    # mutant: extend_items in list mode gives back a dict batch of no values (not []), and
    # extend appends its keys
    ("an empty dict part", {"a": {}}),
    ("empty dict and tuple parts", {"a": {}, "b": ()}),
    ("an empty list part", {"a": []}),
]


@pytest.mark.parametrize("finalized", [False, True], ids=["list mode", "numpy'd"])
@pytest.mark.parametrize("batch", [c[1] for c in EMPTY_DICTS], ids=[c[0] for c in EMPTY_DICTS])
def test_extend_by_a_dict_of_no_values_appends_nothing(batch: dict[str, Any], finalized: bool):
    """A dict batch holding no values is no items, in both modes alike."""
    buf = InfiniteLookbackBuffer([{"a": 1}])
    if finalized:
        buf.finalize()
    buf.extend(batch)
    assert len(buf) == 1
    assert int(np.asarray(buf.get(0)["a"])) == 1


# ------------------------------- a dict batch nesting deeper than the items: worded refusals

DEEPER_BATCHES = [
    # mutant: _leaf_order keeps a pairing in which a column leaf takes a nested value, and
    # sorting that pairing raises Python's "'<' not supported" TypeError
    (
        "a tuple at a scalar leaf",
        {"a": (np.array([1.0, 2.0]), np.array([3.0, 4.0])), "b": np.array([5, 6])},
        TypeError,
        "holds a tuple",
    ),
    (
        "a dict at a scalar leaf",
        {
            "a": np.array([1.0, 2.0]),
            "b": {"c": np.array([5, 6]), "d": np.array([7, 8])},
        },
        ValueError,
        "does not fit",
    ),
]


@pytest.mark.parametrize(
    "batch, error, words",
    [c[1:] for c in DEEPER_BATCHES],
    ids=[c[0] for c in DEEPER_BATCHES],
)
def test_a_dict_batch_nested_deeper_than_the_items_is_refused(batch: Any, error: Any, words: str):
    """A numpy'd {"a": float, "b": int} column refuses such a batch in its words, unchanged."""
    ref = [{"a": 0.0, "b": 1}, {"a": 2.0, "b": 3}]
    buf = InfiniteLookbackBuffer([dict(item) for item in ref])
    buf.finalize()
    with pytest.raises(error, match=words):
        buf.set(batch, at_indices=slice(0, 2))
    assert [{k: np.asarray(v).item() for k, v in buf.get(i).items()} for i in range(2)] == ref


# ------------------------------- list mode: a dict batch with a tuple at a value is refused

TUPLE_AT_A_VALUE = [
    # mutant: extend_items in list mode never checks a dict batch for a tuple where the
    # column's items hold one value (it splits the tuple into items' parts)
    ("a tuple of two arrays", {"a": (np.array([1.0, 2.0]), np.array([3.0, 4.0]))}),
    ("a tuple of one array", {"a": (np.array([1.0, 2.0]),)}),
]


@pytest.mark.parametrize("finalized", [False, True], ids=["list mode", "numpy'd"])
@pytest.mark.parametrize(
    "batch", [c[1] for c in TUPLE_AT_A_VALUE], ids=[c[0] for c in TUPLE_AT_A_VALUE]
)
def test_extend_refuses_a_dict_batch_with_a_tuple_at_a_value(batch: Any, finalized: bool):
    """Both modes refuse such a batch with a ValueError, and nothing is appended."""
    buf = InfiniteLookbackBuffer([{"a": 0.5}])
    if finalized:
        buf.finalize()
    with pytest.raises(ValueError):
        buf.extend(batch)
    assert len(buf) == 1
    assert float(np.asarray(buf.get(0)["a"])) == 0.5


# ------------------------- a batch is judged by the space as its items are, one by one

BITS = gym.spaces.MultiBinary(2)
OUT_OF_SPACE = [
    # mutant: the Discrete batch check compares values without asking whether the batch's
    # dtype casts safely to the space's (the item-by-item check refuses such items)
    (
        "uint64 for Discrete(3)",
        gym.spaces.Discrete(3),
        [0, 1],
        np.array([1, 2], np.uint64),
    ),
    (
        "int64 for an int8 Discrete",
        gym.spaces.Discrete(3, dtype=np.int8),
        [0, 1],
        np.array([1, 2], np.int64),
    ),
    # mutant: the Discrete batch check takes start + n (one past the last value) in
    ("n for Discrete(n)", gym.spaces.Discrete(3), [0, 1], np.array([3, 3])),
    (
        "start + n for Discrete(n, start)",
        gym.spaces.Discrete(3, start=-1),
        [0, 1],
        np.array([2, 2]),
    ),  # mutants: the MultiBinary batch check takes any value from 0 to 1 in (0.5 too), or any
    # value from 0 on
    (
        "0.5 for float MultiBinary rows",
        BITS,
        [[0.0, 1.0], [1.0, 0.0]],
        np.array([[0.5, 1.0], [0.5, 0.0]]),
    ),
    ("2 for MultiBinary", BITS, [[0, 1], [1, 0]], np.array([[2, 1], [2, 0]])),
    # mutant: the MultiDiscrete batch check takes nvec (one past the last value) in
    (
        "nvec for MultiDiscrete",
        gym.spaces.MultiDiscrete([3, 3]),
        [[0, 1], [1, 0]],
        np.array([[3, 1], [3, 0]]),
    ),
]


@pytest.mark.parametrize(
    "space, ref, batch", [c[1:] for c in OUT_OF_SPACE], ids=[c[0] for c in OUT_OF_SPACE]
)
def test_set_refuses_a_batch_whose_items_the_space_refuses(
    space: Any, ref: list[Any], batch: np.ndarray
):
    """set of a batch refuses what set of its items one by one refuses, and changes nothing."""
    buf = InfiniteLookbackBuffer([np.asarray(item) for item in ref], space=space)
    buf.finalize()
    for k, item in enumerate(batch):
        with pytest.raises(ValueError, match="not in the buffer's space"):
            buf.set(item, at_indices=k)
    with pytest.raises(ValueError, match="not in the buffer's space"):
        buf.set(batch, at_indices=slice(0, len(batch)))
    assert buf.get().tolist() == ref


# ------------------------------------------------- an empty batch decides no column's layout

EMPTY_FIRST = [
    # mutant: extend_batch goes on with a batch of no rows, whose dtypes then type the column
    ("an int64 array", np.zeros(0, np.int64)),
    ("a dict of an int64 array", {"a": np.zeros(0, np.int64)}),
    ("int64 rows", np.zeros((0, 3), np.int64)),
]


@pytest.mark.parametrize("batch", [c[1] for c in EMPTY_FIRST], ids=[c[0] for c in EMPTY_FIRST])
def test_an_empty_batch_leaves_the_first_item_to_choose_the_layout(batch: Any):
    """A numpy'd buffer with no item yet stays untyped after extend of an empty batch."""
    buf = InfiniteLookbackBuffer()
    buf.finalize()
    buf.extend(batch)
    buf.append(1.5)
    assert buf.get().tolist() == [1.5]
    assert buf.get().dtype == np.float64

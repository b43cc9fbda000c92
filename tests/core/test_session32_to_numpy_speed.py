"""``to_numpy``'s one-class fast path gives what the general path gave.

Items all of exactly one class among arrays, Python floats and ints (a column of observations,
rewards, actions) are scanned once: that scan is the masked-array check (no such item is or
holds a masked array) and tells the stacking their class (floats and ints read by
``np.fromiter``, arrays joined as rows without batch's own type scan). Anything else takes the
general path, which refuses masked arrays as it did.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import episodes.buffer.list_store as list_store
from episodes import SingleAgentEpisode
from episodes.buffer.list_store import ListStore
from episodes.spaces import batch
from episodes.spaces.batching import batch_one_class

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Sub(np.ndarray):
    """An ndarray subclass: no exact array, so the general path judges it."""


def masked(values: Any, mask: Any) -> np.ma.MaskedArray:
    return np.ma.masked_array(values, mask=mask)


def outcome(run: Any) -> tuple[Any, ...]:
    """What a call gives, comparable across paths: the error, or the store's layout and bytes."""
    try:
        store = run()
    except Exception as error:  # noqa: BLE001 - the paths must fail alike, whatever the error
        return ("error", type(error), str(error))
    if isinstance(store, np.ndarray):
        leaves, structure, size, typed = [store], None, len(store), True
    else:
        leaves, structure, size, typed = store.leaves, store.structure, store.size, store.typed
    described = [
        (leaf.dtype.str, leaf.shape, leaf.flags.c_contiguous, type(leaf), _content(leaf))
        for leaf in leaves
    ]
    return ("ok", repr(structure), size, typed, described)


def _content(leaf: np.ndarray) -> Any:
    if leaf.dtype.hasobject:
        return repr(leaf.tolist())
    return leaf.tobytes()


def general(items: list[Any], space: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as patch:
        patch.setattr(list_store, "_one_class_stack", lambda items, space: None)
        return outcome(lambda: ListStore(list(items)).stacked(space))


def fast(items: list[Any], space: Any) -> tuple[Any, ...]:
    return outcome(lambda: ListStore(list(items)).stacked(space))


BOX4 = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SPACES = [
    None,
    BOX4,
    gym.spaces.Box(-np.inf, np.inf, (), np.float32),
    gym.spaces.Discrete(3),
    gym.spaces.MultiDiscrete([2, 3]),
    gym.spaces.MultiBinary(2),
    gym.spaces.Text(4),
    gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)]),
    gym.spaces.Sequence(gym.spaces.Discrete(2)),
]

ODD_ITEMS: list[Any] = [
    1,
    -1,
    2**53 + 1,
    2**63,
    2**64,
    -(2**63) - 1,
    2**70,
    True,
    0.5,
    float("nan"),
    -0.0,
    float("inf"),
    np.float32(1.5),
    np.int64(3),
    "x",
    b"y",
    None,
    [1.0, 2.0],
    (1, 2),
    {"a": 1},
    np.zeros(2),
    np.zeros(3, np.float32),
    np.zeros((2, 2)),
    np.array(2.0),
    np.array([2**63], np.uint64),
    np.array([-1, 2**60], np.int64),
    np.array(["ab", "c"]),
    np.array([1, "a"], dtype=object),
    np.zeros(2, ">f4"),
    np.zeros(2).view(Sub),
    masked([1.0, 2.0], [0, 1]),
    masked([1.0, 2.0], [0, 0]),
    masked(3.0, True),
    [masked([1.0], [1])],
    {"a": masked([1.0], [1])},
]

BASES: list[list[Any]] = [
    [0.25, -1.5, 3.0],
    [1, 2, 3],
    [0, 2**62, -5],
    [np.arange(4, dtype=np.float32) + k for k in range(3)],
    [np.arange(2, dtype=np.int64) + k for k in range(3)],
    [np.array([2**62, 1], np.int64), np.array([3, 4], np.int64)],
    [np.array([2**63 + 1], np.uint64), np.array([-1], np.int64)],
    [np.array(["a", "bc"]), np.array(["d", "e"])],
    [np.zeros((2, 3)), np.ones((2, 3))],
    [np.array(1.0), np.array(2.0)],
    [np.zeros(2, ">f8"), np.ones(2, ">f8")],
    [np.zeros(2), np.zeros(3)],
    [np.zeros((2, 3)), np.zeros((3, 2))],
    [np.zeros(0), np.zeros(0)],
    [np.arange(2.0), np.arange(0.0), np.arange(4.0)],  # as many values as equal rows hold
]


@pytest.mark.parametrize("space", SPACES, ids=repr)
@pytest.mark.parametrize("base", BASES, ids=lambda base: repr(base)[:40])
def test_plain_columns_stack_as_the_general_path(base: list[Any], space: Any, monkeypatch):
    assert fast(base, space) == general(base, space, monkeypatch)


@pytest.mark.parametrize("odd", ODD_ITEMS, ids=lambda item: repr(item)[:30])
@pytest.mark.parametrize("base", BASES[:8], ids=lambda base: repr(base)[:40])
@pytest.mark.parametrize("where", [0, 1, 3])
def test_one_odd_item_anywhere_stacks_as_the_general_path(base, odd, where, monkeypatch):
    items = list(base)
    items.insert(where, odd)
    for space in (None, BOX4, gym.spaces.Discrete(3)):
        assert fast(items, space) == general(items, space, monkeypatch)


@pytest.mark.parametrize("odd", ODD_ITEMS, ids=lambda item: repr(item)[:30])
def test_columns_of_one_odd_class_stack_as_the_general_path(odd, monkeypatch):
    for items in ([odd], [odd, odd]):
        for space in (None, BOX4):
            assert fast(items, space) == general(items, space, monkeypatch)


ATOMS = st.sampled_from(ODD_ITEMS) | st.floats() | st.integers(-(2**66), 2**66)


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(BASES),
    odd=st.lists(st.tuples(st.integers(0, 5), ATOMS), max_size=2),
    space=st.sampled_from(SPACES),
)
def test_mixed_columns_stack_as_the_general_path(base, odd, space):
    items = list(base)
    for where, item in odd:
        items.insert(min(where, len(items)), item)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert fast(items, space) == general(items, space, monkeypatch)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.floats(), min_size=1) | st.lists(st.integers(-(2**66), 2**66), min_size=1))
def test_one_class_batch_is_batch(items):
    assert outcome(lambda: batch_one_class(items, type(items[0]))) == outcome(lambda: batch(items))


@pytest.mark.parametrize("base", BASES, ids=lambda base: repr(base)[:40])
def test_one_class_batch_of_arrays_is_batch(base):
    assert outcome(lambda: batch_one_class(base, type(base[0]))) == outcome(lambda: batch(base))


MASKED_REFUSALS = [
    ([1.0, 2.0, masked(3.0, True)], "item 2 of 3"),
    ([masked(3.0, True), 1.0], "item 0 of 2"),
    ([np.zeros(2), masked([1.0, 2.0], [0, 1])], "item 1 of 2"),
    ([masked([1.0, 2.0], [0, 1]), masked([1.0, 2.0], [0, 0])], "item 0 of 2"),
    ([1, 2, [masked([1.0], [1])]], "item 2 of 3"),
    ([{"a": 1}, {"a": masked([1.0], [1])}], "item 1 of 2"),
]


@pytest.mark.parametrize(("items", "where"), MASKED_REFUSALS)
def test_masked_arrays_are_refused_as_before(items, where):
    with pytest.raises(ValueError, match=rf"^{where}: a numpy masked array with masked entries"):
        ListStore(list(items)).stacked(None)


def test_plain_columns_take_one_type_scan(monkeypatch):
    # The one-class scan is the masked-array check: the separate scan runs only for columns
    # of other classes (here none of the episode's: arrays, ints and floats).
    calls: list[int] = []
    check = list_store.check_items_unmasked

    def counted(items: list[Any]) -> None:
        calls.append(len(items))
        check(items)

    monkeypatch.setattr(list_store, "check_items_unmasked", counted)
    episode = SingleAgentEpisode(observation_space=BOX4, action_space=gym.spaces.Discrete(2))
    episode.add_env_reset(np.zeros(4, np.float32))
    for step in range(3):
        episode.add_env_step(
            np.full(4, step, np.float32), step % 2, 0.5, extra_model_outputs={"vf": 1.0}
        )
    episode.to_numpy()
    assert calls == []
    assert episode.get_observations(slice(None)).dtype == np.float32
    assert episode.get_actions().tolist() == [0, 1, 0]
    ListStore([np.float32(1.0), np.float32(2.0)]).stacked(None)  # numpy scalars: scanned
    assert calls == [2]


RAGGED_ROWS = [
    [np.arange(2.0), np.arange(0.0), np.arange(4.0)],  # 6 values: 3 rows of 2 in all
    [np.arange(4.0), np.arange(2.0), np.arange(0.0)],
    [np.zeros((1, 2)), np.zeros((3, 2))],
    [np.zeros(2), np.zeros((1, 2))],
]


@pytest.mark.parametrize("rows", RAGGED_ROWS, ids=lambda rows: repr(rows)[:40])
def test_array_rows_of_other_lengths_are_no_column(rows):
    # However many values they hold together, rows of other lengths do not stack.
    with pytest.raises(ValueError):
        batch(rows)
    with pytest.raises(ValueError, match="do not stack: item 0 has shape"):
        ListStore(list(rows)).stacked(None)

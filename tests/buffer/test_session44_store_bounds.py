"""A store used directly refuses positions and sizes outside its items, and stays unchanged.

The buffer resolves Python indexing and lookback before it calls its store; the stores are a
public protocol too, and on their own a numpy store took ``truncate(len + 1)`` as a longer
store (its last row left-over memory), ``truncate(-1)`` as a negative length, ``pop(-1)``
failed in numpy's broadcasting words, ``pop(True)`` returned the whole column as one item, and
a list store took ``truncate(-1)`` as "drop the last item". Every store now gives the same
``IndexError`` / ``TypeError`` and keeps its items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.buffer.view_store import ViewStore

STORES: dict[str, Callable[[list[int]], Any]] = {
    "list": lambda items: ListStore(list(items)),
    "array": lambda items: ArrayStore.from_batch(np.array(items, dtype=np.int64)),
    # A runner chunk's column: a view of a block's column, copied before any change.
    "view": lambda items: ViewStore.from_batch(
        np.stack([np.array(items, np.int64), -np.array(items, np.int64)], axis=1)[:, 0]
        if items
        else np.zeros(0, np.int64)
    ),
}


def _items(store: Any) -> list[int]:
    return [int(x) for x in store.data]


BAD_CALLS = [
    # name, method, argument, error, words in the message
    ("pop of a negative position", "pop", -1, IndexError, "storage position -1 out of range"),
    ("pop one past the end", "pop", 4, IndexError, "storage position 4 out of range"),
    ("pop far before the start", "pop", -5, IndexError, "storage position -5 out of range"),
    ("pop of a float", "pop", 1.0, TypeError, "must be an integer, got float"),
    ("pop of a bool", "pop", True, TypeError, "got the bool True"),
    ("truncate beyond the items", "truncate", 5, IndexError, "truncate size 5 out of range"),
    ("truncate to a negative size", "truncate", -1, IndexError, "truncate size -1 out of"),
    ("truncate to a float", "truncate", 2.5, TypeError, "size must be an integer"),
    ("truncate to a bool", "truncate", False, TypeError, "got the bool False"),
    ("delete one past the end", "delete", 4, IndexError, "storage position 4 out of range"),
    ("delete a negative position", "delete", -1, IndexError, "storage position -1 out of"),
]


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize(
    ("method", "argument", "error", "words"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_a_store_refuses_and_keeps_its_items(kind, method, argument, error, words):
    store = STORES[kind]([10, 11, 12, 13])
    if not hasattr(store, method):
        pytest.skip(f"a {kind} store has no {method}")
    with pytest.raises(error, match=words):
        getattr(store, method)(argument)
    assert len(store) == 4 and _items(store) == [10, 11, 12, 13]
    if kind == "view":
        assert not store.detached  # still a view of the block: nothing was copied for it


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_refused_truncate_keeps_a_numpy_stores_appends_growing_from_its_items(kind):
    store = STORES[kind]([1, 2])
    with pytest.raises(IndexError):
        store.truncate(3)
    store.append(3)
    assert _items(store) == [1, 2, 3]


@given(
    items=st.lists(st.integers(-100, 100), max_size=6),
    position=st.integers(-8, 8),
    size=st.integers(-8, 8),
)
def test_every_store_pops_and_truncates_like_the_others(items, position, size):
    # The list store is the reference: the numpy and view stores agree with it on every
    # position and size, in what they return, keep and refuse.
    results = {}
    for kind, make in STORES.items():
        store, outcome = make(items), []
        for method, argument in (("pop", position), ("truncate", size)):
            try:
                got = getattr(store, method)(argument)
                outcome.append(None if got is None else int(got))
            except IndexError:
                outcome.append("refused")
            outcome.append(_items(store))
        results[kind] = outcome
    assert results["array"] == results["list"] == results["view"]
    if 0 <= position < len(items):
        assert results["list"][0] == items[position]
    else:
        assert results["list"][:2] == ["refused", items]


def test_the_buffer_keeps_its_python_indexing_above_the_stores():
    # The buffer resolves negative indices (lookback included) before the store sees them.
    for finalized in (False, True):
        buf = InfiniteLookbackBuffer([0, 1, 2, 3], lookback=1)
        if finalized:
            buf.finalize()
        assert int(buf.pop(-1)) == 3 and int(buf.pop(0)) == 0
        assert [int(x) for x in buf.get()] == [1, 2] and buf.lookback == 0
        buf.truncate(1)
        assert [int(x) for x in buf.get()] == [1]

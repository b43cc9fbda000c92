"""The store protocol: the list, numpy and view stores answer every operation alike.

Drawn operation sequences (append, extend, extend_from, set, pop, truncate, copy_range, and
the reads get / window / gather / items) run on all three stores; after every step their items
agree (the list store's as given, the others' as arrays).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.buffer.view_store import ViewStore

ROW = 3


def _row(value: float) -> np.ndarray:
    return np.full(ROW, value, np.float32)


def _stores(initial: list[float]) -> list:
    rows = [_row(v) for v in initial]
    block = np.stack(rows) if rows else np.zeros((0, ROW), np.float32)
    wide = np.repeat(block[:, None], 2, axis=1)  # a [T, 2 envs, ROW] block; we view env 1
    return [
        ListStore(list(rows)),
        ArrayStore.from_batch(block.copy()),
        ViewStore.from_batch(wide[:, 1]),
    ]


def _as_rows(items) -> list[list[float]]:
    return [np.asarray(x).tolist() for x in items]


values = st.integers(-50, 50).map(float)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), values),
        st.tuples(st.just("extend"), st.lists(values, min_size=1, max_size=3)),
        st.tuples(st.just("extend_from"), st.integers(0, 4)),
        st.tuples(st.just("set"), st.integers(0, 20), values),
        st.tuples(st.just("pop"), st.integers(0, 20)),
        st.tuples(st.just("truncate"), st.integers(0, 20)),
        st.tuples(st.just("copy_range"), st.integers(0, 20), st.integers(0, 20)),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(values, min_size=1, max_size=6), operations)
def test_stores_agree(initial: list[float], ops: list[tuple]) -> None:
    stores = _stores(initial)
    for op in ops:
        size = len(stores[0])
        name = op[0]
        if name == "append":
            for s in stores:
                s.append(_row(op[1]))
        elif name == "extend":
            for s in stores:
                s.extend([_row(v) for v in op[1]])
        elif name == "extend_from":
            source = ListStore([_row(100.0 + k) for k in range(4)])
            for s in stores:
                s.extend_from(source, min(op[1], 4))
        elif name == "set" and size:
            for s in stores:
                s.set([op[1] % size], [_row(op[2])])
        elif name == "pop" and size:
            popped = [np.asarray(s.pop(op[1] % size)).tolist() for s in stores]
            assert popped[0] == popped[1] == popped[2]
        elif name == "truncate":
            for s in stores:
                s.truncate(min(op[1], size))
        elif name == "copy_range":
            a, b = sorted((min(op[1], size), min(op[2], size)))
            copies = [s.copy_range(a, b) for s in stores]
            assert [type(c) is not ListStore for c in copies] == [False, True, True]
            expected = _as_rows(copies[0].items(0))
            assert all(_as_rows(c.items(0)) == expected for c in copies)
        _check_reads(stores)


def _check_reads(stores: list) -> None:
    size = len(stores[0])
    assert all(len(s) == size for s in stores)
    expected = _as_rows(stores[0].items(0))
    for s in stores[1:]:
        assert _as_rows(s.items(0)) == expected
        assert np.asarray(s.data).tolist() == expected
    if size:
        positions = np.array([size - 1, 0, size // 2])
        for s in stores:
            picked = [expected[p] for p in positions]
            assert _as_rows([s.get(p) for p in positions.tolist()]) == picked
            assert _as_rows(s.gather(positions)) == picked
            assert _as_rows(s.window(0, size)) == expected

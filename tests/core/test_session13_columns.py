"""Numpy columns of objects (session 13 hunt): object rows survive appends.

A row of Python objects appended to a finalized column took the "row of the stored dtype" fast
path, which keeps the row's bytes (pointers, for objects); the next read failed to rebuild them
and lost every pending row. A flush that fails keeps its rows pending.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer import array_store

# Box checks of Python lists defer to gymnasium, which warns that it casts them.
pytestmark = pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")

# ----------------------------------------------------------------------------- object rows
_PAIR = np.dtype([("a", object), ("b", np.float64)])
_PLAIN_PAIR = np.dtype([("a", np.int32), ("b", np.float64)])


def _objects(*values: object) -> np.ndarray:
    row = np.empty(len(values), object)
    row[:] = values
    return row


def _record(dtype: np.dtype, values: list[tuple[object, float]]) -> np.ndarray:
    row = np.empty(len(values), dtype)
    for i, value in enumerate(values):
        row[i] = value
    return row


# Rows of one column, each appended after the column is finalized.
OBJECT_ROWS = {
    "object row": [_objects(None, 1), _objects("a", None), _objects(2.5, "b")],
    "nested objects in cells": [
        _objects({"k": [1, 2]}, (3,)),
        _objects([None], {"z": "w"}),
    ],
    "2-d object rows": [
        np.array([[None, 1], ["x", 2.0]], dtype=object),
        np.array([[{}, ()], [[], "y"]], dtype=object),
    ],
    "structured with an object field": [
        _record(_PAIR, [("s", 1.0), (None, 2.0)]),
        _record(_PAIR, [([1], 3.0), ({"d": 1}, 4.0)]),
    ],
    "structured without objects (bytes fast path)": [
        _record(_PLAIN_PAIR, [(1, 1.0), (2, 2.0)]),
        _record(_PLAIN_PAIR, [(3, 3.0), (4, 4.0)]),
    ],
}


def _assert_rows(stored: np.ndarray, rows: list[np.ndarray]) -> None:
    assert stored.dtype == rows[0].dtype and len(stored) == len(rows)
    for got, want in zip(stored, rows):
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("rows", OBJECT_ROWS.values(), ids=list(OBJECT_ROWS))
@pytest.mark.parametrize("start", ["empty", "first row"])
def test_rows_of_objects_append_to_a_finalized_buffer_and_read_back(rows, start):
    buf = InfiniteLookbackBuffer([] if start == "empty" else [rows[0].copy()])
    buf.finalize()
    for row in rows[len(buf) :]:
        buf.append(row.copy())
    _assert_rows(buf.get(), rows)
    _assert_rows(buf.get(), rows)  # and again: a read leaves nothing behind
    _assert_rows(InfiniteLookbackBuffer.from_state(buf.get_state()).get(), rows)


def test_rows_of_objects_under_a_dict_append_and_read_back():
    rows = [{"x": _objects(None, 1)}, {"x": _objects("a", [2])}, {"x": _objects((), {})}]
    buf = InfiniteLookbackBuffer(rows[:1])
    buf.finalize()
    for row in rows[1:]:
        buf.append(row)
    assert [r.tolist() for r in buf.get()["x"]] == [r["x"].tolist() for r in rows]


def test_object_extra_outputs_of_a_numpy_episode_read_back():
    ep = SingleAgentEpisode()
    ep.add_env_reset(0.0)
    ep.to_numpy()
    given = [_objects("a", None), _objects("b", None), _objects(None, {"c": 1})]
    for i, value in enumerate(given):
        ep.add_env_step(float(i + 1), 0, 0.0, extra_model_outputs={"k": value})
    _assert_rows(ep.get_extra_model_outputs("k"), given)
    ep.validate()


def test_a_flush_that_fails_keeps_its_pending_rows(monkeypatch):
    rows = [np.full(2, float(i)) for i in range(4)]
    buf = InfiniteLookbackBuffer([rows[0]])
    buf.finalize()
    for row in rows[1:]:
        buf.append(row)  # float64 rows of the stored shape wait as bytes

    def failing(*args, **kwargs):
        raise MemoryError("no memory for the pending rows")

    with monkeypatch.context() as patch:
        patch.setattr(array_store.np, "frombuffer", failing)
        with pytest.raises(MemoryError):
            buf.get()
    assert len(buf) == 4
    assert buf.get().tolist() == [row.tolist() for row in rows]

"""``buf.lookback = n`` is checked as the constructor's ``lookback`` (contract §2.2, §8.1)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

CASES: dict[str, tuple[Any, Any]] = {
    # name: (assigned value, lookback after it, or the error and its words)
    "a smaller one": (0, 0),
    "a numpy int": (np.int64(2), 2),
    "beyond the data: cut down": (10, 4),
    "negative": (-1, (ValueError, "lookback must be >= 0, got -1")),
    "a float": (1.5, (TypeError, r"lookback must be an int, got float \(1.5\)")),
    "a bool": (True, (TypeError, "lookback must be an int")),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("case", list(CASES))
def test_assignments_follow_the_constructor(case: str, numpy: bool) -> None:
    value, expected = CASES[case]
    buf = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1)
    if numpy:
        buf.finalize()
    if isinstance(expected, tuple):
        error, words = expected
        with pytest.raises(error, match=words):
            buf.lookback = value
        expected = 1  # unchanged
    else:
        buf.lookback = value
        assert type(buf.lookback) is int
    assert buf.lookback == expected
    assert len(buf) == 4 - expected
    assert [int(x) for x in buf.get()] == [1, 2, 3, 4][expected:]


def test_pickles_and_copies_keep_the_lookback() -> None:
    buf = InfiniteLookbackBuffer([1, 2, 3], lookback=2)
    back = pickle.loads(pickle.dumps(buf))
    assert (back.lookback, back.get()) == (2, [3])
    assert InfiniteLookbackBuffer.from_state(buf.get_state()).lookback == 2

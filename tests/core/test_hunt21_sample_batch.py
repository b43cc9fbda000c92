"""SampleBatch row counts skip number columns, as RLlib's count does."""

from __future__ import annotations

from typing import Any

import pytest

from episodes import SampleBatch

COUNTS: dict[str, tuple[dict[str, Any], int]] = {
    "only a number": ({"a": 5}, 0),
    "number first": ({"a": 5, "b": [1, 2]}, 2),
    "number rewards": ({"rewards": 1.0, "obs": [1, 2]}, 2),
    "number beside nested": ({"gamma": 0.9, "obs": {"x": [[1, 2], [3, 4], [5, 6]]}}, 3),
}


@pytest.mark.parametrize("case", list(COUNTS))
def test_number_columns_count_no_rows(case: str) -> None:
    columns, rows = COUNTS[case]
    batch = SampleBatch(columns)
    assert len(batch) == batch.count == rows
    assert repr(batch) == f"SampleBatch(count={rows}, keys={list(columns)})"

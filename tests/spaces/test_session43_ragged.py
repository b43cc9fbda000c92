"""``batch`` of items whose shapes differ names the shapes, not numpy's inhomogeneous words."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes.spaces import batch

CASES = [
    (
        "arrays",
        [np.zeros(2), np.zeros(3)],
        r"^Cannot batch items of differing shapes: \(2,\), \(3,\)$",
    ),
    (
        "scalar then array",
        [1.0, np.zeros(2)],
        r"^Cannot batch items of differing shapes: \(\), \(2,\)$",
    ),
    (
        "three shapes, repeats named once",
        [np.zeros(2), np.zeros(2), np.zeros((2, 2)), np.zeros(3)],
        r"^Cannot batch items of differing shapes: \(2,\), \(2, 2\), \(3,\)$",
    ),
    (
        "a Dict leaf",
        [{"a": np.zeros(2)}, {"a": np.zeros(3)}],
        r"differing structure or shape: a leaf's shapes differ: \(2,\), \(3,\)$",
    ),
    (
        "a Tuple leaf",
        [(1, np.zeros((2, 1))), (2, np.zeros((1, 2)))],
        r"a leaf's shapes differ: \(2, 1\), \(1, 2\)$",
    ),
]


@pytest.mark.parametrize(("items", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_differing_shapes_are_named(items: list[Any], words: str) -> None:
    with pytest.raises(ValueError, match=words) as caught:
        batch(items)
    assert "inhomogeneous" not in str(caught.value)


def test_equal_shapes_still_stack() -> None:
    out = batch([{"a": np.zeros(2)}, {"a": np.ones(2)}])
    assert out["a"].tolist() == [[0.0, 0.0], [1.0, 1.0]]

"""native_leaves makes every leaf of a nested batch native, big-endian record subarrays too."""

from __future__ import annotations

import numpy as np
import pytest

from episodes.buffer.plain_arrays import is_native, native_leaves

RECORD_OF_SUBARRAYS = np.dtype([("a", ">f4", (2,))])  # numpy's isnative says True for it

CASES = {
    # name -> the big-endian leaf, placed flat and inside a dict and a tuple
    "plain big-endian float": np.arange(3, dtype=">f4"),
    "big-endian 2-d int": np.arange(6, dtype=">i4").reshape(2, 3),
    "record of big-endian subarrays": np.array([([1.0, 2.0],), ([3.0, 4.0],)], RECORD_OF_SUBARRAYS),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nesting", ["flat", "dict", "tuple"])
def test_every_leaf_comes_out_native_with_its_values(case: str, nesting: str) -> None:
    leaf = CASES[case]
    assert not is_native(leaf.dtype)
    batch = {"flat": leaf, "dict": {"x": leaf, "n": np.ones(2)}, "tuple": (np.ones(2), leaf)}[
        nesting
    ]
    out = native_leaves(batch)
    got = {"flat": lambda o: o, "dict": lambda o: o["x"], "tuple": lambda o: o[1]}[nesting](out)
    assert is_native(got.dtype)
    assert (got == leaf.astype(got.dtype)).all()

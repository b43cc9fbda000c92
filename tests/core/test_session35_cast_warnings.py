"""NaN or inf as numpy floats, written into an int or bool column, are refused without a warning.

numpy warns "invalid value encountered in cast" when it casts them, before the column's check
refuses the value; where warnings are errors that warning replaced the refusal's ValueError.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

BAD = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "huge": 1e40}
WRITES = {
    "set-array": lambda buf, v: buf.set(np.array([v, 1.0]), at_indices=slice(0, 2)),
    "set-one-numpy-float": lambda buf, v: buf.set(np.float64(v), at_indices=0),
    "append-numpy-float": lambda buf, v: buf.append(np.float64(v)),
    "extend-array": lambda buf, v: buf.extend(np.array([1.0, v])),
}


@pytest.mark.parametrize("value", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
@pytest.mark.parametrize("dtype", [np.uint8, np.uint64, np.int8, np.int64, np.bool_])
def test_nan_or_inf_into_ints_is_a_value_error_not_a_warning(value, write, dtype):
    buffer = InfiniteLookbackBuffer(np.zeros(3, dtype), lookback=1)
    before = buffer.get_state()["data"].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError):
            write(buffer, value)
    np.testing.assert_array_equal(buffer.get_state()["data"], before)

"""A padded slice too long to read names the items the read would return (after its step)."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

CASES = {
    # name: (slice, items the read would return)
    "step 2 from 0": (slice(0, 2**63 - 3, 2), -(-(2**63 - 3) // 2)),
    "step 1 from 0": (slice(0, 2**63 - 3), 2**63 - 3),
    "step 3 from far left": (slice(-(2**62) - 9, 2, 3), -(-(2**62 + 8) // 3)),
}


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize(("index", "count"), CASES.values(), ids=CASES)
def test_a_slice_too_long_names_its_result_length(mode: str, index: slice, count: int) -> None:
    data = [10, 11, 12, 13, 14]
    buf = InfiniteLookbackBuffer(data if mode == "list" else np.array(data), lookback=2)
    with pytest.raises(MemoryError, match=f"a slice of {count} items") as caught:
        buf.get(index, fill=0)
    assert not str(caught.value).endswith(": ")  # no dangling colon where no reason follows
    assert buf.get(slice(None)) is not None and len(buf) == 3  # the buffer is as it was

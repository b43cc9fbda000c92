"""One-hot and filled reads, found by a one-hot hunt; every read form must agree.

* A uint64 item at or above 2**63 is out of a Discrete space's range in reads of any length
  (it wrapped into a valid slot, with a negative start, in reads of more than 8 items).
* Items numpy would stack as floats (an int64 beside a uint64) are encoded exactly.
* ``one_hot_discrete=True`` changes the discrete leaves only: a padded numpy read keeps the
  other leaves' stored dtype, as without it.
* A one-hot read no array holds is a ``MemoryError`` on every path (numpy's own ``ValueError``
  read as a bad value), empty reads included.
* A stepped filled slice is limited by the items it returns, not by its unstepped length.
* An int beyond 64 bits is out of range, not "no integer".
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.spaces import one_hot

READS = {
    "int": 0,
    "list of 10": list(range(10)),
    "slice of 2": slice(0, 2),
    "slice of 10": slice(0, 10),
    "negative step": slice(None, None, -1),
}


def _buffer(items, space, numpyd):
    buf = InfiniteLookbackBuffer(list(items), space=space)
    if numpyd:
        buf.finalize()
    return buf


@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("read", list(READS))
def test_a_uint64_beyond_int64_is_out_of_range_in_every_read(read, numpyd):
    items = [np.uint64(2**64 - 1)] + [np.uint64(0)] * 9
    buf = _buffer(items, gym.spaces.Discrete(3, start=-1), numpyd)
    with pytest.raises(ValueError, match="out of range"):
        buf.get(READS[read], one_hot_discrete=True)


@pytest.mark.parametrize("read", list(READS))
def test_ints_numpy_would_round_as_floats_are_encoded_exactly(read):
    start = 2**60
    items = [np.int64(start + 1)] * 9 + [np.uint64(start + 2)]
    got = InfiniteLookbackBuffer(items, space=gym.spaces.Discrete(3, start=start)).get(
        READS[read], one_hot_discrete=True
    )
    rows = [got] if read == "int" else list(got)
    expected = [[0.0, 1.0, 0.0]] * 9 + [[0.0, 0.0, 1.0]]
    if read == "negative step":
        expected = expected[::-1]
    assert [np.asarray(row).tolist() for row in rows] == expected[: len(rows)]


def test_one_hot_reads_keep_the_other_leaves_stored_dtype():
    space = gym.spaces.Dict(
        {"b": gym.spaces.Box(-np.inf, np.inf, (), np.float32), "d": gym.spaces.Discrete(2)}
    )
    buf = _buffer([{"b": np.int64(2**53 + 1), "d": 1}] * 2, space, True)
    for index in (slice(-1, 2), [-1, 0]):
        plain = buf.get(index, fill=0, neg_index_as_lookback=True)
        encoded = buf.get(index, fill=0, neg_index_as_lookback=True, one_hot_discrete=True)
        assert encoded["b"].dtype == plain["b"].dtype == np.int64
        assert (
            encoded["b"].tolist()
            == plain["b"].tolist()
            == [0, 2**53 + 1, 2**53 + 1][: len(plain["b"])]
        )
        assert encoded["d"].dtype == np.float32 and encoded["d"][0].tolist() == [0.0, 0.0]


HUGE_READS = {
    **READS,
    "empty slice": slice(1, 1),
    "filler": 5,
}


@pytest.mark.parametrize("read", list(HUGE_READS))
def test_a_one_hot_read_no_array_holds_is_a_memory_error(read):
    buf = InfiniteLookbackBuffer([0, 1], space=gym.spaces.Discrete(2**61))
    with pytest.raises(MemoryError, match="do not fit in one array"):
        buf.get(HUGE_READS[read], one_hot_discrete=True, fill=0)
    with pytest.raises(MemoryError):
        one_hot(0, gym.spaces.Discrete(2**61))


@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
def test_a_stepped_filled_slice_counts_the_items_it_returns(numpyd):
    buf = _buffer([1, 2, 3], None, numpyd)
    forward = buf.get(slice(0, 10**30, 10**29), fill=0)
    backward = buf.get(slice(10**30 - 1, -1, -(10**29)), fill=0)
    assert list(np.asarray(forward)) == [1] + [0] * 9
    assert len(backward) == 10
    with pytest.raises(MemoryError):
        buf.get(slice(0, 10**30), fill=0)


@pytest.mark.parametrize("read", ["int", "list of 10", "negative step"])
def test_an_int_beyond_64_bits_is_out_of_range(read):
    buf = InfiniteLookbackBuffer([2**70] + [0] * 9, space=gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="out of range"):
        buf.get(READS[read], one_hot_discrete=True)


@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("read", list(READS))
def test_a_start_past_int64_encodes_in_reads_of_any_length(read, numpyd):
    start = 2**63 + 5
    space = gym.spaces.Discrete(3, start=start, dtype=np.uint64)
    items = [np.uint64(start + k % 3) for k in range(10)]
    got = _buffer(items, space, numpyd).get(READS[read], one_hot_discrete=True)
    rows = [got] if read == "int" else list(got)
    want = [[float(k % 3 == j) for j in range(3)] for k in range(10)]
    if read == "negative step":
        want = want[::-1]
    assert [np.asarray(row).tolist() for row in rows] == want[: len(rows)]

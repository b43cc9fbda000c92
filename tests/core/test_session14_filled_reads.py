"""A filled index read where no index holds an item: one fillers batch, as the items stack.

It went item by item (a Python filler per index, then dm-tree per item): 13-17 us an index
for a Dict space, 25-170x the same read with one index in range.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.structs import flatten

SPACES = {
    "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    "discrete": gym.spaces.Discrete(4),
    "dict": gym.spaces.Dict(
        {"b": gym.spaces.Box(0, 5, (3,), np.int64), "a": gym.spaces.Discrete(3)}
    ),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (), np.float64))),
}
READS = {
    "all past the end": [5, 6, 9],
    "all left of the lookback": [-9, -8],
    "both sides": [-9, 7, -8],
}


def _buffer(space, n: int) -> InfiniteLookbackBuffer:
    items = [space.sample() for _ in range(n)]
    buffer = InfiniteLookbackBuffer(items, lookback=0, space=space)
    buffer.finalize()
    return buffer


def _same(a, b) -> None:
    leaves_a, structure_a = flatten(a)
    leaves_b, structure_b = flatten(b)
    assert repr(structure_a) == repr(structure_b)  # key order included
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
@pytest.mark.parametrize("indices", READS.values(), ids=READS.keys())
@pytest.mark.parametrize("one_hot", [False, True], ids=["plain", "one-hot"])
@pytest.mark.parametrize("stored", [0, 3], ids=["empty", "three stored"])
def test_reads_without_a_stored_index_are_the_stacked_fillers(space, indices, one_hot, stored):
    buffer = _buffer(space, stored)
    got = buffer.get(indices, fill=0, one_hot_discrete=one_hot)
    filler = buffer.get(10**6, fill=0, one_hot_discrete=one_hot)
    _same(got, ArrayStore.untyped().from_items([filler] * len(indices)))


def test_the_read_does_not_stack_item_by_item(monkeypatch):
    def one_by_one(self, items):
        raise AssertionError(f"stacked {len(items)} items one by one")

    monkeypatch.setattr(ArrayStore, "from_items", one_by_one)
    got = _buffer(SPACES["dict"], 2).get(list(range(5, 1005)), fill=0)
    assert got["b"].shape == (1000, 3) and got["a"].shape == (1000,)

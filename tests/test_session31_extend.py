"""List-mode ``InfiniteLookbackBuffer.extend`` reads its argument as a numpy'd buffer does.

A batched dict (a numpy'd read of a Dict column) is split into its items, not its keys; a
tuple nested like a Tuple column's item is a batch too; a string or bytes is refused (as a
numpy'd ``extend`` refuses it) and the buffer is left as it was (docs/contract.md 2.3, 3.7;
deviation list-extend-batched-struct).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.structs import data_equal

DICT_SPACE = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-9, 9, (2,), np.float32), "vel": gym.spaces.Box(-9, 9, (), np.float32)}
)
TUPLE_SPACE = gym.spaces.Tuple((gym.spaces.Box(-9, 9, (2,), np.float32), gym.spaces.Discrete(5)))


def _dict_items(n: int = 3) -> list[Any]:
    return [{"pos": np.zeros(2, np.float32) + i, "vel": np.float32(i)} for i in range(n)]


def _tuple_items(n: int = 3) -> list[Any]:
    return [(np.zeros(2, np.float32) + i, i) for i in range(n)]


def _read(items: list[Any], space: gym.Space[Any]) -> Any:
    source = InfiniteLookbackBuffer(list(items), space=space)
    source.finalize()
    return source.get()


@pytest.mark.parametrize(
    ("items", "space"), [(_dict_items(), DICT_SPACE), (_tuple_items(), TUPLE_SPACE)]
)
def test_list_mode_extend_splits_a_batch_into_its_items(items: list[Any], space: Any) -> None:
    batch = _read(items, space)
    listed = InfiniteLookbackBuffer(list(items), space=space)
    listed.extend(batch)
    numpyd = InfiniteLookbackBuffer(list(items), space=space)
    numpyd.finalize()
    numpyd.extend(batch)
    assert len(listed) == len(numpyd) == 6
    for t in range(6):
        assert data_equal(listed.get(t), numpyd.get(t))
    listed.finalize()  # the items stack: each is one item of the space
    assert data_equal(listed.get(), numpyd.get())


def test_list_mode_extend_batch_items_are_a_numpyd_reads_rows_other_sequences_items() -> None:
    listed = InfiniteLookbackBuffer(_dict_items(1), space=DICT_SPACE)
    listed.extend(_read(_dict_items(), DICT_SPACE))
    item = listed.get(3)
    assert set(item) == {"pos", "vel"} and item["pos"].tolist() == [2.0, 2.0]
    assert float(item["vel"]) == 2.0
    # Other sequences stay lists of items.
    buf = InfiniteLookbackBuffer([1])
    buf.extend((2, 3))  # a tuple of items where the items hold one value (RLlib's reading)
    buf.extend(range(4, 6))
    buf.extend(np.array([6, 7]))
    buf.extend({})  # a batch of no items
    assert [int(x) for x in buf.get()] == [1, 2, 3, 4, 5, 6, 7]
    pairs = InfiniteLookbackBuffer(_tuple_items(1), space=TUPLE_SPACE)
    pairs.extend(tuple(_tuple_items(2)))  # a tuple of Tuple items: two items
    assert len(pairs) == 3 and pairs.get(2)[1] == 1


@pytest.mark.parametrize("text", ["ab", b"ab"])
def test_list_mode_extend_refuses_a_string_as_a_numpyd_one_does(text: Any) -> None:
    buffers = [InfiniteLookbackBuffer(["x", "y"] if isinstance(text, str) else [b"x", b"y"])]
    buffers.append(copy.deepcopy(buffers[0]))
    buffers[1].finalize()
    for buf in buffers:  # list mode, then numpy'd
        before = copy.deepcopy(buf.get())
        with pytest.raises(ValueError, match="extend takes a list of items"):
            buf.extend(text)
        assert len(buf) == 2 and data_equal(buf.get(), before)


@pytest.mark.parametrize(
    "bad",
    [
        {"pos": np.zeros((2, 2), np.float32), "vel": np.zeros(3, np.float32)},  # ragged
        {"pos": np.zeros(2, np.float32), "vel": np.float32(0)},  # one item, no batch
        {"pos": (np.zeros((2, 2)), np.zeros((2, 2))), "vel": np.zeros(2)},  # tuple at a leaf
    ],
)
def test_list_mode_extend_refuses_a_dict_that_is_no_batch_of_items(bad: Any) -> None:
    buf = InfiniteLookbackBuffer(_dict_items(), space=DICT_SPACE)
    before = copy.deepcopy(buf.get())
    with pytest.raises(ValueError):
        buf.extend(bad)
    assert len(buf) == 3 and data_equal(buf.get(), before)

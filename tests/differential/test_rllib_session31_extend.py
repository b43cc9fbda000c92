"""Differential pin of session 31: list-mode ``extend`` of a batch or a string.

Each test names its docs/deviations.md tag and asserts both sides. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session31_extend.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OBuf, RBuf  # noqa: E402

pytestmark = pytest.mark.differential

SPACE = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-9, 9, (2,), np.float32), "vel": gym.spaces.Box(-9, 9, (), np.float32)}
)
PAIR = gym.spaces.Tuple((gym.spaces.Box(-9, 9, (2,), np.float32), gym.spaces.Discrete(5)))


def _items(space: Any) -> list[Any]:
    if space is SPACE:
        return [{"pos": np.zeros(2, np.float32) + i, "vel": np.float32(i)} for i in range(3)]
    return [(np.zeros(2, np.float32) + i, i) for i in range(3)]


def _batch(buffer_cls: Any, space: Any) -> Any:
    source = buffer_cls(_items(space), space=space)
    source.finalize()
    return source.get()


@pytest.mark.parametrize("space", [SPACE, PAIR], ids=["dict", "tuple"])
def test_list_mode_extend_of_a_batch(space: Any) -> None:  # "list-extend-batched-struct"
    theirs = RBuf(_items(space), space=space)
    theirs.extend(_batch(RBuf, space))
    assert len(theirs) == 5  # the dict's two keys, or the tuple's two leaf arrays
    if space is SPACE:
        assert theirs.get()[3:] == ["pos", "vel"]
    ours = OBuf(_items(space), space=space)
    ours.extend(_batch(OBuf, space))
    assert len(ours) == 6  # one item per row, as a numpy'd buffer appends them
    ours.finalize()
    assert ours.get(5)[0 if space is PAIR else "pos"].tolist() == [2.0, 2.0]


def test_list_mode_extend_of_a_string() -> None:  # "list-extend-batched-struct"
    theirs = RBuf(["x", "y"])
    theirs.extend("ab")
    assert theirs.get() == ["x", "y", "a", "b"]  # its characters
    ours = OBuf(["x", "y"])
    with pytest.raises(ValueError, match="extend takes a list of items"):
        ours.extend("ab")
    assert ours.get() == ["x", "y"]
    # A tuple of plain items is still the tuple of its items in both.
    theirs, ours = RBuf([1]), OBuf([1])
    theirs.extend((2, 3))
    ours.extend((2, 3))
    assert theirs.get() == ours.get() == [1, 2, 3]

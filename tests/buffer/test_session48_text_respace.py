"""An empty numpy'd Text column takes the width of a Text space set on it later.

A Text column is as wide as its space: numpy'd with ``Text(6)`` it takes six-character strings
before its first item. Numpy'd with ``Text(3)`` and then given ``Text(6)``, it kept the old
width and refused a string the new space allows. A column that holds items keeps its layout.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from episodes import InfiniteLookbackBuffer


def _numpyd(first: int) -> InfiniteLookbackBuffer:
    buffer = InfiniteLookbackBuffer(space=gym.spaces.Text(first))
    buffer.finalize()
    return buffer


def _emptied(first: int) -> InfiniteLookbackBuffer:
    buffer = _numpyd(first)
    buffer.append("a")
    buffer.pop()
    return buffer


@pytest.mark.parametrize("make", [_numpyd, _emptied], ids=["numpyd empty", "emptied by pop"])
@pytest.mark.parametrize(("first", "later"), [(3, 6), (6, 3), (1, 10)])
def test_an_empty_text_column_takes_the_new_spaces_width(make, first: int, later: int) -> None:
    buffer = make(first)
    buffer.space = gym.spaces.Text(later)
    word = "x" * later
    buffer.append(word)
    assert buffer.get(-1) == word
    fresh = InfiniteLookbackBuffer(space=gym.spaces.Text(later))
    fresh.finalize()
    fresh.append(word)
    assert buffer.get_state()["data"].dtype == fresh.get_state()["data"].dtype


def test_a_text_column_holding_items_keeps_its_layout() -> None:
    buffer = _numpyd(3)
    buffer.append("abc")
    dtype = buffer.get_state()["data"].dtype
    buffer.space = gym.spaces.Text(6)
    assert buffer.get(-1) == "abc"
    assert buffer.get_state()["data"].dtype == dtype

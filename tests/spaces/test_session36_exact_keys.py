"""``exact_key``: equal keys imply ``==``, so equal copies of a space skip gymnasium's ``==``.

Chunks unpickled one by one carry their own copy of a space; a conversion compared each copy
with ``==`` (``np.allclose`` on both bounds of every Box), which made 1,000 such chunks cost
three times what chunks sharing one space object cost.
"""

from __future__ import annotations

import copy
import pickle
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings

from episodes.converter.alike import SpaceMatch
from episodes.spaces import exact_key
from episodes.testing.strategies.spaces import spaces

gs = gym.spaces


class LooseBox(gs.Box):
    """A subclass with its own ``==``: it gets no key."""

    def __eq__(self, other):
        return isinstance(other, gs.Box)

    __hash__ = gs.Box.__hash__


def nan_box(shape=(2,)):
    """gymnasium refuses NaN bounds when made, but a space changed (or unpickled) may hold one."""
    box = gs.Box(0.0, 1.0, shape)
    box.low[0] = np.nan
    return box


def nan_high_box():
    box = gs.Box(0.0, 1.0, (2,))
    box.high[1] = np.nan
    return box


BOX = gs.Box(-1.0, 1.0, (3,), np.float32)
CASES = {
    # name: (a, b, keys equal)
    "box copy": (BOX, copy.deepcopy(BOX), True),
    "box other bound": (BOX, gs.Box(-1.0, 2.0, (3,), np.float32), False),
    "box other dtype": (BOX, gs.Box(-1.0, 1.0, (3,), np.float64), False),
    "box other shape": (BOX, gs.Box(-1.0, 1.0, (4,), np.float32), False),
    "box -0.0 vs 0.0": (gs.Box(0.0, 1.0, (2,)), gs.Box(-0.0, 1.0, (2,)), False),
    "int box copy": (gs.Box(0, 255, (2, 2), np.uint8), gs.Box(0, 255, (2, 2), np.uint8), True),
    "discrete copy": (gs.Discrete(3, start=1), gs.Discrete(3, start=1), True),
    "discrete other start": (gs.Discrete(3), gs.Discrete(3, start=1), False),
    "multidiscrete copy": (gs.MultiDiscrete([2, 3]), gs.MultiDiscrete([2, 3]), True),
    "multidiscrete other": (gs.MultiDiscrete([2, 3]), gs.MultiDiscrete([3, 2]), False),
    "multibinary copy": (gs.MultiBinary([2, 2]), gs.MultiBinary([2, 2]), True),
    "multibinary int copy": (gs.MultiBinary(3), gs.MultiBinary(3), True),
    "multibinary 3 vs (3,)": (gs.MultiBinary(3), gs.MultiBinary((3,)), False),
    "text copy": (gs.Text(5), gs.Text(5), True),
    "text other length": (gs.Text(5), gs.Text(6), False),
    "dict copy": (
        gs.Dict({"a": BOX, "b": gs.Discrete(2)}),
        gs.Dict({"a": BOX, "b": gs.Discrete(2)}),
        True,
    ),
    "dict other part": (gs.Dict({"a": BOX}), gs.Dict({"a": gs.Discrete(2)}), False),
    "tuple copy": (gs.Tuple([BOX, gs.Discrete(2)]), gs.Tuple([BOX, gs.Discrete(2)]), True),
    "tuple other order": (gs.Tuple([BOX, gs.Discrete(2)]), gs.Tuple([gs.Discrete(2), BOX]), False),
    "box transposed shape": (gs.Box(0, 1, (2, 3)), gs.Box(0, 1, (3, 2)), False),
    "discrete other dtype": (gs.Discrete(3), gs.Discrete(3, dtype=np.int32), False),
    "multidiscrete other start": (
        gs.MultiDiscrete([2, 3]),
        gs.MultiDiscrete([2, 3], start=[1, 1]),
        False,
    ),
    "multidiscrete other shape": (gs.MultiDiscrete([[2, 2]]), gs.MultiDiscrete([2, 2]), False),
    "text other charset": (gs.Text(5), gs.Text(5, charset="ab"), False),
    "text other min_length": (gs.Text(5), gs.Text(5, min_length=2), False),
    "dict other key": (gs.Dict({"a": gs.Discrete(2)}), gs.Dict({"b": gs.Discrete(2)}), False),
    "dict vs tuple": (gs.Dict({"a": gs.Discrete(2)}), gs.Tuple([gs.Discrete(2)]), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_named_cases(name):
    a, b, equal = CASES[name]
    assert exact_key(a) is not None and exact_key(b) is not None
    assert (exact_key(a) == exact_key(b)) is equal
    if equal:
        assert a == b and hash(exact_key(a)) == hash(exact_key(b))
    assert SpaceMatch()(a, b) is bool(a == b)


NO_KEY = {
    "nan bound": nan_box(),
    "nan high bound only": nan_high_box(),
    "subclass": LooseBox(0.0, 1.0, (2,)),
    "dict holding a nan bound": gs.Dict({"a": nan_box((1,))}),
    "tuple holding a subclass": gs.Tuple([LooseBox(0.0, 1.0, (1,))]),
    "sequence": gs.Sequence(gs.Discrete(2)),
}


@pytest.mark.parametrize("name", list(NO_KEY))
def test_spaces_it_cannot_vouch_for_get_none(name):
    assert exact_key(NO_KEY[name]) is None


@settings(max_examples=150, deadline=None)
@given(space=spaces(), other=spaces())
def test_equal_keys_imply_equal_spaces(space, other):
    assert exact_key(space) == exact_key(pickle.loads(pickle.dumps(space)))
    if exact_key(space) is not None and exact_key(space) == exact_key(other):
        assert space == other


@settings(max_examples=150, deadline=None)
@given(space=spaces(), other=spaces())
def test_space_match_answers_as_equality_does(space, other):
    copy_ = pickle.loads(pickle.dumps(space))
    match = SpaceMatch()
    assert match(space, copy_) is bool(space == copy_)
    assert match(space, other) is bool(space == other)
    assert match(other, space) is bool(other == space)


def test_equal_copies_are_matched_without_equality():
    copies = [pickle.loads(pickle.dumps(BOX)) for _ in range(50)]
    match = SpaceMatch()
    with mock.patch.object(gs.Box, "__eq__", autospec=True, side_effect=AssertionError):
        assert all(match(c, copies[0]) for c in copies)


def test_contents_equal_to_equality_only_still_match():
    # -0.0 and 0.0 bounds: other keys, so == decides (and says equal).
    match = SpaceMatch()
    assert match(gs.Box(0.0, 1.0, (2,)), gs.Box(-0.0, 1.0, (2,)))
    assert not match(nan_box(), nan_box())

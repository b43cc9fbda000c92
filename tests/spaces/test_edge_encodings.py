"""Spaces at the edges of their dtypes and of the JSON encoding (each case failed once)."""

from __future__ import annotations

import enum
import warnings

import gymnasium.spaces as gs
import numpy as np
import pytest

from episodes.spaces import one_hot, space_from_dict, space_to_dict
from episodes.spaces.contains import make_checker
from episodes.spaces.serialization import MAX_DEPTH


class Key(enum.IntEnum):
    A = 1


def _nested(depth: int) -> gs.Space:
    space: gs.Space = gs.Discrete(2)
    for _ in range(depth):
        space = gs.Dict({"a": space})
    return space


@pytest.mark.parametrize(
    "space",
    [
        pytest.param(gs.MultiDiscrete(5), id="0-d nvec"),
        pytest.param(gs.MultiDiscrete([3], start=[2**63], dtype=np.uint64), id="uint64 start"),
        pytest.param(gs.Box(-1, 1, (2,), dtype=np.dtype(">f4")), id="big-endian box"),
        pytest.param(gs.Discrete(3, dtype=np.dtype(">i4")), id="big-endian discrete"),
        pytest.param(gs.Dict({np.str_("a"): gs.Discrete(2)}), id="numpy str key"),
        pytest.param(gs.Dict({Key.A: gs.Discrete(2)}), id="int enum key"),
        pytest.param(_nested(MAX_DEPTH), id="deepest allowed"),
    ],
)
def test_round_trip(space):
    back = space_from_dict(space_to_dict(space))
    assert back == space
    str(back)  # a space too deep for repr was once decoded
    if isinstance(space, (gs.Box, gs.Discrete, gs.MultiDiscrete)):
        assert back.dtype == space.dtype


def test_plain_keys_are_written():
    d = space_to_dict(gs.Dict({np.str_("a"): gs.Discrete(2), Key.A: gs.Discrete(2)}))
    assert [type(k) for k, _ in d["spaces"]] == [str, int]


@pytest.mark.parametrize(
    "encoded, message",
    [
        ({"type": "Discrete", "n": 3, "start": 254, "dtype": "uint8"}, "outside uint8"),
        ({"type": "Discrete", "n": 2, "start": -129, "dtype": "int8"}, "outside int8"),
        (space_to_dict(_nested(MAX_DEPTH)) and {"type": "Dict", "spaces": [
            ["a", space_to_dict(_nested(MAX_DEPTH))]]}, "nested more than"),
        ({"type": "MultiDiscrete", "nvec": True}, "must be a list"),
    ],
    ids=["discrete overflows uint8", "discrete below int8", "too deep", "bool nvec"],
)  # fmt: skip
def test_decoder_refuses(encoded, message):
    with pytest.raises(ValueError, match=message):
        space_from_dict(encoded)


def test_encoder_refuses_what_the_decoder_would():
    with pytest.raises(TypeError, match="nested more than"):
        space_to_dict(_nested(MAX_DEPTH + 1))


@pytest.mark.gymnasium_1_4
@pytest.mark.parametrize(
    "space, values",
    [
        (gs.Discrete(2, start=254, dtype=np.uint8), [254, 255, np.uint8(255)]),
        (gs.Discrete(127, start=1, dtype=np.int8), [1, 64, 127, np.int8(5)]),
        (gs.Discrete(1, start=127, dtype=np.int8), [127]),
    ],
    ids=["uint8 top", "int8 top", "int8 last"],
)
def test_checker_when_start_plus_n_overflows_the_dtype(space, values):
    check = make_checker(space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for value in values:
            assert check(value) and space.contains(value)


@pytest.mark.parametrize(
    "space, value",
    [
        (gs.Discrete(3, start=-1), np.uint64(2**64 - 1)),
        (gs.Discrete(3, start=-1), 2**64 - 1),
        (gs.Discrete(3, start=-1), np.array([0, 2**64 - 1], np.uint64)),
        (gs.Discrete(3, start=-(2**63)), 1e19),
        (gs.MultiDiscrete([3, 3], start=[-1, -1]), np.array([0, 2**64 - 1], np.uint64)),
    ],
    ids=["uint64 scalar", "python int", "uint64 array", "float", "multi discrete"],
)
def test_one_hot_refuses_values_that_would_wrap_into_range(space, value):
    with pytest.raises(ValueError, match="out of range"):
        one_hot(value, space)

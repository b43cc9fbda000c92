"""One-value Box bounds have a budget per space dict; the encoder lists bounds past it."""

import gymnasium as gym
import numpy as np
import pytest

from episodes.spaces import space_from_dict, space_to_dict
from episodes.spaces.space_limits import MAX_SCALAR_ENTRIES, ScalarBoundsError, check_space_dict

IMAGE = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
BIG = gym.spaces.Box(0, 255, (512, 512, 4), np.uint8)  # 2**20 entries: one value each bound


def _box_dict(entries: int) -> dict:
    return {"type": "Box", "shape": [entries], "dtype": "float64", "low": 0.0, "high": 1.0}


@pytest.mark.parametrize(
    "space,one_value",
    [
        ("one image", True),
        ("three images", True),
        ("three big images", False),  # 6M one-value entries: past the budget, listed
    ],
)
def test_the_encoder_writes_one_value_bounds_within_the_budget(space, one_value):
    made = {
        "one image": IMAGE,
        "three images": gym.spaces.Dict({f"c{i}": IMAGE for i in range(3)}),
        "three big images": gym.spaces.Dict({f"c{i}": BIG for i in range(3)}),
    }[space]
    d = space_to_dict(made)
    boxes = [d] if d["type"] == "Box" else [part for _, part in d["spaces"]]
    assert all(isinstance(b["low"], list) is not one_value for b in boxes)
    assert space_from_dict(d) == made


def test_a_dict_of_many_one_value_boxes_is_refused_before_building():
    hostile = {"type": "Dict", "spaces": [[f"k{i}", _box_dict(1 << 20)] for i in range(50)]}
    with pytest.raises(ScalarBoundsError, match="one-value bounds stand for"):
        check_space_dict(hostile)
    with pytest.raises(ValueError, match="one-value bounds stand for"):
        space_from_dict(hostile)


def test_the_budget_counts_both_bounds_of_every_box():
    half = MAX_SCALAR_ENTRIES // 4  # two bounds each: two boxes fill the budget exactly
    check_space_dict({"type": "Tuple", "spaces": [_box_dict(half), _box_dict(half)]})
    with pytest.raises(ScalarBoundsError):
        check_space_dict({"type": "Tuple", "spaces": [_box_dict(half), _box_dict(half + 1)]})


@pytest.mark.parametrize("shape", [(3,), (100,)])
def test_a_long_double_box_still_round_trips(shape):
    space = gym.spaces.Box(-1, 1, shape, np.longdouble)
    assert space_from_dict(space_to_dict(space)) == space

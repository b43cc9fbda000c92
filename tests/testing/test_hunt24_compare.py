"""``outputs_equal`` and ``check_list_numpy_agree`` take a list of Dict or Tuple items and the
numpy'd batch of the same values as equal (a property hunt of round 24 saw a false failure)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.testing import check_list_numpy_agree, outputs_equal

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)


@pytest.mark.parametrize(
    ("items", "batch", "equal"),
    [
        ([{"a": 1}, {"a": 2}], {"a": np.array([1, 2])}, True),
        ([(1,), (2,)], (np.array([1, 2]),), True),
        ([{"a": 1}, {"a": 3}], {"a": np.array([1, 2])}, False),
        ([{"a": 1}, {"b": 2}], {"a": np.array([1, 2])}, False),
        ([(1, 2), (3, 4)], (np.array([1, 3]),), False),
        # Regrouped only beside a batch of arrays with a row per item (the regression hunt):
        ([[1, 2], [3, 4]], ((1, 3), (2, 4)), False),  # a matrix is not its transpose
        ([[1, 2], [3, 4]], (np.array([1, 3]), np.array([2, 4])), False),  # lists are rows
        ([(1, 2), (3, 4)], ((1, 2), (3, 4)), True),  # the same rows, list and tuple
        ([{}, {}, {}], {}, False),  # the number of items is part of the value
        ([(), ()], (), False),
        ({"x": [{"a": 1}, {"a": 2}]}, {"x": {"a": [1, 2]}}, False),  # no array batch
    ],
    ids=[
        "dict",
        "tuple",
        "dict-values",
        "dict-keys",
        "tuple-width",
        "transpose",
        "transpose-arrays",
        "rows",
        "empty-dicts",
        "empty-tuples",
        "plain-containers",
    ],
)
def test_items_against_their_batch(items, batch, equal) -> None:
    assert outputs_equal(items, batch) is equal
    assert outputs_equal(batch, items) is equal


@pytest.mark.parametrize(
    "space",
    [gym.spaces.Dict({"a": BOX}), gym.spaces.Tuple((BOX, gym.spaces.Discrete(3)))],
    ids=["dict", "tuple"],
)
def test_a_connector_returning_nested_getter_output_agrees_in_both_modes(space) -> None:
    def connector(episodes, batch):
        return {**batch, "obs": [ep.get_observations() for ep in episodes]}

    space.seed(0)
    ep = SingleAgentEpisode(
        observations=[space.sample() for _ in range(3)],
        observation_space=space,
        actions=[0, 0],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
    )
    check_list_numpy_agree(connector, [ep])


def test_dtypes_counted_means_no_regrouping() -> None:
    # check_deterministic compares with dtypes: an output whose nesting changed differs.
    assert not outputs_equal([{"a": 1}, {"a": 2}], {"a": np.array([1, 2])}, check_dtype=True)

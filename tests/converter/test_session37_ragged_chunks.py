"""A list-mode chunk whose own items do not stack is named by the converter, not by numpy.

``episodes_to_batch`` and ``episodes_to_rollout`` gave numpy's "inhomogeneous shape" or
dm-tree's "Cannot batch items of differing structure" for a chunk whose observations or
actions differ from step to step; they now name the column, the chunk (its episode and
start) and the first item and one unlike it, as ``to_numpy`` names them. The chunk is left
as it was, and refusals of the converter's own (masked entries, keys that do not sort) keep
their words.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout
from episodes.converter.columns import layout_batch
from episodes.structs import data_equal

EXTRAS = {"vf_preds": 0.0, "action_logp": 0.0}


def _chunk(observations: list[Any], actions: list[Any] | None = None, **kw: Any):
    n = len(observations) - 1
    return SingleAgentEpisode(
        "ep-a",
        observations=observations,
        actions=[0] * n if actions is None else actions,
        rewards=[1.0] * n,
        extra_model_outputs={key: [value] * n for key, value in EXTRAS.items()},
        t_started=4,
        len_lookback_buffer=0,
        **kw,
    )


def _values(obs: Any) -> np.ndarray:
    leaves = obs if isinstance(obs, np.ndarray) else next(iter(obs.values()))
    return np.zeros(leaves.shape[:2])


CASES = {
    "ragged observations": (
        lambda: _chunk([np.zeros(2), np.zeros(2), np.zeros(3), np.zeros(2)]),
        r"observations of the chunk of episode 'ep-a' starting at t=4: the items do not stack: "
        r"item 0 has shape \(2,\), item 2 has shape \(3,\)",
    ),
    "ragged observations in a Box space": (
        lambda: _chunk(
            [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0]],
            observation_space=gym.spaces.Box(-1, 1, (2,)),
        ),
        r"observations of the chunk of episode 'ep-a' starting at t=4: the items do not stack: "
        r"item 0 has shape \(2,\), item 2 has shape \(3,\)",
    ),
    "ragged actions": (
        lambda: _chunk([0.0] * 4, [np.zeros(2), np.zeros(3), np.zeros(2)]),
        r"actions of the chunk of episode 'ep-a' starting at t=4: the items do not stack: "
        r"item 0 has shape \(2,\), item 1 has shape \(3,\)",
    ),
    "dict keys changing mid-chunk": (
        lambda: _chunk([{"a": 0.0}, {"a": 0.0}, {"b": 0.0}, {"a": 0.0}]),
        r"observations of the chunk of episode 'ep-a' starting at t=4: the items do not stack: "
        r"item 0 has \{'a': 'shape \(\)'\}, item 2 has \{'b': 'shape \(\)'\}",
    ),
}


@pytest.mark.parametrize("convert", ["batch", "rollout"])
@pytest.mark.parametrize(("make", "message"), CASES.values(), ids=CASES.keys())
def test_a_chunk_whose_items_do_not_stack_is_named(make, message, convert) -> None:
    chunk = make()
    before = copy.deepcopy(chunk)
    with pytest.raises(ValueError, match=message) as info:
        if convert == "batch":
            episodes_to_batch([chunk])
        else:
            episodes_to_rollout([chunk], gamma=0.9, value_fn=_values)
    assert "inhomogeneous" not in str(info.value)
    assert "Cannot batch" not in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)  # numpy's or dm-tree's, chained
    assert not chunk.observations.finalized and not chunk.actions.finalized
    for field in ("observations", "actions", "rewards"):
        assert data_equal(getattr(chunk, f"get_{field}")(), getattr(before, f"get_{field}")())


def test_items_of_other_chunks_are_named_by_position() -> None:
    # layout_batch without a chunk (the chunks' last observations, say) names the items.
    with pytest.raises(ValueError, match=r"^obs: the items do not stack: item 0 has shape"):
        layout_batch([np.zeros(2), np.zeros(2), np.zeros(3)], None, "obs")


OWN_REFUSALS = {
    # A masked entry is refused first, as before, though the items are ragged too.
    "masked beside ragged": (
        [np.ma.masked_array([1.0, 2.0], mask=[0, 1]), np.zeros(3)],
        None,
        "obs: item 0 of 2: a numpy masked array with masked entries",
    ),
    "keys that do not sort": (
        [{1: 0.0, "x": 0.0}, {1: 0.0, "x": 0.0, "y": 0.0}],
        gym.spaces.Dict({1: gym.spaces.Discrete(2), "x": gym.spaces.Discrete(2)}),
        "dict keys",
    ),
}


@pytest.mark.parametrize(("items", "space", "message"), OWN_REFUSALS.values(), ids=OWN_REFUSALS)
def test_the_converters_own_refusals_keep_their_words(items, space, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        layout_batch(items, space, "obs")


def test_items_that_stack_are_batched_as_before() -> None:
    chunk = _chunk([np.zeros(2), np.ones(2), np.full(2, 2.0)])
    batch = episodes_to_batch([chunk])
    assert batch["obs"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert batch["next_obs"].tolist() == [[1.0, 1.0], [2.0, 2.0]]

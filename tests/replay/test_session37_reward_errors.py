"""Replay ``add`` refuses list-mode rows of two shapes with a ``ValueError``, as replay.md says.

A list-mode chunk mixing scalar and vector rewards, or whose observations, actions or extra
outputs differ in shape from step to step, was a ``TypeError`` ("the items do not stack into
one array"), where rewards that are not one number per step and rows whose shapes differ are
documented ``ValueError``s. They are now, naming the chunk, the column and the first item and
one unlike it; the buffer stays as it was. Items that are no numeric rows at all (None, a
ragged nested list, a list holding itself) are still the ``TypeError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

from .reference import assert_states_equal


def _chunk(id_: Any, **changes: Any) -> SingleAgentEpisode:
    """List mode, three steps: (2,) observations, int actions, scalar rewards, a scalar extra."""
    data: dict[str, Any] = {
        "observations": [np.zeros(2)] * 4,
        "actions": [0, 1, 0],
        "rewards": [1.0, 1.0, 1.0],
        "extra_model_outputs": {"vf": [0.0, 0.0, 0.0]},
    }
    data.update(changes)
    return SingleAgentEpisode(id_, len_lookback_buffer=0, **data)


def _self_holding() -> list[Any]:
    item: list[Any] = [1.0]
    item.append(item)
    return item


DIFFERING = {
    "a vector reward after a scalar one": (
        {"rewards": [1.0, np.array([1.0, 2.0]), 1.0]},
        r"rewards: the items do not stack: item 0 has shape \(\), item 1 has shape \(2,\)",
    ),
    "a scalar reward after vector ones": (
        {"rewards": [np.ones(2), np.ones(2), 3.0]},
        r"rewards: the items do not stack: item 0 has shape \(2,\), item 2 has shape \(\)",
    ),
    "observations of two shapes": (
        {"observations": [np.zeros(2), np.zeros(2), np.zeros(3), np.zeros(2)]},
        r"observations: the items do not stack: item 0 has shape \(2,\), item 2 has shape \(3,\)",
    ),
    "actions of two shapes": (
        {"actions": [np.zeros(2), np.zeros(3), np.zeros(2)]},
        r"actions: the items do not stack: item 0 has shape \(2,\), item 1 has shape \(3,\)",
    ),
    "an extra output of two shapes": (
        {"extra_model_outputs": {"vf": [0.0, np.zeros(2), 0.0]}},
        r"extra_model_outputs\['vf'\]: the items do not stack: item 0 has shape \(\), item 1",
    ),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize(("changes", "words"), DIFFERING.values(), ids=DIFFERING.keys())
def test_rows_of_two_shapes_in_a_chunk_are_a_value_error(cls, changes, words) -> None:
    buf = cls(100, seed=0)
    buf.add([_chunk("e0"), _chunk("e1")])
    before = buf.get_state()
    with pytest.raises(ValueError, match=rf"^chunk 1 \(episode 'bad'\): {words}") as caught:
        buf.add([_chunk("x0"), _chunk("bad", **changes), _chunk("x2")])
    assert type(caught.value) is ValueError
    assert_states_equal(buf.get_state(), before)


def test_a_first_add_of_mixed_rewards_is_a_value_error() -> None:
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match=r"^chunk 0 \(episode 'r'\): rewards: the items do not"):
        buf.add(_chunk("r", rewards=[1.0, np.array([1.0, 2.0]), 1.0]))
    assert buf.get_num_timesteps() == 0 and buf.get_num_episodes() == 0


NOT_ROWS = {
    "None among the observations": {"observations": [np.zeros(2), None, np.zeros(2), np.zeros(2)]},
    "a ragged nested list": {"observations": [[0.0, [1.0]]] * 4},
    "a list holding itself": {"observations": [_self_holding()] * 4},
}


@pytest.mark.parametrize("changes", NOT_ROWS.values(), ids=NOT_ROWS.keys())
def test_items_that_are_no_numeric_rows_stay_a_type_error(changes) -> None:
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError, match=r"^chunk 0 \(episode 'odd'\): observations"):
        buf.add(_chunk("odd", **changes))
    assert buf.get_num_timesteps() == 0

"""Replay stores a list-mode chunk's ints as its numpy'd copy does, exact where float64 rounds.

``as_rows`` stacked a list-mode column with ``np.asarray``: ``[2**63 + 1, 1, 2]`` became float64,
rounded, where ``to_numpy`` (``batch``) keeps the ints uint64, exact. The stored columns then
depended on the chunk's mode, and a later numpy'd chunk of the same episode (int rows) was
refused by the float column. Such columns are now stacked by ``batch``'s rule.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.columns import as_rows
from episodes.spaces import batch

BIG = 2**63 + 1
ODD = 2**63 + 2**39 + 1  # float64 then float32 rounds it to another float32 than once


def _episode(**columns: Any) -> SingleAgentEpisode:
    data: dict[str, Any] = {
        "observations": [0.0, 1.0, 2.0],
        "actions": [0, 1],
        "rewards": [1.0, 2.0],
    }
    data.update(columns)
    return SingleAgentEpisode("a", len_lookback_buffer=0, **data)


def _stored(episode: SingleAgentEpisode) -> Any:
    buffer = EpisodeReplayBuffer(10)
    try:
        buffer.add(episode)
    except (TypeError, ValueError) as err:
        return type(err).__name__, str(err)
    stored = buffer.get_episodes()[0]
    columns = {
        "obs": stored.get_observations(),
        "actions": stored.get_actions(),
        "rewards": stored.get_rewards(),
    }
    if "v" in stored.extra_model_outputs:
        columns["v"] = stored.get_extra_model_outputs("v")
    return {name: (col.dtype, col.tolist()) for name, col in columns.items()}


CASES = {
    "observations": {"observations": [BIG, 1, 2]},
    "observations, signs": {"observations": [BIG, -1, 2]},  # objects: refused in both modes
    "numpy ints": {"observations": [np.uint64(BIG), np.int64(1), 2]},
    "int rows": {"observations": [np.array([BIG], np.uint64), np.array([1]), np.array([2])]},
    "actions": {"actions": [ODD, 1]},
    "rewards": {"rewards": [ODD, 1]},
    "extra outputs": {"extra_model_outputs": {"v": [BIG, 3]}},
    "small ints": {"observations": [2**52, 1, 2.5]},  # float64 holds them: unchanged
}


@pytest.mark.parametrize("name", CASES)
def test_list_mode_chunk_is_stored_as_its_numpyd_copy(name: str) -> None:
    listed = _episode(**CASES[name])
    numpyd = copy.deepcopy(listed)
    numpyd.to_numpy()
    assert _stored(listed) == _stored(numpyd)


def test_the_reported_chunk_and_its_numpyd_successor() -> None:
    first = _episode(observations=[BIG, 1, 2])
    second = first.cut()
    second.add_env_step(3, 0, 1.0)
    second.to_numpy()
    buffer = EpisodeReplayBuffer(10)
    buffer.add(first)
    buffer.add(second)  # was refused: int64 rows do not fit a float64 column
    obs = buffer.get_episodes()[0].get_observations()
    assert obs.dtype == np.uint64 and obs.tolist() == [BIG, 1, 2, 3]


@pytest.mark.parametrize(
    "values",
    [[BIG, 1], [np.uint64(BIG), -1], [np.array([BIG], np.uint64), np.array([-1])], [1, 0.5]],
)
def test_as_rows_follows_batch(values: list[Any]) -> None:
    want = batch(values)
    if want.dtype == object:
        with pytest.raises(TypeError, match="numeric arrays only"):
            as_rows(values, "obs")
    else:
        got = as_rows(values, "obs")
        assert (got.dtype, got.tolist()) == (want.dtype, want.tolist())

"""Hunt 22: a replay buffer holding an id with a NaN is not saved (a dataset reads every NaN
back as one id, where the buffer tells them apart by object), and nothing is written."""

from __future__ import annotations

import math

import pytest

from episodes import SingleAgentEpisode
from episodes.io import UnstorableValueError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

IDS = {"nan": math.nan, "tuple-with-nan": ("run", math.nan), "nested": ("a", ("b", math.nan))}


def _episode(id_, terminated=True):
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        terminated=terminated,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(IDS))
def test_a_buffer_holding_a_nan_id_is_not_saved(tmp_path, cls, case):
    buffer = cls(100, seed=0)
    buffer.add([_episode("ok"), _episode(IDS[case])])
    with pytest.raises(UnstorableValueError, match="holds a NaN"):
        buffer.save(tmp_path / "buf")
    assert not (tmp_path / "buf").exists()
    assert list(tmp_path.iterdir()) == []


def test_an_evicted_nan_id_is_not_saved_either(tmp_path):
    buffer = EpisodeReplayBuffer(2, seed=0)
    buffer.add([_episode(math.nan), _episode("b"), _episode("c")])  # evicts the NaN episode
    assert len(buffer.get_evicted_ids()) == 1
    with pytest.raises(UnstorableValueError, match="evicted id .* holds a NaN"):
        buffer.save(tmp_path / "buf")


def test_a_float_id_without_nan_still_saves(tmp_path):
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add([_episode(1.5), _episode(("run", -0.0))])
    buffer.save(tmp_path / "buf")
    assert EpisodeReplayBuffer.load(tmp_path / "buf").get_episode_ids() == [1.5, ("run", 0.0)]

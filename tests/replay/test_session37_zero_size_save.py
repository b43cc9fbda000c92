"""A buffer holding zero-size columns saves and loads (the batched save's size model)."""

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.episode.state import episodes_equal
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episodes(observations, outputs):
    return [
        SingleAgentEpisode(
            i,
            observations=observations,
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
            extra_model_outputs=outputs,
        )  # fmt: skip
        for i in "abc"
    ]


CASES = [
    (
        "empty model output",
        np.zeros((3, 2), np.float32),
        {"state_out": np.zeros((2, 0), np.float32)},
    ),
    ("empty observations", np.zeros((3, 0), np.float32), {}),
    ("empty 2-d observations", np.zeros((3, 2, 0), np.float64), {"h": np.zeros((2, 3))}),
]


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize(("name", "observations", "outputs"), CASES, ids=[c[0] for c in CASES])
def test_zero_size_columns_round_trip(tmp_path, kind, name, observations, outputs):
    buffer = kind(100, seed=0)
    buffer.add(_episodes(observations, outputs))
    buffer.save(tmp_path / "buf")
    back = kind.load(tmp_path / "buf")
    assert back.get_episode_ids() == buffer.get_episode_ids()
    for mine, theirs in zip(buffer.get_episodes(), back.get_episodes(), strict=True):
        assert episodes_equal(theirs, mine)
    got = back.sample(4, n_step=1, include_extra_model_outputs=True)
    assert got["obs"].shape[1:] == observations.shape[1:]

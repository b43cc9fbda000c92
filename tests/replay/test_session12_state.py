"""An empty buffer's state restores its (absent) rows, pinned.

``set_state`` of an empty buffer's state allocated 64 rows where the original had none, so the
two buffers grew and compacted at different times and, from one generator state, drew
different samples after the same adds (replay.md promises the samples the original draws).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def episode(id_: str, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_restored_empty_buffer_draws_what_the_original_draws(kind: type) -> None:
    original = kind(173, seed=0)
    restored = kind(173)
    restored.set_state(original.get_state())
    assert restored.get_state()["layout"]["size"] == original.get_state()["layout"]["size"] == 0
    rng = np.random.default_rng(0)
    for k in range(30):
        added = [episode(f"e{k}-{j}", int(rng.integers(1, 100))) for j in range(2)]
        original.add(added)
        restored.add(added)
        np.testing.assert_array_equal(
            original.sample(8)["indices"], restored.sample(8)["indices"], err_msg=f"add {k}"
        )


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_restored_empty_buffer_refuses_a_sample(kind: type) -> None:
    restored = kind(10)
    restored.set_state(kind(10, seed=0).get_state())
    assert restored.get_num_timesteps() == 0
    with pytest.raises(ValueError):
        restored.sample(1)

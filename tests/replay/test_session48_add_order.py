"""An add whose chunks of one episode come out of time order says where the clash is.

The steps the refused chunk would have to follow belong to an earlier chunk of the same call
(two ``EnvRunner.sample()`` results concatenated later one first), not to the buffer: the
message says which, and the buffer is left as it was.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _chunk(id_: str, t0: int, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32(t) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
    )


CASES = {
    # (stored before, one add, the words of the refusal)
    "later chunk first, new episode": (
        [],
        [_chunk("a", 3, 3), _chunk("a", 0, 3)],
        "starts at t=0, but an earlier chunk of this add takes it up to t=6",
    ),
    "stored episode continued, then an older chunk": (
        [_chunk("a", 0, 3)],
        [_chunk("a", 3, 2), _chunk("a", 3, 2)],
        "starts at t=3, but an earlier chunk of this add takes it up to t=5",
    ),
    "gap after the stored steps": (
        [_chunk("a", 0, 3)],
        [_chunk("a", 4, 2)],
        "starts at t=4, but the buffer holds it up to t=3",
    ),
    "gap after another episode's chunk": (
        [_chunk("a", 0, 3)],
        [_chunk("b", 0, 2), _chunk("a", 2, 2)],
        "starts at t=2, but the buffer holds it up to t=3",
    ),
    # "b" evicts "a", which no chunk of this add touched before: its steps were the buffer's
    "gap after the stored steps of an episode this add evicts": (
        [_chunk("a", 0, 3)],
        [_chunk("b", 0, 5), _chunk("a", 4, 1)],
        "starts at t=4, but the buffer holds it up to t=3",
    ),
}


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", CASES)
def test_the_refusal_says_whose_steps_the_chunk_clashes_with(kind: type, case: str) -> None:
    stored, added, words = CASES[case]
    buffer = kind(6, seed=0)
    if stored:
        buffer.add(stored)
    before = (buffer.get_num_timesteps(), buffer.get_episode_ids(), buffer.get_added_timesteps())
    with pytest.raises(ValueError, match=words):
        buffer.add(added)
    after = (buffer.get_num_timesteps(), buffer.get_episode_ids(), buffer.get_added_timesteps())
    assert after == before

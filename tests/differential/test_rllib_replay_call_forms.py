"""Differential pins of RLlib's replay call forms: ``add(..., weight=)``, ``batch_length_T=0``,
``module_id``. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_replay_call_forms.py
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.replay_buffers.episode_replay_buffer import (  # noqa: E402
    EpisodeReplayBuffer as RBuffer,
)
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (  # noqa: E402
    PrioritizedEpisodeReplayBuffer as RPrioritized,
)

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402

pytestmark = pytest.mark.differential


def _episode(cls: type, id_: str, steps: int) -> object:
    return cls(
        id_,
        observations=[np.array([t], np.float32) for t in range(steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
    )


def test_add_weight_starts_the_new_steps_there() -> None:
    theirs, ours = RPrioritized(100), PrioritizedEpisodeReplayBuffer(100)
    theirs.add([_episode(RSAE, "a", 2)])
    theirs.add([_episode(RSAE, "b", 2)], weight=9.0)
    ours.add(_episode(OSAE, "a", 2))
    ours.add(_episode(OSAE, "b", 2), weight=9.0)
    # RLlib's tree holds priority ** alpha (alpha 1.0 in both by default) per step.
    their_priorities = [theirs._sum_segment[i] for i in range(4)]
    assert their_priorities == [1.0, 1.0, 9.0, 9.0]
    ids = ours.get_episode_indices("a").tolist() + ours.get_episode_indices("b").tolist()
    assert ours.get_priorities(ids).tolist() == their_priorities
    assert theirs._max_priority == ours.max_priority == 1.0


def test_batch_length_zero_samples_no_sequences() -> None:
    theirs, ours = RBuffer(100), EpisodeReplayBuffer(100)
    theirs.add([_episode(RSAE, "a", 6)])
    ours.add(_episode(OSAE, "a", 6))
    # RLlib: one-step episodes (its transitions); ours: whole chunks. Neither reads sequences.
    sampled = theirs.sample(4, batch_length_T=0, sample_episodes=True, n_step=1)
    assert [len(e) for e in sampled] == [1, 1, 1, 1]
    assert [len(e) for e in ours.sample(2, batch_length_T=0, sample_episodes=True)] == [6, 6]
    assert ours.sample(4, batch_length_T=0)["obs"].shape == (4, 1)


def test_counters_take_module_id() -> None:
    theirs, ours = RBuffer(100), EpisodeReplayBuffer(100)
    theirs.add([_episode(RSAE, "a", 4)])
    ours.add(_episode(OSAE, "a", 4))
    for name in ("get_num_timesteps", "get_added_timesteps"):
        assert getattr(theirs, name)(None) == getattr(ours, name)(None) == 4

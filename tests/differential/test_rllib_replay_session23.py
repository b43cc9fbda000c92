"""Differential pins of session 23: the step of a transition's extra model outputs, and the
eviction of an episode whose chunks come twice in one ``add``.

RLlib 2.60's answers are asserted too, so a test fails the day RLlib changes (then revisit the
rows in docs/deviations.md). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_replay_session23.py
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

STEPS = dict(
    observations=[np.array([t], np.float32) for t in range(6)],
    actions=[0] * 5,
    rewards=[1.0] * 5,
    extra_model_outputs={"logp": [float(t) for t in range(5)]},
    len_lookback_buffer=0,
    terminated=True,
)


def _rllib_pairs(cls: type) -> set[tuple[float, float]]:
    """``(o_t, logp)`` of RLlib's one-step sampled episodes."""
    buffer = cls(capacity=100)
    buffer.add(RSAE(id_="a", **STEPS))
    drawn = buffer.sample(40, n_step=1, sample_episodes=True, include_extra_model_outputs=True)
    return {
        (float(e.get_observations(0)[0]), float(e.get_extra_model_outputs("logp", 0)))
        for e in drawn
    }


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_a_transitions_extra_outputs_are_its_own_steps(cls) -> None:  # "uniform-extras-step"
    ours = cls(100, seed=0)
    ours.add(OSAE("a", **STEPS))
    batch = ours.sample(40, n_step=1, include_extra_model_outputs=True)
    assert batch["logp"].tolist() == batch["obs"][:, 0].tolist()  # logp t beside o_t
    assert all(logp == obs for obs, logp in _rllib_pairs(RPrioritized))
    uniform = _rllib_pairs(RBuffer)
    assert {logp for _, logp in uniform} == {0.0}  # RLlib's uniform buffer: step 0's
    assert len({obs for obs, _ in uniform}) > 1


def _chunk(make: type, id_: str, i: int, t0: int, n: int) -> object:
    kw = dict(
        observations=[np.array([i, t], np.float32) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
    )
    return make(id_=id_, **kw)


FIRST = [("a", 0, 0, 4), ("b", 1, 0, 4)]
SECOND = [("a", 0, 4, 2), ("c", 2, 0, 3), ("a", 0, 6, 8)]


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_one_add_with_two_chunks_of_an_evicted_episode(cls) -> None:  # "per-batch-eviction"
    ours = cls(10, seed=0)
    ours.add([_chunk(OSAE, *c) for c in FIRST])
    ours.add([_chunk(OSAE, *c) for c in SECOND])
    assert (ours.get_episode_ids(), ours.get_num_timesteps()) == (["b", "c"], 7)
    theirs = RPrioritized(capacity=10)
    theirs.add([_chunk(RSAE, *c) for c in FIRST])
    theirs.add([_chunk(RSAE, *c) for c in SECOND])
    held = [e.id_ for e in theirs.episodes]
    assert (held, theirs.get_num_timesteps()) == (["c"], 3)  # b evicted too

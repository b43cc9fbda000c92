"""Pinned differences from RLlib 2.60 in ``get_state``/``set_state`` of the replay buffers.

One test per docs/deviations.md replay row (the row's key is in the comment after the test's
name). OUR behaviour is asserted, and RLlib 2.60's too, so a test fails the day RLlib changes
(then revisit the row and docs/replay.md's "Differences from RLlib 2.60"). Run with the
reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_replay_state19.py
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


def _episode(cls, id_, n=5):
    return cls(
        id_=id_,
        observations=[np.full(2, t, np.float32) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
    )


def test_uniform_set_state_adopts_the_states_capacity():  # "state-capacity"
    theirs = RBuffer(capacity=100, batch_size_B=4)
    theirs.add([_episode(RSAE, "a"), _episode(RSAE, "b")])
    into = RBuffer(capacity=7, batch_size_B=2)
    into.set_state(theirs.get_state())
    # RLlib keeps the receiving buffer's settings: 10 steps now sit in a buffer of capacity 7.
    assert (into.capacity, into.batch_size_B, into.get_num_timesteps()) == (7, 2, 10)

    ours = EpisodeReplayBuffer(100, batch_size_B=4, seed=0)
    ours.add([_episode(OSAE, "a"), _episode(OSAE, "b")])
    back = EpisodeReplayBuffer(7, batch_size_B=2)
    back.set_state(ours.get_state())
    assert (back.capacity, back.batch_size_B, back.get_num_timesteps()) == (100, 4, 10)


def test_prioritized_set_state_into_another_capacity():  # "state-capacity"
    theirs = RPrioritized(capacity=100, batch_size_B=4)
    theirs.add([_episode(RSAE, "a"), _episode(RSAE, "b")])
    with pytest.raises(AssertionError):  # its segment trees are sized by the capacity
        RPrioritized(capacity=7, batch_size_B=2).set_state(theirs.get_state())

    ours = PrioritizedEpisodeReplayBuffer(100, batch_size_B=4, seed=0)
    ours.add([_episode(OSAE, "a"), _episode(OSAE, "b")])
    back = PrioritizedEpisodeReplayBuffer(7, batch_size_B=2)
    back.set_state(ours.get_state())
    assert (back.capacity, back.batch_size_B, back.get_num_timesteps()) == (100, 4, 10)


def test_update_priorities_right_after_set_state():  # "state-last-sample"
    theirs = RPrioritized(capacity=100)
    theirs.add([_episode(RSAE, "a")])
    theirs.sample(num_items=3)
    into = RPrioritized(capacity=100)
    into.set_state(theirs.get_state())
    into.update_priorities(np.array([5.0, 5.0, 5.0]), "default_policy")  # the state's last sample
    assert into._max_priority == 5.0

    ours = PrioritizedEpisodeReplayBuffer(100, seed=0)
    ours.add(_episode(OSAE, "a"))
    batch = ours.sample(3)
    back = PrioritizedEpisodeReplayBuffer(100)
    back.set_state(ours.get_state())
    with pytest.raises(ValueError, match="none since set_state: a state holds no last sample"):
        back.update_priorities(np.array([5.0, 5.0, 5.0]))
    back.update_priorities(np.array([5.0, 5.0, 5.0]), batch["indices"])  # the batch's indices
    assert back.max_priority == 5.0
    assert back.get_priorities(batch["indices"]).tolist() == [5.0, 5.0, 5.0]


@pytest.mark.parametrize(
    "theirs_cls, ours_cls",
    [(RBuffer, EpisodeReplayBuffer), (RPrioritized, PrioritizedEpisodeReplayBuffer)],
    ids=["uniform", "prioritized"],
)
def test_state_formats_and_the_generator(theirs_cls, ours_cls):  # "state-format"
    theirs = theirs_cls(capacity=100)
    theirs.add([_episode(RSAE, "a")])
    ours = ours_cls(100, seed=0)
    ours.add(_episode(OSAE, "a"))
    # Neither reads the other's state.
    with pytest.raises(ValueError, match="not a replay buffer state"):
        ours_cls(100).set_state(theirs.get_state())
    with pytest.raises(TypeError):
        theirs_cls(capacity=100).set_state(ours.get_state())
    # RLlib's state holds no generator: the receiving buffer keeps its own, untouched.
    into = theirs_cls(capacity=100)
    rng, before = into.rng, into.rng.bit_generator.state
    into.set_state(theirs.get_state())
    assert "rng" not in theirs.get_state()
    assert into.rng is rng and into.rng.bit_generator.state == before
    # Ours restores it: the restored buffer draws what the original draws next.
    back = ours_cls(100, seed=123)
    back.set_state(ours.get_state())
    assert np.array_equal(back.sample(8)["indices"], ours.sample(8)["indices"])

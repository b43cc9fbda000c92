"""Pinned differences from RLlib 2.60 in sequence batches: ``is_first`` and extra model outputs.

One test per docs/deviations.md row (its key in the comment after the test's name). Ours and
RLlib 2.60's behaviour are both asserted, so a test fails the day RLlib changes. Run with the
reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session44_rllib_sequence_flags.py
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.replay_buffers.episode_replay_buffer import (  # noqa: E402
    EpisodeReplayBuffer as RBuffer,
)

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.replay import EpisodeReplayBuffer  # noqa: E402

LENGTH = 12


def _twins() -> tuple[EpisodeReplayBuffer, RBuffer]:
    """Both buffers holding one episode: observation t, action t % 2, a recorded state per step."""
    kwargs = dict(
        observations=[np.array([float(t)], np.float32) for t in range(LENGTH + 1)],
        actions=[t % 2 for t in range(LENGTH)],
        rewards=[1.0] * LENGTH,
        terminated=True,
        extra_model_outputs={"h": [np.full(3, float(t), np.float32) for t in range(LENGTH)]},
        len_lookback_buffer=0,
    )
    ours, theirs = EpisodeReplayBuffer(100, seed=0), RBuffer(capacity=100)
    ours.add(OSAE("a", **kwargs))
    theirs.add(RSAE(id_="a", **kwargs))
    theirs.rng = np.random.default_rng(0)
    return ours, theirs


def test_is_first_marks_the_episodes_first_step_only():  # "seq-is-first"
    ours, theirs = _twins()
    rl = theirs.sample(batch_size_B=64, batch_length_T=4)
    first_obs = np.asarray(rl["obs"])[:, 0, 0]
    mid = first_obs > 0  # rows that start after the episode's first step
    assert mid.any()
    # RLlib: every row's first column is "first", wherever in the episode the row starts.
    assert np.asarray(rl["is_first"])[:, 0].all()
    mine = ours.sample(64, batch_length_T=4)
    starts = mine["obs"][:, 0, 0]
    assert (starts > 0).any() and (starts == 0).any()
    # Ours: only the episode's own first step, in whichever column it stands.
    assert mine["is_first"][:, 0].tolist() == (starts == 0).tolist()
    assert not mine["is_first"][:, 1:].any()


def test_sequence_batches_carry_the_recorded_outputs():  # "seq-extras"
    ours, theirs = _twins()
    rl = theirs.sample(batch_size_B=8, batch_length_T=4, include_extra_model_outputs=True)
    # RLlib: obs, actions, rewards and the four flags; the recorded state is not among them.
    assert "h" not in rl and "extra_model_outputs" not in rl
    mine = ours.sample(8, batch_length_T=4, include_extra_model_outputs=True)
    # Ours: the state recorded at obs[b, j], for every cell.
    assert mine["h"].shape == (8, 4, 3)
    np.testing.assert_array_equal(mine["h"][:, :, 0], mine["obs"][:, :, 0])


def test_is_last_marks_the_episodes_last_step_only():  # "seq-is-last"
    ours, theirs = _twins()
    rl = theirs.sample(batch_size_B=64, batch_length_T=4)
    rl_obs, rl_last = np.asarray(rl["obs"])[:, :, 0], np.asarray(rl["is_last"])
    mid = (rl_obs < LENGTH).all(axis=1)  # rows that do not reach the final observation
    assert mid.any()
    # RLlib: every row's last column is "last", wherever in the episode the row stops.
    assert rl_last[:, -1].all()
    assert not rl_last[mid, :-1].any()
    mine = ours.sample(64, batch_length_T=4)
    obs = mine["obs"][:, :, 0]
    assert (obs[:, -1] < LENGTH - 1).any() and (obs[:, -1] == LENGTH - 1).any()
    # Ours: only the transition from the episode's last stored step, in whichever column.
    assert mine["is_last"].tolist() == (obs == LENGTH - 1).tolist()

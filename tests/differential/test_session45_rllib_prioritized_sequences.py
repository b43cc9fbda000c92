"""Pinned difference from RLlib 2.60: ``batch_length_T`` on the prioritized buffer.

One test per docs/deviations.md row (its key in the comment after the test's name). Ours and
RLlib 2.60's behaviour are both asserted, so a test fails the day RLlib changes. Run with the
reference venv:

    .venv-ref/bin/python -m pytest -q \
        tests/differential/test_session45_rllib_prioritized_sequences.py
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (  # noqa: E402
    PrioritizedEpisodeReplayBuffer as RPrioritized,
)

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.replay import PrioritizedEpisodeReplayBuffer  # noqa: E402

LENGTH = 10


def _twins() -> tuple[PrioritizedEpisodeReplayBuffer, RPrioritized]:
    """Both buffers holding one episode of observations t; ours: step 2's priority 50."""
    kwargs = dict(
        observations=[np.array([float(t)], np.float32) for t in range(LENGTH + 1)],
        actions=[t % 2 for t in range(LENGTH)],
        rewards=[1.0] * LENGTH,
        terminated=True,
        len_lookback_buffer=0,
    )
    ours, theirs = PrioritizedEpisodeReplayBuffer(100, seed=0), RPrioritized(capacity=100)
    ours.add(OSAE("a", **kwargs))
    theirs.add(RSAE(id_="a", **kwargs))
    theirs.rng = np.random.default_rng(0)
    ours.update_priorities([50.0], ours.locate("a", 2))
    return ours, theirs


def test_batch_length_T_draws_prioritized_sequences():  # "per-sequences"
    ours, theirs = _twins()
    # RLlib 2.60: the sequence length is ignored: B one-step episodes (transitions drawn by
    # priority, with their weights), and update_priorities takes one value for each.
    rl = theirs.sample(400, batch_length_T=4, beta=0.4, n_step=1)
    assert len(rl) == 400 and {len(ep) for ep in rl} == {1}
    assert "weights" in rl[0].extra_model_outputs
    with pytest.raises(AssertionError):
        theirs.update_priorities(np.full(4, 3.0))  # not one per asked sequence step or row
    theirs.update_priorities(np.full(400, 3.0))
    # Ours: [B, T] sequences whose starts are drawn by priority, one weight per sequence.
    batch = ours.sample(400, batch_length_T=4, beta=0.4)
    assert batch["obs"].shape == (400, 4, 1) and batch["weights"].shape == (400,)
    starts = batch["obs"][:, 0, 0]
    assert (np.diff(batch["obs"][:, :, 0], axis=1) == 1).all()  # consecutive steps
    assert set(starts.tolist()) <= set(map(float, range(LENGTH - 4 + 1)))  # 4 steps left
    assert 0.8 < (starts == 2.0).mean() < 0.95  # 50 / (50 + 6)
    np.testing.assert_allclose(batch["weights"][starts == 2.0], 50.0**-0.4, rtol=1e-6)
    ours.update_priorities(np.full(400, 3.0))  # the starts
    assert ours.get_priorities(batch["indices"][:, 0]).tolist() == [3.0] * 400

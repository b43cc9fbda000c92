"""A TorchRL user's translation, checked against TorchRL 0.14.1 (docs/replay.md).

Two places where a TorchRL habit gives other values here, on purpose, each pinned on both
sides so the test fails the day either library changes:

- ``MultiStep`` runs over the collector's ``[N, T]`` batch, so a trajectory that goes on in
  the next batch gets a shorter horizon at the batch's end; ``sample(n_step=n)`` is computed
  from what is stored when it samples, so the same steps get the full horizon once the next
  chunk is in (and TorchRL's shorter one before: the same values on the same data).
- ``TensorDictReplayBuffer`` with a ``SliceSampler`` marks every slice's last step truncated
  (and done); ``is_truncated`` here is the episode's own flag, and the docs' one-line recipe
  gives TorchRL's flags back.

TorchRL and tensordict are installed in the reference venv only; elsewhere this is skipped:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session49_torchrl_user.py
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

with warnings.catch_warnings():  # TorchRL's import-time deprecation warnings, here only
    warnings.simplefilter("ignore")
    pytest.importorskip("tensordict")
    pytest.importorskip("torchrl")
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.postprocs import MultiStep
    from torchrl.data.replay_buffers.samplers import SliceSampler

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.replay import EpisodeReplayBuffer  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning"
)


def _chunk(id_: str, obs: np.ndarray, rewards: np.ndarray, t: int, **flags: bool):
    return SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=list(range(t, t + len(rewards))),
        rewards=list(rewards),
        t_started=t,
        len_lookback_buffer=0,
        **flags,
    )


def _collector_batch(obs: np.ndarray, rewards: np.ndarray, done_last: bool) -> TensorDict:
    """One env's ``[1, T]`` batch as a collector lays it out (``obs`` holds ``T + 1`` rows)."""
    steps = len(rewards)
    done = torch.zeros(1, steps, 1, dtype=torch.bool)
    done[0, -1, 0] = done_last
    return TensorDict(
        {
            "observation": torch.as_tensor(obs[:-1])[None],
            ("next", "observation"): torch.as_tensor(obs[1:])[None],
            ("next", "reward"): torch.as_tensor(rewards)[None, :, None],
            ("next", "done"): done,
            ("next", "terminated"): done.clone(),
            ("next", "truncated"): torch.zeros_like(done),
        },
        batch_size=[1, steps],
    )


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("per_batch", [3, 5, 6])
def test_multistep_stops_at_each_collector_batch_end_ours_runs_across_adds(n, per_batch):
    """One running trajectory of 3 batches: TorchRL's horizon shrinks at every batch's end."""
    gamma = 0.5
    rng = np.random.default_rng(n * 10 + per_batch)
    total = 3 * per_batch
    obs = np.stack([np.arange(total + 1), rng.normal(size=total + 1)], 1).astype(np.float32)
    rewards = rng.normal(size=total).astype(np.float32)
    buf = EpisodeReplayBuffer(1_000, seed=0)
    for b in range(3):
        a, z = b * per_batch, (b + 1) * per_batch
        theirs = MultiStep(gamma=gamma, n_steps=n)(
            _collector_batch(obs[a : z + 1], rewards[a:z], done_last=False)
        )
        buf.add(_chunk("traj", obs[a : z + 1], rewards[a:z], a))
        # Right after the add, ours on the batch's steps is TorchRL's on the batch.
        now = buf.get_transitions(buf.locate("traj", range(a, z)), n_step=n, gamma=gamma)
        steps = theirs["steps_to_next_obs"].numpy()[0]
        np.testing.assert_array_equal(steps, np.minimum(n, np.arange(per_batch, 0, -1)))
        np.testing.assert_array_equal(now["n_step"], steps)
        np.testing.assert_array_equal(now["next_obs"], theirs["next", "observation"].numpy()[0])
        np.testing.assert_allclose(
            now["rewards"], theirs["next", "reward"].numpy()[0, :, 0], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(now["discounts"], theirs["gamma"].numpy()[0], rtol=1e-6)
    # Later, ours run into the chunks added since: only the last stored steps stay short.
    later = buf.get_transitions(buf.locate("traj", range(total)), n_step=n, gamma=gamma)
    np.testing.assert_array_equal(later["n_step"], np.minimum(n, np.arange(total, 0, -1)))
    t = np.arange(total)
    np.testing.assert_array_equal(later["next_obs"], obs[t + later["n_step"]])
    expected = [
        sum(gamma**k * rewards[i + k] for k in range(m)) for i, m in enumerate(later["n_step"])
    ]
    np.testing.assert_allclose(later["rewards"], expected, rtol=1e-5, atol=1e-6)


def _slice_buffer(traj: np.ndarray, obs: np.ndarray, term: np.ndarray, trunc: np.ndarray):
    flag = lambda a: torch.as_tensor(a)[:, None]  # noqa: E731
    td = TensorDict(
        {
            "observation": torch.as_tensor(obs),
            "traj": torch.as_tensor(traj),
            ("next", "terminated"): flag(term),
            ("next", "truncated"): flag(trunc),
            ("next", "done"): flag(term | trunc),
        },
        batch_size=[len(obs)],
    )
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(slice_len=2, traj_key="traj", strict_length=True),
        batch_size=200,
    )
    rb.extend(td)
    return rb


def test_slice_ends_are_truncated_in_torchrl_and_the_recipe_gives_its_flags():
    """Episodes of 4 steps (terminated) and 4 (truncated), slices of 2 steps."""
    traj = np.repeat([0, 1], 4)
    obs = np.arange(8, dtype=np.float32)
    term = np.arange(8) == 3
    trunc = np.arange(8) == 7
    rb = _slice_buffer(traj, obs, term, trunc)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        theirs = rb.sample().view(100, 2)
    by_start = {
        float(row["observation"][0]): (
            row["next", "terminated"][:, 0].numpy(),
            row["next", "truncated"][:, 0].numpy(),
            row["next", "done"][:, 0].numpy(),
        )
        for row in theirs
    }
    assert sorted(by_start) == [0.0, 1.0, 2.0, 4.0, 5.0, 6.0]  # every strict start drawn

    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        [
            _chunk("a", np.arange(5, dtype=np.float32), np.ones(4, np.float32), 0, terminated=True),
            _chunk(
                "b", np.arange(4, 9, dtype=np.float32), np.ones(4, np.float32), 0, truncated=True
            ),
        ]
    )
    batch = buf.sample(200, batch_length_T=2)
    last_column = np.zeros_like(batch["mask"])
    last_column[:, -1] = True
    truncated = batch["is_truncated"] | last_column  # the docs' recipe: TorchRL's flags
    done = batch["is_terminated"] | truncated
    for row in range(200):
        start = float(batch["obs"][row, 0])
        their_term, their_trunc, their_done = by_start[start]
        np.testing.assert_array_equal(batch["is_terminated"][row], their_term)
        np.testing.assert_array_equal(truncated[row], their_trunc)
        np.testing.assert_array_equal(done[row], their_done)
        # Ours, as stored: only the truncated episode's own last step is truncated.
        np.testing.assert_array_equal(batch["is_truncated"][row], [False, start == 6.0])
    # TorchRL's slice ending at the termination (steps 2, 3) is terminated and truncated there.
    np.testing.assert_array_equal(np.stack(by_start[2.0][:2]), [[False, True], [False, True]])

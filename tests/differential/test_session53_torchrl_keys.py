"""A replay batch under TorchRL's keys, and two habits that give other values, vs TorchRL 0.14.1.

- docs/replay.md's key table: a transition batch renamed to TorchRL's keys gives TorchRL's
  ``TD0Estimator`` the target ``rewards + discounts * ~terminateds * V(next_obs)``, n-step
  windows included, as long as ``steps_to_next_obs`` comes along (without it TorchRL
  discounts an n-step return by gamma once).
- Burn-in: ``SliceSampler(slice_len=L + T)`` never puts an episode's first ``L`` steps after
  the burn-in; ``sample(batch_length_T=T, lookback=L)`` does, with the burn-in padded.
- A TD error of exactly 0: TorchRL's ``eps=1e-8`` and the 1e-12 floor here set the smallest
  priority, which every other weight is divided by.

TorchRL and tensordict are installed in the reference venv only; elsewhere this is skipped:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session53_torchrl_keys.py
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

with warnings.catch_warnings():  # TorchRL's import-time deprecation warnings, here only
    warnings.simplefilter("ignore")
    pytest.importorskip("tensordict")
    pytest.importorskip("torchrl")
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule
    from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler, SliceSampler
    from torchrl.data.replay_buffers.samplers import prioritized as torchrl_prioritized
    from torchrl.objectives.value import TD0Estimator

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402
from tests.differential._torchrl_trees import patch_trees  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning"
)


def torchrl_keys(batch: dict[str, Any]) -> dict[Any, Any]:
    """docs/replay.md's renaming (a transition batch on torch)."""

    def col(x: torch.Tensor) -> torch.Tensor:
        return x[:, None]

    return {
        "observation": batch["obs"],
        "action": batch["actions"],
        ("next", "observation"): batch["next_obs"],
        ("next", "reward"): col(batch["rewards"]),
        ("next", "terminated"): col(batch["terminateds"]),
        ("next", "truncated"): col(batch["truncateds"]),
        ("next", "done"): col(batch["terminateds"] | batch["truncateds"]),
        "steps_to_next_obs": batch["n_step"],
        "gamma": batch["discounts"],
        "index": batch["indices"],
        "priority_weight": batch["weights"],
    }


def _filled() -> EpisodeReplayBuffer:
    def obs(k: int, tag: float) -> list[np.ndarray]:
        return [np.float32([t, tag]) for t in range(k)]

    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        [
            SingleAgentEpisode("term", observations=obs(6, 1), actions=[0] * 5,
                               rewards=[1.0, 2, 3, 4, 5], terminated=True, len_lookback_buffer=0),
            SingleAgentEpisode("trunc", observations=obs(4, 2) + [np.float32([50, 2])],
                               actions=[0] * 4, rewards=[1.0] * 4, truncated=True,
                               len_lookback_buffer=0),
            SingleAgentEpisode("running", observations=obs(4, 3), actions=[0] * 3,
                               rewards=[0.5] * 3, len_lookback_buffer=0),
        ]
    )  # fmt: skip
    return buf


@pytest.mark.parametrize("n", [1, 3])
def test_torchrl_td0_estimator_gives_our_target_on_renamed_keys(n):
    buf = _filled()
    items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    batch = buf.get_transitions(items, n_step=n, gamma=0.9, device="cpu")
    td = TensorDict(torchrl_keys(batch), batch_size=[len(items)])
    torch.manual_seed(0)
    net = torch.nn.Linear(2, 1)
    estimator = TD0Estimator(
        gamma=0.9,
        value_network=TensorDictModule(net, in_keys=["observation"], out_keys=["state_value"]),
    )
    with torch.no_grad():
        theirs = estimator.value_estimate(td)[:, 0]
        ours = (
            batch["rewards"]
            + batch["discounts"] * ~batch["terminateds"] * net(batch["next_obs"])[:, 0]
        )
        torch.testing.assert_close(theirs, ours)
        if n > 1:  # without steps_to_next_obs an n-step return is discounted once
            del td["steps_to_next_obs"]
            once = estimator.value_estimate(td)[:, 0]
            longer = batch["n_step"] > 1
            assert longer.any() and not torch.isclose(once[longer], ours[longer]).all()


def test_burn_in_slices_leave_out_episode_starts_ours_keep_them():
    T, L, n = 4, 3, 12
    t = torch.arange(n)
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[-1] = True
    data = TensorDict(
        {"observation": t.float()[:, None], "episode": torch.zeros(n, dtype=torch.int64),
         ("next", "observation"): (t + 1).float()[:, None], ("next", "done"): done,
         ("next", "terminated"): done.clone(), ("next", "reward"): torch.ones(n, 1)},
        batch_size=[n],
    )  # fmt: skip
    torch.manual_seed(0)
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(slice_len=L + T, traj_key="episode", strict_length=True),
        batch_size=(L + T) * 50,
    )
    rb.extend(data)
    slices = rb.sample()["observation"][:, 0].reshape(50, L + T)
    theirs = set(slices[:, L].long().tolist())  # each slice's first step after the burn-in
    assert theirs == set(range(L, n - T + 1))

    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(SingleAgentEpisode(0, observations=[np.float32([x]) for x in range(n + 1)],
                               actions=[0] * n, rewards=[1.0] * n, terminated=True,
                               len_lookback_buffer=0))  # fmt: skip
    b = buf.sample(400, batch_length_T=T, lookback=L)
    ours = set(b["obs"][:, L, 0].astype(int).tolist())
    assert ours == set(range(0, n - T + 1))
    whole = b["mask"][:, 0]  # TorchRL's rows: those whose burn-in is whole
    assert set(b["obs"][whole, L, 0].astype(int).tolist()) == theirs


def test_a_zero_td_error_sets_every_weight_torchrl_by_its_eps(monkeypatch):
    patch_trees(monkeypatch, torchrl_prioritized)
    alpha, beta = 0.6, 0.4
    priorities = np.r_[0.0, np.ones(9)]
    rb = ReplayBuffer(
        storage=LazyTensorStorage(10),
        sampler=PrioritizedSampler(10, alpha=alpha, beta=beta, dtype=torch.float64),
        batch_size=200,
        generator=torch.Generator().manual_seed(0),
    )
    rb.extend(torch.arange(10.0))
    rb.update_priority(torch.arange(10), torch.as_tensor(priorities))
    _, info = rb.sample(return_info=True)
    theirs = info["priority_weight"][info["index"] != 0]
    np.testing.assert_allclose(theirs, (1.0 / 1e-8) ** (-alpha * beta), rtol=1e-5)  # 0.012

    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(SingleAgentEpisode("x", observations=list(range(11)), actions=[0] * 10,
                               rewards=[0.0] * 10, len_lookback_buffer=0))  # fmt: skip
    buf.update_priorities(priorities, buf.get_episode_indices("x"))
    batch = buf.sample(200, beta=beta)
    ours = batch["weights"][batch["indices"] != 0]
    np.testing.assert_allclose(ours, (1.0 / 1e-12) ** (-alpha * beta), rtol=1e-5)  # 0.0013
    buf.update_priorities(priorities + 1e-6, buf.get_episode_indices("x"))  # the docs' remedy
    batch = buf.sample(200, beta=beta)
    ours = batch["weights"][batch["indices"] != 0]
    np.testing.assert_allclose(ours, (1.0 / 1e-6) ** (-alpha * beta), rtol=1e-5)  # 0.036

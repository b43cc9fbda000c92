"""Double DQN with n-step returns on CartPole-v1, learning from an episode replay buffer.

The env runner records episode chunks from a vector env; every chunk goes into an
``EpisodeReplayBuffer`` (continuing chunks join their episode by id), which hands back
transitions with n-step returns, discounts and the true final observation of truncated
episodes. The learner is double DQN (online net picks the next action, target net values it)
with a Huber loss and a target network synced once per iteration.

    .venv/bin/python examples/dqn_cartpole.py --seed 0 --total-steps 100000

It prints a learning curve as it goes and ends with one line ``final_mean_return=<float>``
(the mean return of the last 20 finished training episodes). A budget (``--total-steps``)
below ``learning_starts`` (1000 env steps) lowers it to half the budget, so that a short run
still learns (and says so).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from _ppo_common import ReturnTracker, episode_writer, log_iteration, run_cli, seed_everything
from _ppo_common import summary as make_summary
from torch import nn
from tqdm import tqdm

from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner


@dataclass
class DQNConfig:
    """Hyperparameters (close to the RL-zoo CartPole DQN recipe, plus n-step and double Q)."""

    num_steps: int = 64  # per sub-env and iteration: 256 env steps with 4 envs
    gradient_steps: int = 128  # per iteration
    batch_size: int = 64
    buffer_capacity: int = 100_000
    learning_starts: int = 1_000
    learning_rate: float = 1e-3  # annealed linearly to 0 over the budget
    gamma: float = 0.99
    n_step: int = 3
    exploration_fraction: float = 0.16
    final_epsilon: float = 0.04
    hidden: int = 256
    max_grad_norm: float = 10.0


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(obs_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_actions),
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class EpsilonGreedy:
    """The runner's policy: greedy in the online net, random with probability ``epsilon``."""

    def __init__(self, model: QNetwork, num_actions: int, device: torch.device, seed: int):
        self.model, self.num_actions, self.device = model, num_actions, device
        self.rng = np.random.default_rng(seed)
        self.epsilon = 1.0

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        with torch.no_grad():
            q = self.model(torch.as_tensor(obs, dtype=torch.float32, device=self.device))
        actions = q.argmax(dim=1).cpu().numpy()
        explore = self.rng.random(len(actions)) < self.epsilon
        actions[explore] = self.rng.integers(0, self.num_actions, int(explore.sum()))
        return actions, {}


def dqn_update(
    model: QNetwork,
    target: QNetwork,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: DQNConfig,
) -> float:
    """One double-DQN step on an n-step batch; returns the loss."""
    obs = batch["obs"].float()
    q = model(obs).gather(1, batch["actions"].long()[:, None]).squeeze(1)
    with torch.no_grad():
        next_obs = batch["next_obs"].float()
        best = model(next_obs).argmax(dim=1, keepdim=True)
        next_q = target(next_obs).gather(1, best).squeeze(1)
        # n-step target: R + gamma^m * Q'(s_{t+m}); zero after a termination only (a
        # truncated episode bootstraps from its true final observation).
        alive = 1.0 - batch["terminateds"].float()
        y = batch["rewards"] + batch["discounts"] * alive * next_q
    loss = nn.functional.smooth_l1_loss(q, y)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    optimizer.step()
    return float(loss.detach())


def learn(
    buffer: EpisodeReplayBuffer,
    model: QNetwork,
    target: QNetwork,
    optimizer: torch.optim.Optimizer,
    cfg: DQNConfig,
    device: torch.device,
    shapes: dict[str, tuple[int, ...]],
) -> list[float]:
    """One iteration's learning: sync the target net, then ``gradient_steps`` updates."""
    target.load_state_dict(model.state_dict())
    losses = []
    for _ in range(cfg.gradient_steps):
        batch = buffer.sample(cfg.batch_size, n_step=cfg.n_step, gamma=cfg.gamma, device=device)
        if not shapes:  # recorded once, for the smoke test
            shapes.update({k: tuple(v.shape) for k, v in batch.items()})
        losses.append(dqn_update(model, target, optimizer, batch, cfg))
    return losses


def train(
    seed: int = 0,
    total_steps: int = 100_000,
    *,
    num_envs: int = 4,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: DQNConfig | None = None,
    log_every: int = 20,
    progress: bool = True,
    threads: int = 1,
) -> dict[str, Any]:
    """Trains double n-step DQN on CartPole-v1; returns the curve and final figures.

    Returns:
        ``final_mean_return``, ``env_steps``, ``wall_s``, ``history`` (one dict per
        iteration), ``shapes`` (of the first training batch) and ``config``.
    """
    cfg = config or DQNConfig()
    seed_everything(seed, threads)
    dev = torch.device(device)
    env = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="sync")
    obs_dim = int(np.prod(env.single_observation_space.shape))
    num_actions = int(env.single_action_space.n)
    model = QNetwork(obs_dim, num_actions, cfg.hidden).to(dev)
    target = QNetwork(obs_dim, num_actions, cfg.hidden).to(dev)
    target.load_state_dict(model.state_dict())
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    policy = EpsilonGreedy(model, num_actions, dev, seed)
    runner = EnvRunner(env, policy, seed=seed)
    buffer = EpisodeReplayBuffer(cfg.buffer_capacity, seed=seed)
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    if cfg.learning_starts > total_steps:
        # Otherwise the run would collect without one gradient step and report as if trained
        # (or learn only in its last iteration, the budget rounded up to whole iterations).
        tqdm.write(
            f"learning_starts lowered from {cfg.learning_starts} to {total_steps // 2}: "
            f"the budget is {total_steps} env steps"
        )
        cfg = replace(cfg, learning_starts=total_steps // 2)
    explore_steps = max(1.0, cfg.exploration_fraction * num_iters * steps_per_iter)
    tracker, history = ReturnTracker(), []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps, start = 0, time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    with episode_writer(save_dir, env=env) as writer:
        for iteration in range(1, num_iters + 1):
            policy.epsilon = max(cfg.final_epsilon, 1.0 - env_steps / explore_steps)
            # Annealing the step size to 0 lets the Q-function settle instead of oscillating.
            for group in optimizer.param_groups:
                group["lr"] = cfg.learning_rate * (1 - (iteration - 1) / num_iters)
            chunks = runner.sample(cfg.num_steps)
            buffer.add(chunks)
            if writer is not None:
                writer.write_many(chunks)
            env_steps += steps_per_iter
            losses = []
            if buffer.get_num_timesteps() >= cfg.learning_starts:
                losses = learn(buffer, model, target, optimizer, cfg, dev, shapes)
            tracker.add(runner.get_metrics()["episode_returns"])
            loss = float(np.mean(losses)) if losses else float("nan")
            history.append(
                {"env_steps": env_steps, "mean_return": tracker.mean, "loss": loss,
                 "epsilon": policy.epsilon}
            )  # fmt: skip
            log_iteration(
                bar,
                tracker,
                iteration=iteration,
                num_iters=num_iters,
                log_every=log_every,
                env_steps=env_steps,
                steps=steps_per_iter,
                postfix=dict(eps=f"{policy.epsilon:.2f}"),
                curve_extra=f"  loss {loss:8.4g}  eps {policy.epsilon:.2f}",
            )
            if stop_at_return is not None and tracker.mean >= stop_at_return:
                tqdm.write(f"reached {tracker.mean:.1f} >= {stop_at_return}: stopping early")
                break
    bar.close()
    env.close()
    return make_summary(
        tracker, env_steps=env_steps, start=start, history=history, shapes=shapes,
        config=asdict(cfg),
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    learning_starts = DQNConfig.learning_starts
    run_cli(
        train,
        __doc__.splitlines()[0],
        total_steps=100_000,
        num_envs=4,
        save_by_default=None,
        argv=argv,
        total_steps_help=f"env steps in all (below learning_starts, {learning_starts}, "
        "learning starts after half of them instead)",
    )


if __name__ == "__main__":
    main()

"""Feed-forward PPO on CartPole-v1, with every step passing through ``episodes``.

Run: ``python examples/ppo_cartpole.py [--seed 0] [--total-steps 200000] [--num-envs 8]``

The loop: an :class:`~episodes.runner.EnvRunner` drives a gymnasium vector env with the
current policy and returns per-env :class:`~episodes.SingleAgentEpisode` chunks (log-probs,
values and logits recorded as extra-model-outputs); :func:`~episodes.converter.
episodes_to_rollout` lays them out as a ``[T, N]`` :class:`~episodes.rollout.RolloutStorage`
(truncated episodes bootstrapped with the true value of their final observation); GAE fills
the advantages; ``mini_batch_generator`` feeds the clipped PPO update. The collected chunks
are saved with :class:`episodes.io.EpisodeWriter` (``--save-dir none`` turns that off).

It prints a learning curve as it goes and ends with one line ``final_mean_return=<float>``:
the mean return of the last 20 finished episodes.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers beside this file
from _ppo_common import (  # noqa: E402
    ReturnTracker,
    episode_writer,
    log_iteration,
    mean_stats,
    mlp,
    ppo_loss,
    run_cli,
    seed_everything,
    summary,
)


@dataclass
class PPOConfig:
    """Hyperparameters (tuned for >= 475 within 200k steps on 2 CPU cores)."""

    num_steps: int = 128  # T: steps per env per iteration (8 envs -> 1024 per update)
    num_epochs: int = 10
    num_mini_batches: int = 4
    learning_rate: float = 1e-3  # annealed linearly to 0 over the budget
    gamma: float = 0.98
    lam: float = 0.8
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    max_grad_norm: float = 0.5
    hidden: int = 64
    # Stop an update's remaining mini-batches once the policy has moved this far (approx. KL):
    # late in training a few large steps can otherwise undo a solved policy.
    target_kl: float | None = 0.02


class ActorCritic(nn.Module):
    """Separate MLP actor (logits) and critic (value)."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: int):
        super().__init__()
        self.actor = mlp(obs_dim, num_actions, hidden, out_gain=0.01)
        self.critic = mlp(obs_dim, 1, hidden, out_gain=1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, shape ``[B]``."""
        return self.critic(obs).squeeze(-1)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Categorical:
        """The action distribution at ``obs``."""
        return torch.distributions.Categorical(logits=self.actor(obs), validate_args=False)


class SamplingPolicy:
    """The runner-facing policy: numpy observations in, actions plus extra outputs out."""

    def __init__(self, model: ActorCritic, device: torch.device):
        self.model = model
        self.device = device

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples actions and records what the PPO update needs (log-prob, value, logits)."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        dist = self.model.distribution(x)
        actions = dist.sample()
        extras = {
            "action_logp": dist.log_prob(actions).cpu().numpy(),
            "vf_preds": self.model.value(x).cpu().numpy(),
            "logits": dist.logits.cpu().numpy(),
        }
        return actions.cpu().numpy(), extras

    @torch.no_grad()
    def value_fn(self, obs: np.ndarray) -> torch.Tensor:
        """Batched ``V`` for the converter's bootstrap (final / last observations)."""
        return self.model.value(torch.as_tensor(obs, dtype=torch.float32, device=self.device))


def update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    storage: Any,
    cfg: PPOConfig,
) -> dict[str, float]:
    """``num_epochs`` passes of clipped PPO over the storage's shuffled mini-batches."""
    stats = []
    for batch in storage.mini_batch_generator(cfg.num_mini_batches, cfg.num_epochs):
        dist = model.distribution(batch.observations)
        actions = batch.actions.squeeze(-1).long()
        loss, batch_stats = ppo_loss(
            dist.log_prob(actions),
            dist.entropy(),
            model.value(batch.observations),
            old_log_prob=batch.old_actions_log_prob.squeeze(-1),
            old_values=batch.values.squeeze(-1),
            advantages=batch.advantages.squeeze(-1),
            returns=batch.returns.squeeze(-1),
            clip=cfg.clip,
            value_coef=cfg.value_coef,
            entropy_coef=cfg.entropy_coef,
        )
        stats.append(batch_stats)
        if cfg.target_kl is not None and batch_stats["approx_kl"] > 1.5 * cfg.target_kl:
            break
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        optimizer.step()
    return mean_stats(stats)


def train(
    seed: int = 0,
    total_steps: int = 200_000,
    *,
    num_envs: int = 8,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: PPOConfig | None = None,
    log_every: int = 5,
    progress: bool = True,
    threads: int = 1,
) -> dict[str, Any]:
    """Trains PPO on CartPole-v1 and returns the learning curve and final figures.

    Args:
        seed: Seeds torch, numpy and the envs.
        total_steps: Env-step budget (rounded up to whole iterations of ``num_envs * T``).
        num_envs: Sub-envs of the sync vector env.
        device: Torch device of the learner (sampling runs there too; CartPole is tiny).
        save_dir: Where to save the collected chunks with ``episodes.io``; None: don't.
        stop_at_return: Stop once the mean of the last 20 finished episodes reaches this.
        config: Hyperparameters.
        log_every: Print a curve line every this many iterations (0: never).
        progress: Show a tqdm progress bar.
        threads: Torch CPU threads.

    Returns:
        ``final_mean_return``, ``env_steps``, ``wall_s``, ``history`` (one dict per iteration:
        env steps, mean return of the last 20 episodes, losses), ``shapes`` (the storage and
        first mini-batch shapes of the first iteration) and ``config``.
    """
    cfg = config or PPOConfig()
    seed_everything(seed, threads)
    dev = torch.device(device)
    env = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="sync")
    obs_dim = int(np.prod(env.single_observation_space.shape))
    model = ActorCritic(obs_dim, int(env.single_action_space.n), cfg.hidden).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    policy = SamplingPolicy(model, dev)
    runner = EnvRunner(env, policy, seed=seed)
    keys = ColumnKeys(values="vf_preds", log_probs="action_logp", distribution=("logits",))
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    tracker = ReturnTracker()
    history: list[dict[str, Any]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    with episode_writer(save_dir, env=env) as writer:
        for iteration in range(1, num_iters + 1):
            # Linear annealing to 0 lets the policy settle at the end of the budget.
            for group in optimizer.param_groups:
                group["lr"] = cfg.learning_rate * (1 - (iteration - 1) / num_iters)
            episodes = runner.sample(cfg.num_steps)
            if writer is not None:
                writer.write_many(episodes)
            rollout = episodes_to_rollout(
                episodes, gamma=cfg.gamma, value_fn=policy.value_fn, keys=keys, device=dev
            )
            storage = rollout.storage
            storage.compute_returns(rollout.last_values, cfg.gamma, cfg.lam)
            if not shapes:
                first = next(iter(storage.mini_batch_generator(cfg.num_mini_batches, 1)))
                shapes = {
                    "observations": tuple(storage.observations.shape),
                    "actions": tuple(storage.actions.shape),
                    "returns": tuple(storage.returns.shape),
                    "batch_observations": tuple(first.observations.shape),
                    "batch_actions": tuple(first.actions.shape),
                }
            stats = update(model, optimizer, storage, cfg)
            env_steps += steps_per_iter
            metrics = runner.get_metrics()
            tracker.add(metrics["episode_returns"])
            history.append({"env_steps": env_steps, "mean_return": tracker.mean, **stats})
            log_iteration(
                bar,
                tracker,
                iteration=iteration,
                num_iters=num_iters,
                log_every=log_every,
                env_steps=env_steps,
                steps=steps_per_iter,
                postfix=dict(kl=f"{stats['approx_kl']:.4f}"),
                curve_extra=(
                    f"  value_loss {stats['value_loss']:8.4g}  kl {stats['approx_kl']:.4f}"
                    f"  {env_steps / (time.perf_counter() - start):5.0f} steps/s"
                ),
            )
            if stop_at_return is not None and tracker.mean >= stop_at_return:
                tqdm.write(f"reached {tracker.mean:.1f} >= {stop_at_return}: stopping early")
                break
    bar.close()
    env.close()
    return summary(
        tracker,
        env_steps=env_steps,
        start=start,
        history=history,
        shapes=shapes,
        config=asdict(cfg),
    )


def main(argv: list[str] | None = None) -> None:
    # The demo: saves what it collects unless --save-dir none.
    run_cli(
        train,
        __doc__.splitlines()[0],
        total_steps=200_000,
        num_envs=8,
        save_by_default="ppo_cartpole",
        argv=argv,
    )


if __name__ == "__main__":
    main()

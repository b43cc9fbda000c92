"""Recurrent (GRU) PPO on CartPole-v1 with the velocities hidden, through ``episodes``.

Run: ``python examples/ppo_recurrent.py [--seed 0] [--total-steps 300000] [--num-envs 16]``

The policy sees only the cart position and the pole angle, so it has to remember the recent
past to act well: GRUs carry that memory. The loop is the feed-forward one
(``ppo_cartpole.py``) with three differences:

* the policy is recurrent (a GRU actor and a GRU critic),
  ``policy(obs, state) -> (actions, extras, state)``; the :class:`~episodes.runner.EnvRunner`
  resets a sub-env's state when its episode starts, and the policy records the states it was
  *given* at each step as the extra-model-outputs ``"h"`` (actor) and ``"hc"`` (critic),
  ``[num_layers, hidden]`` per step, so the storage knows every trajectory's initial states;
* the PPO update reads ``recurrent_mini_batch_generator``: whole envs per mini-batch, their
  ``[T]`` columns split at episode ends into zero-padded trajectories, each replayed through the
  GRU from its stored initial state;
* bootstrap values need the GRU state too, so instead of a stateless ``value_fn`` the example
  stores ``V`` of each ongoing or truncated chunk's last observation in
  ``chunk.custom_data["bootstrap_value"]``, which the converter reads (the critic GRU run
  from the state recorded at the chunk's last step over its last two observations, all chunks
  in one batched call: the runner's live state has moved past an env's window by the end of
  a next-step-mode call).

Ends with one line ``final_mean_return=<float>`` (mean return of the last 20 episodes).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.rollout import unpad_trajectories
from episodes.runner import EnvRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers beside this file
from _ppo_common import (  # noqa: E402
    ReturnTracker,
    episode_writer,
    init_layer,
    log_iteration,
    mean_stats,
    ppo_loss,
    run_cli,
    seed_everything,
    summary,
)

#: CartPole's observation is (x, x_dot, theta, theta_dot); the agent keeps the positions only.
VISIBLE = (0, 2)


class HideVelocities(gym.ObservationWrapper):
    """CartPole with the two velocities removed from the observation."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(
            box.low[list(VISIBLE)], box.high[list(VISIBLE)], dtype=np.float32
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The positions only."""
        return observation[list(VISIBLE)].astype(np.float32)


@dataclass
class RecurrentPPOConfig:
    """Hyperparameters (the common ones as in ``ppo_cartpole.py``; 300k-step budget)."""

    num_steps: int = 64  # T per env per iteration (16 envs -> 1024 per update)
    num_epochs: int = 4
    num_mini_batches: int = 4  # groups of whole envs (fewer with fewer envs)
    learning_rate: float = 1e-3  # annealed linearly to 0
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    max_grad_norm: float = 0.5
    hidden: int = 64
    num_layers: int = 1


class RecurrentActorCritic(nn.Module):
    """Separate GRU actor (logits) and GRU critic (value), as rsl_rl's recurrent policies.

    Separate trunks (and gradient clipping per network, see :func:`update`) matter here: with
    a shared one, the large early value gradients dominate the clipped gradient norm and the
    policy barely moves.
    """

    def __init__(self, obs_dim: int, num_actions: int, hidden: int, num_layers: int):
        super().__init__()
        self.num_layers, self.hidden = num_layers, hidden
        self.actor_gru = nn.GRU(obs_dim, hidden, num_layers)
        self.critic_gru = nn.GRU(obs_dim, hidden, num_layers)
        self.actor_head = init_layer(nn.Linear(hidden, num_actions), 0.01)
        self.critic_head = init_layer(nn.Linear(hidden, 1), 1.0)

    def initial_state(self, num_envs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeros ``(actor, critic)``, each ``[num_layers, num_envs, hidden]`` (env axis 1)."""
        device = next(self.parameters()).device
        shape = (self.num_layers, num_envs, self.hidden)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def actor_parameters(self) -> list[nn.Parameter]:
        """The actor's parameters (GRU and head)."""
        return [*self.actor_gru.parameters(), *self.actor_head.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        """The critic's parameters (GRU and head)."""
        return [*self.critic_gru.parameters(), *self.critic_head.parameters()]

    def logits(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` ``[T, B, D]`` from the actor state -> logits ``[T, B, A]``, new state."""
        features, state = self.actor_gru(obs, state)
        return self.actor_head(features), state

    def value(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` ``[T, B, D]`` from the critic state -> values ``[T, B]``, new state."""
        features, state = self.critic_gru(obs, state)
        return self.critic_head(features).squeeze(-1), state


class RecurrentSamplingPolicy:
    """The runner-facing recurrent policy; records its input states as extras ``h``/``hc``."""

    def __init__(self, model: RecurrentActorCritic, device: torch.device):
        self.model = model
        self.device = device

    def initial_state(self, num_envs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A fresh state batch; the runner calls this (env axis 1) on every episode start."""
        return self.model.initial_state(num_envs)

    @torch.no_grad()
    def __call__(
        self, obs: np.ndarray, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[np.ndarray, dict[str, np.ndarray], tuple[torch.Tensor, torch.Tensor]]:
        """One step of every sub-env: actions, extras, new ``(actor, critic)`` state."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
        h_actor, h_critic = state
        logits, new_actor = self.model.logits(x, h_actor)
        values, new_critic = self.model.value(x, h_critic)
        dist = torch.distributions.Categorical(logits=logits[0], validate_args=False)
        actions = dist.sample()
        extras = {
            "action_logp": dist.log_prob(actions).cpu().numpy(),
            "vf_preds": values[0].cpu().numpy(),
            "logits": logits[0].cpu().numpy(),
            # The states *entering* this step, per env [num_layers, hidden]: what the
            # recurrent generator hands back for every trajectory's first step.
            "h": h_actor.transpose(0, 1).cpu().numpy(),
            "hc": h_critic.transpose(0, 1).cpu().numpy(),
        }
        return actions.cpu().numpy(), extras, (new_actor, new_critic)


@torch.no_grad()
def store_bootstrap_values(
    episodes: list[Any], runner: EnvRunner, model: RecurrentActorCritic, device: torch.device
) -> None:
    """Puts ``V(last observation)`` of every ongoing or truncated chunk into its custom_data.

    A recurrent value needs the GRU state after the chunk's observations. The runner's live
    state is not it: in next-step mode the runner steps on past an env's window (reset steps
    record no transition) and its state has moved on, or was reset, by the end of the call.

    The chunk holds the critic state *entering* each step (``"hc"``), so the state entering
    its last step, run over the last two observations (that step's, then the last one), gives
    the state after the chunk's observations: what a replay of the whole chunk from its first
    step's state gives, at two GRU steps. Every chunk takes those two steps at once, in one
    batched call (a call per chunk, replaying it, took longer than sampling it at 512 envs).
    """
    del runner  # its live state is past the windows (see above)
    # Terminated wins over truncated: V = 0, nothing to store.
    wanted = [ep for ep in episodes if not ep.is_terminated]
    stepped = [ep for ep in wanted if len(ep)]
    if stepped:
        # [2, B, obs_dim]: each chunk's observation at its last step, then its last observation.
        obs = np.stack([ep.get_observations(slice(-2, None)) for ep in stepped], axis=1)
        # [num_layers, B, hidden]: the critic state entering each chunk's last step.
        state = np.stack([ep.get_extra_model_outputs("hc", -1) for ep in stepped], axis=1)
        values, _ = model.value(
            torch.as_tensor(obs, dtype=torch.float32, device=device),
            torch.as_tensor(state, dtype=torch.float32, device=device),
        )
        for ep, value in zip(stepped, values[-1].tolist()):
            ep.custom_data["bootstrap_value"] = value
    resets = [ep for ep in wanted if not len(ep)]
    if resets:  # chunks of just a reset: their one observation, from the state a reset gives
        obs = np.stack([ep.get_observations(-1) for ep in resets])[None]  # [1, B, obs_dim]
        state = model.initial_state(len(resets))[1]
        values, _ = model.value(torch.as_tensor(obs, dtype=torch.float32, device=device), state)
        for ep, value in zip(resets, values[-1].tolist()):
            ep.custom_data["bootstrap_value"] = value


def update(
    model: RecurrentActorCritic,
    optimizer: torch.optim.Optimizer,
    storage: Any,
    cfg: RecurrentPPOConfig,
) -> dict[str, float]:
    """Clipped PPO over padded trajectories, replayed through the GRU from their first state."""
    stats = []
    for batch in storage.recurrent_mini_batch_generator(cfg.num_mini_batches, cfg.num_epochs):
        h_actor, h_critic = batch.hidden_states  # each [num_layers, num_traj, hidden]
        # Padded steps come after each trajectory's end, so they never leak into real outputs.
        logits, _ = model.logits(batch.observations, h_actor)
        values, _ = model.value(batch.observations, h_critic)
        logits = unpad_trajectories(logits, batch.masks)  # [T, n_envs, A]
        values = unpad_trajectories(values, batch.masks)  # [T, n_envs]
        dist = torch.distributions.Categorical(logits=logits, validate_args=False)
        loss, batch_stats = ppo_loss(
            dist.log_prob(batch.actions.squeeze(-1).long()),
            dist.entropy(),
            values,
            old_log_prob=batch.old_actions_log_prob.squeeze(-1),
            old_values=batch.values.squeeze(-1),
            advantages=batch.advantages.squeeze(-1),
            returns=batch.returns.squeeze(-1),
            clip=cfg.clip,
            value_coef=cfg.value_coef,
            entropy_coef=cfg.entropy_coef,
        )
        optimizer.zero_grad()
        loss.backward()
        # Clip each network on its own: the critic's early gradients are large (returns of
        # tens to hundreds) and, under one global norm, would shrink the actor's step to nothing.
        for part in (model.actor_parameters(), model.critic_parameters()):
            nn.utils.clip_grad_norm_(part, cfg.max_grad_norm)
        optimizer.step()
        stats.append(batch_stats)
    return mean_stats(stats)


def make_env(num_envs: int) -> gym.vector.VectorEnv:
    """A sync vector env of velocity-less CartPoles."""
    return gym.make_vec(
        "CartPole-v1", num_envs, vectorization_mode="sync", wrappers=[HideVelocities]
    )


def train(
    seed: int = 0,
    total_steps: int = 300_000,
    *,
    num_envs: int = 16,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: RecurrentPPOConfig | None = None,
    log_every: int = 5,
    progress: bool = True,
    threads: int = 1,
) -> dict[str, Any]:
    """Trains GRU PPO on velocity-less CartPole; returns the curve and final figures.

    Args: as ``ppo_cartpole.train``.

    Returns:
        ``final_mean_return``, ``env_steps``, ``wall_s``, ``history``, ``shapes`` (storage,
        hidden-state and first recurrent mini-batch shapes) and ``config``.
    """
    cfg = config or RecurrentPPOConfig()
    if cfg.num_mini_batches > num_envs:
        # A mini-batch holds whole envs: fewer envs than mini-batches can't fill them all.
        cfg = replace(cfg, num_mini_batches=num_envs)
    seed_everything(seed, threads)
    dev = torch.device(device)
    env = make_env(num_envs)
    obs_dim = int(np.prod(env.single_observation_space.shape))
    model = RecurrentActorCritic(
        obs_dim, int(env.single_action_space.n), cfg.hidden, cfg.num_layers
    ).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    policy = RecurrentSamplingPolicy(model, dev)
    runner = EnvRunner(env, policy, state_batch_axis=1, seed=seed)
    keys = ColumnKeys(distribution=("logits",), actor_hidden=("h",), critic_hidden=("hc",))
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    tracker = ReturnTracker()
    history: list[dict[str, Any]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    # Named apart from CartPole-v1: its datasets hold other observations.
    with episode_writer(save_dir, env_id="NoVelocityCartPole-v1", env=env) as writer:
        for iteration in range(1, num_iters + 1):
            for group in optimizer.param_groups:
                group["lr"] = cfg.learning_rate * (1 - (iteration - 1) / num_iters)
            episodes = runner.sample(cfg.num_steps)
            store_bootstrap_values(episodes, runner, model, dev)
            if writer is not None:
                writer.write_many(episodes)
            rollout = episodes_to_rollout(episodes, gamma=cfg.gamma, keys=keys, device=dev)
            storage = rollout.storage
            storage.compute_returns(rollout.last_values, cfg.gamma, cfg.lam)
            if not shapes:
                gen = storage.recurrent_mini_batch_generator(cfg.num_mini_batches, 1)
                first = next(iter(gen))
                shapes = {
                    "observations": tuple(storage.observations.shape),
                    "hidden": tuple(storage.saved_hidden_states_actor[0].shape),
                    "batch_observations": tuple(first.observations.shape),
                    "batch_masks": tuple(first.masks.shape),
                    "batch_hidden": tuple(first.hidden_states[0].shape),
                    "batch_critic_hidden": tuple(first.hidden_states[1].shape),
                    "batch_actions": tuple(first.actions.shape),
                }
            stats = update(model, optimizer, storage, cfg)
            env_steps += steps_per_iter
            tracker.add(runner.get_metrics()["episode_returns"])
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
    # Off by default: the recorded GRU states make ~400 MB per 300k-step run.
    run_cli(
        train,
        __doc__.splitlines()[0],
        total_steps=300_000,
        num_envs=16,
        save_by_default=None,
        argv=argv,
    )


if __name__ == "__main__":
    main()

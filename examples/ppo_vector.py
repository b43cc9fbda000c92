"""Feed-forward PPO on gymnasium's CartPoleVectorEnv: hundreds of sub-envs through ``episodes``.

Run: ``python examples/ppo_vector.py [--seed 0] [--total-steps 2000000] [--num-envs 512]``

The same loop as ``ppo_cartpole.py``, at the scale of massively parallel training: one numpy
``CartPoleVectorEnv`` steps all sub-envs at once (next-step autoreset), an
:class:`~episodes.runner.EnvRunner` records per-env :class:`~episodes.SingleAgentEpisode`
chunks of ``T`` steps, :func:`~episodes.converter.episodes_to_rollout` lays them out as a
``[T, N]`` :class:`~episodes.rollout.RolloutStorage` (truncated episodes bootstrapped with
``V`` of their final observation), GAE fills the advantages and ``mini_batch_generator``
feeds the clipped PPO update. Nothing is saved unless ``--save-dir`` names a folder.

Every iteration prints a curve line with the env steps per second, of the whole iteration
and of collection alone (runner + converter + GAE); the run ends with one line
``final_mean_return=<float>``: the mean return of the last 20 finished episodes.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import WINDOWS, EnvRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers beside this file
from _ppo_common import (  # noqa: E402
    ReturnTracker,
    episode_writer,
    log_iteration,
    run_cli,
    seed_everything,
    summary,
)

# The model, the runner-facing policy and the PPO update are ppo_cartpole's own.
from ppo_cartpole import ActorCritic, SamplingPolicy, update  # noqa: E402


@dataclass
class VectorPPOConfig:
    """Hyperparameters (tuned for >= 475 within 2M steps with 512 sub-envs on 2 CPU cores)."""

    num_steps: int = 32  # T: steps per sub-env per iteration (512 envs -> 16384 per update)
    num_epochs: int = 5
    num_mini_batches: int = 8
    learning_rate: float = 1e-3  # annealed linearly to 0 over the budget
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    max_grad_norm: float = 0.5
    hidden: int = 64
    # Stop an update's remaining mini-batches once the policy has moved this far (approx. KL).
    target_kl: float | None = 0.02


def make_env(num_envs: int, torch_env: bool = False, device: str = "cpu") -> gym.vector.VectorEnv:
    """gymnasium's numpy-vectorized CartPole (one array op per step for all sub-envs).

    With ``torch_env``, the same task as batched torch tensors on ``device`` (what a GPU
    simulator hands over): the runner then records on that device.
    """
    if torch_env:
        return TorchCartPole(num_envs, device=device)
    return gym.make_vec("CartPole-v1", num_envs, vectorization_mode="vector_entry_point")


class TensorSamplingPolicy(SamplingPolicy):
    """The policy for a torch-tensor env: tensors in, tensors out, nothing leaves the device."""

    @torch.no_grad()
    def __call__(self, obs: Any) -> tuple[Any, dict[str, Any]]:  # type: ignore[override]
        """Samples actions; the extra outputs stay tensors on the env's device."""
        dist = self.model.distribution(obs)
        actions = dist.sample()
        extras = {
            "action_logp": dist.log_prob(actions),
            "vf_preds": self.model.value(obs),
            "logits": dist.logits,
        }
        return actions, extras


def collect(
    runner: EnvRunner, policy: SamplingPolicy, cfg: VectorPPOConfig, writer: Any
) -> tuple[Any, float]:
    """One rollout: runner -> converter -> GAE. Returns the storage and its seconds."""
    start = time.perf_counter()
    episodes = runner.sample(cfg.num_steps)
    rollout = episodes_to_rollout(
        episodes,
        gamma=cfg.gamma,
        value_fn=policy.value_fn,
        keys=ColumnKeys(values="vf_preds", log_probs="action_logp"),
        device=policy.device,
    )
    rollout.storage.compute_returns(rollout.last_values, cfg.gamma, cfg.lam)
    seconds = time.perf_counter() - start
    if writer is not None:  # outside the timing: saving is not part of collection
        writer.write_many(episodes)
    return rollout.storage, seconds


def train(
    seed: int = 0,
    total_steps: int = 2_000_000,
    *,
    num_envs: int = 512,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: VectorPPOConfig | None = None,
    log_every: int = 1,
    progress: bool = True,
    threads: int = 1,
    torch_env: bool = False,
    window: str = "transitions",
) -> dict[str, Any]:
    """Trains PPO on ``CartPoleVectorEnv`` and returns the learning curve and final figures.

    Args:
        seed: Seeds torch, numpy and the envs.
        total_steps: Env-step budget (rounded up to whole iterations of ``num_envs * T``).
        num_envs: Sub-envs of the vector env.
        device: Torch device of the learner (sampling runs there too).
        save_dir: Where to save the collected chunks with ``episodes.io``; None: don't.
        stop_at_return: Stop once the mean of the last 20 finished episodes reaches this.
        config: Hyperparameters.
        log_every: Print a curve line every this many iterations (0: never).
        progress: Show a tqdm progress bar.
        threads: Torch CPU threads.
        torch_env: Step ``TorchCartPole`` (torch tensors on ``device``) instead of the numpy
            env: collection, conversion, GAE and the update all stay on the device.
        window: The runner's ``window``: ``"vector_steps"`` takes ``T`` vector steps per
            iteration and masks the reset steps in the storage (``--window vector_steps``).

    Returns:
        ``final_mean_return``, ``env_steps``, ``wall_s``, ``history`` (one dict per iteration:
        env steps, mean return of the last 20 episodes, steps/s, losses), ``shapes`` (the
        storage shapes of the first iteration) and ``config``.
    """
    cfg = config or VectorPPOConfig()
    seed_everything(seed, threads)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        # The command line refuses it at parse time; checked here for callers of train:
        # building TorchCartPole on a missing CUDA ends in a misleading linker hint from
        # torch ("Cannot get CUDA generator without ATen_cuda ...").
        raise SystemExit(f"error: --device {device}: CUDA is not available on this machine")
    env = make_env(num_envs, torch_env, device)
    obs_shape, action_space = env.single_observation_space.shape, env.single_action_space
    assert obs_shape is not None and isinstance(action_space, gym.spaces.Discrete)
    model = ActorCritic(int(np.prod(obs_shape)), int(action_space.n), cfg.hidden).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    policy = (TensorSamplingPolicy if torch_env else SamplingPolicy)(model, dev)
    runner = EnvRunner(env, policy, seed=seed, window=window)
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    tracker = ReturnTracker()
    history: list[dict[str, Any]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    # TorchCartPole has no spec, but it is CartPole-v1 (same dynamics and spaces).
    with episode_writer(save_dir, env_id="CartPole-v1", env=env) as writer:
        for iteration in range(1, num_iters + 1):
            iter_start = time.perf_counter()
            # Linear annealing to 0 lets the policy settle at the end of the budget.
            for group in optimizer.param_groups:
                group["lr"] = cfg.learning_rate * (1 - (iteration - 1) / num_iters)
            storage, collect_s = collect(runner, policy, cfg, writer)
            if not shapes:
                shapes = {
                    "observations": tuple(storage.observations.shape),
                    "actions": tuple(storage.actions.shape),
                    "returns": tuple(storage.returns.shape),
                }
            stats = update(model, optimizer, storage, cfg)
            # Transitions trained on: with window="vector_steps" a reset step is a masked cell.
            recorded = steps_per_iter if storage.valid is None else int(storage.valid.sum())
            env_steps += recorded
            tracker.add(runner.get_metrics()["episode_returns"])
            rates = {
                "steps_per_s": recorded / (time.perf_counter() - iter_start),
                "collect_steps_per_s": recorded / collect_s,
            }
            history.append({"env_steps": env_steps, "mean_return": tracker.mean, **rates, **stats})
            log_iteration(
                bar,
                tracker,
                iteration=iteration,
                num_iters=num_iters,
                log_every=log_every,
                env_steps=env_steps,
                steps=steps_per_iter,
                postfix=dict(sps=f"{rates['steps_per_s']:.0f}"),
                curve_extra=(
                    f"  kl {stats['approx_kl']:.4f}  {rates['steps_per_s']:6.0f} steps/s"
                    f" (collection {rates['collect_steps_per_s']:6.0f} steps/s)"
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


def main(argv: list[str] | None = None, *, torch_env: bool = False, doc: str = __doc__) -> None:
    """The command line: ``torch_env`` selects the torch-tensor env (``ppo_torch_env.py``).

    Besides the shared flags, ``--window vector_steps`` records ``T`` vector steps per
    iteration (next-step reset steps masked) instead of ``T`` transitions per sub-env.
    """

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--window",
            choices=WINDOWS,
            default="transitions",
            help="transitions: T transitions per sub-env per iteration; vector_steps: T "
            "vector steps (next-step reset steps masked in the storage)",
        )
        # A curve line every iteration unless --log-every says otherwise.
        parser.set_defaults(log_every=1)

    run_cli(
        functools.partial(train, torch_env=torch_env),
        doc.splitlines()[0],
        total_steps=2_000_000,
        num_envs=512,
        save_by_default=None,
        argv=argv,
        add_arguments=add_arguments,
    )


if __name__ == "__main__":
    main()

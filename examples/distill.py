"""Teacher-student distillation on CartPole-v1 through ``episodes`` (DAgger-style).

Run: ``python examples/distill.py [--seed 0] [--total-steps 100000] [--num-envs 16]``

* The teacher is a scripted linear controller on the true, privileged state
  (``push right iff w . s > 0``); it balances the pole for the full 500 steps and learns nothing.
* The student is a small MLP that sees only a noisy copy of the state (Gaussian noise on every
  component), never the state itself.
* Each sub-env's observation is a dict ``{"student": noisy, "privileged": true state}``. The
  sampling policy acts with the teacher with probability ``beta`` (decayed from 1 to 0 over the
  first part of the budget) and otherwise with the student, and always records the teacher's
  action as the extra-model-output ``"teacher_action"``: the DAgger recipe, so the student
  learns the teacher's answer on the states it visits itself.
* :func:`~episodes.converter.episodes_to_rollout` with ``training_type="distillation"`` and
  ``ColumnKeys(privileged_actions="teacher_action")`` keeps only the student's view (``obs_fn``)
  and the teacher's actions; the student trains on the storage's ``generator()``, one batch per
  time step, accumulating a cross-entropy loss over a few steps per optimiser step.

Ends with one line ``final_mean_return=<float>``: the mean return of the last 20 finished
episodes; with the default budget (beta reaches 0 after 30% of it) the student plays them alone,
while with a short one they may have begun under the teacher.
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
    mlp,
    run_cli,
    seed_everything,
    summary,
)

#: The teacher's gains on (x, x_dot, theta, theta_dot): balances CartPole for 500 steps.
TEACHER_GAINS = np.array([0.1, 0.5, 1.0, 1.0], dtype=np.float32)


def teacher_actions(state: np.ndarray) -> np.ndarray:
    """The scripted privileged controller: 1 (push right) iff ``w . s > 0``; ``[N]`` int64."""
    return (state @ TEACHER_GAINS > 0).astype(np.int64)


class NoisyStudentView(gym.ObservationWrapper):
    """Observation ``{"student": state + noise, "privileged": state}`` for one CartPole."""

    def __init__(self, env: gym.Env, noise_std: float = 0.1):
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.noise_std = noise_std
        inf = np.full(box.shape, np.inf, dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "student": gym.spaces.Box(-inf, inf, dtype=np.float32),
                "privileged": box,
            }
        )
        # Its own generator: drawing from the env's would shift CartPole's reset states.
        self._noise = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Resets the env; a seed also seeds the observation noise."""
        if seed is not None:
            self._noise = np.random.default_rng(seed + 10_007)
        return super().reset(seed=seed, options=options)

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        """The true state for the teacher, a noisy copy for the student."""
        noise = self._noise.normal(0.0, self.noise_std, size=observation.shape)
        return {
            "student": (observation + noise).astype(np.float32),
            "privileged": observation.astype(np.float32),
        }


@dataclass
class DistillConfig:
    """Hyperparameters."""

    num_steps: int = 64  # T per env per iteration (16 envs -> 1024 steps per update)
    num_epochs: int = 4  # passes over each rollout
    gradient_length: int = 8  # time steps (x N envs) accumulated per optimiser step
    learning_rate: float = 1e-3
    beta_decay_fraction: float = 0.3  # beta goes 1 -> 0 linearly over this part of the budget
    noise_std: float = 0.1
    hidden: int = 64


class MixedPolicy:
    """Acts with the teacher with probability ``beta``, else with the (greedy) student.

    Always records the teacher's action, whoever acted.
    """

    def __init__(self, student: nn.Module, device: torch.device, seed: int):
        self.student = student
        self.device = device
        self.beta = 1.0
        self.rng = np.random.default_rng(seed)

    @torch.no_grad()
    def __call__(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Mixed actions plus ``{"teacher_action": [N]}``."""
        teacher = teacher_actions(obs["privileged"])
        x = torch.as_tensor(obs["student"], dtype=torch.float32, device=self.device)
        student = self.student(x).argmax(-1).cpu().numpy()
        use_teacher = self.rng.random(len(teacher)) < self.beta
        actions = np.where(use_teacher, teacher, student)
        return actions, {"teacher_action": teacher}


def student_view(observations: dict[str, np.ndarray]) -> np.ndarray:
    """``obs_fn`` for the converter: the storage keeps only what the student sees."""
    return observations["student"]


def update(
    student: nn.Module, optimizer: torch.optim.Optimizer, storage: Any, cfg: DistillConfig
) -> dict[str, float]:
    """Behaviour cloning of the teacher's actions over the distillation generator.

    The generator yields one ``[N, ...]`` batch per time step; the loss of
    ``gradient_length`` consecutive steps is accumulated before each optimiser step (as
    rsl_rl's distillation does), which gives the optimiser batches of a useful size.
    """
    losses, accuracies = [], []
    for _ in range(cfg.num_epochs):
        loss = torch.zeros((), device=storage.device)
        steps_in_loss = 0
        for t, batch in enumerate(storage.generator(), start=1):
            logits = student(batch.observations)
            target = batch.privileged_actions.squeeze(-1).long()
            loss = loss + nn.functional.cross_entropy(logits, target)
            steps_in_loss += 1
            accuracies.append(float((logits.argmax(-1) == target).float().mean()))
            if t % cfg.gradient_length == 0 or t == storage.num_transitions_per_env:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                # The last group is short when num_steps is not a multiple of gradient_length.
                losses.append(float(loss.detach()) / steps_in_loss)
                loss = torch.zeros((), device=storage.device)
                steps_in_loss = 0
    return {"loss": float(np.mean(losses)), "accuracy": float(np.mean(accuracies))}


def train(
    seed: int = 0,
    total_steps: int = 100_000,
    *,
    num_envs: int = 16,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: DistillConfig | None = None,
    log_every: int = 5,
    progress: bool = True,
    threads: int = 1,
) -> dict[str, Any]:
    """Distils the scripted teacher into a student on noisy observations.

    Args: as ``ppo_cartpole.train``.

    Returns:
        ``final_mean_return``, ``env_steps``, ``wall_s``, ``history`` (env steps, beta, mean
        return, loss, accuracy per iteration), ``shapes`` and ``config``.
    """
    cfg = config or DistillConfig()
    seed_everything(seed, threads)
    dev = torch.device(device)
    env = gym.make_vec(
        "CartPole-v1",
        num_envs,
        vectorization_mode="sync",
        wrappers=[lambda e: NoisyStudentView(e, cfg.noise_std)],
    )
    obs_dim = int(np.prod(env.single_observation_space["student"].shape))
    student = mlp(obs_dim, int(env.single_action_space.n), cfg.hidden, out_gain=0.01).to(dev)
    optimizer = torch.optim.Adam(student.parameters(), lr=cfg.learning_rate)
    policy = MixedPolicy(student, dev, seed)
    runner = EnvRunner(env, policy, seed=seed)
    keys = ColumnKeys(privileged_actions="teacher_action")
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    decay_iters = max(1, round(cfg.beta_decay_fraction * num_iters))
    tracker = ReturnTracker()
    history: list[dict[str, Any]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    # Named apart from CartPole-v1: its datasets hold dict observations.
    with episode_writer(save_dir, env_id="StudentViewCartPole-v1", env=env) as writer:
        for iteration in range(1, num_iters + 1):
            policy.beta = max(0.0, 1.0 - (iteration - 1) / decay_iters)
            episodes = runner.sample(cfg.num_steps)
            if writer is not None:
                writer.write_many(episodes)
            rollout = episodes_to_rollout(
                episodes,
                gamma=1.0,  # unused: distillation computes no returns
                keys=keys,
                training_type="distillation",
                obs_fn=student_view,
                device=dev,
            )
            storage = rollout.storage
            if not shapes:
                first = next(iter(storage.generator()))
                shapes = {
                    "observations": tuple(storage.observations.shape),
                    "actions": tuple(storage.actions.shape),
                    "privileged_actions": tuple(storage.privileged_actions.shape),
                    "batch_observations": tuple(first.observations.shape),
                    "batch_privileged_actions": tuple(first.privileged_actions.shape),
                }
            stats = update(student, optimizer, storage, cfg)
            env_steps += steps_per_iter
            tracker.add(runner.get_metrics()["episode_returns"])
            history.append(
                {"env_steps": env_steps, "beta": policy.beta, "mean_return": tracker.mean, **stats}
            )
            log_iteration(
                bar,
                tracker,
                iteration=iteration,
                num_iters=num_iters,
                log_every=log_every,
                env_steps=env_steps,
                steps=steps_per_iter,
                postfix=dict(beta=f"{policy.beta:.2f}"),
                curve_extra=(
                    f"  beta {policy.beta:.2f}  loss {stats['loss']:.4f}"
                    f"  agreement {stats['accuracy']:.3f}"
                ),
            )
            if stop_at_return is not None and policy.beta == 0.0 and tracker.mean >= stop_at_return:
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
    # Saving is opt-in here; the demo (ppo_cartpole) saves by default.
    run_cli(
        train,
        __doc__.splitlines()[0],
        total_steps=100_000,
        num_envs=16,
        save_by_default=None,
        argv=argv,
    )


if __name__ == "__main__":
    main()

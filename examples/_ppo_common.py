"""Small pieces shared by the training examples: command line, logging, saving, PPO loss.

Each example stays readable on its own; only the plumbing that is identical across them lives
here (the networks and the training loops stay in the examples).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

try:  # The disk format ships with the library; guard anyway so the examples never need it.
    from episodes.io import DatasetError, DatasetWriter, EpisodeWriter, dataset_info
except ImportError:  # pragma: no cover - only without episodes.io
    EpisodeWriter = None  # type: ignore[assignment,misc]

#: How many finished episodes ``final_mean_return`` averages over (the issue's definition).
RECENT_EPISODES = 20


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (anything else is a usage error, exit 2)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0 (anything else is a usage error, exit 2)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def make_parser(description: str, *, total_steps: int, num_envs: int) -> argparse.ArgumentParser:
    """The flags every example accepts (each example may add its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument(
        "--total-steps", type=positive_int, default=total_steps, help="env steps in all"
    )
    parser.add_argument("--num-envs", type=positive_int, default=num_envs)
    parser.add_argument("--device", default="cpu", help="torch device of the learner")
    parser.add_argument(
        "--save-dir",
        default=None,
        help="save every collected episode chunk there with episodes.io (a new or empty "
        "directory gets a format v1 dataset; an existing format v1 or v2 dataset is "
        "appended to); 'none' disables saving",
    )
    parser.add_argument(
        "--stop-at-return",
        type=float,
        default=None,
        help="stop early once the mean of the last 20 episodes reaches this",
    )
    parser.add_argument(
        "--log-every", type=non_negative_int, default=5, help="iterations per curve line"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    return parser


def default_save_dir(name: str, seed: int) -> str:
    """A fresh ``out/`` folder per run (``out/`` is git-ignored), so runs never mix."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("out", name, f"seed{seed}-{stamp}-{os.getpid()}")


def seed_everything(seed: int, threads: int) -> None:
    """Seeds torch and numpy and pins the torch thread count (small nets gain nothing more)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(max(1, threads))


def _is_v2_dataset(path: str) -> bool:
    """Whether ``path`` holds a format v2 dataset (one ``DatasetWriter`` appends to)."""
    try:
        return dataset_info(path).version >= 2
    except (DatasetError, OSError, ValueError):
        return False


def open_writer(save_dir: str) -> Any:
    """A writer for ``save_dir``: ``EpisodeWriter`` (format v1, also for a new directory) or
    ``DatasetWriter`` for an existing format v2 dataset.

    Raises:
        SystemExit: ``save_dir`` can't be written to (not empty and not a dataset, an
            unsupported version, locked, ...), with a one-line message instead of a traceback.
    """
    v2 = _is_v2_dataset(save_dir)
    try:
        return DatasetWriter(save_dir, sync=False) if v2 else EpisodeWriter(save_dir, sync=False)
    except DatasetError as error:
        raise SystemExit(f"error: --save-dir {save_dir}: {error}") from None


@contextlib.contextmanager
def episode_writer(save_dir: str | None) -> Iterator[Any]:
    """A writer for ``save_dir`` (see :func:`open_writer`), or None when saving is off or
    ``episodes.io`` is missing.

    ``sync=False``: the demo's data is cheap to regenerate, and an fsync per chunk would cost
    more than the training itself on a slow disk.
    """
    if save_dir is None or save_dir.lower() == "none":
        yield None
        return
    if EpisodeWriter is None:  # pragma: no cover - only without episodes.io
        print(f"episodes.io is not available: not saving episodes to {save_dir}")
        yield None
        return
    with open_writer(save_dir) as writer:
        yield writer


class ReturnTracker:
    """Keeps the returns of finished episodes; the learning curve reads the recent ones."""

    def __init__(self, window: int = RECENT_EPISODES):
        self.recent: deque[float] = deque(maxlen=window)
        self.num_episodes = 0

    def add(self, returns: Sequence[float]) -> None:
        """Adds the returns of newly finished episodes, in the order they finished."""
        self.recent.extend(float(r) for r in returns)
        self.num_episodes += len(returns)

    @property
    def mean(self) -> float:
        """Mean of the last ``window`` finished episodes (NaN before the first one)."""
        return float(np.mean(self.recent)) if self.recent else math.nan


def ppo_loss(
    new_log_prob: torch.Tensor,
    entropy: torch.Tensor,
    new_values: torch.Tensor,
    *,
    old_log_prob: torch.Tensor,
    old_values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    clip: float,
    value_coef: float,
    entropy_coef: float,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped PPO objective (policy surrogate, clipped value loss, entropy bonus).

    All tensors share one shape (``[B]`` or ``[T, N]``); ``mask`` (same shape, bool) marks the
    real steps when the batch is padded.

    Returns:
        The scalar loss to minimise and float statistics for the learning curve.
    """
    if mask is None:
        mask = torch.ones_like(advantages, dtype=torch.bool)
    weight = mask.to(advantages.dtype)
    count = weight.sum().clamp_min(1.0)

    def mean(x: torch.Tensor) -> torch.Tensor:
        return (x * weight).sum() / count

    log_ratio = new_log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    policy_loss = -mean(surrogate)
    # Clipping the value change like the policy keeps the critic from jumping on one batch.
    clipped_values = old_values + (new_values - old_values).clamp(-clip, clip)
    value_loss = mean(torch.max((new_values - returns).pow(2), (clipped_values - returns).pow(2)))
    entropy_mean = mean(entropy)
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy_mean
    with torch.no_grad():
        # The low-variance KL estimator (Schulman's k3), only for the curve.
        approx_kl = mean(ratio - 1 - log_ratio)
    stats = {
        "policy_loss": float(policy_loss.detach()),
        "value_loss": float(value_loss.detach()),
        "entropy": float(entropy_mean.detach()),
        "approx_kl": float(approx_kl),
    }
    return loss, stats


def mean_stats(stats: Sequence[dict[str, float]]) -> dict[str, float]:
    """Averages per-mini-batch statistics key by key."""
    if not stats:
        return {}
    return {key: float(np.mean([s[key] for s in stats])) for key in stats[0]}


def init_layer(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights and zero biases: the usual PPO initialisation (stable early updates)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(in_dim: int, out_dim: int, hidden: int, out_gain: float) -> nn.Sequential:
    """A two-hidden-layer tanh MLP."""
    return nn.Sequential(
        init_layer(nn.Linear(in_dim, hidden), math.sqrt(2)),
        nn.Tanh(),
        init_layer(nn.Linear(hidden, hidden), math.sqrt(2)),
        nn.Tanh(),
        init_layer(nn.Linear(hidden, out_dim), out_gain),
    )


def curve_line(iteration: int, env_steps: int, tracker: ReturnTracker, extra: str = "") -> str:
    """One line of the learning curve."""
    return (
        f"iter {iteration:4d}  env_steps {env_steps:7d}  episodes {tracker.num_episodes:5d}  "
        f"mean_return(last {tracker.recent.maxlen}) {tracker.mean:6.1f}{extra}"
    )


def print_final(value: float) -> None:
    """The one line scripts and tests parse."""
    print(f"final_mean_return={value:.2f}", flush=True)


def log_iteration(
    bar: Any,
    tracker: ReturnTracker,
    *,
    iteration: int,
    num_iters: int,
    log_every: int,
    env_steps: int,
    steps: int,
    postfix: dict[str, str],
    curve_extra: str,
) -> None:
    """Advances the progress bar and prints a learning-curve line every ``log_every`` iterations."""
    bar.update(steps)
    bar.set_postfix(ret=f"{tracker.mean:.1f}", **postfix)
    if log_every and (iteration % log_every == 0 or iteration == num_iters):
        from tqdm import tqdm

        tqdm.write(curve_line(iteration, env_steps, tracker, curve_extra))


def summary(
    tracker: ReturnTracker,
    *,
    env_steps: int,
    start: float,
    history: list[dict[str, Any]],
    shapes: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """What ``train`` returns: the final mean return, steps, time, curve, shapes and config."""
    return {
        "final_mean_return": tracker.mean,
        "env_steps": env_steps,
        "wall_s": time.perf_counter() - start,
        "history": history,
        "shapes": shapes,
        "config": config,
    }


def run_cli(
    train: Any,
    description: str,
    *,
    total_steps: int,
    num_envs: int,
    save_by_default: str | None,
    argv: list[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Parses the shared flags, trains, and prints the closing ``final_mean_return=`` line.

    ``add_arguments(parser)`` may add an example's own flags (and change defaults with
    ``parser.set_defaults``); the values of the flags it adds go to ``train`` as keyword
    arguments named by their ``dest``, so ``--help`` lists them with the shared ones.
    """
    parser = make_parser(description, total_steps=total_steps, num_envs=num_envs)
    shared = set(vars(parser.parse_args([])))
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    extra = {key: value for key, value in vars(args).items() if key not in shared}
    save_dir = args.save_dir or (
        default_save_dir(save_by_default, args.seed) if save_by_default else "none"
    )
    result = train(
        args.seed,
        args.total_steps,
        num_envs=args.num_envs,
        device=args.device,
        save_dir=save_dir,
        stop_at_return=args.stop_at_return,
        log_every=args.log_every,
        progress=not args.no_progress,
        threads=args.threads,
        **extra,
    )
    if save_dir.lower() != "none":
        print(f"saved the collected episodes to {save_dir}")
    print(f"{result['env_steps']} env steps in {result['wall_s']:.1f} s")
    print_final(result["final_mean_return"])

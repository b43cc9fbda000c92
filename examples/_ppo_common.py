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
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

try:  # The disk format ships with the library; guard anyway so the examples never need it.
    from episodes.io import DatasetError, DatasetWriter, EpisodeWriter, dataset_info
    from episodes.io.tools import other_env_problem
    from episodes.io.writer import FRESH_NAMES
except ImportError:  # pragma: no cover - only without episodes.io
    EpisodeWriter = None  # type: ignore[assignment,misc]

#: How many finished episodes ``final_mean_return`` averages over (the issue's definition).
RECENT_EPISODES = 20

#: The largest ``--seed``: ``np.random.seed`` takes 32-bit seeds only.
MAX_SEED = 2**32 - 1


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


def seed_int(text: str) -> int:
    """An argparse ``type``: a seed in ``[0, 2**32 - 1]`` (numpy's seeds are 32-bit)."""
    value = int(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in [0, {MAX_SEED}], got {value}")
    return value


def finite_float(text: str) -> float:
    """An argparse ``type``: a finite float (``nan`` would never compare true, ``inf`` never
    be reached)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def device_name(text: str) -> str:
    """An argparse ``type``: a torch device this machine has (cpu, cuda[:i] or mps).

    Checked at parse time so that a typo or a missing GPU is a usage error, not a traceback
    from the first tensor moved there.
    """
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(
                f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise argparse.ArgumentTypeError(f"{text}: MPS is not available on this machine")
    elif device.type != "cpu":
        raise argparse.ArgumentTypeError(f"{text}: the examples train on cpu, cuda or mps")
    return str(device)


def make_parser(
    description: str,
    *,
    total_steps: int,
    num_envs: int,
    total_steps_help: str = "env steps in all",
    save_dir_help: str | None = None,
) -> argparse.ArgumentParser:
    """The flags every example accepts (each example may add its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=seed_int, default=0, help=f"0 to {MAX_SEED}")
    parser.add_argument(
        "--total-steps", type=positive_int, default=total_steps, help=total_steps_help
    )
    parser.add_argument("--num-envs", type=positive_int, default=num_envs)
    parser.add_argument(
        "--device",
        type=device_name,
        default="cpu",
        help="torch device of the learner (cpu, cuda[:i] or mps)",
    )
    parser.add_argument(
        "--save-dir",
        default=None,
        help=save_dir_help
        or "save every collected episode chunk there with episodes.io (a new or empty "
        "directory gets a format v1 dataset; an existing format v1 or v2 dataset of the "
        "same env and spaces is appended to); 'none' disables saving",
    )
    parser.add_argument(
        "--stop-at-return",
        type=finite_float,
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


def _not_a_directory(save_dir: str) -> str:
    """Why ``save_dir`` can't be (or become) a directory ("" if it can)."""
    path = Path(save_dir)
    existing = path
    # lexists: a dangling link stops the walk as well (it can't be made into a directory).
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir():
        return ""
    if existing == path:
        return f"{save_dir} exists and is not a directory"
    return f"{existing} is not a directory"


def save_dir_problem(
    save_dir: str,
    env_id: str | None = None,
    spaces: tuple[Any, Any] | None = None,
    *,
    v2_only: bool = False,
) -> str:
    """Why an example may not save episodes into ``save_dir`` ("" if it may).

    It may when ``save_dir`` is new, an empty directory, or a dataset the example can append
    to: format v2 only with ``v2_only`` (the Ray runners write v2), and, given ``env_id`` and
    ``spaces`` (observation and action space of one sub-env), of the same env and spaces, as
    ``episodes record`` requires (a mixed dataset breaks the readers that batch its steps).
    Reads only: the Ray examples ask on the driver, before any actor opens the dataset.
    """
    problem = _not_a_directory(save_dir)
    if problem or not os.path.isdir(save_dir):
        return problem
    try:
        names = set(os.listdir(save_dir))
        if not names or (not v2_only and names <= FRESH_NAMES):
            return ""  # new, or a v1 dataset's first steps (a killed writer's): it restarts it
        info = dataset_info(save_dir)
        if v2_only and info.version < 2:
            return (
                f"{save_dir} is a format v1 dataset; the runners append to format v2 only "
                f"(convert it with `episodes migrate {save_dir} NEW_DIR`, or pass a new directory)"
            )
        if env_id is None or spaces is None:
            return ""
        # Its env id, and the spaces of its episodes (a wrapper keeps the id).
        return other_env_problem(save_dir, env_id, *spaces)
    except (DatasetError, OSError, ValueError) as error:
        return str(error)
    return ""


def open_writer(
    save_dir: str, env_id: str | None = None, spaces: tuple[Any, Any] | None = None
) -> Any:
    """A writer for ``save_dir``: ``EpisodeWriter`` (format v1, also for a new directory) or
    ``DatasetWriter`` for an existing format v2 dataset.

    Given ``env_id`` and ``spaces``, an existing dataset must hold that env's episodes (see
    :func:`save_dir_problem`).

    Raises:
        SystemExit: ``save_dir`` can't be written to (a file, not empty and not a dataset, of
            another env, an unsupported version, locked, ...), with a one-line message
            instead of a traceback.
    """
    problem = save_dir_problem(save_dir, env_id, spaces)
    if problem:
        raise SystemExit(f"error: --save-dir {save_dir}: {problem}")
    v2 = _is_v2_dataset(save_dir)
    try:
        return DatasetWriter(save_dir, sync=False) if v2 else EpisodeWriter(save_dir, sync=False)
    except (DatasetError, OSError) as error:
        raise SystemExit(f"error: --save-dir {save_dir}: {error}") from None


@contextlib.contextmanager
def episode_writer(
    save_dir: str | None, env_id: str | None = None, env: Any = None
) -> Iterator[Any]:
    """A writer for ``save_dir`` (see :func:`open_writer`), or None when saving is off or
    ``episodes.io`` is missing.

    Given the vector ``env`` (and the ``env_id`` it records as: its spec's id by default),
    an existing dataset must hold episodes of that env and of its sub-env's spaces.

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
    spaces = None
    if env is not None:
        env_id = env_id or getattr(env.spec, "id", None) or type(env).__name__
        spaces = (env.single_observation_space, env.single_action_space)
    with open_writer(save_dir, env_id, spaces) as writer:
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


def print_final(value: float, env_steps: int) -> None:
    """The one line scripts and tests parse.

    Raises:
        SystemExit: no episode finished (the mean is NaN): exit 1 with a line that says so,
            not a ``final_mean_return=nan`` a script would take for a result.
    """
    if math.isnan(value):
        raise SystemExit(
            f"error: no episode finished within {env_steps} env steps; raise --total-steps"
        )
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
    total_steps_help: str = "env steps in all",
) -> None:
    """Parses the shared flags, trains, and prints the closing ``final_mean_return=`` line.

    ``add_arguments(parser)`` may add an example's own flags (and change defaults with
    ``parser.set_defaults``); the values of the flags it adds go to ``train`` as keyword
    arguments named by their ``dest``, so ``--help`` lists them with the shared ones.
    """
    parser = make_parser(
        description,
        total_steps=total_steps,
        num_envs=num_envs,
        total_steps_help=total_steps_help,
    )
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
    print_final(result["final_mean_return"], result["env_steps"])

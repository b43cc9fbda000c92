"""A dataset recorded by remote runners, read back with Ray Data into training batches.

Run: ``python examples/offline_ray_data.py [--seed 0] [--total-steps 20000] [--num-envs 8]``

1. Collect: a :class:`~episodes.distributed.RunnerGroup` of 2 runner actors (random CartPole
   policy) samples in parallel; every runner appends its chunks to one shared format v2
   dataset (``--save-dir``, a fresh folder under ``out/`` by default; ``--save-dir none``: a
   temporary folder, removed at the end).
2. Read: :func:`~episodes.distributed.read_steps` turns the dataset into a
   ``ray.data.Dataset`` of steps (one read task per shard), shuffled, and batched into torch
   tensors.
3. Train: a small network regresses one-step TD targets ``r + gamma * (1 - terminated) * V(o')``
   of the random policy (fitted value evaluation), epoch after epoch over the batches.

It prints the dataset's size, the loss per epoch, and ends with ``final_loss=<float>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ppo_common import (  # noqa: E402
    default_save_dir,
    mlp,
    positive_int,
    save_dir_problem,
    seed_int,
)

#: The runner actors ``collect`` starts; ``--num-envs`` splits evenly over them.
NUM_RUNNERS = 2


def make_env(ctx: Any) -> gym.vector.VectorEnv:
    """Built on each runner actor."""
    return gym.make_vec("CartPole-v1", int(ctx.config["num_envs"]), vectorization_mode="sync")


def make_policy(env: gym.vector.VectorEnv, ctx: Any) -> Any:
    """A seeded random policy, built on each runner actor."""
    from episodes.runner import RandomPolicy

    return RandomPolicy(env.action_space, seed=ctx.seed)


def path_problem(path: str) -> str:
    """Why the runners can't append CartPole-v1 chunks to ``path`` ("" if they can)."""
    probe = gym.make("CartPole-v1")
    try:
        spaces = (probe.observation_space, probe.action_space)
    finally:
        probe.close()
    return save_dir_problem(path, "CartPole-v1", spaces, v2_only=True)


def collect(path: str, total_steps: int, num_envs: int, seed: int) -> int:
    """Two remote runners write ``total_steps`` (rounded up) into one dataset.

    Raises:
        ValueError: ``num_envs`` does not split evenly over the two runners (odd or < 2), or
            the runners can't append to ``path`` (see :func:`path_problem`).
    """
    from episodes.distributed import RunnerGroup
    from episodes.io import DatasetMetadata

    if num_envs < NUM_RUNNERS or num_envs % NUM_RUNNERS:
        raise ValueError(
            f"num_envs ({num_envs}) must split evenly over {NUM_RUNNERS} runners "
            f"(an even number >= {NUM_RUNNERS})"
        )
    problem = path_problem(path)  # on the driver: a runner would fail on its actor
    if problem:
        raise ValueError(f"path {path}: {problem}")
    per_runner = num_envs // NUM_RUNNERS
    group = RunnerGroup(
        make_env,
        make_policy,
        num_runners=NUM_RUNNERS,
        seed=seed,
        config={"num_envs": per_runner},
        write_to=path,
        write_metadata=DatasetMetadata(env_id="CartPole-v1", policy="random", seeds=[seed]),
        num_cpus_per_runner=0.5,
    )
    collected = 0
    with group:
        while collected < total_steps:
            collected += group.sample(200).env_steps
    return collected


def train(path: str, *, epochs: int, batch_size: int, gamma: float, seed: int) -> float:
    """Fitted value evaluation over Ray Data batches; returns the last epoch's mean loss."""
    from episodes.distributed import read_steps

    torch.manual_seed(seed)
    value = mlp(4, 1, 64, out_gain=1.0)
    optimizer = torch.optim.Adam(value.parameters(), lr=1e-3)
    steps = read_steps(path).select_columns(["obs", "reward", "next_obs", "terminated"])
    loss_value = float("nan")
    for epoch in range(1, epochs + 1):
        losses, values = [], []
        shuffled = steps.random_shuffle(seed=seed + epoch)
        for batch in shuffled.iter_torch_batches(batch_size=batch_size, dtypes=torch.float32):
            with torch.no_grad():
                target = batch["reward"] + gamma * (1 - batch["terminated"]) * value(
                    batch["next_obs"]
                ).squeeze(-1)
            prediction = value(batch["obs"]).squeeze(-1)
            loss = (prediction - target).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            values.append(prediction.mean().item())
        loss_value = float(np.mean(losses))
        # V grows towards the random policy's discounted return, the targets with it.
        print(
            f"epoch {epoch}: {len(losses)} batches, mean TD loss {loss_value:.4f}, "
            f"mean V {np.mean(values):.2f}",
            flush=True,
        )
    return loss_value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=seed_int, default=0, help="0 to 2**32 - 1")
    parser.add_argument("--total-steps", type=positive_int, default=20_000)
    parser.add_argument(
        "--num-envs",
        type=positive_int,
        default=8,
        help=f"split evenly over {NUM_RUNNERS} runners (an even number >= {NUM_RUNNERS})",
    )
    parser.add_argument(
        "--save-dir",
        default=None,
        help="the dataset the runners write and training reads (a new or empty directory "
        "gets a format v2 dataset; an existing format v2 dataset of CartPole-v1 is appended "
        "to and read whole, a format v1 one is refused); default: a fresh folder under out/; "
        "'none': a temporary folder, removed at the end",
    )
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--batch-size", type=positive_int, default=512)
    args = parser.parse_args(argv)
    if args.num_envs % NUM_RUNNERS:
        parser.error(
            f"argument --num-envs: {args.num_envs} does not split evenly over {NUM_RUNNERS} "
            f"runners (an even number >= {NUM_RUNNERS})"
        )
    path = args.save_dir or default_save_dir("offline_ray_data", args.seed)
    if path.lower() == "none":  # as in the other examples: nothing kept after the run
        with tempfile.TemporaryDirectory(prefix="offline_ray_data-") as temporary:
            run(args, os.path.join(temporary, "data"))
        return
    problem = path_problem(path)  # before Ray starts
    if problem:
        parser.error(f"argument --save-dir: {path}: {problem}")
    run(args, path)


def run(args: argparse.Namespace, path: str) -> None:
    """Collects into ``path``, then trains on it (the parsed flags in ``args``)."""
    import ray
    import ray.data

    from episodes.io import dataset_info

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    start = time.perf_counter()
    collected = collect(path, args.total_steps, args.num_envs, args.seed)
    info = dataset_info(path)
    print(
        f"collected {collected} steps with {NUM_RUNNERS} remote runners into {path}: "
        f"{info.num_chunks} chunks, {info.num_shards} shards, {info.num_steps} steps "
        f"({time.perf_counter() - start:.1f} s)"
    )
    loss = train(path, epochs=args.epochs, batch_size=args.batch_size, gamma=0.99, seed=args.seed)
    print(f"final_loss={loss:.4f}")


if __name__ == "__main__":
    main()

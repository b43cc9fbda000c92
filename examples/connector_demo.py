"""Collect CartPole-v1 episodes with the EnvRunner and build connector features across a cut.

Run: ``python examples/connector_demo.py [--seed 0] [--num-envs 4] [--steps 100]``

It samples twice (two chunks per ongoing episode, cut with a lookback of 4), then builds
previous-4-actions (one-hot, zero fill) and 4-frame observation stacks for the second sample's
chunks and checks that a chunk which continues an episode from the first sample gets exactly
the rows the un-cut episode gives.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.runner import EnvRunner, RandomPolicy


def at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low`` (anything else is a usage error, exit 2)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid ... value"
    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=at_least(0), default=0)
    parser.add_argument("--num-envs", type=at_least(1), default=4)
    # 2 at least: the cross-cut check needs a chunk of >= 2 steps that continues an episode.
    parser.add_argument(
        "--steps", type=at_least(2), default=100, help="steps per env per sample (>= 2)"
    )
    parser.add_argument(
        "--autoreset-mode", default="NextStep", choices=["NextStep", "SameStep", "Disabled"]
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()

    env = gym.make_vec(
        "CartPole-v1",
        args.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": args.autoreset_mode},
    )
    runner = EnvRunner(
        env, RandomPolicy(env.action_space, seed=args.seed), len_lookback_buffer=4, seed=args.seed
    )
    first = runner.sample(args.steps)
    second = runner.sample(args.steps)
    metrics = runner.get_metrics()
    # No finished episode has no mean return (the runner's metric is NaN then).
    mean_return = (
        f"mean return {metrics['mean_episode_return']:.1f}"
        if metrics["num_episodes"]
        else "no mean return yet"
    )
    print(
        f"sampled 2 x {args.steps} steps x {args.num_envs} envs ({args.autoreset_mode}): "
        f"{len(first)} + {len(second)} chunks, {metrics['num_episodes']} finished episodes, "
        f"{mean_return}, {metrics['env_steps_per_s']:.0f} env steps/s"
    )

    pipeline = ConnectorPipeline(
        [FrameStack(4), PrevActionsPrevRewards(n_actions=4, n_rewards=0), AddLearnerColumns()]
    )
    print(pipeline)
    batch = pipeline(second)
    for key in ("obs", "prev_n_actions", "actions", "rewards", "terminateds", "t"):
        print(f"  {key:15s} {batch[key].shape} {batch[key].dtype}")

    # A chunk of the second sample that continues an episode of the first one.
    by_id = {ep.id_: ep for ep in first if not ep.is_done}
    chunk = next((ep for ep in second if ep.id_ in by_id and len(ep) >= 2), None)
    if chunk is None:
        print(
            "no chunk of the second sample continues an episode of the first one with >= 2 "
            "steps (every episode ended at the cut): nothing to compare; try more --steps "
            "or --num-envs"
        )
        return
    before = by_id[chunk.id_]
    print(
        f"chunk of env {chunk.custom_data['env_index']}: t_started={chunk.t_started}, "
        f"len={len(chunk)}, lookback={chunk.actions.lookback}"
    )
    rows = pipeline([chunk])
    print("  first row, 4 stacked frames (oldest first):\n", rows["obs"][0])
    print("  first row, previous 4 actions one-hot:\n", rows["prev_n_actions"][0])

    uncut = copy.deepcopy(before)
    uncut.concat_episode(copy.deepcopy(chunk))
    uncut_rows = pipeline([uncut])
    offset = len(before)
    for key in ("obs", "prev_n_actions", "actions", "t"):
        np.testing.assert_array_equal(rows[key], uncut_rows[key][offset:], err_msg=key)
    # ... and equal to the getter idiom on the un-cut episode, step by step.
    for i in range(len(chunk)):
        ts = offset + i
        expected = uncut.get_actions(
            slice(ts - 4, ts), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True
        )
        np.testing.assert_array_equal(rows["prev_n_actions"][i], expected)
        frames = uncut.get_observations(slice(ts - 3, ts + 1), neg_index_as_lookback=True, fill=0.0)
        np.testing.assert_array_equal(rows["obs"][i], frames)
    print(
        f"cross-cut rows equal the un-cut episode's rows: OK ({time.perf_counter() - start:.2f}s)"
    )


if __name__ == "__main__":
    main()

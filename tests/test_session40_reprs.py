"""Long-lived objects print what they are in a line: counts and settings, never their data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.sum_tree import SumTree
from episodes.runner import EnvRunner, RandomPolicy


def _episodes(n: int, steps: int) -> list[SingleAgentEpisode]:
    return [
        SingleAgentEpisode(
            f"e{i}",
            observations=np.zeros((steps + 1, 2), np.float32),
            actions=np.zeros(steps, np.int64),
            rewards=np.ones(steps),
            len_lookback_buffer=0,
        )
        for i in range(n)
    ]


def _filled(kind: type[EpisodeReplayBuffer], **kwargs: Any) -> EpisodeReplayBuffer:
    buf = kind(50, **kwargs)
    buf.add(_episodes(3, 20))  # 60 steps into 50: the oldest episode is evicted
    return buf


def _tree() -> SumTree:
    tree = SumTree(4)
    tree.update(np.array([0, 2]), np.array([1.5, 2.0]))
    return tree


def _runner(mode: gym.vector.AutoresetMode, window: str) -> EnvRunner:
    env = gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, window=window)


CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "empty uniform buffer": (
        lambda: EpisodeReplayBuffer(100),
        "EpisodeReplayBuffer(capacity=100, episodes=0, timesteps=0)",
    ),
    "uniform buffer after an eviction": (
        lambda: _filled(EpisodeReplayBuffer),
        "EpisodeReplayBuffer(capacity=50, episodes=2, timesteps=40)",
    ),
    "prioritized buffer": (
        lambda: _filled(PrioritizedEpisodeReplayBuffer, alpha=0.6),
        "PrioritizedEpisodeReplayBuffer(capacity=50, episodes=2, timesteps=40, alpha=0.6)",
    ),
    "sum tree": (_tree, "SumTree(capacity=4, total=3.5)"),
    "random policy": (lambda: RandomPolicy(gym.spaces.Discrete(3)), "RandomPolicy(Discrete(3))"),
    "next-step runner": (
        lambda: _runner(gym.vector.AutoresetMode.NEXT_STEP, "transitions"),
        "EnvRunner(num_envs=3, autoreset_mode=NEXT_STEP, window='transitions')",
    ),
    "same-step runner, vector steps": (
        lambda: _runner(gym.vector.AutoresetMode.SAME_STEP, "vector_steps"),
        "EnvRunner(num_envs=3, autoreset_mode=SAME_STEP, window='vector_steps')",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_repr(case: str) -> None:
    make, expected = CASES[case]
    assert repr(make()) == expected


def test_a_buffer_that_was_never_set_up_prints_as_an_object() -> None:
    class Broken(EpisodeReplayBuffer):
        def __init__(self) -> None:
            raise RuntimeError("before the base class ran")

    obj = Broken.__new__(Broken)
    assert repr(obj).startswith("<") and "Broken object at" in repr(obj)

"""Rows that read past a chunk's lookback into steps its episode had warn.

``FrameStack(n)`` reads ``n - 1`` observations before a row and ``PrevActionsPrevRewards``
``n`` actions or rewards: before an episode's start they are filled, as they are beyond a
chunk's lookback. When the chunk starts later in its episode (``t_started`` past its lookback),
the filled items existed: a ``ShortLookbackWarning`` names the episode and the lookback to keep.
The rows themselves are as before.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import FrameStack, PrevActionsPrevRewards, ShortLookbackWarning
from episodes.runner import EnvRunner, RandomPolicy


def _chunk(t_started: int, lookback: int, steps: int = 4) -> SingleAgentEpisode:
    n = lookback + steps
    return SingleAgentEpisode(
        "e",
        observations=[float(i) for i in range(n + 1)],
        actions=list(range(n)),
        rewards=[1.0] * n,
        action_space=gym.spaces.Discrete(n),
        t_started=t_started,
        len_lookback_buffer=lookback,
    )


# name -> (connector, t_started, lookback, steps, warns)
CASES: dict[str, tuple[Any, int, int, int, bool]] = {
    "frames past a one-step lookback": (FrameStack(4), 5, 1, 4, True),
    "frames within the lookback": (FrameStack(4), 5, 3, 4, False),
    "the episode had no more steps before": (FrameStack(4), 1, 1, 4, False),
    "a fresh episode": (FrameStack(4), 0, 0, 4, False),
    "a chunk starting at its lookback's reach": (FrameStack(4), 2, 1, 4, True),
    "inference on a long chunk": (FrameStack(4, inference=True), 5, 1, 4, False),
    "inference on a one-step chunk": (FrameStack(4, inference=True), 5, 1, 1, True),
    "previous actions past the lookback": (PrevActionsPrevRewards(3, 0), 5, 1, 4, True),
    "previous rewards past the lookback": (PrevActionsPrevRewards(0, 2), 5, 1, 4, True),
    "previous rewards within the lookback": (PrevActionsPrevRewards(0, 2), 5, 2, 4, False),
    "no previous items": (PrevActionsPrevRewards(0, 0), 5, 0, 4, False),
    "previous actions and rewards: one warning": (PrevActionsPrevRewards(3, 3), 5, 1, 4, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_row_reading_lost_items_warns(case: str) -> None:
    connector, t_started, lookback, steps, warns = CASES[case]
    episode = _chunk(t_started, lookback, steps)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = connector([episode], {})
    short = [w for w in caught if issubclass(w.category, ShortLookbackWarning)]
    assert len(short) == (1 if warns else 0), [str(w.message) for w in caught]
    if warns:
        assert "'e'" in str(short[0].message) and "lookback" in str(short[0].message)
        assert short[0].filename == __file__  # attributed to the line that called it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = connector([episode], {})
    assert out.keys() == again.keys()
    assert all(np.array_equal(out[key], again[key]) for key in out)


def test_the_runner_warns_until_its_lookback_covers_the_frames() -> None:
    def chunks(lookback: int) -> list[SingleAgentEpisode]:
        env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        policy = RandomPolicy(env.action_space, seed=0)
        runner = EnvRunner(env, policy, seed=0, len_lookback_buffer=lookback)
        runner.sample(8)
        return list(runner.sample(8))  # continuing chunks start past t = 0

    with pytest.warns(ShortLookbackWarning, match="Keep at least 3 steps of lookback"):
        FrameStack(4)(chunks(1), {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShortLookbackWarning)
        FrameStack(4)(chunks(3), {})
        PrevActionsPrevRewards(3, 3)(chunks(3), {})


def test_one_warning_per_call_names_the_first_episode() -> None:
    first, second = _chunk(5, 1), _chunk(7, 1)
    second.id_ = "f"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FrameStack(4)([first, second], {})
    assert [str(w.message).split(":")[0] for w in caught] == ["FrameStack(4)"]
    assert "'e'" in str(caught[0].message)

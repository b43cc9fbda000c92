"""A same-step env read as next-step is refused at its first ending step.

A wrapper whose class-level ``metadata`` hides the env's (or a custom batched env that sets
none) made the runner read a same-step env as next-step: every next episode's first
transition was dropped, truncations bootstrapped from the next episode's first observation,
and the metrics' episode lengths were wrong, silently; only same-step envs report
``final_obs``, so its presence shows the mode is wrong.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.infos import check_batched_infos

AM = gym.vector.AutoresetMode


class HidingWrapper(gym.vector.VectorWrapper):
    metadata = {"render_modes": []}  # a class attribute hides the inner env's metadata


def _env(mode, hide):
    env = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=5,
    )
    return HidingWrapper(env) if hide else env


def test_a_hidden_same_step_mode_is_refused_when_an_episode_ends():
    env = _env("SameStep", hide=True)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    assert runner.autoreset_mode is AM.NEXT_STEP
    runner.sample(4)  # no episode ended yet: nothing to tell
    with pytest.raises(ValueError, match=r"'final_obs'.*SAME_STEP"):
        runner.sample(4)


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_declared_modes_record_as_before(mode):
    env = _env(mode, hide=False)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.sample(12)
    lengths = runner.get_metrics()["episode_lengths"]
    assert lengths and all(n == 5 for n in np.ravel(lengths))


CASES = {
    # name: (infos, mode, refused)
    "next-step, final_obs": ({"final_obs": [None, 1]}, AM.NEXT_STEP, True),
    "next-step, gymnasium 0.29's final_observation": (
        {"final_observation": [1]},
        AM.NEXT_STEP,
        True,
    ),
    "next-step, other keys": ({"x": np.zeros(2), "_x": np.ones(2, bool)}, AM.NEXT_STEP, False),
    "same-step, final_obs": ({"final_obs": [None, 1]}, AM.SAME_STEP, False),
    "disabled, final_obs": ({"final_obs": [None, 1]}, AM.DISABLED, False),
    "no mode given": ({"final_obs": [None, 1]}, None, False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_check_table(name):
    infos, mode, refused = CASES[name]
    if refused:
        with pytest.raises(ValueError, match="same-step"):
            check_batched_infos(infos, "the env's step infos", mode)
    else:
        check_batched_infos(infos, "the env's step infos", mode)

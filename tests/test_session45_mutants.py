"""Behaviour that hand-made mutants of ``episodes.runner.recorder`` and
``episodes.runner.backlog`` showed no test pinned (session 45).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
The reset-step test drives ``EnvRunner`` and the per-step reference runner
(``tests/runner/per_step_runner.py``) over their own copies of an env that also flags its
next-step reset steps as ``terminated``: the runner's chunks and finished episodes must equal
the reference's, which ignores flags on reset steps. The backlog tests count the calls until
``EnvRunner.sample`` first warns of rows carried over, at both of its bounds.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, RandomEnv
from tests.runner._runner_env import action_policy
from tests.runner._runner_env import make_vec as make_scripted
from tests.runner.per_step_runner import PerStepRunner
from tests.runner.test_batched_equals_per_step import assert_same_chunks


def _uneven_vec(obs: str, rates: list[float], p_info: float, mode: str) -> gym.vector.SyncVectorEnv:
    specs = [EnvSpec(obs, "discrete", rate, 0.0, p_info) for rate in rates]
    return gym.vector.SyncVectorEnv([lambda s=s: RandomEnv(s) for s in specs], autoreset_mode=mode)


class FlagsOnResetSteps(gym.vector.VectorWrapper):
    """A next-step env that also reports its reset steps as ``terminated``: a reset step
    belongs to no episode, so its flags end nothing (the per-step reference ignores them)."""

    def reset(self, **kwargs: Any) -> Any:
        self.ended = np.zeros(self.num_envs, bool)
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        resetting, self.ended = self.ended, terminated | truncated
        return obs, rewards, terminated | resetting, truncated, infos


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("seed", [0, 1])
def test_flags_on_a_reset_step_end_no_episode(seed, window):  # mutant: no `done &= ~waiting`
    made = []
    for cls in (PerStepRunner, EnvRunner):
        env = FlagsOnResetSteps(_uneven_vec("box", [0.3, 0.6], 0.5, "NextStep"))
        kwargs = {"window": window} if cls is EnvRunner else {}
        made.append(cls(env, Policy(env.single_action_space, True), seed=seed, **kwargs))
    reference, runner = made
    for size in [3, 5, 2, 6]:
        want, got = reference.sample(size), runner.sample(size)
        if window == "transitions":
            assert_same_chunks(want, got, {})
    # The episodes that ended, in order (a vector-step window cuts the calls elsewhere).
    want_ended = reference.get_metrics()["episode_lengths"]
    got_ended = runner.get_metrics()["episode_lengths"]
    n = min(len(want_ended), len(got_ended))
    assert n >= 4 and list(want_ended[:n]) == list(got_ended[:n])


# ------------------------------------------------------------------ the backlog warning


# (num_steps, the call that first warns, the rows sub-env 1 then holds): the bound is the
# larger of 256 rows and 16 calls' worth.
BOUNDS = {"256 rows": (1, 258, 257), "16 calls": (32, 17, 543)}


# mutants: `waiting = row - start.min() + 1`, `waiting = row - keep` (lookback counted),
# `BACKLOG_CALLS = 15`
@pytest.mark.parametrize("lookback", [0, 2])
@pytest.mark.parametrize("bound", BOUNDS)
def test_the_backlog_warning_comes_at_the_first_call_past_the_bound(bound, lookback):
    """Sub-env 0 ends an episode every step, so every other vector step is its reset step;
    sub-env 1 never ends one. After call ``k`` of ``T`` steps sub-env 1 holds ``k * T - 1``
    transitions a later call hands out (its lookback rows are no backlog)."""
    num_steps, first_call, held = BOUNDS[bound]
    env = make_scripted([[(1, "term")], [(10**6, "trunc")]], AutoresetMode.NEXT_STEP)
    runner = EnvRunner(env, action_policy, len_lookback_buffer=lookback)
    warned_at = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for call in range(1, first_call + 4):
            before = len(seen)
            runner.sample(num_steps)
            warned_at += [call] * (len(seen) - before)
    assert warned_at == [first_call]
    assert f"holds {held} transitions" in str(seen[0].message)

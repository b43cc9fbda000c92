"""How the runner reads an env's autoreset mode: hidden disabled modes and mistyped ones.

A ``VectorWrapper`` subclass with a class-level ``metadata`` hides the wrapped env's mode, so
the runner read a disabled ``SyncVectorEnv`` as next-step: it never reset the ended sub-envs,
and the step after an ending failed in gymnasium's bare ``AssertionError``, the env stepped
past what was recorded. ``env.metadata["autoreset_mode"] = "same_step"`` (a mistyped value)
was ``'same_step' is not a valid AutoresetMode``, naming neither the key nor the valid values.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner, autoreset_mode_of

N = 2


class HidingWrapper(gym.vector.VectorWrapper):
    metadata = {"render_modes": []}  # a class attribute hides the wrapped env's metadata


class CountingWrapper(gym.vector.VectorWrapper):
    """Counts the calls that reach the wrapped env."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.calls = 0

    def step(self, actions: Any) -> Any:
        self.calls += 1
        return super().step(actions)

    def reset(self, **kwargs: Any) -> Any:
        self.calls += 1
        return super().reset(**kwargs)


def _sync(mode: str, length: int = 3) -> gym.vector.SyncVectorEnv:
    def make() -> gym.Env:
        return gym.wrappers.TimeLimit(gym.make("CartPole-v1"), length)

    return gym.vector.SyncVectorEnv([make] * N, autoreset_mode=mode)


def _policy(obs: Any) -> Any:
    return np.zeros(N, np.int64), None


def test_a_hidden_disabled_mode_is_refused_before_any_step() -> None:
    counted = CountingWrapper(_sync("Disabled"))
    env = HidingWrapper(counted)
    with pytest.raises(ValueError) as err:
        EnvRunner(env, _policy, seed=0)
    message = str(err.value)
    for part in ("env.metadata", "env.unwrapped.metadata['autoreset_mode']", "DISABLED"):
        assert part in message
    assert counted.calls == 0
    assert "autoreset_mode" not in env.metadata  # nothing set on the env


def test_the_refusals_advice_makes_a_runner_that_records_the_disabled_env() -> None:
    env = HidingWrapper(_sync("Disabled"))
    env.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.DISABLED}  # the advice
    assert HidingWrapper.metadata == {"render_modes": []}  # the class's dict untouched
    runner = EnvRunner(env, _policy, seed=0)
    assert runner.autoreset_mode is AutoresetMode.DISABLED
    chunks = runner.sample(7)  # two endings per sub-env
    done = [len(ep) for ep in chunks if ep.is_done]
    assert len(done) == 2 * N and set(done) == {3}
    assert all(ep.is_truncated for ep in chunks if ep.is_done)


# name: (make env, mode read); where the wrapper names no mode and the wrapped env names one
# other than disabled, the runner reads next-step as before (a hidden same-step env is
# refused at its first ending step, by its infos' final_obs).
READ = {
    "hidden next-step": (lambda: HidingWrapper(_sync("NextStep")), AutoresetMode.NEXT_STEP),
    "hidden same-step": (lambda: HidingWrapper(_sync("SameStep")), AutoresetMode.NEXT_STEP),
    "plain wrapper over disabled": (
        lambda: gym.vector.VectorWrapper(_sync("Disabled")),
        AutoresetMode.DISABLED,
    ),
    "disabled env": (lambda: _sync("Disabled"), AutoresetMode.DISABLED),
    "wrapper naming its own mode over disabled": (
        lambda: _named(HidingWrapper(_sync("Disabled")), AutoresetMode.NEXT_STEP),
        AutoresetMode.NEXT_STEP,
    ),
    "mode as its value string": (
        lambda: _named(_sync("NextStep"), "SameStep"),
        AutoresetMode.SAME_STEP,
    ),
    "no metadata": (lambda: SimpleNamespace(), AutoresetMode.NEXT_STEP),
    "metadata None": (lambda: SimpleNamespace(metadata=None), AutoresetMode.NEXT_STEP),
    "unwrapped without metadata": (
        lambda: SimpleNamespace(metadata={}, unwrapped=SimpleNamespace()),
        AutoresetMode.NEXT_STEP,
    ),
}


def _named(env: Any, mode: Any) -> Any:
    env.metadata = {**env.metadata, "autoreset_mode": mode}
    return env


@pytest.mark.parametrize("name", list(READ))
def test_modes_read(name: str) -> None:
    make, want = READ[name]
    assert autoreset_mode_of(make()) is want


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_every_mode_and_its_value_are_taken(mode: AutoresetMode) -> None:
    for given in (mode, mode.value):
        assert autoreset_mode_of(SimpleNamespace(metadata={"autoreset_mode": given})) is mode


# Values gymnasium's AutoresetMode(value) refuses: names, other spellings, None, others.
BAD = {
    "snake case": "same_step",
    "member name": "SAME_STEP",
    "lower case": "samestep",
    "bytes": b"SameStep",
    "None": None,
    "int": 1,
    "list": ["SameStep"],
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_value_that_is_no_mode_is_refused_naming_key_value_and_modes(name: str) -> None:
    value = BAD[name]
    env = _sync("NextStep")
    env.metadata = {"autoreset_mode": value}
    with pytest.raises(ValueError) as err:
        EnvRunner(env, _policy, seed=0)
    message = str(err.value)
    assert f"env.metadata['autoreset_mode'] is {value!r}" in message
    for mode in AutoresetMode:
        assert repr(mode.value) in message and mode.name in message


def test_a_hidden_value_that_is_no_mode_is_refused_naming_the_unwrapped_env() -> None:
    env = HidingWrapper(_sync("NextStep"))
    env.unwrapped.metadata = {"autoreset_mode": "disabled"}
    with pytest.raises(ValueError, match=r"env\.unwrapped\.metadata\['autoreset_mode'\] is 'dis"):
        autoreset_mode_of(env)

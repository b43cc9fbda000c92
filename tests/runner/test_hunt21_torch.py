"""TorchCartPole's seeds beyond torch's range, and env values on the meta device.

* ``TorchCartPole.reset(seed=...)`` takes any int >= 0: up to ``2**64 - 1`` (the most torch's
  generator takes) exactly as ``manual_seed`` takes it, a larger one folded deterministically.
* An env whose observations, rewards or flags are torch tensors on the meta device (a shape
  without data) is a ``ValueError`` naming the field, on the device path and on the host path,
  rather than torch's ``NotImplementedError`` / ``RuntimeError`` / ``TypeError``. A refused
  first reset leaves the runner unstarted; a refused step leaves it failed (``RuntimeError``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from episodes.envs.torch_cartpole import TorchCartPole  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402


# ------------------------------------------------------------------ 1. seeds beyond 2**64 - 1
@pytest.mark.parametrize("seed", [0, 2**63 - 1, 2**63, 2**64 - 1])
def test_seed_torch_takes_is_used_as_before(seed: int) -> None:
    generator = torch.Generator()
    generator.manual_seed(seed)
    expected = torch.rand((3, 4), generator=generator) * 0.1 - 0.05
    assert torch.equal(TorchCartPole(3).reset(seed=seed)[0], expected)


@pytest.mark.parametrize("seed", [2**64, 2**64 + 1, 2**100, 10**40])
def test_seed_beyond_torch_range_is_folded_deterministically(seed: int) -> None:
    env = TorchCartPole(3)
    first = env.reset(seed=seed)[0]
    env.step(torch.ones(3, dtype=torch.long))
    assert torch.equal(env.reset(seed=seed)[0], first)
    assert torch.equal(TorchCartPole(3).reset(seed=seed)[0], first)
    assert not torch.equal(TorchCartPole(3).reset(seed=seed + 1)[0], first)
    assert bool(first.abs().max() <= 0.05)


def test_runner_with_seed_beyond_torch_range_samples_reproducibly() -> None:
    def policy(obs: Any) -> Any:
        return (obs[:, 2] > 0).long(), {}

    def observations(seed: int) -> list[np.ndarray]:
        chunks = EnvRunner(TorchCartPole(2), policy, seed=seed).sample(3)
        return [np.asarray(chunk.get_observations()) for chunk in chunks]

    first, again = observations(2**64), observations(2**64)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    other = observations(2**64 + 1)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


# ---------------------------------------------------------------- 2. meta tensors of an env
class _Env(gym.vector.VectorEnv):
    """Two sub-envs whose field ``bad`` is a meta tensor (torch or numpy other fields)."""

    def __init__(self, bad: str | None, *, numpy: bool = False, same_step: bool = False):
        self.num_envs, self.bad, self.numpy, self.resets = 2, bad, numpy, 0
        self.single_observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        mode = gym.vector.AutoresetMode
        self.metadata = {"autoreset_mode": mode.SAME_STEP if same_step else mode.NEXT_STEP}

    def _value(self, field: str, shape: tuple[int, ...], dtype: Any) -> Any:
        if self.bad == field:
            return torch.empty(shape, dtype=dtype, device="meta")
        if self.numpy:
            return torch.zeros(shape, dtype=dtype).numpy()
        return torch.zeros(shape, dtype=dtype)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.resets += 1
        return self._value("reset obs", (2, 3), torch.float32), {}

    def step(self, actions: Any) -> tuple[Any, ...]:
        infos: dict[str, Any] = {}
        if self.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP:
            infos = {"final_obs": self._value("final_obs", (2, 3), torch.float32)}
            infos["_final_obs"] = torch.zeros(2, dtype=torch.bool)
        return (
            self._value("obs", (2, 3), torch.float32),
            self._value("rewards", (2,), torch.float32),
            self._value("terminated", (2,), torch.bool),
            self._value("truncated", (2,), torch.bool),
            infos,
        )


def _policy(obs: Any) -> Any:
    return torch.zeros(2, dtype=torch.long), {}


STEP_CASES = {
    "torch obs": ("obs", False, False, "the env's observations"),
    "torch rewards": ("rewards", False, False, "the env's rewards"),
    "torch terminated": ("terminated", False, False, "the env's terminated"),
    "torch truncated": ("truncated", False, False, "the env's truncated"),
    "torch final_obs": ("final_obs", False, True, r"the env's infos\['final_obs'\]"),
    "numpy env, meta obs": ("obs", True, False, "the env's observations"),
    "numpy env, meta rewards": ("rewards", True, False, "the env's rewards"),
    "numpy env, meta terminated": ("terminated", True, False, "the env's terminated"),
    "numpy env, meta truncated": ("truncated", True, False, "the env's truncated"),
}


@pytest.mark.parametrize("case", list(STEP_CASES), ids=list(STEP_CASES))
def test_meta_step_value_is_refused_naming_the_field(case: str) -> None:
    bad, numpy, same_step, name = STEP_CASES[case]
    runner = EnvRunner(_Env(bad, numpy=numpy, same_step=same_step), _policy)
    with pytest.raises(ValueError, match=f"^{name}: got a torch tensor on the meta device"):
        runner.sample(2)
    # The env stepped past what was recorded: the documented RuntimeError from then on.
    with pytest.raises(RuntimeError, match="an earlier sample"):
        runner.sample(2)


@pytest.mark.parametrize("numpy", [False, True], ids=["torch env", "numpy env"])
def test_meta_reset_observations_leave_the_runner_unstarted(numpy: bool) -> None:
    env = _Env("reset obs", numpy=numpy)
    if numpy:  # a numpy first leaf: the host recorder, with a meta second leaf
        env.single_observation_space = gym.spaces.Tuple(
            (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (3,)))
        )
        plain = env.reset

        def reset(**kwargs: Any) -> tuple[Any, dict[str, Any]]:
            obs, infos = plain(**kwargs)
            return (np.zeros((2, 3), np.float32), obs), infos

        env.reset = reset  # type: ignore[method-assign]
    runner = EnvRunner(env, _policy)
    with pytest.raises(ValueError, match="^the env's reset observations: got a torch tensor"):
        runner.sample(2)
    env.bad = None
    if numpy:  # the step's observations follow the reset's nesting
        step = _Env.step

        def step_tuple(actions: Any) -> tuple[Any, ...]:
            obs, *rest = step(env, actions)
            return ((np.zeros((2, 3), np.float32), obs), *rest)

        env.step = step_tuple  # type: ignore[method-assign]
    chunks = runner.sample(2)  # unstarted: it resets the env again and records
    assert env.resets == 2
    assert [len(chunk) for chunk in chunks] == [2, 2]

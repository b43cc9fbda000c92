"""Hunt fixes of the torch-tensor (device) runner path and of recurrent states.

Each test failed before its fix: float finals widened the device observation block mid-episode,
int64 then float32 promoted as torch does, a numpy state on a tensor env (or a state in another
container than initial_state's) killed the runner at the first reset, bfloat16 outputs on a
numpy env gave a bare numpy TypeError after env.step, and a float state_batch_axis was taken.
"""

from __future__ import annotations

import copy
from collections import namedtuple
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner
from episodes.runner.device_blocks import TensorColumn
from tests.runner._runner_env import CountingSteps

MODES = ["NextStep", "SameStep"]


class Finals64(TorchCartPole):
    """float32 observations whose same-step final observations come as float64."""

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        if not bool(infos["_final_obs"].any()):
            return obs, rewards, terminated, truncated, {}
        infos["final_obs"] = infos["final_obs"].double()
        return obs, rewards, terminated, truncated, infos


def push_left(obs: Any) -> tuple[Any, dict[str, Any]]:
    return torch.zeros(len(obs), dtype=torch.long), {}


def test_float64_finals_keep_the_device_observations_float32_so_chunks_join() -> None:
    env = Finals64(2, autoreset_mode="SameStep", max_episode_steps=12)
    runner = EnvRunner(env, push_left, seed=0)
    first, second = runner.sample(4), runner.sample(8)  # the first ending falls in call 2
    before, after = copy.deepcopy(first[0]), second[0]
    assert before.id_ == after.id_
    assert after.get_observations().dtype == np.float32
    before.concat_episode(after)  # raised AssertionError: the observations no longer joined
    ended = [c for c in second if c.is_done]
    assert ended and all(c.get_observations().dtype == np.float32 for c in ended)


def test_a_device_float_column_rounds_floats_in_without_looking_at_them() -> None:
    col = TensorColumn.for_batch(torch.zeros(2), rows=2)
    col.put(0, torch.tensor([0.25, 1e300], dtype=torch.float64))
    assert col.leaves[0].dtype == torch.float32  # documented: beyond the range is inf
    assert col.leaves[0][0].tolist() == [0.25, float("inf")]


class IntThenFloat:
    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, obs: Any) -> tuple[Any, dict[str, Any]]:
        self.steps += 1
        n = len(obs)
        x = torch.full((n,), 2**24 + 1) if self.steps == 1 else torch.full((n,), 0.5)
        return torch.zeros(n, dtype=torch.long), {"x": x}


def test_device_int64_then_float32_widens_to_float64_as_the_host_does() -> None:
    runner = EnvRunner(TorchCartPole(2), IntThenFloat(), seed=0)
    x = runner.sample(3)[0].get_extra_model_outputs("x")
    assert x.dtype == np.float64 and x.tolist() == [16777217.0, 0.5, 0.5]


class NumpyStepCounter:
    """A recurrent policy keeping numpy state: each sub-env's steps in its episode."""

    def initial_state(self, num_envs: int) -> np.ndarray:
        return np.zeros((num_envs, 1), np.float32)

    def __call__(self, obs: Any, state: np.ndarray) -> tuple[Any, dict[str, Any], Any]:
        n = len(obs)
        return (
            torch.zeros(n, dtype=torch.long),
            {"t": torch.from_numpy(state[:, 0].copy())},
            (state + 1),
        )


@pytest.mark.parametrize("mode", MODES)
def test_a_numpy_state_on_a_tensor_env_is_reset_per_episode(mode: str) -> None:
    env = TorchCartPole(2, autoreset_mode=mode, max_episode_steps=3)
    chunks = EnvRunner(env, NumpyStepCounter(), seed=0).sample(5)
    assert [c.get_extra_model_outputs("t").tolist() for c in chunks] == [
        [0.0, 1.0, 2.0],
        [0.0, 1.0],
        [0.0, 1.0, 2.0],
        [0.0, 1.0],
    ]


Hidden = namedtuple("Hidden", "h c")


class ContainerSwap:
    """initial_state gives a namedtuple (or list); the policy returns a plain tuple."""

    def __init__(self, fresh: Any, leaves: int = 2):
        self.fresh, self.leaves = fresh, leaves

    def initial_state(self, num_envs: int) -> Any:
        return self.fresh(np.zeros((num_envs, 1)), np.zeros((num_envs, 1)))

    def __call__(self, obs: Any, state: Any) -> tuple[Any, dict[str, Any], Any]:
        h = np.asarray(state[0]) + 1
        out = (h, h.copy(), h.copy())[: self.leaves]
        actions = np.zeros(len(obs), np.int64)
        return actions, {"t": h[:, 0].copy()}, tuple(out)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("fresh", [Hidden, lambda h, c: [h, c]], ids=["namedtuple", "list"])
def test_a_state_in_another_container_than_initial_states_is_reset(mode: str, fresh: Any) -> None:
    env = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=3,
    )
    runner = EnvRunner(env, ContainerSwap(fresh), seed=0)
    chunks = runner.sample(5)
    assert [c.get_extra_model_outputs("t").tolist() for c in chunks.by_env()[0]] == [
        [1.0, 2.0, 3.0],
        [1.0, 2.0],
    ]
    assert isinstance(runner.state, tuple) and not isinstance(runner.state, Hidden)


def test_a_state_with_other_leaves_is_refused_before_the_env_steps() -> None:
    env = CountingSteps(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))
    runner = EnvRunner(env, ContainerSwap(Hidden, leaves=3), seed=0)
    with pytest.raises(ValueError, match="leaf shapes"):
        runner.sample(3)
    assert env.steps == 0


class BFloat16Extras:
    def __call__(self, obs: Any) -> tuple[Any, dict[str, Any]]:
        n = len(obs)
        return np.zeros(n, np.int64), {"h": torch.zeros(n, 3, dtype=torch.bfloat16)}


def test_bfloat16_outputs_on_a_numpy_env_are_a_clear_error_before_the_env_steps() -> None:
    env = CountingSteps(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))
    with pytest.raises(ValueError, match="bfloat16 values, which have no numpy dtype"):
        EnvRunner(env, BFloat16Extras(), seed=0).sample(3)
    assert env.steps == 0


@pytest.mark.parametrize("axis", [1.5, "1", True, None])
def test_state_batch_axis_takes_ints_only(axis: Any) -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    with pytest.raises(TypeError, match="state_batch_axis must be an int"):
        EnvRunner(env, ContainerSwap(Hidden), state_batch_axis=axis)


def test_state_batch_axis_takes_a_numpy_int() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(env, ContainerSwap(Hidden), state_batch_axis=np.int64(0))
    assert runner.state_batch_axis == 0 and type(runner.state_batch_axis) is int


def test_an_initial_state_of_none_is_refused_before_the_first_reset() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(
        env, lambda obs, state: (np.zeros(2, np.int64), {}, None), initial_state=lambda n: None
    )
    with pytest.raises(ValueError, match="initial_state returned None"):
        runner.sample(3)


def test_unseeded_torch_cartpoles_start_differently() -> None:
    first, second = TorchCartPole(4).reset()[0], TorchCartPole(4).reset()[0]
    assert not torch.equal(first, second)
    seeded = TorchCartPole(4)
    assert torch.equal(seeded.reset(seed=3)[0], TorchCartPole(4).reset(seed=3)[0])

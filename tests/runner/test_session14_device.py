"""The torch-device path, round 14: infos and final observations an env gets slightly wrong.

- An info tensor of a dtype numpy lacks (bfloat16, float8) failed ``sample()`` at the end of
  the call with torch's ``TypeError`` naming no field, and the runner was dead afterwards: such
  infos now come to the host as float32 (exact: float32 holds each of their values); a tensor
  no numpy dtype holds is a ``ValueError`` naming the info key.
- Same-step ``infos["final_obs"]`` given as a numpy batch or as a list of per-env tensors got
  torch's raw errors: numpy is now moved to the device (as the policy's outputs are), and a
  list or an object array is a ``ValueError`` naming ``infos['final_obs']``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner


def policy(obs: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    return (obs[:, 2] > 0).long(), {}


Make = Callable[[int], torch.Tensor]


class ExtraInfo(TorchCartPole):
    """TorchCartPole whose reset and step infos carry one more tensor (``make(num_envs)``)."""

    def __init__(self, make: Make, make_at_reset: Make | None = None):
        super().__init__(2, autoreset_mode="SameStep")
        self.make, self.make_at_reset = make, make_at_reset or make

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = super().reset(**kwargs)
        return obs, {**infos, "at_reset": self.make_at_reset(self.num_envs)}

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        infos = {**infos, "energy": self.make(self.num_envs)}
        infos["_energy"] = torch.ones(self.num_envs, dtype=torch.bool)
        return obs, rewards, terminated, truncated, infos


# ---------------------------------------------------- 1. info tensors of a dtype numpy lacks
LOSSLESS = {
    "bfloat16": (torch.bfloat16, np.float32),
    "float8_e4m3fn": (torch.float8_e4m3fn, np.float32),
    "float8_e5m2": (torch.float8_e5m2, np.float32),
    "float16 (numpy has it)": (torch.float16, np.float16),
}


@pytest.mark.torch_2_3
@pytest.mark.parametrize("dtype, host", LOSSLESS.values(), ids=list(LOSSLESS))
def test_info_of_a_dtype_numpy_lacks_comes_as_float32(dtype: torch.dtype, host: type) -> None:
    runner = EnvRunner(ExtraInfo(lambda n: torch.full((n,), 0.375, dtype=dtype)), policy, seed=0)
    for _ in range(2):  # the runner goes on
        chunks = runner.sample(3)
        infos = [info for chunk in chunks for info in chunk.get_infos()]
        energy = [info["energy"] for info in infos if "energy" in info]
        assert energy and all(type(e) is host and e == 0.375 for e in energy)


def test_first_call_records_the_reset_info_as_float32() -> None:
    make = lambda n: torch.arange(n, dtype=torch.bfloat16) + 0.5  # noqa: E731
    runner = EnvRunner(ExtraInfo(make), policy, seed=0)
    chunks = runner.sample(2)
    firsts = [chunk.get_infos()[0] for chunk in chunks if chunk.t_started == 0]
    assert [info["at_reset"] for info in firsts] == [np.float32(0.5), np.float32(1.5)]
    assert all(type(info["at_reset"]) is np.float32 for info in firsts)


def zeros(n: int) -> torch.Tensor:
    return torch.zeros(n)


REFUSED = {
    "uint4 at a step": (
        lambda: ExtraInfo(lambda n: torch.zeros(n, dtype=torch.uint4), zeros),
        "the env's infos['energy']: a torch.uint4 tensor on cpu",
    ),
    "meta at the reset": (
        lambda: ExtraInfo(zeros, lambda n: torch.zeros(n, device="meta")),
        "the env's reset infos['at_reset']: a torch.float32 tensor on meta",
    ),
}


@pytest.mark.torch_2_3
@pytest.mark.parametrize("env, where", REFUSED.values(), ids=list(REFUSED))
def test_info_no_numpy_dtype_holds_names_its_key(env: Callable[[], ExtraInfo], where: str) -> None:
    runner = EnvRunner(env(), policy, seed=0)
    with pytest.raises(ValueError, match=re.escape(where) + ".*cannot be copied to the host"):
        runner.sample(3)


# ------------------------------------------------------- 2. final observations not one tensor
class Finals(TorchCartPole):
    """Same-step TorchCartPole whose ``infos["final_obs"]`` is given another way."""

    def __init__(self, how: Callable[[torch.Tensor], Any]):
        super().__init__(3, autoreset_mode="SameStep", max_episode_steps=2)
        self.how = how

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        if "final_obs" in infos:
            infos = {**infos, "final_obs": self.how(infos["final_obs"])}
        return obs, rewards, terminated, truncated, infos


def final_observations(runner: EnvRunner) -> list[np.ndarray]:
    return [
        np.asarray(chunk.get_observations(-1))
        for chunk in runner.sample(5)
        if chunk.is_done  # ended in the call: its last observation is a final one
    ]


def test_numpy_final_obs_is_moved_to_the_device() -> None:
    want = final_observations(EnvRunner(Finals(lambda fo: fo), policy, seed=0))
    got = final_observations(EnvRunner(Finals(lambda fo: fo.numpy()), policy, seed=0))
    assert want and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


NOT_A_TENSOR = {
    "list of per-env tensors": (lambda fo: list(fo), "a list"),
    "object array of per-env items": (
        lambda fo: np.array([None, *fo[1:]], dtype=object),
        "an array of object",
    ),
    "python lists": (lambda fo: fo.tolist(), "a list"),
}


@pytest.mark.parametrize("how, what", NOT_A_TENSOR.values(), ids=list(NOT_A_TENSOR))
def test_final_obs_not_a_batched_tensor_names_the_field(
    how: Callable[[torch.Tensor], Any], what: str
) -> None:
    runner = EnvRunner(Finals(how), policy, seed=0)
    with pytest.raises(
        ValueError, match=rf"infos\['final_obs'\]: got {what}, expected a batched tensor"
    ):
        runner.sample(5)

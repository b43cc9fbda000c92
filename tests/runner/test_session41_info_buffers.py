"""Info buffers an env writes in place every step keep each recorded step's values.

GPU simulators keep their infos in tensors they update in place (Isaac Lab's
``extras["time_outs"]`` is the termination manager's buffer; step counters and metrics in
``extras["log"]`` are 0-d tensors added to). The recording keeps a copy of every step's infos
(tensors cloned on their device), on a numpy env and on a torch env, as numpy arrays were
already copied; a whole-step 0-d tensor is each sub-env's own clone, so a consumer changing
one sub-env's in place changes no other's.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.row_infos import owned_copy
from tests.runner._tensor_env import TensorVectorEnv

N = 3


class _InPlaceInfos(gym.vector.VectorWrapper):
    """Reports the step number in buffers it writes in place: per sub-env and whole-step."""

    def __init__(self, env: gym.vector.VectorEnv, kind: str):
        super().__init__(env)
        self.kind = kind
        self.steps = 0
        self.per_env_tensor = torch.zeros(N, dtype=torch.int64)
        self.per_env_array = np.zeros(N, np.int64)
        self.whole_tensor = torch.tensor(0)

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        self.steps += 1
        self.per_env_tensor += 1
        self.per_env_array += 1
        self.whole_tensor += 1
        infos = dict(infos)
        if self.kind == "per-env tensor":
            infos["count"] = self.per_env_tensor
        elif self.kind == "per-env array":
            infos["count"] = self.per_env_array
        elif self.kind == "whole-step tensor":
            infos["log"] = {"count": self.whole_tensor}
        else:  # a list of per-env tensors that share the step's buffer
            infos["count"] = np.array(list(self.per_env_tensor.unbind()), dtype=object)
        return obs, rewards, terminated, truncated, infos


def _env(on_torch: bool, kind: str) -> gym.vector.VectorEnv:
    base = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    return _InPlaceInfos(TensorVectorEnv(base) if on_torch else base, kind)


def _count(info: dict[str, Any], kind: str) -> int:
    value = info["log"]["count"] if kind == "whole-step tensor" else info["count"]
    return int(value.item() if hasattr(value, "item") else value)


KINDS = ["per-env tensor", "per-env array", "whole-step tensor", "object array of tensors"]
CASES = [
    pytest.param(on_torch, kind, id=f"{'torch' if on_torch else 'numpy'} env, {kind}")
    for on_torch in (False, True)
    for kind in KINDS
    # A torch env's infos are tensors or numeric arrays (its object arrays stay numpy).
    if not (on_torch and kind == "object array of tensors")
]


@pytest.mark.parametrize(("on_torch", "kind"), CASES)
def test_each_recorded_step_keeps_the_values_of_its_step(on_torch: bool, kind: str) -> None:
    env = _env(on_torch, kind)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    step = 0
    for _ in range(2):  # two calls: infos of rows carried over to the next call too
        chunks = runner.sample(5)
        # A chunk of sub-env 0 per episode, in order; each info after the first of the
        # runner's first episode is a step's. CartPole does not end in 10 random steps often:
        # count the steps every chunk of sub-env 0 recorded.
        for chunk in (c for c in chunks if c.custom_data["env_index"] == 0):
            for info in chunk.get_infos()[1:]:
                if info:
                    step += 1
                    assert _count(info, kind) == step
    assert step >= 8


@pytest.mark.parametrize("on_torch", [False, True], ids=["numpy env", "torch env"])
def test_a_whole_step_tensor_is_each_sub_envs_own(on_torch: bool) -> None:
    env = _env(on_torch, "whole-step tensor")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(2)
    first, second = chunks[0].get_infos(1)["log"]["count"], chunks[1].get_infos(1)["log"]["count"]
    first += 100  # a numpy scalar on a torch env (its infos come to the host): no change
    assert int(second) == 1


OWNED_CASES = {
    "tensor": torch.tensor([1.0, 2.0]),
    "0-d tensor": torch.tensor(3),
    "array": np.array([1, 2]),
    "nested": {"a": [torch.tensor([1]), np.array([2])], "b": (np.array(3),)},
}


@pytest.mark.parametrize("value", OWNED_CASES.values(), ids=OWNED_CASES.keys())
def test_owned_copy_shares_no_memory_and_keeps_values(value: Any) -> None:
    kept = owned_copy(value)
    leaves, kept_leaves = _leaves(value), _leaves(kept)
    assert len(leaves) == len(kept_leaves)
    for original, copy in zip(leaves, kept_leaves):
        assert type(copy) is type(original)
        assert np.array_equal(np.asarray(copy), np.asarray(original))
        original += 1  # the env writes its buffer in place
        assert not np.array_equal(np.asarray(copy), np.asarray(original))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for inner in value.values() for leaf in _leaves(inner)]
    if isinstance(value, (list, tuple)):
        return [leaf for inner in value for leaf in _leaves(inner)]
    return [value]

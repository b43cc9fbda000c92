"""The torch-device path, round 12: what a host-sync audit found, pinned (on the CPU).

- A nested column kept the first batch it saw as its structure, so a pickled ``SampledChunks``
  of a Dict-observation torch env carried that batch's tensors (on a GPU: CUDA tensors, which
  a host without CUDA cannot unpickle), and every numpy sample carried a stale batch.
- Off the converter's fast path (``layout="per_chunk"``, a written chunk) ``value_fn`` and
  ``obs_fn`` got numpy arrays where the fast path gives device tensors: a torch critic failed.
- A recurrent policy whose ``initial_state`` returns host values: the same recording as one
  returning tensors; and ``initial_state`` stays called anew for each reset (a fix that called
  it once per ``sample()`` gave every reset of a call the same random state: pinned below).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, make_vec
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv, to_arrays

ENV_SPEC = EnvSpec("dict", "box", p_terminate=0.2, p_truncate=0.1, p_info=0.0)


class TensorSpy(pickle.Pickler):
    """A pickler that lists the tensors and arrays it writes."""

    def __init__(self, file: Any):
        super().__init__(file)
        self.tensors: list[tuple[int, ...]] = []

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            self.tensors.append(tuple(obj.shape))
        return NotImplemented


def leaves_of(structure: Any) -> list[Any]:
    if isinstance(structure, dict):
        return [x for v in structure.values() for x in leaves_of(v)]
    if isinstance(structure, (tuple, list)):
        return [x for v in structure for x in leaves_of(v)]
    return [structure]


# ------------------------------------------------------- 1. a column's structure holds no data
@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
@pytest.mark.parametrize("on_torch", [False, True], ids=["numpy-env", "torch-env"])
def test_pickled_sample_holds_no_first_batch(mode: str, on_torch: bool) -> None:
    env = make_vec(ENV_SPEC, 3, mode)
    policy: Any = Policy(env.single_action_space, recurrent=False)
    if on_torch:
        env, policy = TensorVectorEnv(env), TensorPolicy(policy)
    runner = EnvRunner(env, policy, seed=0)
    runner.sample(4)
    chunks = runner.sample(4)  # the first reset's batch is not among this call's rows
    structure = chunks.recording.blocks.obs.structure
    assert set(structure) == {"pos", "mode"}
    assert leaves_of(structure) == [None, None]
    spy = TensorSpy(io.BytesIO())
    spy.dump(chunks)
    assert spy.tensors == []
    back = pickle.loads(pickle.dumps(chunks))
    for a, b in zip(chunks, back):
        for key in ("pos", "mode"):
            np.testing.assert_array_equal(
                a.get_observations(slice(None))[key], b.get_observations(slice(None))[key]
            )


# ---------------------------------------------- 2. value_fn gets tensors on every path
def cartpole_policy(obs: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    zeros = torch.zeros(len(obs))
    return (obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0].float(), "action_logp": zeros}


def torch_critic(seen: list[str]) -> Any:
    weights = torch.linspace(0.5, 1.5, 4)

    def value(obs: Any) -> torch.Tensor:
        seen.append(type(obs).__name__)
        return obs.float() @ weights  # fails on a numpy array

    return value


def sample() -> Any:
    return EnvRunner(TorchCartPole(4, max_episode_steps=5), cartpole_policy, seed=0).sample(8)


def test_value_fn_gets_tensors_per_chunk() -> None:
    seen: list[str] = []
    rollout = episodes_to_rollout(
        sample(), gamma=0.9, value_fn=torch_critic(seen), layout="per_chunk"
    )
    assert seen and set(seen) == {"Tensor"}
    assert rollout.storage.rewards.shape[1] >= 4


def test_value_fn_gets_tensors_after_a_write() -> None:
    fast_seen: list[str] = []
    fast = episodes_to_rollout(sample(), gamma=0.9, value_fn=torch_critic(fast_seen))
    chunks = sample()
    reward = float(chunks[0].get_rewards(0))
    chunks[0].set_rewards(new_data=reward, at_indices=0)  # the same value: general path
    seen: list[str] = []
    general = episodes_to_rollout(chunks, gamma=0.9, value_fn=torch_critic(seen))
    assert set(fast_seen) == set(seen) == {"Tensor"}
    torch.testing.assert_close(general.storage.rewards, fast.storage.rewards)
    torch.testing.assert_close(general.last_values, fast.last_values)


def test_obs_fn_gets_tensors_per_chunk() -> None:
    seen: list[str] = []

    def obs_fn(obs: Any) -> Any:
        seen.append(type(obs).__name__)
        return obs * 2

    episodes_to_rollout(
        sample(), gamma=0.9, value_fn=torch_critic([]), obs_fn=obs_fn, layout="per_chunk"
    )
    assert seen and set(seen) == {"Tensor"}


# --------------------------------- 3. initial_state on a torch env: host values, random draws
class HostStatePolicy:
    """A recurrent policy on a torch env whose ``initial_state`` returns numpy (or tensors)."""

    def __init__(self, as_tensor: bool):
        self.inner = Policy(ACTION_SPACE, recurrent=True)
        self.as_tensor = as_tensor
        self.fresh_calls = 0

    def initial_state(self, n: int) -> Any:
        self.fresh_calls += 1
        state = self.inner.initial_state(n) + 0.5
        return torch.from_numpy(state) if self.as_tensor else state

    def __call__(self, obs: Any, state: torch.Tensor) -> Any:
        host = state.numpy() if isinstance(state, torch.Tensor) else state  # the first is fresh
        actions, extras, new = self.inner(to_arrays(obs), host)
        extras = {k: torch.from_numpy(np.asarray(v)) for k, v in extras.items()}
        return torch.from_numpy(actions), extras, torch.from_numpy(new)


BOX_SPEC = EnvSpec("box", "box", p_terminate=0.25, p_truncate=0.1, p_info=0.0)
ACTION_SPACE = make_vec(BOX_SPEC, 1, "NextStep").single_action_space


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_host_initial_state_records_as_a_tensor_one(mode: str) -> None:
    results = {}
    for as_tensor in (False, True):
        policy = HostStatePolicy(as_tensor)
        runner = EnvRunner(TensorVectorEnv(make_vec(BOX_SPEC, 4, mode)), policy, seed=1)
        calls = [runner.sample(12) for _ in range(3)]
        results[as_tensor] = [
            np.concatenate([c.get_extra_model_outputs("h", slice(None)) for c in chunks])
            for chunks in calls
        ]
    for host, device in zip(results[False], results[True]):
        np.testing.assert_array_equal(host, device)
    assert any((h == 0.5).all(axis=1).sum() > 1 for h in results[False])  # resets happened


def test_random_initial_state_is_drawn_for_every_reset() -> None:
    generator = torch.Generator().manual_seed(0)

    def initial_state(n: int) -> torch.Tensor:
        return torch.randn(n, 2, generator=generator)

    def policy(obs: torch.Tensor, state: torch.Tensor) -> Any:
        zeros = torch.zeros(len(obs))
        extras = {"vf_preds": zeros, "action_logp": zeros, "h": state.clone()}
        return (obs[:, 2] > 0).long(), extras, state

    env = TorchCartPole(2, max_episode_steps=3)
    chunks = EnvRunner(env, policy, initial_state=initial_state, seed=0).sample(12)
    starts = [tuple(c.get_extra_model_outputs("h", 0).tolist()) for c in chunks if c.t_started == 0]
    assert len(starts) >= 4
    assert len(set(starts)) == len(starts)  # each reset drew its own state

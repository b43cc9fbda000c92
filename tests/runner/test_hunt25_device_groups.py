"""A group of runners that recorded on one torch device converts on the device fast path.

Before round 25 such a ``GroupSample`` took the general path: every chunk built, every field's
host mirror copied off the device, the columns assembled on the host (hundreds of times
slower than one runner of as many envs). Now each part is read from its blocks on the device
and the parts are joined there; the storage equals the general path's and the parts' own.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.distributed import GroupSample, RunnerSample
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, make_vec, obs_fn_for, value_fn
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv

KEYS = ColumnKeys(values="vf", log_probs="logp", distribution=("logits",))
FIELDS = ("observations", "actions", "rewards", "dones", "values", "actions_log_prob")


def _as_arrays(obs):
    return {k: np.asarray(v) for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)


def _like_input(obs, out):
    """Tensors for the fast path's tensors, arrays for the general path's built chunks."""
    first = next(iter(obs.values())) if isinstance(obs, dict) else obs
    return torch.from_numpy(np.asarray(out)) if isinstance(first, torch.Tensor) else out


def _tensor_value_fn(obs):
    return _like_input(obs, value_fn(_as_arrays(obs)))


def _tensor_obs_fn(kind):
    fn = obs_fn_for(kind)
    if fn is None:
        return None
    return lambda obs: _like_input(obs, fn(_as_arrays(obs)))


def _runner(spec: EnvSpec, mode: str, num_envs: int, seed: int, window: str) -> EnvRunner:
    env = TensorVectorEnv(make_vec(spec, num_envs, mode))
    policy = TensorPolicy(Policy(make_vec(spec, 1, mode).action_space, False))
    return EnvRunner(env, policy, seed=seed, window=window)


def _storage(rollout, name):
    value = getattr(rollout.storage, name)
    return value if not isinstance(value, dict) else dict(sorted(value.items()))


def _same(a, b) -> None:
    for name in FIELDS:
        x, y = _storage(a, name), _storage(b, name)
        pairs = zip(x.values(), y.values()) if isinstance(x, dict) else [(x, y)]
        for u, v in pairs:
            assert u.dtype == v.dtype and torch.equal(u, v), name
    for x, y in zip(a.storage.distribution_params, b.storage.distribution_params):
        assert torch.equal(x, y)
    assert torch.equal(a.last_values, b.last_values)
    assert (a.mask is None) == (b.mask is None)
    if a.mask is not None:
        assert torch.equal(a.mask, b.mask)


def _same_as_parts(group, parts) -> None:
    """The group's storage is the parts' own storages side by side."""
    for name in FIELDS:
        x = _storage(group, name)
        if isinstance(x, dict):
            for key in x:
                joined = torch.cat([_storage(p, name)[key] for p in parts], dim=1)
                assert torch.equal(x[key], joined), (name, key)
        else:
            assert torch.equal(x, torch.cat([_storage(p, name) for p in parts], dim=1)), name
    assert torch.equal(group.last_values, torch.cat([p.last_values for p in parts]))
    if group.mask is not None:
        masks = [torch.ones_like(p.storage.dones[..., 0], dtype=torch.bool) if p.mask is None
                 else p.mask for p in parts]  # fmt: skip
        assert torch.equal(group.mask, torch.cat(masks, dim=1))


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("obs", ["box", "dict"])
def test_a_device_group_converts_on_the_fast_path_as_the_general_path(obs, mode, window):
    spec = EnvSpec(obs, "discrete", 0.15, 0.15, 0.0)

    def group_of_runners() -> tuple[GroupSample, list]:
        runners = [_runner(spec, mode, n, 10 * r, window) for r, n in enumerate((3, 2))]
        for runner in runners:
            runner.sample(6)  # leftover rows and lookback from an earlier call
        parts = [runner.sample(6) for runner in runners]
        samples = [RunnerSample(r, 0, 0, 0, p.num_envs, p) for r, p in enumerate(parts)]
        return GroupSample(samples), parts

    kwargs = dict(gamma=0.9, value_fn=_tensor_value_fn, keys=KEYS, obs_fn=_tensor_obs_fn(obs))
    group, parts = group_of_runners()
    fast = episodes_to_rollout(group, **kwargs)
    assert [part.built() for part in parts] == [[], []]  # no chunk built on the fast path
    twin, twin_parts = group_of_runners()  # the same seeds: the same chunks
    _same_as_parts(fast, [episodes_to_rollout(part, **kwargs) for part in twin_parts])
    if window == "vector_steps":
        return  # a window with reset steps is laid out by the fast path only
    general = episodes_to_rollout(copy.deepcopy(list(twin)), **kwargs)
    _same(fast, general)
    assert [[c.custom_data["env_index"] for c in g] for g in fast.groups] == [
        [c.custom_data["env_index"] for c in g] for g in general.groups
    ]


def test_a_group_of_host_and_device_recordings_takes_the_general_path():
    spec = EnvSpec("box", "discrete", 0.2, 0.1, 0.0)
    device_runner = _runner(spec, "NextStep", 2, 0, "transitions")
    host_runner = EnvRunner(
        make_vec(spec, 2, "NextStep"), Policy(make_vec(spec, 1, "NextStep").action_space, False),
        seed=0,
    )  # fmt: skip
    parts = [device_runner.sample(5), host_runner.sample(5)]
    group = GroupSample([RunnerSample(r, 0, 0, 0, 2, p) for r, p in enumerate(parts)])
    kwargs = dict(gamma=0.9, value_fn=_tensor_value_fn, keys=KEYS)
    fast = episodes_to_rollout(group, **kwargs)
    general = episodes_to_rollout(copy.deepcopy(list(group)), **kwargs)
    assert torch.equal(fast.storage.rewards, general.storage.rewards)
    assert torch.equal(fast.storage.observations, general.storage.observations)


def _cartpole_policy(dtype):
    def policy(obs):
        zeros = torch.zeros(len(obs))
        return (obs[:, 0] > 0).to(dtype), {"vf_preds": zeros, "action_logp": zeros}

    return policy


@pytest.mark.parametrize(
    "dtypes", [(torch.uint32, torch.int32), (torch.uint8, torch.int64)], ids=["u32+i32", "u8+i64"]
)
def test_device_parts_of_other_dtypes_join_as_numpy_joins_them(dtypes) -> None:
    # torch.cat promotes otherwise (and refuses uint32 with int32): such parts take the
    # general path, whose columns numpy joins.
    from episodes.envs.torch_cartpole import TorchCartPole

    def group() -> GroupSample:
        parts = [
            EnvRunner(TorchCartPole(2), _cartpole_policy(dtype), seed=seed).sample(4)
            for seed, dtype in enumerate(dtypes)
        ]
        return GroupSample([RunnerSample(i, 0, 0, 0, 2, p) for i, p in enumerate(parts)])

    fast = episodes_to_rollout(group(), gamma=0.9, value_fn=lambda obs: obs[:, 0])
    general = episodes_to_rollout(
        copy.deepcopy(list(group())), gamma=0.9, value_fn=lambda obs: obs[:, 0]
    )
    assert fast.storage.actions.dtype == general.storage.actions.dtype == torch.int64
    assert torch.equal(fast.storage.actions, general.storage.actions)

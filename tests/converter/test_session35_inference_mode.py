"""Rollouts converted (or sampled) under ``torch.inference_mode`` train outside it.

The converter's zero-copy path took inference tensors into the storage: ``torch.from_numpy``
views made inside inference mode, and a torch env's blocks recorded there. A loss outside
inference mode then raised "Inference tensors cannot be saved for backward" (the
distillation generator's steps, the recurrent generator's actions and values). Now the
numpy columns are viewed as normal tensors (still taken without a copy), an inference
tensor is copied, and the storage equals the one ``copy=True`` or a plain call gives.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.rollout import RolloutStorage, unpad_trajectories
from episodes.runner import EnvRunner

N, T = 4, 8


def _env(kind: str, mode: str):
    if kind == "torch":
        return TorchCartPole(N, autoreset_mode=mode, max_episode_steps=5)
    make = [lambda: gym.make("CartPole-v1", max_episode_steps=5)] * N
    return gym.vector.SyncVectorEnv(make, autoreset_mode=gym.vector.AutoresetMode(mode))


def _policy(obs):
    pole = obs[:, 2]
    actions = (pole > 0).long() if isinstance(obs, torch.Tensor) else (pole > 0).astype(np.int64)
    teacher = (obs[:, 3] > 0) * 1
    logp = obs[:, 1] * 0 - 0.7
    return actions, {"vf_preds": obs[:, 0] * 0.5, "action_logp": logp, "teacher": teacher}


def _value_fn(obs):
    return torch.as_tensor(obs)[:, 0] * 0.5


def _convert(chunks, training_type, storage=None, copy=False):
    if training_type == "rl":
        ro = episodes_to_rollout(chunks, gamma=0.9, value_fn=_value_fn, storage=storage, copy=copy)
        ro.storage.compute_returns(ro.last_values, 0.9, 0.95)
        return ro.storage
    keys = ColumnKeys(privileged_actions="teacher")
    kwargs = {"storage": storage, "copy": copy, "training_type": training_type, "keys": keys}
    return episodes_to_rollout(chunks, gamma=1.0, **kwargs).storage


def _leaves(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return []


def _train(storage: RolloutStorage) -> None:
    """A loss with backward() over every generator the storage's training type has."""
    net = nn.Linear(4, 2)
    if storage.training_type == "distillation":
        for batch in storage.generator():
            assert not any(leaf.is_inference() for leaf in _leaves(batch))
            logits = net(batch.observations)
            target = batch.privileged_actions.squeeze(-1)
            nn.functional.cross_entropy(logits, target).backward()
        assert net.weight.grad is not None
        return
    for recurrent in (False, True):
        if recurrent:
            batches = storage.recurrent_mini_batch_generator(2, num_epochs=1)
        else:
            batches = storage.mini_batch_generator(2, num_epochs=1)
        for batch in batches:
            assert not any(leaf.is_inference() for leaf in _leaves(batch))
            logits = net(batch.observations)
            if recurrent:
                logits = unpad_trajectories(logits, batch.masks)
            logp = torch.distributions.Categorical(logits=logits).log_prob(
                batch.actions.squeeze(-1)
            )
            ratio = torch.exp(logp - batch.old_actions_log_prob.squeeze(-1))
            value = logits[..., :1]
            loss = -(ratio * batch.advantages.squeeze(-1)).mean()
            loss = loss + ((value - batch.returns) * (value - batch.values)).mean()
            loss.backward()
    assert net.weight.grad is not None


def _check(storage: RolloutStorage, expected: RolloutStorage) -> None:
    assert not any(t.is_inference() for t in storage.tensors.values())
    for name, tensor in expected.tensors.items():
        assert torch.equal(storage.tensors[name], tensor), name
    _train(storage)


CASES = [
    (kind, mode, window, training_type, given)
    for kind in ("numpy", "torch")
    for mode in ("NextStep", "SameStep")
    for window in ("transitions", "vector_steps")
    for training_type in ("rl", "distillation")
    for given in (False, True)
]


@pytest.mark.parametrize(("kind", "mode", "window", "training_type", "given"), CASES)
def test_sampled_and_converted_in_inference_mode(kind, mode, window, training_type, given):
    runner = EnvRunner(_env(kind, mode), _policy, seed=0, window=window)
    reference = EnvRunner(_env(kind, mode), _policy, seed=0, window=window)
    storage = None
    for _ in range(2):  # a given storage is reused, as rsl_rl reuses its own
        if given and storage is None:
            storage = _convert(reference.sample(T), training_type)  # allocated outside
            expected = storage
            runner.sample(T)
        else:
            with torch.inference_mode():
                storage = _convert(runner.sample(T), training_type, storage if given else None)
            expected = _convert(reference.sample(T), training_type)
        _check(storage, expected)
        if kind == "numpy":  # the columns are still taken without a copy
            assert storage.shared == expected.shared != frozenset()


TORCH_CASES = [
    (mode, window, training_type)
    for mode in ("NextStep", "SameStep")
    for window in ("transitions", "vector_steps")
    for training_type in ("rl", "distillation")
]


@pytest.mark.parametrize(("mode", "window", "training_type"), TORCH_CASES)
def test_sampled_in_inference_mode_converted_outside(mode, window, training_type):
    runner = EnvRunner(_env("torch", mode), _policy, seed=0, window=window)
    for grad_mode in (torch.inference_mode, torch.inference_mode, torch.no_grad):
        with grad_mode():  # only the env loop, as rsl_rl's runner; then an evaluation pass
            chunks = runner.sample(T)
        storage = _convert(chunks, training_type)
        _check(storage, _convert(chunks, training_type, copy=True))


@pytest.mark.parametrize("training_type", ["rl", "distillation"])
def test_a_storage_allocated_outside_filled_inside(training_type):
    env = gym.make_vec("CartPole-v1", N, vectorization_mode="vector_entry_point")
    runner = EnvRunner(env, _policy, seed=0)
    extra = {"distribution_params": ()} if training_type == "rl" else {}
    storage = RolloutStorage(training_type, N, T, (4,), (1,), actions_dtype=torch.int64, **extra)
    with torch.inference_mode():
        chunks = runner.sample(T)
        filled = _convert(chunks, training_type, storage)
    assert filled is storage
    _check(storage, _convert(chunks, training_type, copy=True))

"""A runner sampled under ``torch.inference_mode``, ``no_grad`` or neither, in any order.

A torch env's device blocks (and the blocks the next call continues in) were made in the
grad mode of the call that made them: once a call ran inside ``inference_mode`` they were
inference tensors, and the next call outside it raised "Inplace update to inference tensor
outside InferenceMode". Now they are normal tensors whatever the mode, every order of calls
records what plain calls record, and a rollout converted in each call trains with
``backward()`` outside inference mode.
"""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from episodes.converter import episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner

N, T = 3, 6
MODES = {
    "inf": torch.inference_mode,
    "nograd": torch.no_grad,
    "plain": contextlib.nullcontext,
}
ORDERS = [
    ("nograd", "inf", "nograd"),  # an evaluation pass after collection in inference mode
    ("inf", "plain", "inf"),  # the first call inside
    ("inf", "inf", "nograd", "plain"),
    ("plain", "inf", "plain"),
]
ENVS = [
    (kind, mode, window)
    for kind in ("torch", "numpy")
    for mode in ("NextStep", "SameStep")
    for window in ("transitions", "vector_steps")
]


def _env(kind: str, mode: str):
    if kind == "torch":
        return TorchCartPole(N, autoreset_mode=mode, max_episode_steps=4)
    make = [lambda: gym.make("CartPole-v1", max_episode_steps=4)] * N
    return gym.vector.SyncVectorEnv(make, autoreset_mode=gym.vector.AutoresetMode(mode))


def _policy(obs):
    pole = obs[:, 2]
    actions = (pole > 0).long() if isinstance(obs, torch.Tensor) else (pole > 0).astype(np.int64)
    return actions, {"vf_preds": obs[:, 0] * 0.5, "action_logp": obs[:, 1] * 0 - 0.7}


def _value_fn(obs):
    return torch.as_tensor(obs)[:, 0] * 0.5


def _runner(kind: str, mode: str, window: str) -> EnvRunner:
    return EnvRunner(_env(kind, mode), _policy, seed=0, window=window)


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
@pytest.mark.parametrize(("kind", "mode", "window"), ENVS)
def test_any_order_of_grad_modes_records_and_trains(kind, mode, window, order):
    runner, reference = _runner(kind, mode, window), _runner(kind, mode, window)
    net = nn.Linear(4, 1)
    storage = None
    for grad_mode in order:
        with MODES[grad_mode]():
            chunks = runner.sample(T)
            ro = episodes_to_rollout(chunks, gamma=0.9, value_fn=_value_fn, storage=storage)
        storage = ro.storage
        assert not any(t.is_inference() for t in storage.tensors.values())
        expected = episodes_to_rollout(reference.sample(T), gamma=0.9, value_fn=_value_fn)
        valid, want = storage.valid, expected.storage.valid
        assert (valid is None) == (want is None)
        assert valid is None or torch.equal(valid, want)
        storage.compute_returns(ro.last_values, 0.9, 0.95)
        expected.storage.compute_returns(expected.last_values, 0.9, 0.95)
        for name, tensor in expected.storage.tensors.items():  # what plain calls record
            assert torch.equal(storage.tensors[name], tensor), name
        net.zero_grad()
        for batch in storage.mini_batch_generator(2, num_epochs=1):
            ((net(batch.observations) - batch.returns) ** 2).mean().backward()
        assert net.weight.grad is not None and bool(torch.isfinite(net.weight.grad).all())


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_the_hunters_order_on_a_torch_env(mode):
    env = TorchCartPole(4, autoreset_mode=mode)
    runner = EnvRunner(env, lambda o: ((o[:, 2] > 0).long(), {}), seed=0)
    with torch.no_grad():
        runner.sample(8)
    with torch.inference_mode():
        runner.sample(8)
    with torch.no_grad():  # raised: an in-place update of an inference tensor
        assert sum(runner.sample(8).lengths()) == 8 * 4
    assert sum(runner.sample(8).lengths()) == 8 * 4


def _recorded(chunks) -> list[tuple]:
    return [
        (
            np.asarray(c.get_observations()).tolist(),
            np.asarray(c.get_actions()).tolist(),
            np.asarray(c.get_rewards()).tolist(),
            c.is_terminated,
            c.is_truncated,
        )
        for c in chunks
    ]


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_a_torch_env_records_the_same_chunks_in_any_order(mode, window, order):
    runner, reference = _runner("torch", mode, window), _runner("torch", mode, window)
    for grad_mode in order:
        with MODES[grad_mode]():
            chunks = runner.sample(T)
        assert _recorded(chunks) == _recorded(reference.sample(T))

"""The runner and converter put tensors where the data is, not on torch's default device.

Training scripts call ``torch.set_default_device("cuda")``; the library's dtype probes and
copies made tensors there (``meta`` stands in for a GPU here: a probe made on it cannot be read
back to numpy, as one on a GPU cannot). A CPU env and CPU policy outputs must record and
convert exactly as without the setting.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner


def _numpy_env_run(extras_as_tensors: bool):
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")

    def policy(obs):
        values = torch.as_tensor(obs, device="cpu").sum(-1)
        logp = torch.zeros(len(obs), device="cpu")
        extras = {"vf_preds": values, "action_logp": logp}
        if not extras_as_tensors:
            extras = {key: value.numpy() for key, value in extras.items()}
        return (obs[:, 2] > 0).astype(np.int64), extras

    chunks = EnvRunner(env, policy, seed=0).sample(6)
    rollout = episodes_to_rollout(
        chunks, gamma=0.99, value_fn=lambda obs: np.asarray(obs, np.float64).sum(-1)
    )
    return chunks, rollout


CASES = {"tensor-extras": True, "numpy-extras": False}


@pytest.mark.parametrize("extras_as_tensors", CASES.values(), ids=CASES.keys())
def test_numpy_env_with_cpu_tensor_outputs_under_another_default_device(extras_as_tensors):
    expected_chunks, expected = _numpy_env_run(extras_as_tensors)
    with torch.device("meta"):
        chunks, storage = _numpy_env_run(extras_as_tensors)
    assert [len(c) for c in chunks] == [len(c) for c in expected_chunks]
    for got, want in zip(chunks, expected_chunks):
        np.testing.assert_array_equal(got.get_observations(), want.get_observations())
        np.testing.assert_array_equal(
            got.get_extra_model_outputs("vf_preds"), want.get_extra_model_outputs("vf_preds")
        )
    torch.testing.assert_close(storage.last_values, expected.last_values, rtol=0, atol=0)
    for name in ("observations", "rewards", "values", "dones", "actions_log_prob"):
        got, want = getattr(storage.storage, name), getattr(expected.storage, name)
        assert got.device == want.device == torch.device("cpu")
        torch.testing.assert_close(got, want, rtol=0, atol=0)


class _EnvWithInfos(TorchCartPole):
    """TorchCartPole on the CPU whose infos hold a bfloat16 tensor (no numpy dtype)."""

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = super().step(actions)
        infos = {**infos, "energy": obs[:, 0].to(torch.bfloat16)}
        return obs, rewards, terminated, truncated, infos


def _torch_env_run(autoreset_mode: str, window: str):
    env = _EnvWithInfos(4, device="cpu", autoreset_mode=autoreset_mode)

    def policy(obs):
        extras = {"vf_preds": obs.sum(-1), "action_logp": torch.zeros(len(obs), device="cpu")}
        return (obs[:, 2] > 0).long(), extras

    chunks = EnvRunner(env, policy, seed=0, window=window).sample(12)
    rollout = episodes_to_rollout(
        chunks, gamma=0.99, value_fn=lambda obs: obs.double().sum(-1).numpy()
    )
    return chunks, rollout


TORCH_CASES = {
    "next-step-transitions": ("NextStep", "transitions"),
    "same-step-transitions": ("SameStep", "transitions"),
    "next-step-vector-steps": ("NextStep", "vector_steps"),
}


@pytest.mark.parametrize("mode,window", TORCH_CASES.values(), ids=TORCH_CASES.keys())
def test_cpu_torch_env_under_another_default_device(mode, window):
    expected_chunks, expected = _torch_env_run(mode, window)
    with torch.device("meta"):
        chunks, rollout = _torch_env_run(mode, window)
    assert [len(c) for c in chunks] == [len(c) for c in expected_chunks]
    for got, want in zip(chunks, expected_chunks):
        np.testing.assert_array_equal(got.get_observations(), want.get_observations())
        np.testing.assert_array_equal(got.get_infos(), want.get_infos())
        assert [i.get("energy") for i in got.get_infos()] == [
            i.get("energy") for i in want.get_infos()
        ]
    torch.testing.assert_close(rollout.last_values, expected.last_values, rtol=0, atol=0)
    for name in ("observations", "rewards", "values", "dones"):
        got, want = getattr(rollout.storage, name), getattr(expected.storage, name)
        assert got.device == want.device == torch.device("cpu")
        torch.testing.assert_close(got, want, rtol=0, atol=0)


_FRESH_PROCESS = """
import numpy as np, torch
torch.set_default_device("meta")  # before anything: dtype probes are cached per process
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner

class Env(TorchCartPole):
    def step(self, actions):
        obs, rewards, terminated, truncated, infos = super().step(actions)
        return obs, rewards, terminated, truncated, {**infos, "energy": obs[:, 0].bfloat16()}

calls = []
def policy(obs):
    calls.append(None)
    wide = torch.int64 if len(calls) > 2 else torch.int32  # widens the column mid-run
    return (obs[:, 2] > 0).long(), {"count": torch.ones(len(obs), dtype=wide, device="cpu")}

chunks = EnvRunner(Env(3, device="cpu"), policy, seed=0).sample(5)
energy = [i["energy"] for c in chunks for i in c.get_infos() if "energy" in i]
counts = np.concatenate([c.get_extra_model_outputs("count") for c in chunks])
print(type(energy[0]).__name__, len(energy), counts.dtype, counts.tolist())
"""


def test_dtype_probes_made_first_under_another_default_device():
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["float32", "15", "int64", *["[1,"] + ["1,"] * 13 + ["1]"]]

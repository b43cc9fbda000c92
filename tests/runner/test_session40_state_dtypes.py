"""A recurrent torch state of any torch dtype is reset per sub-env, on every env kind.

Before the fix a uint16/uint32/uint64 state (an RNG key, a counter) on a numpy vector env died
at the first sub-env reset inside ``sample()`` in torch's ``index_put`` ("not implemented for
'UInt32'"), after the env had stepped, leaving the runner failed; the torch-env path (``where``)
worked. docs/api.md: a reset writes fresh entries in the state's dtype and device, on every env.

The policy's state counts each sub-env's steps in its episode (in the state's own dtype), and
the scripted env reports that step in its observation, so every state the policy is handed is
checked against the count of the step it acts on.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner
from tests.runner._runner_env import make_vec
from tests.runner._tensor_env import TensorVectorEnv

_NAMES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
DTYPES = [getattr(torch, name) for name in _NAMES if hasattr(torch, name)]
# Sub-env 0's episodes last 2 steps, sub-env 1's 3: most resets start one sub-env only.
SCRIPTS = [[(2, "term")], [(3, "trunc")]]


def wide(state: torch.Tensor) -> np.ndarray:
    """The state's values as float64 (a complex state's real part)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex32 is "experimental"
        real = state.real if state.is_complex() else state
        return real.to(torch.float64).numpy()


def next_count(state: torch.Tensor) -> torch.Tensor:
    """One more step, in the state's dtype (a bool state flips)."""
    if state.dtype == torch.bool:
        return ~state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (state.to(torch.complex128 if state.is_complex() else torch.float64) + 1).to(
            state.dtype
        )


class Counter:
    """A recurrent policy whose ``[N, 2]`` state counts the steps of each sub-env's episode."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.seen: list[tuple[np.ndarray, torch.Tensor]] = []

    def initial_state(self, num_envs: int) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.zeros(num_envs, 2, dtype=self.dtype)

    def __call__(self, obs: Any, state: torch.Tensor) -> tuple[Any, dict[str, Any], Any]:
        t = np.asarray(torch.as_tensor(obs)[:, 2]).astype(np.int64)
        self.seen.append((t, state))
        return torch.zeros(len(t), dtype=torch.long), {}, next_count(state)


def counts(dtype: torch.dtype, upto: int) -> np.ndarray:
    """The state after 0, 1, ... ``upto`` steps, as float64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = torch.zeros(1, dtype=dtype)
    out = []
    for _ in range(upto + 1):
        out.append(wide(value)[0])
        value = next_count(value)
    return np.array(out)


@pytest.mark.parametrize("kind", ["numpy env", "torch env"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
def test_every_torch_state_dtype_is_reset_per_sub_env(
    dtype: torch.dtype, mode: str, kind: str
) -> None:
    env = make_vec(SCRIPTS, mode)
    if kind == "torch env":
        env = TensorVectorEnv(env)
    policy = Counter(dtype)
    runner = EnvRunner(env, policy, initial_state=policy.initial_state, seed=0)
    for size in (5, 4):  # resets in both calls, and across the calls' boundary
        runner.sample(size)
    assert len(policy.seen) >= 9  # (NextStep adds the reset steps)
    expected = counts(dtype, 3)
    for t, state in policy.seen:
        assert state.dtype == dtype and state.device.type == "cpu"
        assert tuple(state.shape) == (2, 2)
        got = wide(state)
        np.testing.assert_array_equal(got, np.stack([expected[t], expected[t]], axis=1))
    # Every sub-env started episodes while the other went on: partial resets were checked.
    starts = [tuple(t == 0) for t, _ in policy.seen[1:]]
    assert (True, False) in starts and (False, True) in starts


@pytest.mark.parametrize("kind", ["numpy env", "torch env"])
@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_an_unsigned_state_with_the_env_axis_second_keeps_other_entries(
    dtype: torch.dtype, kind: str
) -> None:
    """A ``[1, N, 3]`` state (``state_batch_axis=1``) whose fresh entries differ per call."""
    env = make_vec(SCRIPTS, "NextStep")
    if kind == "torch env":
        env = TensorVectorEnv(env)
    top = 2 ** (8 * torch.empty((), dtype=dtype).element_size()) - 1
    calls = []
    seen: list[tuple[list[list[int]], int]] = []  # the state, the latest fresh value

    def initial_state(n: int) -> torch.Tensor:
        calls.append(n)
        return torch.full((1, n, 3), top - len(calls), dtype=dtype)

    def policy(obs: Any, state: torch.Tensor) -> tuple[Any, dict[str, Any], Any]:
        assert state.dtype == dtype
        seen.append((state[0].tolist(), top - len(calls)))
        stepped = state.clone()
        stepped[0, :, 0] = torch.tensor([7, 8]).to(dtype)  # the entries a reset replaces
        return torch.zeros(2, dtype=torch.long), {}, stepped

    runner = EnvRunner(env, policy, initial_state=initial_state, state_batch_axis=1, seed=0)
    runner.sample(4)
    first = top - 1
    # NextStep: sub-env 0 restarts at the 4th policy call, sub-env 1 at the 5th.
    assert seen[0][0] == [[first] * 3] * 2
    assert seen[1][0] == seen[2][0] == [[7, first, first], [8, first, first]]
    fresh = seen[3][1]
    assert fresh < first and seen[3][0] == [[fresh] * 3, [8, first, first]]
    fresh = seen[4][1]
    assert seen[4][0] == [[7, seen[3][1], seen[3][1]], [fresh] * 3]

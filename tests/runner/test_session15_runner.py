"""Session 15 fixes: dtypes the two recorders disagreed on, and errors that named no field.

Each test failed before its fix:

* a recurrent state of another dtype than ``initial_state``'s (float16 from a half-precision
  policy, float32 fresh rows): numpy leaves took the policy's dtype, tensor leaves on a numpy
  env died in torch's ``index_put`` after the env stepped, and a torch env promoted the state
  to float32 at every step (``torch.where``);
* bfloat16 outputs in a later call (or a later step) killed the runner on a numpy env (after
  ``env.step``), while a torch env recorded them as float32;
* on a torch env, observations of strings or objects, a list of per-env arrays, rewards or
  flags that are None or strings failed in torch's ``TypeError``/``RuntimeError``;
* datetime64/timedelta64 values after numbers (or numbers after them) gave numpy's
  ``DTypePromotionError``, naming no field;
* ``TorchCartPole.reset(seed=list)`` crashed on a None entry and read only the first seed;
* same-step final observations of different shapes in one step gave numpy's stack error;
* ``sample(2**70)`` (or any ``num_steps`` no memory holds) gave numpy's or torch's words.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner
from episodes.runner.host_values import host_array
from episodes.runner.nesting import stacked_finals
from episodes.runner.widening import promoted_dtype

N = 2


def numpy_cartpole() -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", N, vectorization_mode="sync")


# ------------------------------------------------------------------ 1. recurrent state dtype
class _TwoStepEnv(gym.Env):  # type: ignore[type-arg]
    """Episodes of two steps: every other vector step resets every sub-env."""

    observation_space = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return np.full(2, self.t, np.float32), 1.0, self.t % 2 == 0, False, {}


class _AsTensors(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """A numpy vector env seen through torch (CPU): the runner's device path."""

    def __init__(self, env: gym.vector.VectorEnv):
        self.env, self.num_envs, self.metadata = env, env.num_envs, env.metadata
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = self.env.reset(**kwargs)
        return torch.from_numpy(obs), infos

    def step(self, actions: Any) -> Any:
        obs, r, te, tr, infos = self.env.step(np.asarray(actions))
        return (
            torch.from_numpy(obs),
            torch.from_numpy(r),
            torch.from_numpy(te),
            torch.from_numpy(tr),
            infos,
        )


def _two_step_env(device_path: bool) -> gym.vector.VectorEnv:
    env = gym.vector.SyncVectorEnv([_TwoStepEnv, _TwoStepEnv], autoreset_mode="NextStep")
    return _AsTensors(env) if device_path else env


STATE_CASES = {
    # (the env yields tensors, the policy's state leaves are tensors)
    "numpy_env_numpy_state": (False, False),
    "numpy_env_tensor_state": (False, True),
    "torch_env_tensor_state": (True, True),
}


@pytest.mark.parametrize("case", STATE_CASES)
def test_a_reset_keeps_the_dtype_of_the_state_the_policy_returned(case: str) -> None:
    device_path, tensor_state = STATE_CASES[case]
    seen: list[Any] = []

    def policy(obs: Any, state: Any) -> Any:
        seen.append(state.dtype)
        new = (torch.as_tensor(state) + 1).to(torch.float16)  # a half-precision policy
        actions = torch.zeros(N, dtype=torch.long)
        return (
            actions if device_path else actions.numpy(),
            {},
            new if tensor_state else new.numpy(),
        )

    runner = EnvRunner(
        _two_step_env(device_path),
        policy,
        initial_state=lambda n: torch.zeros(n, 3, dtype=torch.float32),
        seed=0,
    )
    runner.sample(4)  # two resets of every sub-env: before the fix, dead or promoted here
    runner.sample(2)
    assert {str(d).replace("torch.", "") for d in seen[1:]} == {"float16"}
    # The fresh rows were written: the started sub-envs' entries are zeros again + 1.
    assert str(runner.state.dtype).replace("torch.", "") == "float16"


# ------------------------------------------------------------ 2. bfloat16 in a later call
def _switching_policy(dtype: dict[str, Any]) -> Any:
    def policy(obs: Any) -> Any:
        actions = (torch.as_tensor(obs)[:, 2] > 0).long()
        if isinstance(obs, np.ndarray):
            actions = actions.numpy()
        return actions, {"logp": torch.full((len(obs),), 0.5, dtype=dtype["now"])}

    return policy


@pytest.mark.parametrize("env_kind", ["numpy_env", "torch_env"])
@pytest.mark.parametrize("when", ["later_call", "later_step"])
def test_later_bfloat16_outputs_are_recorded_as_float32_on_both_recorders(
    env_kind: str, when: str
) -> None:
    env = numpy_cartpole() if env_kind == "numpy_env" else TorchCartPole(N)
    dtype = {"now": torch.float32}
    inner = _switching_policy(dtype)
    calls = {"n": 0}

    def policy(obs: Any) -> Any:
        calls["n"] += 1
        if when == "later_step" and calls["n"] == 5:
            dtype["now"] = torch.bfloat16
        return inner(obs)

    runner = EnvRunner(env, policy, seed=0)
    runner.sample(3)
    if when == "later_call":
        dtype["now"] = torch.bfloat16
    chunks = runner.sample(3)  # before the fix: a ValueError after env.step on a numpy env
    logp = chunks[0].get_extra_model_outputs("logp")
    assert logp.dtype == np.float32 and np.all(logp == 0.5)
    dtype["now"] = torch.float32
    runner.sample(3)  # the runner goes on


def test_host_array_gives_float32_for_float_dtypes_numpy_lacks() -> None:
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        out = host_array(torch.tensor([0.5, 1.5], dtype=dtype))
        assert out.dtype == np.float32 and out.tolist() == [0.5, 1.5]
    with pytest.raises(ValueError, match="no numpy dtype"):  # no numpy dtype holds them
        host_array(torch.zeros(2, dtype=torch.uint8).view(torch.bits8))


def test_bfloat16_at_the_first_step_is_still_refused_before_the_env_steps() -> None:
    dtype = {"now": torch.bfloat16}
    runner = EnvRunner(numpy_cartpole(), _switching_policy(dtype), seed=0)
    with pytest.raises(ValueError, match="bfloat16"):
        runner.sample(3)
    dtype["now"] = torch.float32
    assert len(runner.sample(3)) == N  # refused before the env stepped: the runner is fine


# ------------------------------------------------- 3. a torch env's values, named refusals
class _BadAtStep2(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Torch tensors, then one bad value at the second step."""

    def __init__(self, bad: str):
        self.num_envs, self.bad, self.k = N, bad, 0
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.single_observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)

    def reset(self, **kwargs: Any) -> Any:
        return torch.zeros(N, 3), {}

    def step(self, actions: Any) -> Any:
        self.k += 1
        obs: Any = torch.ones(N, 3)
        rewards: Any = torch.ones(N)
        terminated: Any = torch.zeros(N, dtype=torch.bool)
        truncated: Any = torch.zeros(N, dtype=torch.bool)
        if self.k == 2:
            if self.bad == "str_observations":
                obs = np.full((N, 3), "x")
            elif self.bad == "object_observations":
                obs = np.empty((N, 3), object)
            elif self.bad == "list_of_array_observations":
                obs = [np.ones(3, np.float32)] * N
            elif self.bad == "list_of_tensor_observations":
                obs = [torch.ones(3)] * N
            elif self.bad == "rewards_none":
                rewards = None
            elif self.bad == "str_rewards":
                rewards = np.array(["a", "b"])
            elif self.bad == "terminated_none":
                terminated = None
            elif self.bad == "str_truncated":
                truncated = np.array(["a", "b"])
        return obs, rewards, terminated, truncated, {}


DEVICE_VALUES = {
    "str_observations": "the env's observations",
    "object_observations": "the env's observations",
    "list_of_array_observations": "the env's observations",
    "list_of_tensor_observations": "the env's observations",
    "rewards_none": "the env's rewards",
    "str_rewards": "the env's rewards",
    "terminated_none": "the env's terminated",
    "str_truncated": "the env's truncated",
}


@pytest.mark.parametrize("bad", DEVICE_VALUES)
def test_torch_env_values_no_tensor_holds_are_a_value_error_naming_the_field(bad: str) -> None:
    runner = EnvRunner(_BadAtStep2(bad), lambda obs: (torch.zeros(N, dtype=torch.long), {}))
    with pytest.raises(ValueError, match=DEVICE_VALUES[bad]):
        runner.sample(4)


def test_valid_numpy_observations_on_a_torch_env_are_still_taken() -> None:
    class Mixed(_BadAtStep2):
        def step(self, actions: Any) -> Any:
            obs, *rest = super().step(actions)
            return (obs.numpy().astype(np.float64), *rest)

    chunks = EnvRunner(Mixed("none"), lambda obs: (torch.zeros(N, dtype=torch.long), {})).sample(3)
    obs = chunks[0].get_observations()  # moved to the device, rounded into the float column
    assert obs.dtype == np.float32 and obs.tolist() == [[0.0] * 3] + [[1.0] * 3] * 3


def test_valid_numpy_dict_observations_on_a_torch_env_are_still_taken() -> None:
    class DictEnv(_BadAtStep2):
        def reset(self, **kwargs: Any) -> Any:
            return {"a": torch.zeros(N, 3), "b": torch.zeros(N, dtype=torch.long)}, {}

        def step(self, actions: Any) -> Any:
            obs, *rest = super().step(actions)
            return ({"a": obs.numpy(), "b": np.ones(N, np.int64)}, *rest)

    policy = lambda obs: (torch.zeros(N, dtype=torch.long), {})  # noqa: E731
    obs = EnvRunner(DictEnv("none"), policy).sample(3)[0].get_observations()
    assert obs["a"].tolist() == [[0.0] * 3] + [[1.0] * 3] * 3 and obs["b"].tolist() == [0, 1, 1, 1]


# ---------------------------------------------------------- 4. datetimes meet other kinds
@pytest.mark.parametrize(
    ("column", "got"),
    [
        ("float32", "datetime64[s]"),
        ("datetime64[s]", "float32"),
        ("int64", "datetime64[s]"),
        ("timedelta64[s]", "float32"),
        ("<U3", "timedelta64[s]"),
        ("float64", "V8"),
    ],
)
def test_other_kinds_are_refused_naming_the_field(column: str, got: str) -> None:
    with pytest.raises(ValueError, match=r"'stamp': got .* values for a column of"):
        promoted_dtype(np.dtype(column), np.dtype(got), "the policy's extra output 'stamp'")


def test_a_datetime_extra_output_after_floats_is_named_in_the_runner() -> None:
    calls = {"n": 0}

    def policy(obs: Any) -> Any:
        calls["n"] += 1
        stamp = np.zeros(N, np.float32)
        if calls["n"] > 3:
            stamp = np.array(["2024-01-01"] * N, "datetime64[s]")
        return np.zeros(N, np.int64), {"stamp": stamp}

    runner = EnvRunner(numpy_cartpole(), policy, seed=0)
    runner.sample(3)
    with pytest.raises(ValueError, match="extra output 'stamp': got datetime64"):
        runner.sample(3)


# ----------------------------------------------------- 5. TorchCartPole's per-env seed lists
@pytest.mark.parametrize("seed", [[None, None], [None, 3], (4, None)])
def test_torch_cartpole_takes_seed_lists_with_none(seed: Any) -> None:
    obs, _ = TorchCartPole(N).reset(seed=seed)
    assert obs.shape == (N, 4)
    chunks = EnvRunner(TorchCartPole(N), lambda o: ((o[:, 2] > 0).long(), {}), seed=seed)
    assert len(chunks.sample(2)) == N


def test_torch_cartpole_seed_lists_read_every_seed() -> None:
    a, _ = TorchCartPole(N).reset(seed=[3, 7])
    b, _ = TorchCartPole(N).reset(seed=[3, 8])
    c, _ = TorchCartPole(N).reset(seed=[3, 7])
    assert not torch.equal(a, b) and torch.equal(a, c)


def test_torch_cartpole_int_seed_is_unchanged() -> None:
    # The generator seeded with the int itself, as before (the examples' figures depend on it).
    env = TorchCartPole(N)
    obs, _ = env.reset(seed=5)
    generator = torch.Generator().manual_seed(5)
    assert torch.equal(obs, torch.rand((N, 4), generator=generator) * 0.1 - 0.05)


def test_torch_cartpole_takes_a_numpy_int_seed() -> None:
    # Before: ``seed[0]`` of a numpy int (an IndexError); the runner's own check takes them.
    assert torch.equal(
        TorchCartPole(N).reset(seed=np.int64(5))[0], TorchCartPole(N).reset(seed=5)[0]
    )


@pytest.mark.parametrize("seed", [[1, 2, 3], [1.5, 2], -1, True, 2.5])
def test_torch_cartpole_refuses_other_seeds(seed: Any) -> None:
    with pytest.raises(ValueError, match="seed must be None or an int >= 0"):
        TorchCartPole(N).reset(seed=seed)


def test_torch_cartpole_documents_unchecked_actions() -> None:
    doc = TorchCartPole.__doc__ or ""
    assert "not" in doc and "checked" in doc and "left" in doc


# ------------------------------------------------------ 6. same-step finals of two shapes
def test_final_observations_of_different_shapes_are_named() -> None:
    finals = np.empty(2, object)
    finals[0], finals[1] = np.zeros(3, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"infos\['final_obs'\].*\(3,\), \(4,\)"):
        stacked_finals({"final_obs": finals}, np.array([0, 1]), None, [(2, 3)])


def test_final_observations_of_different_shapes_in_the_runner() -> None:
    class SameStep(gym.vector.VectorEnv):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.num_envs = N
            self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
            self.single_observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
            self.single_action_space = gym.spaces.Discrete(2)

        def reset(self, **kwargs: Any) -> Any:
            return np.zeros((N, 3), np.float32), {}

        def step(self, actions: Any) -> Any:
            finals = np.empty(N, object)
            finals[0], finals[1] = np.zeros(3, np.float32), np.zeros(4, np.float32)
            done = np.ones(N, bool)
            infos = {"final_obs": finals, "_final_obs": done}
            return np.zeros((N, 3), np.float32), np.ones(N), done, ~done, infos

    runner = EnvRunner(SameStep(), lambda obs: (np.zeros(N, np.int64), {}), seed=0)
    with pytest.raises(ValueError, match=r"infos\['final_obs'\]"):
        runner.sample(2)


# ------------------------------------------------------------ 8. num_steps beyond memory
@pytest.mark.parametrize("env_kind", ["numpy_env", "torch_env"])
@pytest.mark.parametrize("num_steps", [2**70, 2**62, 2**45])
def test_num_steps_no_memory_holds_is_named_and_the_runner_goes_on(
    env_kind: str, num_steps: int
) -> None:
    if env_kind == "numpy_env":
        env: Any = numpy_cartpole()

        def policy(obs: Any) -> Any:
            return (obs[:, 2] > 0).astype(np.int64), {}
    else:
        env = TorchCartPole(N)

        def policy(obs: Any) -> Any:
            return (obs[:, 2] > 0).long(), {}

    runner = EnvRunner(env, policy, seed=0)
    runner.sample(2)
    with pytest.raises(ValueError, match=f"num_steps={num_steps}"):
        runner.sample(num_steps)
    assert sum(len(c) for c in runner.sample(2)) == 2 * N
    fresh = EnvRunner(env, policy, seed=0)  # a first call's refusal leaves it unstarted
    with pytest.raises(ValueError, match="num_steps="):
        fresh.sample(num_steps)
    assert sum(len(c) for c in fresh.sample(2)) == 2 * N


def test_other_errors_of_a_first_call_pass_through() -> None:
    class Ragged(_BadAtStep2):
        def reset(self, **kwargs: Any) -> Any:
            return torch.zeros(N + 1, 3), {}

    with pytest.raises(ValueError, match="reset observations"):
        EnvRunner(Ragged("none"), lambda obs: (torch.zeros(N, dtype=torch.long), {})).sample(2)

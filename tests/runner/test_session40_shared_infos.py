"""Info values of the whole vector step (no item per sub-env) are shared by the sub-envs.

Isaac-Lab-style envs report metrics over all sub-envs every step (``extras["log"] =
{"Episode_Reward/x": tensor(0.3)}``); a number, a string, None, a 0-d array or tensor holds no
item per sub-env: every sub-env that reported infos at that step gets that same object, but
for a 0-d numpy array, handed out as its numpy scalar (what a per-env row reads as, and one no
consumer can change in place for the others; a torch env's 0-d tensors come to the host, as
its other tensor infos, and so read as numpy scalars too; a numpy env's 0-d tensor is cloned
for each sub-env). Arrays with a first dimension too
short for the sub-envs stay refused, naming the key and shape.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner
from episodes.runner.infos import env_info, is_step_value

N = 3
MODES = {"next-step": AutoresetMode.NEXT_STEP, "same-step": AutoresetMode.SAME_STEP}


class _Counter(gym.Env):
    """Truncates every ``length`` steps (sub-env ``i`` after ``length + i``); a per-env info."""

    observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int):
        self.length, self.t = length, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"t": self.t}

    def step(self, action):
        self.t += 1
        obs = np.full(1, self.t, np.float32)
        return obs, 1.0, False, self.t >= self.length, {"t": self.t}


class _StepValues(gym.vector.VectorWrapper):
    """Adds values of the whole step (and a per-env ``step`` number) to every infos."""

    def __init__(self, env: gym.vector.VectorEnv, tensors: bool = False):
        super().__init__(env)
        self.tensors = tensors
        self.step_number = 0
        self.given: dict[int, dict[str, Any]] = {}  # what each step's infos shared

    def _add(self, infos: dict[str, Any]) -> dict[str, Any]:
        k = self.step_number
        zero_d: Any = torch.tensor(0.5 * k) if self.tensors else np.array(0.5 * k)
        shared = {
            "rate": 0.25 * k,  # a Python float
            "np_rate": np.float32(k),  # a numpy scalar
            "name": f"step{k}",
            "nothing": None,
            "zero_d": zero_d,
            "log": {"Episode_Reward/x": torch.tensor(0.3 * k), "count": k},
        }
        self.given[k] = shared
        per_env = torch.full((N,), k) if self.tensors else np.full(N, k)
        out = dict(infos)
        out.update(shared, step=per_env)
        # Reported by sub-env 1 only: the others' infos leave it out.
        out["masked"], out["_masked"] = "only 1", np.array([False, True, False])
        if "final_info" in out:
            out["final_info"] = {**out["final_info"], "ended_at": f"final{k}"}
        return out

    def reset(self, **kwargs):
        self.step_number = 0
        obs, infos = self.env.reset(**kwargs)
        return obs, self._add(infos)

    def step(self, actions):
        self.step_number += 1
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        return obs, rewards, terminated, truncated, self._add(infos)


def _numpy_env(mode: AutoresetMode) -> _StepValues:
    env = gym.vector.SyncVectorEnv(
        [lambda i=i: _Counter(3 + i) for i in range(N)], autoreset_mode=mode
    )
    return _StepValues(env)


def _torch_env(mode: AutoresetMode) -> _StepValues:
    return _StepValues(TorchCartPole(N, autoreset_mode=mode.value, max_episode_steps=3), True)


def _numpy_policy(obs):
    return np.zeros(len(obs), np.int64), None


def _torch_policy(obs):
    return torch.zeros(len(obs), dtype=torch.long), None


def _same(a: Any, b: Any, copied: bool) -> bool:
    if a is b:
        return True
    if isinstance(a, (np.ndarray, np.generic, torch.Tensor)):  # a host copy, or its scalar
        return float(a) == float(b)
    return copied and type(a) is type(b) and a == b


def _check_chunks(chunks: Any, env: _StepValues, *, torch_env: bool, copied: bool = False) -> int:
    """Each chunk's infos hold their step's shared values; the sub-envs of a step one object.

    ``copied``: the chunks went through pickle, so their values equal the env's, not are them.
    """
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    seen = 0
    for chunk in chunks:
        i = chunk.custom_data["env_index"]
        for info in chunk.get_infos():
            if not info or "step" not in info:  # a same-step final info
                if info:
                    assert set(info) <= {"t", "_t", "ended_at"} and info["ended_at"][:5] == "final"
                continue
            seen += 1
            k = int(info["step"])
            given = env.given[k]
            by_step[k].append(info)
            for key in ("rate", "np_rate", "name", "nothing", "zero_d"):
                assert _same(info[key], given[key], copied), (key, info[key], given[key])
            for key in ("rate", "np_rate", "name", "nothing"):  # kept as the env gave them
                assert copied or info[key] is given[key]
            # A 0-d numpy array reads as its scalar (a torch env's 0-d tensors come to the
            # host as 0-d arrays): immutable, so no sub-env's consumer changes another's.
            assert isinstance(info["zero_d"], np.generic)
            if torch_env:
                assert isinstance(info["log"]["Episode_Reward/x"], np.generic)
            else:  # a numpy env's 0-d tensor: a clone (the env may add to it in place)
                assert isinstance(info["log"]["Episode_Reward/x"], torch.Tensor)
                assert info["log"]["Episode_Reward/x"] is not given["log"]["Episode_Reward/x"]
            assert float(info["log"]["Episode_Reward/x"]) == pytest.approx(0.3 * k)
            assert info["log"]["count"] == given["log"]["count"]
            assert ("masked" in info) == (i == 1)
            if not torch_env:
                assert int(info["t"]) >= 0  # the per-env value
    for infos in by_step.values():  # one object per step, whichever sub-env's info holds it
        # pickle makes a new float per reference (it memoizes no numbers): equal ones, then
        for key in ("name",) if copied else ("rate", "name"):
            assert len({id(info[key]) for info in infos}) == 1, key
        assert len({float(info["zero_d"]) for info in infos}) == 1
        if not torch_env:  # each sub-env its own clone: a consumer's += changes no other's
            tensors = [info["log"]["Episode_Reward/x"] for info in infos]
            assert len({id(t) for t in tensors}) == len(tensors)
        assert len({id(info["log"]) for info in infos}) == len(infos)  # each dict its own
    return seen


ENVS = {"numpy": (_numpy_env, _numpy_policy, False), "torch": (_torch_env, _torch_policy, True)}


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES)
@pytest.mark.parametrize("kind", ENVS)
def test_step_values_are_shared_by_every_sub_envs_info(kind, mode) -> None:
    make, policy, torch_env = ENVS[kind]
    env = make(mode)
    runner = EnvRunner(env, policy, seed=0)
    for _ in range(3):  # the runner keeps working across calls
        chunks = runner.sample(5)
        assert _check_chunks(chunks, env, torch_env=torch_env) > 0
    copied = pickle.loads(pickle.dumps(runner.sample(4)))
    assert _check_chunks(copied, env, torch_env=torch_env, copied=True) > 0


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES)
def test_same_step_final_infos_share_their_step_values(mode) -> None:
    env = _numpy_env(mode)
    chunks = EnvRunner(env, _numpy_policy, seed=0).sample(8)
    finals = [c.get_infos()[-1] for c in chunks if c.is_done]
    assert finals
    if mode is AutoresetMode.SAME_STEP:
        assert all(info["ended_at"].startswith("final") for info in finals)
        assert all(int(info["t"]) >= 3 for info in finals)  # the sub-env's own last value


SHARED = {
    "a float": 0.5,
    "an int": 3,
    "a numpy scalar": np.float32(2.0),
    "a string": "hello",
    "bytes": b"hi",
    "None": None,
    "a 0-d array": np.array(3.0),
    "a 0-d tensor": torch.tensor(1.5),
}


@pytest.mark.parametrize("value", SHARED.values(), ids=SHARED)
def test_env_info_shares_a_value_of_the_whole_step(value) -> None:
    assert is_step_value(value)
    infos = {"x": value, "n": {"y": value}, "p": np.array([1, 2])}
    for i in range(2):
        out = env_info(infos, i)
        if type(value) is np.ndarray:  # a 0-d array: its scalar, immutable
            assert type(out["x"]) is np.float64 and out["x"] == value and out["n"]["y"] == value
        elif isinstance(value, torch.Tensor):  # a 0-d tensor: each sub-env's own clone
            assert out["x"] is not value and out["n"]["y"] is not value
            assert out["x"] == value and out["n"]["y"] == value
        else:
            assert out["x"] is value and out["n"]["y"] is value
        assert out["p"] == i + 1


def test_a_consumer_changing_one_sub_envs_value_leaves_the_others() -> None:
    infos = {"log": {"m": np.array(1.0)}, "p": np.array([1, 2])}
    first, second = env_info(infos, 0), env_info(infos, 1)
    first["log"]["m"] += 1  # a numpy scalar: rebinds the key of this sub-env's dict only
    assert second["log"]["m"] == 1.0 and infos["log"]["m"] == 1.0


class _Infos(gym.vector.VectorWrapper):
    """Steps with the given infos (the env's own dropped)."""

    def __init__(self, env: gym.vector.VectorEnv, infos: dict[str, Any]):
        super().__init__(env)
        self.bad = infos

    def step(self, actions):
        obs, rewards, terminated, truncated, _ = self.env.step(actions)
        return obs, rewards, terminated, truncated, self.bad


REFUSED = {
    "a short array": ({"x": np.arange(2)}, r"infos\['x'\] .* got ndarray of shape \(2,\)"),
    "a short tensor": ({"x": torch.arange(1)}, r"infos\['x'\] .* got Tensor of shape \(1,\)"),
    "nested": ({"log": {"y": np.zeros((1, 4))}}, r"infos\['y'\] .* of shape \(1, 4\)"),
    # More rows than sub-envs: not the sub-envs' rows (reading the first N would hide it).
    "a long array": ({"x": np.arange(N + 2)}, rf"infos\['x'\] .* of shape \({N + 2},\)"),
    "a long list": ({"x": list(range(N + 1))}, r"infos\['x'\] .* got list"),
    "a long nested array": ({"log": {"y": np.zeros(N + 1)}}, r"infos\['y'\] .* shape"),
}


@pytest.mark.parametrize("infos, match", REFUSED.values(), ids=REFUSED)
def test_a_value_short_of_the_sub_envs_is_still_refused(infos, match) -> None:
    env = _Infos(gym.make_vec("CartPole-v1", N, vectorization_mode="sync"), infos)
    with pytest.raises(ValueError, match=match):
        EnvRunner(env, _numpy_policy, seed=0).sample(3)

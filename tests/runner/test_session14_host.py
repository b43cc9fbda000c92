"""Session 14 fixes: what the host runner does with malformed policy outputs and env batches.

Each test failed before its fix:

* an extra output (or the actions) that is an empty dict or tuple passed the first-step check;
  the env stepped, then the block row found no leaf (``IndexError``) and the runner was dead;
  a ragged list was refused in numpy's words, naming no output;
* a Dict observation whose keys changed at a later step (or that turned into a tuple) was
  filed under the first step's keys without a word; so were same-step final observations and
  disabled-mode reset observations of other keys;
* a VectorEnv without ``single_observation_space``/``single_action_space`` was taken by the
  constructor, but every ``sample()`` then raised ``AttributeError`` after recording;
* reset observations without one row per sub-env failed in numpy's broadcast words (or, with
  ``window="vector_steps"``, the env's correct next step was blamed);
* ``numpy_episodes="no"`` was taken as True; a same-step env without ``infos["final_obs"]``
  at an ending step raised a bare ``KeyError``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import tree
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from episodes.runner import EnvRunner
from episodes.runner.blocks import Column
from tests.runner._runner_env import CountingSteps

N = 2
BOX = gym.spaces.Box(-100, 100, (2,), np.float32)


def cartpole() -> CountingSteps:
    return CountingSteps(gym.make_vec("CartPole-v1", N, vectorization_mode="sync"))


class Switchable:
    """A policy returning ``outputs(obs)``, swappable after a refusal."""

    def __init__(self, outputs: Any):
        self.outputs = outputs

    def __call__(self, obs: Any) -> Any:
        return self.outputs(obs)


def good(obs: Any) -> Any:
    return np.zeros(N, np.int64), {"a": np.zeros(N)}


# --------------------------------------------------------------- 1. leafless, ragged outputs
LEAFLESS = {
    "extra_empty_dict": lambda obs: (np.zeros(N, np.int64), {"a": {}}),
    "extra_empty_tuple": lambda obs: (np.zeros(N, np.int64), {"a": ()}),
    "extra_nested_empty": lambda obs: (np.zeros(N, np.int64), {"a": {"x": ()}}),
    "actions_empty_dict": lambda obs: ({}, {}),
}


@pytest.mark.parametrize("case", sorted(LEAFLESS))
def test_leafless_output_is_refused_before_the_env_steps(case: str) -> None:
    env = cartpole()
    policy = Switchable(LEAFLESS[case])
    runner = EnvRunner(env, policy, seed=0)
    name = "actions" if case.startswith("actions") else "extra output 'a'"
    with pytest.raises(ValueError, match=f"the policy's {name} holds no batch"):
        runner.sample(3)
    assert env.steps == 0
    policy.outputs = good  # the runner is untouched: it goes on as if the call were not made
    assert [len(c) for c in runner.sample(3)] == [3] * N


RAGGED = {
    "extra_first_step": (lambda t: {"a": [[1, 2], [3]]}, "extra output 'a'", 0),
    "extra_later_step": (
        lambda t: {"a": [[1, 2], [3, 4]] if t < 2 else [[1, 2], [3]]},
        "extra output 'a'",
        1,
    ),
}


@pytest.mark.parametrize("case", sorted(RAGGED))
def test_ragged_list_output_names_the_output(case: str) -> None:
    make, name, steps = RAGGED[case]
    env = cartpole()
    calls = {"t": 0}

    def policy(obs: Any) -> Any:
        calls["t"] += 1
        return np.zeros(N, np.int64), make(calls["t"])

    with pytest.raises(ValueError, match=rf"the policy's {name} is a list whose items differ"):
        EnvRunner(env, policy, seed=0).sample(3)
    assert env.steps == steps  # refused before the env stepped again


def test_ragged_list_actions_name_the_actions() -> None:
    env = cartpole()
    runner = EnvRunner(env, lambda obs: ([[0, 1], [0]], {}), seed=0)
    with pytest.raises(ValueError, match="the policy's actions is a list whose items differ"):
        runner.sample(2)
    assert env.steps == 0


# ----------------------------------------------------------- 2. observations change nesting
def observations(kind: str, changed: bool, t: int) -> Any:
    pos = np.full((N, 2), t, np.float32)
    vel = np.full((N, 2), -t, np.float32)
    if kind == "inner":
        return {"pos": {"y" if changed else "x": pos}, "vel": vel}
    if not changed:
        return {"pos": pos, "vel": vel}
    if kind == "renamed":
        return {"pos": pos, "zzz": vel}
    if kind == "tuple":
        return (pos, vel)
    assert kind == "swapped"  # the same keys, values swapped: nothing to refuse
    return {"pos": vel, "vel": pos}


class NestingEnv(VectorEnv):  # type: ignore[type-arg]
    """Dict observations whose nesting changes at vector step ``at`` in one place: ``where``.

    ``where`` is "step" (the step's observations), "final" (same-step ``infos["final_obs"]``)
    or "reset" (the observations of the runner's resets in disabled mode). Every sub-env's
    episode ends at every second step.
    """

    def __init__(self, mode: AutoresetMode, kind: str, where: str, at: int = 3):
        self.num_envs, self.kind, self.where, self.at = N, kind, where, at
        self.metadata = {"autoreset_mode": mode}
        inner = gym.spaces.Dict({"x": BOX}) if kind == "inner" else BOX
        self.single_observation_space = gym.spaces.Dict({"pos": inner, "vel": BOX})
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, N)
        self.action_space = batch_space(self.single_action_space, N)
        self.t = 0
        self.steps = 0

    def _obs(self, where: str) -> Any:
        return observations(self.kind, self.where == where and self.t >= self.at, self.t)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return self._obs("reset"), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        self.steps += 1
        done = np.full(N, self.t % 2 == 0)
        infos: dict[str, Any] = {}
        if done.any() and self.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP:
            finals = self._obs("final")
            items = np.empty(N, object)  # gymnasium's: one item per sub-env
            for i in range(N):
                items[i] = tree.map_structure(lambda x, i=i: x[i], finals)
            infos["final_obs"], infos["_final_obs"] = items, done
        return self._obs("step"), np.ones(N), done, np.zeros(N, bool), infos


PLACES = {
    "step": (AutoresetMode.NEXT_STEP, "the env's observations changed nesting"),
    "final": (AutoresetMode.SAME_STEP, r"infos\['final_obs'\]\) of sub-env 0 changed nesting"),
    "reset": (AutoresetMode.DISABLED, "the env's reset observations changed nesting"),
}


@pytest.mark.parametrize("kind", ["renamed", "tuple", "inner"])
@pytest.mark.parametrize("where", sorted(PLACES))
def test_observations_that_change_nesting_are_refused(where: str, kind: str) -> None:
    mode, message = PLACES[where]
    runner = EnvRunner(NestingEnv(mode, kind, where), lambda obs: (np.zeros(N, np.int64), {}))
    with pytest.raises(ValueError, match=message):
        runner.sample(8)
    # The env had stepped, as for any env output refused on its way into the blocks.
    with pytest.raises(RuntimeError, match="changed nesting"):
        runner.sample(2)


@pytest.mark.parametrize("where", sorted(PLACES))
def test_observations_of_the_same_nesting_are_recorded(where: str) -> None:
    mode, _ = PLACES[where]
    env = NestingEnv(mode, "swapped", where)
    chunks = EnvRunner(env, lambda obs: (np.zeros(N, np.int64), {})).sample(6)
    assert sum(len(c) for c in chunks) == 6 * N
    assert all(sorted(c.get_observations()) == ["pos", "vel"] for c in chunks)


def test_torch_observations_that_change_keys_are_refused() -> None:
    class TorchNesting(NestingEnv):
        def _obs(self, where: str) -> Any:
            return tree.map_structure(torch.from_numpy, super()._obs(where))

    env = TorchNesting(AutoresetMode.NEXT_STEP, "renamed", "step")
    runner = EnvRunner(env, lambda obs: (torch.zeros(N, dtype=torch.int64), {}))
    with pytest.raises(ValueError, match="the env's observations changed nesting"):
        runner.sample(8)


def test_column_refuses_a_batch_of_other_keys() -> None:
    from episodes.runner.nesting import nests_as  # new in this session

    col = Column.for_batch({"a": np.zeros(2), "b": np.zeros(2)}, rows=3)
    col.put(0, {"b": np.ones(2), "a": np.ones(2)})  # key order does not matter
    with pytest.raises(ValueError, match=r"obs changed nesting from \{'a': \(2,\), 'b'"):
        col.put(1, {"a": np.ones(2), "c": np.ones(2)}, "obs")
    assert nests_as((1, [2]), [None, (None,)]) and not nests_as((1, {}), (None, None))


# ------------------------------------------------------------- 3. no single spaces
class NoSingleSpaces(VectorEnv):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.num_envs = N
        self.metadata: dict[str, Any] = {}
        self.steps = 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return np.zeros((N, 3)), {}

    def step(self, actions: Any) -> Any:
        self.steps += 1
        done = np.array([self.steps == 2, False])
        return np.ones((N, 3)), np.ones(N), done, np.zeros(N, bool), {}


def test_env_without_single_spaces_is_sampled() -> None:
    env = NoSingleSpaces()
    runner = EnvRunner(env, lambda obs: (np.zeros(N, np.int64), {}))
    first, second = runner.sample(3), runner.sample(3)
    assert [len(c) for c in first] == [2, 1, 3] and [len(c) for c in second] == [3, 3]
    assert first[0].observation_space is None
    # Every transition recorded counts: 7 in the first call (sub-env 1's fourth carried over).
    assert runner.get_metrics()["num_env_steps"] == 7 + 6


# ------------------------------------------------------ 4. reset observations per sub-env
class ResetRows(VectorEnv):  # type: ignore[type-arg]
    """Box (or Dict) observations; the reset's hold ``reset_rows`` rows."""

    def __init__(self, reset_rows: int, as_dict: bool = False, n: int = 3):
        self.num_envs, self.reset_rows, self.as_dict, self.steps = n, reset_rows, as_dict, 0
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.single_observation_space = BOX
        self.single_action_space = gym.spaces.Discrete(2)
        self.resets = 0

    def _obs(self, rows: int) -> Any:
        obs = np.zeros((rows, 2), np.float32)
        return {"a": np.zeros((self.num_envs, 1)), "b": obs} if self.as_dict else obs

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.resets += 1
        return self._obs(self.reset_rows), {}

    def step(self, actions: Any) -> Any:
        self.steps += 1
        n = self.num_envs
        return self._obs(n), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("as_dict", [False, True], ids=["box", "dict"])
@pytest.mark.parametrize("rows", [2, 4])
def test_reset_observations_without_a_row_per_sub_env(rows: int, as_dict: bool, window: str):
    env = ResetRows(rows, as_dict)
    runner = EnvRunner(env, lambda obs: (np.zeros(3, np.int64), {}), seed=0, window=window)
    leaf = r" \(leaf 1\)" if as_dict else ""
    message = rf"the env's reset observations{leaf}: got a batch of shape \({rows}, 2\), "
    with pytest.raises(ValueError, match=message + r"expected \(3, 2\)"):
        runner.sample(4)
    assert env.steps == 0
    env.reset_rows = 3  # the runner stayed unstarted: the next call resets again
    assert [len(c) for c in runner.sample(4)] == [4, 4, 4]
    assert env.resets == 2


def test_torch_reset_observations_without_a_row_per_sub_env() -> None:
    class TorchRows(ResetRows):
        def _obs(self, rows: int) -> Any:
            return torch.zeros(rows, 2)

    env = TorchRows(2)
    with pytest.raises(ValueError, match=r"reset observations: got a batch of shape \(2, 2\)"):
        EnvRunner(env, lambda obs: (torch.zeros(3, dtype=torch.int64), {})).sample(4)
    assert env.steps == 0


# ---------------------------------------------------------------------------- 5. the rest
@pytest.mark.parametrize("flag", ["no", 1, None, np.array([True])])
def test_numpy_episodes_must_be_a_bool(flag: Any) -> None:
    env = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    with pytest.raises(TypeError, match="numpy_episodes must be a bool"):
        EnvRunner(env, good, numpy_episodes=flag)
    assert EnvRunner(env, good, numpy_episodes=np.False_).numpy_episodes is False


class NoFinalObs(VectorEnv):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.num_envs = N
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self.single_observation_space = BOX
        self.single_action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return np.zeros((N, 2), np.float32), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        done = np.array([self.t == 2, False])
        return np.zeros((N, 2), np.float32), np.ones(N), done, np.zeros(N, bool), {}


def test_same_step_ending_without_final_obs_names_the_field() -> None:
    runner = EnvRunner(NoFinalObs(), lambda obs: (np.zeros(N, np.int64), {}))
    with pytest.raises(ValueError, match=r"sub-envs \[0\] finished .* infos\['final_obs'\]"):
        runner.sample(4)
    with pytest.raises(RuntimeError, match="final_obs"):
        runner.sample(4)


LEAF_TO_CONTAINER = {
    "a leaf beside an inner dict turned into a dict": (
        {"a": None, "b": None, "n": {"c": None}},
        {"a": {"p": 1, "q": 2}, "b": {}, "n": {"c": 3}},
    ),
    "an inner leaf turned into a dict": (
        {"pos": {"x": None}, "vel": None},
        {"pos": {"x": 1}, "vel": {"v": 2}},
    ),
    "a tuple member turned into a tuple": (
        {"t": (None, None)},
        {"t": ((1, 2), ())},
    ),
}


@pytest.mark.parametrize("structure, batch", LEAF_TO_CONTAINER.values(), ids=LEAF_TO_CONTAINER)
def test_a_leaf_that_became_a_container_is_another_nesting(structure, batch):
    from episodes.runner.nesting import inner_containers, nests_within

    assert not nests_within(batch, structure, inner_containers(structure))


# A number, a string, None or a 0-d array is the whole step's, shared (test_session40_shared_infos)
NOT_PER_ENV = {"a short array": np.array([3]), "a short list": [3], "a set": {3}}


@pytest.mark.parametrize("value", NOT_PER_ENV.values(), ids=NOT_PER_ENV)
def test_an_info_value_without_one_item_per_sub_env_names_its_key(value):
    from episodes.runner.infos import env_info

    with pytest.raises(ValueError, match=r"infos\['x'\] must hold one value per sub-env"):
        env_info({"x": value}, 1)
    assert env_info({"x": np.array([1, 2])}, 1) == {"x": 2}

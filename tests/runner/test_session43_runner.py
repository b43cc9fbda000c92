"""The runner's attributes it was made with, ``reset``, and observations mixing tensors and arrays.

Found by a hunt that drove the runner as gymnasium users do: an env reset outside the runner
spliced two episodes into one; assigning ``autoreset_mode`` or ``window`` after construction
changed what the checks and ``repr`` said but not what was recorded; a Dict observation of a
torch leaf and a numpy leaf failed or recorded depending on which key sorted first.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes.runner import EnvRunner

torch = pytest.importorskip("torch")

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def cartpole(mode: AutoresetMode = AutoresetMode.NEXT_STEP, n: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec(
        "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )


def lean(obs: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """A deterministic policy: push towards the pole's lean (runs of tens of steps)."""
    return (obs[:, 2] > 0).astype(np.int64), {}


def columns(chunks: Any) -> list[tuple[Any, ...]]:
    return [
        (
            c.custom_data["env_index"],
            c.t_started,
            np.asarray(c.get_observations()).tolist(),
            np.asarray(c.get_actions()).tolist(),
            np.asarray(c.get_rewards()).tolist(),
            c.is_terminated,
            c.is_truncated,
        )
        for c in chunks
    ]


# ------------------------------------------------------------------ fixed attributes
FIXED = [
    ("env", lambda: cartpole()),
    ("num_envs", lambda: 3),
    ("autoreset_mode", lambda: AutoresetMode.SAME_STEP),
    ("window", lambda: "vector_steps"),
]


@pytest.mark.parametrize(("name", "value"), FIXED, ids=[f[0] for f in FIXED])
def test_attributes_made_with_are_read_only(name: str, value: Any) -> None:
    env = cartpole()
    runner = EnvRunner(env, lean, seed=0)
    before = getattr(runner, name)
    with pytest.raises(AttributeError, match=rf"EnvRunner\.{name} is read-only: .*EnvRunner"):
        setattr(runner, name, value())
    assert getattr(runner, name) is before or getattr(runner, name) == before
    chunks = runner.sample(5)  # records as made: two envs, next-step, transitions
    assert [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in (0, 1)] == [
        5,
        5,
    ]
    assert runner.env is env and runner.num_envs == 2 and runner.window == "transitions"


def test_a_runner_pickled_with_its_attributes_by_name_still_loads() -> None:
    # As an earlier build pickled it: the made-with attributes in the instance dict by name.
    runner = EnvRunner(cartpole(), lean, seed=0)
    first = runner.sample(4)
    state = dict(copy.deepcopy(runner).__dict__)  # make_vec's envs do not pickle
    for name in ("env", "num_envs", "autoreset_mode", "window"):
        state[name] = state.pop("_" + name)
    old = EnvRunner.__new__(EnvRunner)
    old.__setstate__(state)
    assert old.num_envs == 2 and old.window == "transitions"
    later, goes_on = old.sample(4), runner.sample(4)
    assert columns(later) == columns(goes_on)
    assert [c.id_ for c in later] == [c.id_ for c in goes_on]
    assert later[0].id_ == first[0].id_ and later[0].t_started == 4  # lean: no end yet


# ------------------------------------------------------------------------ reset()
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_reset_with_a_seed_records_what_a_new_runner_with_it_records(mode: AutoresetMode) -> None:
    runner = EnvRunner(cartpole(mode), lean, seed=0)
    before = runner.sample(30)
    runner.reset(seed=7)
    after = runner.sample(30)
    fresh = EnvRunner(cartpole(mode), lean, seed=7).sample(30)
    assert columns(after) == columns(fresh)
    assert {c.id_ for c in after}.isdisjoint(c.id_ for c in before)
    assert [c.t_started for c in after if c.custom_data["env_index"] == 0][0] == 0
    # And it goes on from there as the fresh runner does.
    assert columns(runner.sample(10)) == columns(
        (lambda r: (r.sample(30), r.sample(10))[1])(EnvRunner(cartpole(mode), lean, seed=7))
    )


def test_reset_without_a_seed_resets_the_env_unseeded() -> None:
    env = cartpole()
    seen: list[Any] = []
    reset = env.reset

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs.get("seed"))
        return reset(**kwargs)

    env.reset = spy  # type: ignore[method-assign]
    runner = EnvRunner(env, lean, seed=3)
    runner.sample(2)
    runner.sample(2)  # continues: no reset
    runner.reset()
    runner.sample(2)
    assert seen == [3, None] and runner.seed is None


def test_an_env_reset_outside_the_runner_is_taken_after_reset() -> None:
    env = cartpole()
    runner = EnvRunner(env, lean, seed=0)
    runner.sample(5)
    env.reset(seed=11)  # outside: the runner cannot see it
    runner.reset(seed=11)
    chunks = runner.sample(5)
    start, _ = cartpole().reset(seed=11)
    assert np.asarray(chunks[0].get_observations(0)).tolist() == start[0].tolist()
    assert chunks[0].t_started == 0


def test_reset_makes_a_runner_whose_sample_failed_usable() -> None:
    env = cartpole()
    calls = {"n": 0}

    def flaky(obs: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("policy failed")
        return lean(obs)

    runner = EnvRunner(env, flaky, seed=0)
    with pytest.raises(RuntimeError, match="policy failed"):
        runner.sample(10)
    with pytest.raises(RuntimeError, match="failed part-way"):
        runner.sample(10)
    runner.reset(seed=0)
    chunks = runner.sample(10)
    assert columns(chunks) == columns(EnvRunner(cartpole(), lean, seed=0).sample(10))


def test_a_refused_seed_leaves_the_runner_going_on() -> None:
    runner = EnvRunner(cartpole(), lean, seed=0)
    first = runner.sample(3)
    with pytest.raises(ValueError):
        runner.reset(seed=-1)
    with pytest.raises(ValueError):
        runner.reset(seed=[1, 2, 3])  # three seeds for two sub-envs
    second = runner.sample(3)
    assert second[0].id_ == first[0].id_ and second[0].t_started == 3


def test_reset_starts_a_recurrent_state_over() -> None:
    given: list[np.ndarray] = []

    def recurrent(obs: np.ndarray, state: np.ndarray) -> Any:
        given.append(state.copy())
        return lean(obs)[0], {}, state + 1.0

    runner = EnvRunner(cartpole(), recurrent, initial_state=lambda n: np.full((n, 1), -5.0), seed=0)
    runner.sample(3)
    assert given[-1].ravel().tolist() == [-3.0, -3.0]
    runner.reset(seed=0)
    given.clear()
    runner.sample(1)
    assert given[0].ravel().tolist() == [-5.0, -5.0]


def test_reset_keeps_the_policy_outputs_checked_anew() -> None:
    # The new recording allocates its output columns at its first step, for the outputs then.
    def with_logp(obs: np.ndarray) -> Any:
        return lean(obs)[0], {"action_logp": np.zeros(len(obs), np.float32)}

    runner = EnvRunner(cartpole(), with_logp, seed=0)
    runner.sample(3)
    runner.reset(seed=0)
    chunks = runner.sample(3)
    assert np.asarray(chunks[0].get_extra_model_outputs("action_logp")).tolist() == [0.0] * 3


# --------------------------------------------------------------- mixed observations
class MixedLeaves(VectorEnv):
    """Dict observations holding a torch leaf and a numpy leaf, in the key order asked for."""

    def __init__(self, tensor_key: str, array_key: str, n: int = 2):
        self.num_envs, self.keys, self.t = n, (tensor_key, array_key), 0
        self.single_observation_space = spaces.Dict(
            {tensor_key: spaces.Box(-10, 10, (3,)), array_key: spaces.MultiBinary(2)}
        )
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def _obs(self) -> dict[str, Any]:
        state = torch.full((self.num_envs, 3), float(self.t))
        mask = np.full((self.num_envs, 2), self.t % 2, np.int8)
        return {self.keys[0]: state, self.keys[1]: mask}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return self._obs(), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        n = self.num_envs
        return self._obs(), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}


@pytest.mark.parametrize(
    ("tensor_key", "array_key"), [("a", "b"), ("b", "a")], ids=["tensor-first", "array-first"]
)
def test_tensor_and_array_leaves_are_recorded_on_the_host_whichever_sorts_first(
    tensor_key: str, array_key: str
) -> None:
    runner = EnvRunner(MixedLeaves(tensor_key, array_key), lambda o: (np.zeros(2, int), {}))
    chunks = runner.sample(3)
    obs = chunks[0].get_observations()
    assert type(obs[tensor_key]) is np.ndarray and type(obs[array_key]) is np.ndarray
    assert obs[tensor_key][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert obs[array_key][:, 0].tolist() == [0, 1, 0, 1]
    assert runner.sample(2)[0].t_started == 3


def test_a_fixed_attribute_not_yet_held_is_a_missing_attribute() -> None:
    # A subclass reading it before EnvRunner.__init__ ran, hasattr, getattr with a default.
    bare = EnvRunner.__new__(EnvRunner)
    for name in ("env", "num_envs", "autoreset_mode", "window"):
        assert not hasattr(bare, name)
        assert getattr(bare, name, "default") == "default"


class _NoModeEnv(gym.vector.VectorEnv):
    """A same-step env that declares no mode and reports no final observation (Isaac Lab's way).

    Its observations are numpy arrays, or torch tensors with ``torch_env`` (a device recorder).
    """

    def __init__(self, n: int = 2, torch_env: bool = False):
        self.num_envs, self.t, self.torch_env = n, 0, torch_env
        self.single_observation_space = spaces.Box(-10, 10, (1,))
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.metadata = {}

    def _out(self, value: Any) -> Any:
        return torch.as_tensor(value) if self.torch_env else value

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return self._out(np.zeros((self.num_envs, 1))), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        ended = np.full(self.num_envs, self.t % 3 == 0)
        obs = np.full((self.num_envs, 1), float(self.t))
        n = self.num_envs
        return (
            self._out(obs),
            self._out(np.ones(n)),
            self._out(ended),
            self._out(~ended & False),
            {},
        )


@pytest.mark.parametrize("torch_env", [False, True], ids=["numpy-env", "torch-env"])
def test_the_autoreset_doubt_is_said_once_per_runner_across_reset(torch_env: bool) -> None:
    from episodes.runner import AutoresetModeWarning

    def policy(obs: Any) -> Any:
        return np.zeros(len(obs), np.int64), {}

    runner = EnvRunner(_NoModeEnv(torch_env=torch_env), policy, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.sample(8)
        runner.reset(seed=0)
        runner.sample(8)
        runner.reset(seed=1)
        runner.sample(8)
    said = [w for w in caught if issubclass(w.category, AutoresetModeWarning)]
    assert len(said) == 1

"""Session 16 runner fixes: refusals that came after the env stepped, metrics that were lost.

Each test failed before its fix:

* a first ``sample(num_steps)`` whose action or extra-output blocks could not be allocated
  failed in numpy's or torch's words after ``env.step`` (those blocks were made by the first
  step's recording), and the runner was dead; contract §11 promises a ``ValueError`` naming
  ``num_steps`` before the env steps, the runner as it was;
* ``runner.metrics.max_listed = 2.5`` was taken and killed the next ``sample()`` after the
  env stepped; ``-1`` silently listed no episode;
* ``runner.metrics = RunnerMetrics(...)`` was taken, but the recorder kept counting episodes
  into the old object: the new one reported 0 episodes;
* ``EnvRunner(len_lookback_buffer=2**63)`` was taken, and the first ``sample()`` died in
  numpy's ``OverflowError`` after the env stepped.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner, RandomPolicy, RunnerMetrics
from episodes.structs import data_equal

N = 2
BIG = 10**7  # rows the observation blocks hold; the wide outputs' blocks overflow at this size
WIDE = 2**40  # items per row of a wide output (a broadcast view: no memory of its own)


class _CountingEnv(gym.Env):  # type: ignore[type-arg]
    """Episodes of ``3 + i`` steps, each drawn from the seed; counts ``step`` calls."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, i: int, counter: dict[str, int]):
        self.i, self.counter, self.t, self.k = i, counter, 0, 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.k, self.t = int(self.np_random.integers(1000)), 0
        return np.array([self.k, self.t], np.float32), {"k": self.k}

    def step(self, action: Any) -> Any:
        self.counter["step"] += 1
        self.t += 1
        obs = np.array([self.k, self.t], np.float32)
        return obs, float(self.t), self.t >= 3 + self.i, False, {}


class _AsTensors(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """A numpy vector env seen through torch (CPU): the runner's device path."""

    def __init__(self, env: gym.vector.VectorEnv):
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = env.metadata

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        obs, infos = self.env.reset(seed=seed, options=options)
        return torch.as_tensor(obs), infos

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, infos = self.env.step(np.asarray(actions))
        as_t = torch.as_tensor
        return as_t(obs), as_t(rew), as_t(term), as_t(trunc), {}


def _env(backend: str, counter: dict[str, int]) -> gym.vector.VectorEnv:
    env = gym.vector.SyncVectorEnv([lambda i=i: _CountingEnv(i, counter) for i in range(N)])
    return _AsTensors(env) if backend == "torch" else env


class _Policy:
    """Actions 0 and an extra output ``logits`` of ``width`` items per sub-env; ``wide``
    makes the actions or the logits ``WIDE`` items (a broadcast view of one value)."""

    def __init__(self, backend: str, wide: str | None):
        self.backend, self.wide = backend, wide

    def _batch(self, n: int, width: int, dtype: Any) -> Any:
        if self.backend == "torch":
            return torch.zeros(n, 1, dtype=torch.uint8).expand(n, width)
        return np.broadcast_to(np.zeros((n, 1), dtype), (n, width))

    def __call__(self, obs: Any) -> Any:
        n = len(obs)
        actions = self._batch(n, WIDE, np.uint8) if self.wide == "actions" else None
        if actions is None:
            actions = (
                torch.zeros(n, dtype=torch.int64)
                if self.backend == "torch"
                else (np.zeros(n, np.int64))
            )
        width = WIDE if self.wide == "extras" else 4
        return actions, {"logits": self._batch(n, width, np.uint8)}


def _data(chunks: Any) -> list[tuple[Any, ...]]:
    """What a chunk holds, without its id (a per-runner uuid)."""
    return [
        (
            c.t_started,
            c.custom_data["env_index"],
            c.get_observations(),
            c.get_actions(),
            c.get_rewards(),
            c.get_extra_model_outputs("logits"),
            c.is_terminated,
            c.is_truncated,
        )
        for c in chunks
    ]


def _same(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(data_equal(x, y) for x, y in zip(_data(a), _data(b)))


# ------------------------------------------------- 1. first call: output blocks too big
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("wide", ["extras", "actions"])
def test_first_call_output_blocks_too_big_refused_before_env_steps(
    backend: str, window: str, wide: str
) -> None:
    counter = {"step": 0}
    policy = _Policy(backend, wide)
    runner = EnvRunner(_env(backend, counter), policy, seed=3, window=window)
    with pytest.raises(ValueError, match=rf"num_steps={BIG}: too many steps for one call"):
        runner.sample(BIG)
    assert counter["step"] == 0  # refused before env.step
    # The runner is as it was: unstarted, and its next call records as a fresh runner's.
    policy.wide = None
    got = [runner.sample(3), runner.sample(4)]
    twin = EnvRunner(_env(backend, {"step": 0}), _Policy(backend, None), seed=3, window=window)
    want = [twin.sample(3), twin.sample(4)]
    assert all(_same(g, w) for g, w in zip(got, want))
    assert runner.get_metrics()["num_vector_steps"] == twin.get_metrics()["num_vector_steps"]


# ------------------------------------------------------------- 2. max_listed on assignment
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2.5, ValueError),
        (-1, ValueError),
        ("3", ValueError),
        (True, ValueError),
        (None, ValueError),
        (np.float64(3.0), ValueError),
    ],
    ids=["float", "negative", "string", "bool", "none", "numpy-float"],
)
def test_max_listed_checked_when_set(value: Any, error: type[Exception]) -> None:
    env = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.sample(5)
    with pytest.raises(error, match="max_listed must be an int >= 0"):
        runner.metrics.max_listed = value
    assert runner.metrics.max_listed == 100_000  # the old value kept
    runner.sample(100)  # episodes end in this call: the runner goes on
    assert runner.get_metrics()["num_episodes"] > 0


def test_max_listed_set_later_bounds_the_listing() -> None:
    env = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.metrics.max_listed = np.int64(2)
    assert type(runner.metrics.max_listed) is int and runner.metrics.max_listed == 2
    runner.sample(200)
    m = runner.get_metrics()
    assert m["num_episodes"] > 2 and len(m["episode_returns"]) == 2
    with pytest.raises(ValueError, match="max_listed"):
        RunnerMetrics(max_listed=-1)


# ---------------------------------------------------------- 3. runner.metrics replaced
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("when", ["before-first-call", "after-first-call"])
def test_replaced_runner_metrics_count_the_episodes(backend: str, when: str) -> None:
    def make() -> EnvRunner:
        return EnvRunner(_env(backend, {"step": 0}), _Policy(backend, None), seed=1)

    runner, twin = make(), make()
    if when == "after-first-call":
        runner.sample(5)
        twin.sample(5)
        twin.get_metrics()  # the twin's counts restart here, as the new object's do
    old = runner.metrics
    keys = ("num_episodes", "total_episodes", "num_env_steps", "episode_lengths")
    before = {k: old.reduce(reset=False)[k] for k in keys}
    runner.metrics = new = RunnerMetrics(max_listed=3)
    assert runner.metrics is new
    runner.sample(20)
    twin.sample(20)
    got, want = runner.get_metrics(), twin.get_metrics()
    assert got["num_episodes"] == want["num_episodes"] > 3
    assert got["num_env_steps"] == want["num_env_steps"]
    assert got["episode_lengths"] == want["episode_lengths"][-3:]
    assert {k: old.reduce(reset=False)[k] for k in keys} == before  # nothing more went there


@pytest.mark.parametrize("value", [{}, None, "metrics", RunnerMetrics], ids=str)
def test_runner_metrics_of_another_type_refused(value: Any) -> None:
    env = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    old = runner.metrics
    with pytest.raises(TypeError, match="metrics must be a RunnerMetrics"):
        runner.metrics = value
    assert runner.metrics is old
    runner.sample(3)
    assert runner.get_metrics()["num_env_steps"] == 3 * N


# ------------------------------------------------------- 4. a lookback beyond int64
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("lookback", [2**63, 2**64 + 5, 10**30], ids=["2**63", "2**64+5", "1e30"])
def test_lookback_beyond_int64_means_every_earlier_step(
    backend: str, window: str, lookback: int
) -> None:
    counter = {"step": 0}
    policy = _Policy(backend, None)
    runner = EnvRunner(
        _env(backend, counter), policy, seed=0, len_lookback_buffer=lookback, window=window
    )
    assert runner.len_lookback_buffer == 2**63 - 1
    ref = EnvRunner(
        _env(backend, {"step": 0}), policy, seed=0, len_lookback_buffer=2**63 - 1, window=window
    )
    for num_steps in (3, 7, 2, 9):
        got, want = runner.sample(num_steps), ref.sample(num_steps)
        assert _same(got, want)
        for chunk in got:  # the whole episode so far is the lookback
            assert chunk.observations.lookback == chunk.t_started

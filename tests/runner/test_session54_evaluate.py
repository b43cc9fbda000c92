"""``episodes.runner.evaluate``: exactly one whole episode per seed, checked three ways.

Each kept episode must equal the docs' hand-written recipe (rounds of seeded resets built from
``EnvRunner``, ``EpisodeTally`` and ``concat_episode``) and a plain one-env gymnasium loop on
the same seed, value by value, in every autoreset mode and for any number of sub-envs against
the number of seeds. Beside that: the bound on a round's steps, bad input refused before any
step, and the runner left usable with its metrics untouched.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.runner import EnvRunner, Evaluated, RandomPolicy, evaluate
from tests.runner._eval_envs import (
    ENVS,
    MODES,
    Success,
    cartpole_policy,
    pendulum_policy,
    recipe,
    vector_env,
)


@functools.cache
def plain_episode(name, seed, recurrent=False):
    """The independent check: one gymnasium env, one episode, the return summed in step order."""
    env_id, limit, policy = ENVS[name]
    env = Success(gym.make(env_id, max_episode_steps=limit))
    obs, _ = env.reset(seed=seed)
    observations, actions, rewards, ret, done, t = [obs], [], [], 0.0, False, 0
    while not done:
        action = policy(obs[None])[0][0]
        if recurrent:
            action = recurrent_action(action, t)
        obs, reward, terminated, truncated, info = env.step(action)
        ret += float(reward)
        observations.append(obs)
        actions.append(action)
        rewards.append(float(reward))
        done, t = terminated or truncated, t + 1
    return {
        "ret": ret,
        "length": len(rewards),
        "terminated": terminated,
        "truncated": truncated,
        "success": info["is_success"],
        "observations": np.array(observations),
        "actions": np.array(actions),
        "rewards": rewards,
    }


def recurrent_action(action, t):
    """Flips every 4th action of the episode: right only where the state restarts per episode."""
    return 1 - action if t % 4 == 3 else action


class CountingPolicy:
    """A recurrent policy whose state counts the steps of each sub-env's episode."""

    def initial_state(self, n):
        return np.zeros(n, np.int64)

    def __call__(self, obs, state):
        actions = cartpole_policy(obs)[0]
        flipped = np.where(state % 4 == 3, 1 - actions, actions)
        return flipped, {}, state + 1


def assert_equals_plain(item, name, seed, recurrent=False):
    want = plain_episode(name, seed, recurrent)
    e, ep = item.finished, item.episode
    assert e.ret == want["ret"]  # added in step order by both: equal to the last bit
    assert (e.length, len(ep), e.t_started, ep.t_started) == (want["length"],) * 2 + (0, 0)
    assert (e.terminated, ep.is_terminated, ep.is_truncated) == (
        want["terminated"],
        want["terminated"],
        want["truncated"],
    )
    assert bool(e.last_info["is_success"]) == want["success"]
    assert bool(ep.get_infos(-1)["is_success"]) == want["success"]
    np.testing.assert_array_equal(np.asarray(ep.get_observations()), want["observations"])
    np.testing.assert_array_equal(np.asarray(ep.get_actions()), want["actions"])
    assert np.asarray(ep.get_rewards(), np.float64).tolist() == want["rewards"]
    assert ep.custom_data["seed"] == seed and type(ep.custom_data["seed"]) is int
    assert e.id_ == ep.id_ and e.env_index == ep.custom_data["env_index"]


def same_values(a, b):
    """Two episodes with the same steps, flags and data (their ids may differ)."""
    np.testing.assert_array_equal(np.asarray(a.get_observations()), b.get_observations())
    np.testing.assert_array_equal(np.asarray(a.get_actions()), b.get_actions())
    assert a.get_rewards().tolist() == b.get_rewards().tolist()
    assert (a.is_terminated, a.is_truncated, a.t_started) == (
        b.is_terminated,
        b.is_truncated,
        b.t_started,
    )
    assert [sorted(i) for i in a.get_infos()] == [sorted(i) for i in b.get_infos()]


@pytest.mark.parametrize("m", [0, 1, 3, 7])
@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("mode", list(MODES))
def test_evaluate_equals_the_recipe_and_a_plain_loop(mode, n, m):
    seeds = [100 + 7 * j for j in range(m)]
    runner = EnvRunner(vector_env("cartpole", n, mode), cartpole_policy)
    out = evaluate(runner, seeds, num_steps=6)
    assert len(out) == m and all(isinstance(item, Evaluated) for item in out)
    for item, seed in zip(out, seeds):
        assert_equals_plain(item, "cartpole", seed)
    finished, episodes = recipe(
        EnvRunner(vector_env("cartpole", n, mode), cartpole_policy), seeds, num_steps=6
    )
    for item, e, ep in zip(out, finished, episodes):
        assert item.finished._replace(id_=None) == e._replace(id_=None)
        same_values(item.episode, ep)
        assert item.episode.custom_data == ep.custom_data
    if m == 7:  # the seeds hold both endings, or the flag checks would say little
        assert {item.finished.terminated for item in out} == {True, False}


@pytest.mark.parametrize("mode", list(MODES))
def test_box_actions_and_a_vector_steps_window(mode):
    env = vector_env("pendulum", 3, mode)
    runner = EnvRunner(env, pendulum_policy, window="vector_steps", len_lookback_buffer=4)
    seeds = [5, 6, 7, 8]
    for item, seed in zip(evaluate(runner, seeds, num_steps=7), seeds):
        assert_equals_plain(item, "pendulum", seed)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_recurrent_policy_starts_each_kept_episode_from_its_initial_state(mode):
    runner = EnvRunner(vector_env("cartpole", 2, mode), CountingPolicy())
    runner.sample(9)  # a state part-way through episodes: the rounds must start it over
    seeds = [100, 107, 114]
    for item, seed in zip(evaluate(runner, seeds, num_steps=5), seeds):
        assert_equals_plain(item, "cartpole", seed, recurrent=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_the_same_seeds_give_the_same_episodes_whatever_the_runner_and_sizes(mode):
    seeds = [3, 1, 3, 4, 1]  # repeats: the same episode each time
    a = evaluate(EnvRunner(vector_env("cartpole", 2, mode), cartpole_policy), seeds)
    b = evaluate(
        EnvRunner(vector_env("cartpole", 4, mode), cartpole_policy), tuple(seeds), num_steps=3
    )
    runner = EnvRunner(vector_env("cartpole", 3, mode), cartpole_policy)
    c = evaluate(runner, np.array(seeds, np.int64), num_steps=1)
    d = evaluate(runner, [np.int32(s) for s in seeds], num_steps=50)
    for x, y, z, w in zip(a, b, c, d):
        assert x.finished.ret == y.finished.ret == z.finished.ret == w.finished.ret
        same_values(x.episode, y.episode)
        same_values(x.episode, z.episode)
        same_values(x.episode, w.episode)
        assert z.episode.id_ != w.episode.id_  # fresh ids, same values
    same_values(a[0].episode, a[2].episode)
    assert [type(x.episode.custom_data["seed"]) for x in c] == [int] * 5


@settings(max_examples=15, deadline=None)
@given(
    seeds=st.lists(st.integers(0, 30), max_size=6),
    n=st.integers(1, 4),
    num_steps=st.integers(1, 45),
    mode=st.sampled_from(list(MODES)),
)
def test_every_kept_episode_is_the_plain_loops_for_its_seed(seeds, n, num_steps, mode):
    runner = EnvRunner(vector_env("cartpole", n, mode), cartpole_policy)
    out = evaluate(runner, seeds, num_steps=num_steps)
    assert len(out) == len(seeds)
    for item, seed in zip(out, seeds):
        assert_equals_plain(item, "cartpole", seed)


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("mode", list(MODES))
def test_an_episode_of_max_vector_steps_is_kept_a_longer_one_raises(mode, window):
    # Pendulum ends at its time limit only: every episode lasts exactly 25 steps
    runner = EnvRunner(vector_env("pendulum", 2, mode), pendulum_policy, window=window)
    out = evaluate(runner, [1, 2, 3], num_steps=7, max_vector_steps=25)
    assert [item.finished.length for item in out] == [25, 25, 25]
    before = runner.get_metrics(reset=False)
    with pytest.raises(
        RuntimeError,
        match=r"episodes of seeds\[0\]=1, seeds\[1\]=2 did not end within "
        r"max_vector_steps=24 steps",
    ):
        evaluate(runner, [1, 2, 3], num_steps=7, max_vector_steps=24)
    assert runner.get_metrics(reset=False) == before  # the metrics put back after the error
    with pytest.raises(RuntimeError, match=r"the episode of seeds\[0\]=8 did not end within"):
        evaluate(runner, [8], num_steps=7, max_vector_steps=5)
    # the runner was reset: the next sample starts new episodes, and works
    chunks = runner.sample(30)
    assert [c.t_started for c in chunks if c.custom_data["env_index"] == 0][0] == 0
    assert len(chunks.by_env()[1]) == 2


def test_the_error_names_the_late_episode_by_its_place_in_seeds():
    runner = EnvRunner(vector_env("cartpole", 2, "same_step", limit=500), cartpole_policy)
    seeds = [100, 107, 114, 121]
    lengths = [item.finished.length for item in evaluate(runner, seeds)]
    bound = max(lengths[:2])  # the first round passes, the second has one longer episode
    assert [n > bound for n in lengths] == [False, False, True, False]
    with pytest.raises(RuntimeError, match=rf"the episode of seeds\[2\]=114 .*={bound} steps"):
        evaluate(runner, seeds, max_vector_steps=bound)
    assert [item.finished.length for item in evaluate(runner, seeds[2:], num_steps=9)] == lengths[
        2:
    ]


def test_the_runners_metrics_are_untouched_and_the_runner_goes_on():
    env = vector_env("cartpole", 3, "next_step")
    runner = EnvRunner(env, cartpole_policy)
    runner.sample(50)
    metrics = runner.metrics
    before = runner.get_metrics(reset=False)
    assert before["num_episodes"] > 0
    out = evaluate(runner, [1, 2, 3, 4], num_steps=5)
    assert len(out) == 4
    assert runner.metrics is metrics and runner.get_metrics(reset=False) == before
    assert runner.seed is None
    chunks = runner.sample(50)  # starts over: new episodes, counted in the runner's metrics
    assert chunks[0].t_started == 0 and chunks[0].id_ not in {i.episode.id_ for i in out}
    assert runner.get_metrics()["total_env_steps"] == before["total_env_steps"] + 150


class Boom(Exception):
    pass


def test_a_policy_error_mid_round_passes_through_and_leaves_the_runner_usable():
    calls = []

    def policy(obs):
        calls.append(1)
        if len(calls) == 30:
            raise Boom
        return cartpole_policy(obs)

    runner = EnvRunner(vector_env("cartpole", 2, "same_step"), policy)
    metrics = runner.metrics
    with pytest.raises(Boom):
        evaluate(runner, [100, 107, 114], num_steps=8)
    assert runner.metrics is metrics and runner.get_metrics()["num_episodes"] == 0
    # a failed sample leaves a runner that must be reset: evaluate did it
    assert sum(len(c) for c in runner.sample(5)) == 10
    for item, seed in zip(evaluate(runner, [100]), [100]):
        assert_equals_plain(item, "cartpole", seed)


def generator_of_seeds():
    yield 1


BAD = {
    # name: (runner arg or None for a good runner, seeds, kwargs, error, message)
    "env_as_runner": ("env", [1], {}, TypeError, "runner must be an EnvRunner, got SyncVectorEnv"),
    "none_runner": (None, [1], {}, TypeError, "runner must be an EnvRunner, got NoneType"),
    "set_of_seeds": ("runner", {1, 2}, {}, TypeError, "seeds must be a sequence.*got set"),
    "generator": ("runner", generator_of_seeds(), {}, TypeError, "got generator"),
    "string": ("runner", "12", {}, TypeError, "got str"),
    "dict": ("runner", {0: 1}, {}, TypeError, "got dict"),
    "int": ("runner", 3, {}, TypeError, "got int"),
    "2d_array": ("runner", np.zeros((2, 2), int), {}, TypeError, r"shape \(2, 2\)"),
    "none_seed": ("runner", [1, None], {}, ValueError, r"seeds\[1\] must be an int >= 0, got None"),
    "float_seed": ("runner", [1.0], {}, ValueError, r"seeds\[0\] must be an int >= 0, got 1.0"),
    "bool_seed": ("runner", [2, True], {}, ValueError, r"seeds\[1\] must be .* got True"),
    "negative_seed": ("runner", [-1], {}, ValueError, r"seeds\[0\] must be an int >= 0, got -1"),
    "float_array": ("runner", np.array([1.0]), {}, ValueError, r"seeds\[0\]"),
    "num_steps_0": ("runner", [1], {"num_steps": 0}, ValueError, "num_steps must be an int >= 1"),
    "num_steps_float": ("runner", [1], {"num_steps": 2.0}, ValueError, "num_steps must be"),
    "num_steps_1_vector_steps": (
        "vector_steps_runner",
        [1],
        {"num_steps": 1},
        ValueError,
        "num_steps must be an int >= 2, got 1: with window='vector_steps'",
    ),
    "bound_0": ("runner", [1], {"max_vector_steps": 0}, ValueError, "max_vector_steps must be"),
    "bound_float": ("runner", [1], {"max_vector_steps": 1e9}, ValueError, "max_vector_steps"),
    "bound_bool": ("runner", [1], {"max_vector_steps": True}, ValueError, "max_vector_steps"),
    "empty_but_bad_steps": ("runner", [], {"num_steps": -1}, ValueError, "num_steps must be"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_refused_before_anything_steps(case):
    which, seeds, kwargs, error, message = BAD[case]
    env = vector_env("cartpole", 2, "next_step")
    runner = EnvRunner(env, cartpole_policy, window="transitions")
    if which == "vector_steps_runner":
        runner = EnvRunner(env, cartpole_policy, window="vector_steps")
    first = runner.sample(5)
    before = runner.get_metrics(reset=False)
    arg = {"env": env, None: None}.get(which, runner)
    with pytest.raises(error, match=message):
        evaluate(arg, seeds, **kwargs)
    # unchanged: the next sample continues the same episodes, the metrics as they were
    assert runner.get_metrics(reset=False) == before
    ongoing = [c for c in first if c.custom_data["env_index"] == 0][-1]
    following = runner.sample(5)[0]
    assert (following.id_, following.t_started) == (ongoing.id_, ongoing.t)


def test_no_seeds_touch_nothing():
    env = vector_env("cartpole", 2, "same_step")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    first = runner.sample(4)
    assert evaluate(runner, []) == [] and evaluate(runner, range(0)) == []
    assert runner.sample(4)[0].id_ == first[0].id_  # not reset: the episodes go on


def test_evaluating_between_training_calls_changes_nothing_training_produces():
    def train(with_evaluation):
        env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
        runner = EnvRunner(env, RandomPolicy(env.action_space, seed=1), seed=0)
        evaluator = EnvRunner(vector_env("cartpole", 2, "next_step"), cartpole_policy)
        out = []
        for _ in range(4):
            chunks = runner.sample(20)
            out += [
                (c.t_started, np.asarray(c.get_observations()).tolist(), c.get_actions().tolist())
                for c in chunks
            ]
            metrics = runner.get_metrics()
            out.append((metrics["num_episodes"], metrics["episode_returns"]))
            if with_evaluation:
                evaluate(evaluator, [3, 4, 5])
        return out

    assert train(True) == train(False)


class TorchObservations(gym.vector.VectorEnv):
    """A next-step CartPole vector env yielding torch tensors (the device recorder's path)."""

    def __init__(self, num_envs):
        self.inner = vector_env("cartpole", num_envs, "next_step")
        self.num_envs, self.metadata = num_envs, self.inner.metadata
        self.single_observation_space = self.inner.single_observation_space
        self.single_action_space = self.inner.single_action_space
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space

    def reset(self, *, seed=None, options=None):
        obs, infos = self.inner.reset(seed=seed, options=options)
        return self.torch.as_tensor(obs), infos

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.inner.step(np.asarray(actions))
        as_tensor = self.torch.as_tensor
        return (
            as_tensor(obs),
            as_tensor(rewards),
            as_tensor(terminated),
            as_tensor(truncated),
            infos,
        )


def test_an_env_yielding_torch_tensors():
    torch = pytest.importorskip("torch")
    TorchObservations.torch = torch
    runner = EnvRunner(TorchObservations(3), lambda obs: ((obs[:, 2] > 0).long(), {}))
    seeds = [100, 107, 114, 121]
    out = evaluate(runner, seeds, num_steps=6)
    for item, seed in zip(out, seeds):
        assert_equals_plain(item, "cartpole", seed)
    assert len(runner.sample(3)) >= 3


def test_an_episode_ending_one_step_past_the_bound_raises_in_a_two_step_window():
    # next-step vector steps: sample takes at least 2, so with 1 step left the call runs to 23
    env = vector_env("pendulum", 2, "next_step", limit=23)
    runner = EnvRunner(env, pendulum_policy, window="vector_steps")
    assert runner.least_num_steps == 2
    (kept,) = evaluate(runner, [4], num_steps=7, max_vector_steps=23)
    assert kept.finished.length == len(kept.episode) == 23
    with pytest.raises(RuntimeError, match=r"seeds\[0\]=4 did not end within max_vector_steps=22"):
        evaluate(runner, [4], num_steps=7, max_vector_steps=22)

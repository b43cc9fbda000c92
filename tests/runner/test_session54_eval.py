"""An evaluation harness built on the public API, checked against plain gymnasium loops.

Every K training iterations a user evaluates the policy on a separate vector env: exactly M
whole episodes, episode j started from ``reset(seed=seeds[j])``, deterministic actions, the
figures taken from an ``EpisodeTally``, the episodes kept on disk. These tests pin what such a
recipe built from the public pieces relies on (``episodes.runner.evaluate`` is that recipe in
the library; docs/evaluation.md): each figure equals a plain one-env gymnasium loop's on
the same seeds, in every autoreset mode and for any number of sub-envs against M; two
evaluations give the same episodes; evaluating between training calls changes nothing the
training runner produces; and the saved episodes read back with their checkpoint step.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetMetadata, DatasetWriter, filter_dataset
from episodes.runner import EnvRunner, EpisodeTally, RandomPolicy
from tests.runner._eval_envs import (
    ENVS,
    MODES,
    Success,
    cartpole_policy,
    pendulum_policy,
    vector_env,
)
from tests.runner._eval_envs import (
    recipe as evaluate,
)


def plain_loop(name, seeds):
    """The independent check: one gymnasium env, one episode per seed, sums in step order."""
    env_id, limit, policy = ENVS[name]
    out = []
    for seed in seeds:
        env = Success(gym.make(env_id, max_episode_steps=limit))
        obs, _ = env.reset(seed=seed)
        observations, rewards, ret, done = [obs], [], 0.0, False
        while not done:
            action = policy(obs[None])[0][0]
            obs, reward, terminated, truncated, info = env.step(action)
            ret += float(reward)
            observations.append(obs)
            rewards.append(float(reward))
            done = terminated or truncated
        out.append(
            {
                "ret": ret,
                "length": len(rewards),
                "terminated": terminated,
                "truncated": truncated,
                "success": info["is_success"],
                "observations": np.array(observations),
                "rewards": rewards,
            }
        )
    return out


CASES = {
    # name: (env, sub-envs, M seeds)
    "one_sub_env": ("cartpole", 1, 5),
    "more_sub_envs_than_episodes": ("cartpole", 8, 3),
    "m_not_a_multiple_of_n": ("cartpole", 3, 7),
    "m_a_multiple_of_n": ("cartpole", 2, 6),
    "box_actions": ("pendulum", 3, 4),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(CASES))
def test_exactly_m_episodes_equal_a_plain_loop_on_the_same_seeds(case, mode):
    name, n, m = CASES[case]
    seeds = [100 + 7 * j for j in range(m)]
    runner = EnvRunner(vector_env(name, n, mode), ENVS[name][2])
    finished, episodes = evaluate(runner, seeds, num_steps=6)
    expected = plain_loop(name, seeds)
    assert len(finished) == len(episodes) == m
    for e, ep, want, seed in zip(finished, episodes, expected, seeds):
        # the tally adds rewards in step order, as the plain loop does: equal to the last bit
        assert e.ret == want["ret"]
        assert (e.length, len(ep), e.terminated, ep.is_terminated) == (
            want["length"],
            want["length"],
            want["terminated"],
            want["terminated"],
        )
        assert ep.is_truncated == want["truncated"]
        assert bool(e.last_info["is_success"]) == want["success"]
        assert bool(ep.get_infos(-1)["is_success"]) == want["success"]
        np.testing.assert_array_equal(np.asarray(ep.get_observations()), want["observations"])
        assert list(np.asarray(ep.get_rewards(), np.float64)) == want["rewards"]
        assert ep.t_started == 0 and ep.custom_data["seed"] == seed
        assert math.isclose(ep.get_return(), want["ret"], rel_tol=1e-12)
    if case == "one_sub_env":  # the cases must hold both endings, or the flag checks say little
        assert {w["terminated"] for w in expected} == {True, False}


def test_the_runners_own_metrics_also_count_the_episodes_thrown_away():
    # 3 seeds on 8 sub-envs: 5 unseeded sub-envs run too, and their episodes end in
    # get_metrics(): evaluation figures come from the kept episodes, never from get_metrics
    runner = EnvRunner(vector_env("cartpole", 8, "next_step"), cartpole_policy)
    finished, _ = evaluate(runner, [1, 2, 3], num_steps=40)
    assert len(finished) == 3
    assert runner.get_metrics()["num_episodes"] > 3


@pytest.mark.parametrize("mode", list(MODES))
def test_two_evaluations_give_the_same_episodes_whatever_the_sample_size(mode):
    runner = EnvRunner(vector_env("pendulum", 2, mode), pendulum_policy)
    first, eps_a = evaluate(runner, [5, 6, 7], num_steps=7)
    second, eps_b = evaluate(runner, [5, 6, 7], num_steps=4)
    assert [e.ret for e in first] == [e.ret for e in second]
    for a, b in zip(eps_a, eps_b):
        assert a.id_ != b.id_  # fresh ids, same values
        np.testing.assert_array_equal(np.asarray(a.get_observations()), b.get_observations())
        np.testing.assert_array_equal(np.asarray(a.get_actions()), b.get_actions())
        assert a.get_rewards().tolist() == b.get_rewards().tolist()


def long_rewards_episode(rewards):
    ep = SingleAgentEpisode("x", len_lookback_buffer=0)
    ep.add_env_reset(0)
    for t, r in enumerate(rewards):
        ep.add_env_step(t + 1, 0, float(r), terminated=t == len(rewards) - 1)
    ep.to_numpy()
    return ep


def test_a_tally_return_does_not_depend_on_where_the_chunks_were_cut():
    # Before: each chunk was summed with numpy's pairwise sum and the sums added, so one
    # episode's return differed in its last bits with the sample size (and from get_metrics)
    rewards = np.random.default_rng(0).normal(size=97) * 10
    sequential = 0.0
    for r in rewards:
        sequential += float(r)
    whole = long_rewards_episode(rewards)
    returns = set()
    for cuts in ([], [10], [33, 34, 80], list(range(5, 97, 5))):
        edges = [0, *cuts, len(whole)]
        chunks = [whole[a:b] for a, b in zip(edges, edges[1:])]
        (e,) = EpisodeTally().add(chunks)
        returns.add(e.ret)
    assert returns == {sequential}


@pytest.mark.parametrize("num_steps", [3, 7, 50])
def test_a_tally_return_equals_the_runners_metrics_to_the_last_bit(num_steps):
    env = vector_env("pendulum", 2, "same_step")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    tally, returns = EpisodeTally(), []
    for _ in range(100 // num_steps):  # 25-step episodes: several end
        returns += [e.ret for e in tally.add(runner.sample(num_steps))]
    assert returns and sorted(returns) == sorted(runner.get_metrics()["episode_returns"])


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


def test_evaluation_episodes_saved_per_checkpoint_read_back(tmp_path):
    env = vector_env("cartpole", 2, "same_step")
    runner = EnvRunner(env, cartpole_policy)
    path = tmp_path / "eval"
    kept = {}
    for step in (1000, 2000):
        _, episodes = evaluate(runner, [10, 11, 12])
        for ep in episodes:
            ep.custom_data["checkpoint_step"] = step
        kept[step] = episodes
        # metadata is stored when the dataset is created: per-checkpoint facts go in custom_data
        with DatasetWriter(path, metadata=DatasetMetadata.from_env(env, policy="greedy")) as w:
            w.write_many(episodes)
    with Dataset(path) as ds:
        assert len(ds) == 6 and ds.metadata.policy == "greedy"
        back = [ds.episode(i) for i in range(len(ds))]
    for got, want in zip(back, kept[1000] + kept[2000]):
        assert got.custom_data == want.custom_data
        np.testing.assert_array_equal(got.get_observations(), want.get_observations())
        assert (got.is_terminated, got.is_truncated) == (want.is_terminated, want.is_truncated)
        assert bool(got.get_infos(-1)["is_success"]) == bool(want.get_infos(-1)["is_success"])
    filter_dataset(path, tmp_path / "k2000", custom_data={"checkpoint_step": 2000})
    with Dataset(tmp_path / "k2000") as ds:
        assert [ds.episode(i).custom_data["seed"] for i in range(len(ds))] == [10, 11, 12]


def test_a_list_of_m_seeds_longer_than_the_sub_envs_is_refused_by_name():
    env = vector_env("cartpole", 2, "next_step")
    with pytest.raises(ValueError, match=r"one per sub-env\), got \[1, 2, 3\]"):
        EnvRunner(env, cartpole_policy, seed=[1, 2, 3])
    runner = EnvRunner(env, cartpole_policy)
    with pytest.raises(ValueError, match="seed must be"):
        runner.reset(seed=[1, 2, 3])


class RandomLength(gym.Env):
    """An episode of 1..40 steps, the length drawn at reset from the env's own generator."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.length, self.t = int(self.np_random.integers(1, 41)), 0
        return np.array([self.length], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.length], np.float32), 1.0, self.t >= self.length, False, {}


def test_the_first_m_episodes_to_finish_are_biased_short_the_recipe_is_not():
    # the docs' warning: counting get_metrics()["num_episodes"] up to M on 8 sub-envs takes
    # the episodes that end first; the recipe keeps the seeded episodes, whatever they last
    seeds, m = list(range(8)), 4

    def env():
        return gym.vector.SyncVectorEnv([RandomLength for _ in range(8)])

    lengths_of_seeds = [RandomLength().reset(seed=s)[0][0] for s in seeds[:m]]
    runner = EnvRunner(env(), lambda obs: (np.zeros(len(obs), np.int64), {}), seed=seeds)
    first_finished = []
    while len(first_finished) < m:
        runner.sample(1)
        first_finished += runner.get_metrics()["episode_lengths"]
    first_finished = first_finished[:m]
    finished, _ = evaluate(EnvRunner(env(), runner.policy), seeds[:m], num_steps=5)
    assert [e.length for e in finished] == lengths_of_seeds
    assert sorted(first_finished) == sorted(RandomLength().reset(seed=s)[0][0] for s in seeds)[:m]
    assert max(first_finished) < max(lengths_of_seeds)

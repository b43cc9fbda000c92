"""What a user of gymnasium's vector wrappers finds in the runner's chunks and metrics.

RecordEpisodeStatistics' ``info["episode"]``: in next-step mode at the ended episode's last
info, in same-step mode at the next episode's first info (gymnasium puts it among the reset's
infos), and ``get_metrics()`` agrees with it in both. NormalizeReward: the metrics sum the
rewards recorded, the wrapped ones. DictInfoToList is refused, naming it. A sub-env that
raises in ``step`` stops the runner until ``reset()``, which starts new episodes.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import vector as vw

from episodes.runner import EnvRunner, RandomPolicy

NEXT, SAME = AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP
LIMIT = functools.partial(gym.wrappers.TimeLimit, max_episode_steps=9)


def _cartpole(mode: AutoresetMode, per_env: tuple = ()) -> Any:
    return gym.make_vec(
        "CartPole-v1",
        num_envs=3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        wrappers=list(per_env),
    )


def _episode_infos(chunks: Any) -> list[tuple[int, int, bool, bool, float, int]]:
    """(env, info index, infos' length, chunk done, r, l) of every info holding "episode"."""
    found = []
    for chunk in chunks:
        infos = chunk.get_infos()
        for k, info in enumerate(infos):
            if "episode" in info:
                stats = info["episode"]
                found.append(
                    (
                        chunk.custom_data["env_index"],
                        k,
                        len(infos),
                        chunk.is_done,
                        float(stats["r"]),
                        int(stats["l"]),
                    )
                )
    return found


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_record_episode_statistics_agrees_with_get_metrics(mode: AutoresetMode) -> None:
    env = vw.RecordEpisodeStatistics(_cartpole(mode, (LIMIT,)))
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    stats: list[tuple[int, int, int, bool, float, int]] = []
    counted: list[tuple[float, int]] = []
    for call in range(5):
        chunks = runner.sample(12)
        metrics = runner.get_metrics()
        new = _episode_infos(chunks)
        for _env, k, length, done, _r, _l in new:
            if mode is NEXT:  # the ended episode's last info
                assert done and k == length - 1
            else:  # the next episode's first info: gymnasium files it with the reset's infos
                assert k == 0
        ended = [c for c in chunks if c.is_done]
        assert len(ended) == metrics["num_episodes"] > 0  # TimeLimit(9) ends some every call
        if mode is NEXT:
            assert len(new) == len(ended)
        stats += new
        counted += zip(metrics["episode_returns"], metrics["episode_lengths"])
        if call == 2:
            # TimeLimit(9) and 12 steps a call: the third call's second endings are its last
            # transitions, so in same-step mode their next episodes (whose first info holds
            # "episode") start in the next call
            assert len(stats) == len(counted) - (3 if mode is SAME else 0)
    assert len(counted) == 18  # 60 transitions a sub-env: six episodes of 9
    assert sorted((r, n) for *_, r, n in stats) == sorted(counted)[: len(stats)]
    assert {n for _, n in counted} == {9}


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_metrics_sum_the_rewards_the_wrappers_hand_out(mode: AutoresetMode) -> None:
    # RecordEpisodeStatistics inside NormalizeReward sees the env's rewards; the runner, outside
    # both, records (and counts) the normalized ones.
    env = vw.NormalizeReward(vw.RecordEpisodeStatistics(_cartpole(mode, (LIMIT,))))
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    chunks = [chunk for _ in range(3) for chunk in runner.sample(12)]
    metrics = runner.get_metrics()
    raw = sorted(r for *_, r, _ in _episode_infos(chunks))
    assert raw and set(raw) == {9.0}  # CartPole pays 1 a step, TimeLimit(9) cuts every episode
    by_id: dict[str, float] = {}
    for chunk in chunks:
        by_id[chunk.id_] = by_id.get(chunk.id_, 0.0) + float(np.sum(chunk.get_rewards()))
    ended = {c.id_ for c in chunks if c.is_done}
    assert sorted(metrics["episode_returns"]) == pytest.approx(sorted(by_id[i] for i in ended))
    assert all(r != 9.0 for r in metrics["episode_returns"])


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_dict_info_to_list_is_refused_naming_the_wrapper(mode: AutoresetMode) -> None:
    env = vw.DictInfoToList(_cartpole(mode))
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    for _ in range(2):  # refused at the first reset: the runner stays unstarted, and says so again
        with pytest.raises(TypeError, match="came as a list.*no DictInfoToList wrapper"):
            runner.sample(3)
    assert runner.get_metrics()["total_env_steps"] == 0


class _Buggy(gym.Env):
    """Counts its steps and raises at the ones listed in ``bug_at`` (a user's bug)."""

    observation_space = gym.spaces.Box(-100, 100, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, index: int, bug_at: set[int], counter: list[int]):
        self.index, self.bug_at, self.counter, self.t = index, bug_at, counter, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.full(2, -self.index, np.float32), {"reset": self.index}

    def step(self, action: Any) -> tuple:
        self.counter[0] += 1
        if self.counter[0] in self.bug_at:
            raise ArithmeticError(f"bug at env step {self.counter[0]}")
        self.t += 1
        return np.array([self.t, self.index], np.float32), 1.0, self.t >= 5, False, {}


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_an_env_that_raises_in_step_stops_the_runner_until_reset(mode: AutoresetMode) -> None:
    counter = [0]
    fns = [functools.partial(_Buggy, i, {23}, counter) for i in range(2)]
    env = SyncVectorEnv(fns, autoreset_mode=mode)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    first = runner.sample(4)
    with pytest.raises(ArithmeticError, match="bug at env step 23"):
        runner.sample(10)
    with pytest.raises(RuntimeError, match=r"failed part-way \(ArithmeticError.*call reset\(\)"):
        runner.sample(3)
    runner.reset(seed=1)
    chunks = runner.sample(6)
    assert {c.id_ for c in chunks}.isdisjoint({c.id_ for c in first})
    for chunk in chunks:
        if chunk.t_started == 0:  # new episodes, from the sub-envs' reset observations
            index = chunk.custom_data["env_index"]
            assert chunk.get_observations(0).tolist() == [-index, -index]
            assert chunk.get_infos(0) == {"reset": index}
    assert sorted(len(c) for c in chunks if c.is_done) == [5, 5]

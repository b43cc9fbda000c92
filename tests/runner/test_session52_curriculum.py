"""A curriculum user's journey: per-task figures, rollouts, replay and datasets vs a plain log.

Each sub-env runs a task (reward ``task + 1`` a step) at a level (``3 + level`` steps; even
levels terminate, odd ones truncate); the curriculum changes both between ``sample`` calls
with ``env.call``, which only takes effect at the sub-env's next reset. The env keeps its own
log of every episode it ended, which the runner's figures are checked against.
"""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from episodes.converter import episodes_to_rollout
from episodes.io import DatasetWriter, dataset_info, filter_dataset, load_episode
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.episode_tally import EpisodeTally

N_TASKS = 3
MODES = [
    pytest.param(AutoresetMode.NEXT_STEP, id="next_step"),
    pytest.param(AutoresetMode.SAME_STEP, id="same_step"),
    pytest.param(AutoresetMode.DISABLED, id="disabled"),
]


class TaskEnv(gym.Env):
    """Observation: one-hot running task, then the step count."""

    def __init__(self, task: int, level: int):
        self.task, self.level = task, level
        self.observation_space = spaces.Box(-100, 100, (N_TASKS + 1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.log: list[tuple[int, int, float, int, bool]] = []  # task, level, return, len, success

    def _obs(self):
        obs = np.zeros(N_TASKS + 1, np.float32)
        obs[self.running[0]] = 1.0
        obs[-1] = self.t
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if options and "task" in options:
            self.task = options["task"]
        self.running, self.t, self.ret = (self.task, self.level), 0, 0.0
        return self._obs(), {"task": self.task, "level": self.level}

    def step(self, action):
        task, level = self.running
        self.t += 1
        reward = float(task + 1)
        self.ret += reward
        ended = self.t >= 3 + level
        terminated, truncated = ended and level % 2 == 0, ended and level % 2 == 1
        info = {"task": task, "level": level}
        if ended:
            info["success"] = terminated
            self.log.append((task, level, self.ret, self.t, terminated))
        return self._obs(), reward, terminated, truncated, info

    def set_curriculum(self, task: int, level: int) -> None:
        self.task, self.level = task, level


def make_env(mode, n=8):
    fns = [lambda i=i: TaskEnv(i % N_TASKS, i % 2) for i in range(n)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


def advance(env, call):
    """The curriculum's next stage: new tasks and levels, taking effect at each next reset."""
    env.call("set_curriculum", (call + 1) % N_TASKS, (call + 1) % 3)


class PerTask:
    """Whole-episode figures per task, from chunks, across calls (partial returns by id)."""

    def __init__(self):
        self.partial: dict[str, tuple[float, int]] = {}
        self.done: dict[int, list[tuple[float, int, bool]]] = defaultdict(list)
        self.per_env: dict[int, list[tuple[int, int, float, int, bool]]] = defaultdict(list)

    def add(self, chunks):
        for c in chunks:
            ret, length = self.partial.pop(c.id_, (0.0, 0))
            ret, length = ret + c.get_return(), length + len(c)
            if not c.is_done:
                self.partial[c.id_] = (ret, length)
                continue
            last = c.get_infos(-1)
            task, level, success = int(last["task"]), int(last["level"]), bool(last["success"])
            self.done[task].append((ret, length, success))
            env_index = c.custom_data["env_index"]
            self.per_env[env_index].append((task, level, ret, length, success))


@pytest.mark.parametrize("mode", MODES)
def test_per_task_figures_across_calls_match_the_log(mode):
    env = make_env(mode)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    tally, library, metric_returns = PerTask(), PerTask(), []
    episode_tally = EpisodeTally()
    for call in range(5):
        chunks = runner.sample(4)  # shorter than most episodes: they span calls
        tally.add(chunks)
        for e in episode_tally.add(chunks):
            task, level = int(e.first_info["task"]), int(e.first_info["level"])
            assert (int(e.last_info["task"]), int(e.last_info["level"])) == (task, level)
            assert e.t_started == 0
            row = (task, level, e.ret, e.length, bool(e.last_info["success"]))
            library.per_env[e.env_index].append(row)
        metric_returns += runner.get_metrics()["episode_returns"]
        advance(env, call)
    for i, sub in enumerate(env.envs):
        handed = tally.per_env[i]
        assert handed == library.per_env[i]
        # Same order, and the task, level and return the episode ran under (not the new stage)
        assert handed == sub.log[: len(handed)]
        assert len(handed) >= len(sub.log) - 1 >= 3
    # The metrics count an episode when the env ends it: in next-step mode that can be a call
    # before its chunk is handed out (carried-over transitions), so they follow the env's log.
    assert sorted(metric_returns) == sorted(e[2] for sub in env.envs for e in sub.log)
    assert set(tally.done) == set(range(N_TASKS))


def test_next_step_metrics_count_episodes_before_their_chunks_are_handed_out():
    env = make_env(AutoresetMode.NEXT_STEP)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    counted, handed = [], []
    for call in range(5):
        chunks = runner.sample(4)
        handed.append(sum(c.is_done for c in chunks))
        counted.append(runner.get_metrics()["num_episodes"])
        advance(env, call)
    # Stage 3 (5-step episodes) ends the odd sub-envs' episodes in transitions carried over
    assert counted == [8, 8, 8, 8, 8]
    assert handed == [8, 8, 8, 4, 8]


@pytest.mark.parametrize("mode", MODES)
def test_truncation_bootstrap_uses_the_old_tasks_final_observation(mode):
    env = make_env(mode)
    gamma = 0.5

    def value_fn(obs):  # a value that tells the task and the step apart
        obs = torch.as_tensor(obs)
        return 10.0 * obs[:, :N_TASKS].argmax(-1) + obs[:, -1]

    def policy(obs):
        n = len(obs)
        logp = torch.full((n,), float(np.log(0.5)))
        return torch.zeros(n, dtype=torch.int64), {"vf_preds": value_fn(obs), "action_logp": logp}

    runner = EnvRunner(env, policy, seed=0)

    checked = 0
    for call in range(4):
        chunks = runner.sample(5)
        rollout = episodes_to_rollout(chunks, gamma=gamma, value_fn=value_fn)
        rewards = rollout.storage.rewards[..., 0]
        for i in range(env.num_envs):
            mine = [c for c in chunks if c.custom_data["env_index"] == i]
            t = 0
            for c in mine:
                t += len(c)
                if c.is_truncated:
                    task, level = int(c.get_infos(-1)["task"]), int(c.get_infos(-1)["level"])
                    want = (task + 1) + gamma * (10.0 * task + 3 + level)
                    assert float(rewards[t - 1, i]) == pytest.approx(want)
                    checked += 1
            if not mine[-1].is_done:
                obs = mine[-1].get_observations(-1)
                want = 10.0 * int(np.argmax(obs[:N_TASKS])) + float(obs[-1])
                assert float(rollout.last_values[i]) == pytest.approx(want)
        advance(env, call)
    assert checked >= 4


def test_stratified_replay_batches_by_task():
    env = make_env(AutoresetMode.NEXT_STEP)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    buffer = EpisodeReplayBuffer(10_000)
    task_of: dict[str, int] = {}
    for call in range(4):
        chunks = runner.sample(6)
        for c in chunks:
            task_of.setdefault(c.id_, int(c.get_infos(0)["task"]))
        buffer.add(list(chunks))
        advance(env, call)
    items: dict[int, list[np.ndarray]] = defaultdict(list)
    for id_ in buffer.get_episode_ids():
        items[task_of[id_]].append(buffer.get_episode_indices(id_))
    rng = np.random.default_rng(0)
    per_task = 4
    drawn = np.concatenate([rng.choice(np.concatenate(items[k]), per_task) for k in range(N_TASKS)])
    batch = buffer.get_transitions(drawn, include_infos=True)
    tasks = [int(info["task"]) for info in batch["infos"]]
    assert tasks == [k for k in range(N_TASKS) for _ in range(per_task)]
    # rewards tell the task as well: task + 1 a step
    assert batch["rewards"].tolist() == [float(k + 1) for k in tasks]


def test_dataset_per_task_metadata_and_filter(tmp_path):
    env = make_env(AutoresetMode.SAME_STEP)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    tally = PerTask()
    with DatasetWriter(tmp_path / "all") as writer:
        for call in range(4):
            chunks = runner.sample(4)
            tally.add(chunks)
            for c in chunks:
                # JSON values only: a numpy int from the batched infos would be refused
                c.custom_data["task"] = int(c.get_infos(0)["task"])
            writer.write_many(chunks)
            advance(env, call)
    for task in range(N_TASKS):
        n = filter_dataset(tmp_path / "all", tmp_path / f"t{task}", custom_data={"task": task})
        assert n > 0
        info = dataset_info(tmp_path / f"t{task}")
        done = sorted((s.ret, s.length) for s in info.episodes if s.terminated or s.truncated)
        assert done == sorted((r, n) for r, n, _ in tally.done[task])
        for s in info.episodes[:2]:
            ep = load_episode(tmp_path / f"t{task}", s.id_)
            assert ep.custom_data["task"] == task


def test_episode_tally_refuses_a_chunk_given_twice_and_keeps_what_it_had():
    env = make_env(AutoresetMode.SAME_STEP)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    tally = EpisodeTally()
    first = runner.sample(2)
    assert tally.add(first) == [] and len(tally) == 8
    second = runner.sample(1)
    with pytest.raises(ValueError, match="starts at t=0, but the tally has it up to t=3"):
        tally.add([*second, *first])
    done = tally.add(second)  # as if the refused call had not been made
    assert [(e.env_index, e.length, e.ret) for e in done] == [
        (i, 3, 3.0 * (i % N_TASKS + 1)) for i in range(0, 8, 2)
    ]
    assert len(tally) == 4  # the episodes begun at the call's last step come with the next
    done = tally.add(runner.sample(1))
    assert [(e.env_index, e.length, e.terminated) for e in done] == [
        (i, 4, False) for i in range(1, 8, 2)
    ]


def test_episode_tally_started_mid_episode_and_cleared_after_a_reset():
    env = make_env(AutoresetMode.NEXT_STEP)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.sample(1)
    tally = EpisodeTally()
    chunks = runner.sample(2)
    done = tally.add(chunks)
    # level 0 ends at t=3 (seen from t=1), level 1 runs on
    assert [(e.env_index, e.t_started, e.length) for e in done] == [
        (i, 1, 2) for i in range(0, 8, 2)
    ]
    assert all(int(e.first_info["task"]) == int(e.last_info["task"]) for e in done)
    assert len(tally) == sum(not c.is_done for c in chunks) >= 4
    runner.reset(seed=1)
    tally.clear()
    assert len(tally) == 0
    assert tally.add(runner.sample(2)) == [] and len(tally) == 8

"""Hindsight relabelling end to end: a goal vector env, the runner, the buffers, and a log.

A goal-conditioned env (Dict observations with ``achieved_goal`` and ``desired_goal``, a
vectorized ``compute_reward``, a 50-step time limit and rare terminations) writes every step
it takes into a plain-Python log. The runner's chunks go into a replay buffer; HER batches
("future", "final", "episode") built from the public API only (``episode_steps``,
``episode_bounds``, ``items_at``, ``get_transitions``) are checked transition by transition
against a relabelling done in plain Python from the log, for episodes still running across
calls, evicted ones (dropped or restarted), lookbacks, every autoreset mode and both buffers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy
from tests.replay._stats import chi_square_p

LIMIT = 50
THRESHOLD = 0.15
STRATEGIES = ("future", "final", "episode")


def compute_reward(achieved: Any, desired: Any, info: Any = None) -> np.ndarray:
    distance = np.linalg.norm(np.asarray(achieved) - np.asarray(desired), axis=-1)
    return -(distance > THRESHOLD).astype(np.float32)


def plain_reward(achieved: list[float], desired: list[float]) -> float:
    distance = math.sqrt(sum((a - b) ** 2 for a, b in zip(achieved, desired)))
    return -1.0 if distance > THRESHOLD else 0.0


class GoalEnv(gym.Env):  # type: ignore[type-arg]
    """A point with a velocity; the episode terminates when it leaves the box (rarely)."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        box = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, (6,), np.float32),
                "achieved_goal": box,
                "desired_goal": box,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.log = log

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.concatenate([self.p, self.v]),
            "achieved_goal": self.p.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.p, self.goal = self.np_random.uniform(-0.5, 0.5, (2, 3)).astype(np.float32)
        self.v = np.zeros(3, np.float32)
        self.t = 0
        obs = self._obs()
        self.log.append({"obs": [_plain(obs)], "act": [], "term": False, "trunc": False})
        return obs, {}

    def step(self, action: Any) -> Any:
        action = np.clip(np.asarray(action, np.float32), -1, 1)
        self.v = (0.5 * self.v + 0.05 * action).astype(np.float32)
        self.p = (self.p + self.v).astype(np.float32)
        self.t += 1
        obs = self._obs()
        reward = float(compute_reward(obs["achieved_goal"], obs["desired_goal"]))
        terminated = bool(np.abs(self.p).max() > 1.0)
        truncated = self.t >= LIMIT and not terminated
        episode = self.log[-1]
        episode["obs"].append(_plain(obs))
        episode["act"].append([float(x) for x in action])
        episode["term"], episode["trunc"] = terminated, truncated
        return obs, reward, terminated, truncated, {}


def _plain(obs: dict[str, np.ndarray]) -> dict[str, list[float]]:
    return {key: [float(x) for x in value] for key, value in obs.items()}


class Reference:
    """The env log by runner episode id, and a plain model of what the buffer stores."""

    def __init__(self, logs: list[list[dict[str, Any]]], capacity: int, on_evicted: str) -> None:
        self.logs, self.capacity, self.on_evicted = logs, capacity, on_evicted
        self.where: dict[Any, tuple[int, int]] = {}  # id -> (sub-env, its episode number)
        self.count = [0] * len(logs)
        self.stored: dict[Any, list[Any]] = {}  # id -> [t_begin, t_end, done], oldest first
        self.evicted: set[Any] = set()

    def episode(self, id_: Any) -> dict[str, Any]:
        env_index, number = self.where[id_]
        return self.logs[env_index][number]

    def add(self, chunks: list[SingleAgentEpisode]) -> None:
        evicted_now: set[Any] = set()
        for chunk in chunks:
            if chunk.id_ not in self.where:
                env_index = chunk.custom_data["env_index"]
                self.where[chunk.id_] = (env_index, self.count[env_index])
                self.count[env_index] += 1
            if not len(chunk) or chunk.id_ in evicted_now:
                continue
            end = chunk.t_started + len(chunk)
            if chunk.id_ in self.stored:
                self.stored[chunk.id_][1:] = [end, chunk.is_done]
            elif chunk.id_ in self.evicted and self.on_evicted == "drop":
                continue
            else:
                self.evicted.discard(chunk.id_)
                self.stored[chunk.id_] = [chunk.t_started, end, chunk.is_done]
            while len(self.stored) > 1 and self.size() > self.capacity:
                oldest = next(iter(self.stored))
                del self.stored[oldest]
                self.evicted.add(oldest)
                evicted_now.add(oldest)

    def size(self) -> int:
        return sum(end - begin for begin, end, _ in self.stored.values())


def her_batch(buf: Any, size: int, strategy: str, rng: np.random.Generator) -> Any:
    """A HER batch from public calls only: k=4, so 80% relabelled."""
    batch = buf.sample(size, n_step=1)
    items = batch["indices"]
    _, t = buf.episode_steps(items)
    t_begin, t_end, _ = buf.episode_bounds(items)
    if strategy == "future":
        goal_t = rng.integers(t, t_end)
    elif strategy == "final":
        goal_t = t_end - 1
    else:
        goal_t = rng.integers(t_begin, t_end)
    goals = buf.get_transitions(buf.items_at(items, goal_t))["next_obs"]["achieved_goal"]
    relabel = rng.random(size) < 0.8
    for key in ("obs", "next_obs"):
        batch[key]["desired_goal"] = np.where(relabel[:, None], goals, batch[key]["desired_goal"])
    nxt = batch["next_obs"]
    batch["rewards"] = compute_reward(nxt["achieved_goal"], nxt["desired_goal"])
    return batch, relabel


def check_batch(buf: Any, ref: Reference, batch: Any, relabel: Any, strategy: str) -> list[Any]:
    """Every transition against the log; the goal's step found from the goal's value.

    Returns ``(later stored steps, goal offset)`` of each relabelled "future" item.
    """
    ids, times = buf.episode_steps(batch["indices"])
    offsets = []
    for i, (id_, t) in enumerate(zip(ids.tolist(), times.tolist())):
        episode = ref.episode(id_)
        begin, end, _ = ref.stored[id_]
        assert begin <= t < end
        goal = batch["obs"]["desired_goal"][i].tolist()
        if relabel[i]:
            later = [s for s in range(begin, end) if episode["obs"][s + 1]["achieved_goal"] == goal]
            assert len(later) == 1, (id_, t, later)
            step = later[0]
            allowed = {"future": range(t, end), "final": [end - 1], "episode": range(begin, end)}
            assert step in allowed[strategy], (strategy, id_, t, step, begin, end)
            if strategy == "future":
                offsets.append((end - t, step - t))
        else:
            assert goal == episode["obs"][t]["desired_goal"]
        for key, at in (("obs", t), ("next_obs", t + 1)):
            for leaf, value in dict(episode["obs"][at], desired_goal=goal).items():
                assert batch[key][leaf][i].tolist() == value, (key, leaf, id_, t)
        assert batch["actions"][i].tolist() == episode["act"][t]
        assert float(batch["rewards"][i]) == plain_reward(
            episode["obs"][t + 1]["achieved_goal"], goal
        )
        last = t == len(episode["act"]) - 1
        assert bool(batch["terminateds"][i]) == (last and episode["term"])
        assert bool(batch["truncateds"][i]) == (last and episode["trunc"])
    return offsets


def collect(
    mode: AutoresetMode,
    kind: Any,
    capacity: int,
    on_evicted: str,
    num_steps: int,
    lookback: int,
    calls: int,
    *,
    seed: int = 0,
    num_envs: int = 6,
    round_trip: bool = False,
    size: int = 96,
) -> tuple[list[Any], Reference]:
    logs: list[list[dict[str, Any]]] = [[] for _ in range(num_envs)]
    env = SyncVectorEnv(
        [lambda log=log: GoalEnv(log) for log in logs],
        autoreset_mode=mode,  # type: ignore[misc]
    )
    runner = EnvRunner(
        env, RandomPolicy(env.action_space, seed=seed), seed=seed, len_lookback_buffer=lookback
    )
    buf = kind(capacity, seed=seed)
    ref = Reference(logs, capacity, on_evicted)
    rng = np.random.default_rng(seed)
    offsets: list[Any] = []
    for call in range(calls):
        chunks = list(runner.sample(num_steps))
        buf.add(chunks, on_evicted=on_evicted)
        ref.add(chunks)
        if round_trip and call % 3 == 1:
            state = buf.get_state()
            buf = kind(capacity)
            buf.set_state(state)
        stored = {}
        for id_ in buf.get_episode_ids():
            begin, end, done = buf.episode_bounds(buf.get_episode_indices(id_)[:1])
            stored[id_] = [int(begin[0]), int(end[0]), bool(done[0])]
        assert stored == ref.stored
        for strategy in STRATEGIES:
            batch, relabel = her_batch(buf, size, strategy, rng)
            offsets += check_batch(buf, ref, batch, relabel, strategy)
    return offsets, ref


CASES = {
    # name: (mode, buffer, capacity, on_evicted, runner.sample(T), lookback, calls)
    "next-step, all kept": (AutoresetMode.NEXT_STEP, EpisodeReplayBuffer, 10**6, "raise", 7, 1, 20),
    "same-step, all kept": (AutoresetMode.SAME_STEP, EpisodeReplayBuffer, 10**6, "raise", 7, 1, 20),
    "next-step, running episodes restarted": (
        AutoresetMode.NEXT_STEP, EpisodeReplayBuffer, 90, "restart", 3, 4, 40,
    ),
    "same-step, running episodes dropped": (
        AutoresetMode.SAME_STEP, EpisodeReplayBuffer, 150, "drop", 5, 0, 30,
    ),
    "prioritized, next-step, restarted": (
        AutoresetMode.NEXT_STEP, PrioritizedEpisodeReplayBuffer, 120, "restart", 13, 2, 12,
    ),
    "disabled autoreset, restarted": (
        AutoresetMode.DISABLED, EpisodeReplayBuffer, 100, "restart", 6, 1, 25,
    ),
    "prioritized, same-step, whole windows": (
        AutoresetMode.SAME_STEP, PrioritizedEpisodeReplayBuffer, 10**6, "raise", 50, 0, 4,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_every_relabelled_transition_matches_the_env_log(case: str) -> None:
    mode, kind, capacity, on_evicted, num_steps, lookback, calls = CASES[case]
    offsets, ref = collect(mode, kind, capacity, on_evicted, num_steps, lookback, calls)
    assert offsets  # "future" relabelled something
    episodes = [e for log in ref.logs for e in log]
    assert any(e["term"] for e in episodes) and any(e["trunc"] for e in episodes)
    if on_evicted != "raise":
        assert ref.evicted


def test_state_round_trips_keep_the_goals() -> None:
    collect(AutoresetMode.NEXT_STEP, PrioritizedEpisodeReplayBuffer, 100, "restart", 6, 2, 15,
            round_trip=True)  # fmt: skip


def test_future_goals_are_uniform_over_the_later_stored_steps() -> None:
    # The goal's step, read back from its value, is uniform over t .. t_end - 1 (goals
    # o_{t+1} .. o_{t_end}): (offset + U) / (later steps) is uniform on [0, 1).
    offsets, _ = collect(
        AutoresetMode.NEXT_STEP, EpisodeReplayBuffer, 10**6, "raise", 9, 1, 25, seed=3, size=400
    )
    later, offset = np.array(offsets, np.float64).T
    assert len(offsets) > 5000 and (offset < later).all()
    u = (offset + np.random.default_rng(0).random(len(offset))) / later
    counts = np.bincount((u * 10).astype(int), minlength=10)
    assert chi_square_p(counts, np.full(10, len(u) / 10)) > 1e-3
    # the first step of the future and its last are as likely as any other
    short = later == 3
    assert chi_square_p(np.bincount(offset[short].astype(int)), np.full(3, short.sum() / 3)) > 1e-3


def _recipe() -> dict[str, Any]:
    """The namespace of replay.md's HER recipe (its block runs, asserts included)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "replay.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "her_sample" in b)
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    exec(compile(block, "<replay.md>", "exec"), namespace)
    return namespace


def test_the_recipe_keeps_terminations_that_were_no_success() -> None:
    # An env that ends episodes at the goal and also on a failure (leaving the workspace):
    # recomputing the terminations from the new rewards must not undo the failures.
    recipe = _recipe()
    obs = np.stack([np.array([t, 0.0], np.float32) for t in range(4)])
    far = np.full((4, 2), 9.0, np.float32)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "fell", observations={"observation": obs, "achieved_goal": obs, "desired_goal": far},
            actions=np.zeros((3, 2), np.float32), rewards=[-1.0] * 3, terminated=True,
            len_lookback_buffer=0,
        )
    )  # fmt: skip
    batch, _, _ = recipe["her_sample"](buf, 64, ratio=0.0, terminate_on_success=True)
    _, t = buf.episode_steps(batch["indices"])
    assert (batch["terminateds"] == (t == 2)).all()  # the fall still ends the episode
    batch, goal_t, relabel = recipe["her_sample"](buf, 64, ratio=1.0, terminate_on_success=True)
    _, t = buf.episode_steps(batch["indices"])
    assert (batch["terminateds"] == ((goal_t == t) | (t == 2))).all()


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_relabelling_a_batch_in_place_changes_nothing_stored(kind: Any) -> None:
    # The recipe's np.where builds new arrays; a relabelling in place must be as safe, and
    # obs and next_obs must not share a goal array (a write to one would show in the other).
    goals = np.arange(12, dtype=np.float32).reshape(6, 2)
    buf = kind(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a", observations={"achieved_goal": goals, "desired_goal": goals + 100},
            actions=np.zeros((5, 2), np.float32), rewards=[-1.0] * 5, len_lookback_buffer=0,
        )
    )  # fmt: skip
    batch = buf.sample(16, n_step=1)
    batch["obs"]["desired_goal"][:] = -1
    assert (batch["next_obs"]["desired_goal"] >= 100).all()
    batch["next_obs"]["achieved_goal"][:] = -2
    again = buf.get_transitions(batch["indices"])
    _, t = buf.episode_steps(batch["indices"])
    assert again["obs"]["desired_goal"].tolist() == (goals[t] + 100).tolist()
    assert again["next_obs"]["achieved_goal"].tolist() == goals[t + 1].tolist()


def test_dict_observations_given_as_lists_per_key() -> None:
    # How a HER user writes an episode by hand: each goal key's items as one array. A list under
    # a key is structure (a numpy'd column lays out list-holding items so), not the key's items:
    # here it reads as 2 observations (the rows' length), which the constructor refuses.
    steps = [np.array([t, 0.0], np.float32) for t in range(4)]
    episode = SingleAgentEpisode(
        observations={"achieved_goal": np.stack(steps), "desired_goal": {"xy": np.stack(steps)}},
        actions=np.zeros((3, 2), np.float32), rewards=[0.0] * 3, len_lookback_buffer=0,
    )  # fmt: skip
    assert len(episode) == 3
    last = episode.get_observations(3)
    assert last["achieved_goal"].tolist() == last["desired_goal"]["xy"].tolist() == [3.0, 0.0]
    assert last["achieved_goal"].dtype == np.float32
    with pytest.raises(AssertionError, match="column lengths disagree with 2 observations"):
        SingleAgentEpisode(
            observations={"achieved_goal": steps, "desired_goal": steps},
            actions=np.zeros((3, 2), np.float32), rewards=[0.0] * 3, len_lookback_buffer=0,
        )  # fmt: skip

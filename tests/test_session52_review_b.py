"""A review of session 52's core changes: batched replay ``add``, flat arrays, EpisodeTally.

Pins what the review checked and found to hold: a many-chunk ``add`` (rows joined per column,
evictions killed once) stores what one ``add`` per chunk stores for unusual row dtypes and
layouts, keeps no reference to the caller's arrays; ``flat_transitions`` gives what a
brute-force reading of the written episodes gives; ``EpisodeTally`` hands out the episodes
``get_metrics`` counts, in every autoreset mode and window, across a ``reset()``.
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, flat_transitions
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, EpisodeTally, RandomPolicy


# ------------------------------------------------------------------- replay add batching
def _chunk(id_: str, obs: np.ndarray, actions: np.ndarray, **kw: Any) -> SingleAgentEpisode:
    n = len(actions)
    return SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=list(actions),
        rewards=list(np.linspace(-1.0, 1.0, n)),
        len_lookback_buffer=0,
        **kw,
    ).to_numpy()


def _read_only(shape: tuple[int, ...]) -> np.ndarray:
    rows = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    rows.flags.writeable = False
    return rows


# name -> (observations of 4 rows, actions of 3 rows, episode keywords)
ROWS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "big-endian obs": (np.arange(8, dtype=">f4").reshape(4, 2), np.arange(3), {}),
    "strided obs": (np.arange(24.0).reshape(4, 6)[:, ::3], np.arange(3), {}),
    "read-only obs": (_read_only((4, 2)), np.arange(3), {}),
    "complex obs": (np.arange(8).reshape(4, 2) * (1 + 1j), np.arange(3), {}),
    "bool obs": (np.arange(8).reshape(4, 2) % 3 == 0, np.arange(3), {}),
    "nan obs": (np.where(np.eye(4, 2) > 0, np.nan, 1.0), np.arange(3), {}),
    "float64 obs, float32 box": (
        np.linspace(0, 1, 8).reshape(4, 2),
        np.arange(3),
        {"observation_space": gym.spaces.Box(0, 1, (2,), np.float32)},
    ),
    "discrete actions as floats": (
        np.zeros((4, 2)),
        np.array([0.0, 1.0, 1.0]),
        {"action_space": gym.spaces.Discrete(2)},
    ),
    "multi-binary bool actions": (
        np.zeros((4, 2)),
        np.array([[True, False], [False, True], [True, True]]),
        {"action_space": gym.spaces.MultiBinary(2)},
    ),
    "scalar obs": (np.arange(4.0), np.arange(3), {}),
}


def _state(buffer: EpisodeReplayBuffer) -> dict[str, Any]:
    state = buffer.get_state()
    state["layout"].pop("size", None)  # rows allocated: the adds' sizes decide
    return state


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(ROWS))
def test_one_add_of_many_unusual_chunks_stores_what_one_add_per_chunk_stores(kind, case):
    obs, actions, kw = ROWS[case]
    chunks = [_chunk(f"e{i}", obs, actions, **kw) for i in range(4)]
    together, apart = kind(100, seed=1), kind(100, seed=1)
    together.add(chunks)
    for chunk in chunks:
        apart.add(chunk)
    np.testing.assert_equal(_state(together), _state(apart))
    np.testing.assert_equal(together.sample(6), apart.sample(6))


@pytest.mark.parametrize("case", list(ROWS))
def test_a_full_buffer_evicting_in_one_add_stores_what_one_add_per_chunk_stores(case):
    obs, actions, kw = ROWS[case]
    chunks = [_chunk(f"e{i}", obs, actions, **kw) for i in range(7)]
    together, apart = EpisodeReplayBuffer(7, seed=2), EpisodeReplayBuffer(7, seed=2)
    together.add(chunks, on_evicted="drop")
    for chunk in chunks:
        apart.add(chunk, on_evicted="drop")
    assert together.get_evicted_ids() == apart.get_evicted_ids() == [f"e{i}" for i in range(5)]
    assert together.get_episode_ids() == apart.get_episode_ids() == ["e5", "e6"]
    assert together.get_added_timesteps() == apart.get_added_timesteps() == 21
    for buffer in (together, apart):
        buffer._compact()
    np.testing.assert_equal(together.sample(5), apart.sample(5))


def test_add_keeps_no_reference_to_the_callers_arrays():
    chunks = [_chunk(f"e{i}", np.zeros((4, 2), np.float32), np.zeros(3)) for i in range(3)]
    buffer = EpisodeReplayBuffer(100)
    buffer.add(chunks)
    before = buffer.get_state()
    for chunk in chunks:  # the numpy'd episode's own arrays, which the quick reading takes
        chunk.get_observations()[...] = 9.0
        chunk.get_actions()[...] = 9.0
        chunk.get_rewards()[...] = 9.0
    np.testing.assert_equal(buffer.get_state(), before)


# ------------------------------------------------------------------------ flat arrays
def _random_dataset(path: str, seed: int) -> list[tuple[np.ndarray, np.ndarray, Any, int]]:
    """Episodes cut in pieces (some with lookback or an ending-only last piece), written
    interleaved; returns each episode's (obs, actions, rewards, end) in first-write order."""
    rng = np.random.default_rng(seed)
    episodes, pieces = [], []
    for e in range(int(rng.integers(0, 5))):
        steps, end = int(rng.integers(1, 7)), int(rng.integers(0, 3))
        obs, actions = rng.normal(size=(steps + 1, 2)), rng.integers(0, 5, steps)
        rewards = rng.normal(size=steps)
        cuts = sorted({0, steps, *rng.integers(0, steps + 1, 2).tolist()})
        ending_only = bool(end) and rng.random() < 0.3
        mine = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            last = b == steps and not ending_only
            back = int(rng.integers(0, a + 1))
            mine.append(
                SingleAgentEpisode(
                    f"id{e}",
                    observations=list(obs[a - back : b + 1]),
                    actions=list(actions[a - back : b]),
                    rewards=list(rewards[a - back : b]),
                    terminated=last and end == 1,
                    truncated=last and end == 2,
                    t_started=a,
                    len_lookback_buffer=back,
                ).to_numpy()
            )
        if ending_only:
            mine.append(
                SingleAgentEpisode(
                    f"id{e}",
                    observations=[obs[-1]],
                    actions=[],
                    rewards=[],
                    terminated=end == 1,
                    truncated=end == 2,
                    t_started=steps,
                    len_lookback_buffer=0,
                )
            )
        episodes.append((obs, actions, rewards, end))
        pieces.append(mine)
    order: list[int] = []  # which episode writes next: each episode's pieces in time order
    for e, mine in enumerate(pieces):
        order += [e] * len(mine)
    rng.shuffle(order)
    firsts: list[int] = []
    with DatasetWriter(path) as writer:
        for e in order:
            writer.write(pieces[e].pop(0))
            if e not in firsts:
                firsts.append(e)
    return [episodes[e] for e in firsts]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("done_only", [False, True])
def test_flat_transitions_are_the_written_episodes_whole(tmp_path, seed, done_only):
    episodes = _random_dataset(str(tmp_path), seed)
    flat = flat_transitions(tmp_path, done_only=done_only)
    kept = [ep for ep in episodes if ep[3] or not done_only]
    rows = sum(len(a) for _, a, _, _ in kept)
    for name, cut in (("observations", slice(None, -1)), ("next_observations", slice(1, None))):
        want = np.concatenate([obs[cut] for obs, *_ in kept]) if kept else np.zeros((0, 2))
        np.testing.assert_allclose(flat[name].reshape(rows, 2), want)
    ends = [[False] * (len(a) - 1) + [True] for _, a, _, _ in kept]
    assert flat["actions"].tolist() == [int(x) for _, a, _, _ in kept for x in a]
    np.testing.assert_allclose(flat["rewards"], [x for _, _, r, _ in kept for x in r])
    end_of = [(end, last) for (_, _, _, end), flags in zip(kept, ends) for last in flags]
    assert flat["terminals"].tolist() == [last and end == 1 for end, last in end_of]
    assert flat["timeouts"].tolist() == [last and end != 1 for end, last in end_of]


# ----------------------------------------------------------------------- episode tally
TALLY_CASES = [
    pytest.param(mode, window, env_id, id=f"{mode}-{window}-{env_id}")
    for mode in ("NEXT_STEP", "SAME_STEP", "DISABLED")
    for window in ("transitions", "vector_steps")
    for env_id in ("CartPole-v1", "Pendulum-v1")
]


@pytest.mark.parametrize(("mode", "window", "env_id"), TALLY_CASES)
def test_the_tally_hands_out_the_episodes_get_metrics_counts(mode, window, env_id):
    env = gym.make_vec(
        env_id,
        3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": getattr(gym.vector.AutoresetMode, mode)},
        max_episode_steps=13 if env_id == "Pendulum-v1" else None,
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, window=window)
    tally, finished, lengths, returns = EpisodeTally(), [], [], []
    for call in range(8):
        finished += tally.add(runner.sample(20))
        metrics = runner.get_metrics()
        lengths += metrics["episode_lengths"]
        returns += metrics["episode_returns"]
        if call == 4:  # mid-episode: the abandoned ones are neither handed out nor counted
            runner.reset()
            tally.clear()
    assert len(finished) > 3
    assert sorted(e.length for e in finished) == sorted(lengths)
    np.testing.assert_allclose(sorted(e.ret for e in finished), sorted(returns), rtol=1e-12)
    assert {e.env_index for e in finished} <= {0, 1, 2}


def test_metrics_keep_episodes_a_reset_dropped_with_the_carried_over_transitions():
    # Next-step mode carries a sub-env's transitions over; an episode that ended among them is
    # counted when its env step ran, and reset() drops them: counted, never handed out.
    env = gym.make_vec(
        "CartPole-v1",
        4,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP},
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    tally, finished, lengths = EpisodeTally(), [], []
    for _ in range(15):
        finished += tally.add(runner.sample(15))
        lengths += runner.get_metrics()["episode_lengths"]
        runner.reset()  # abandons the running episodes, drops carried-over transitions
        tally.clear()
    counted = collections.Counter(lengths)
    counted.subtract(e.length for e in finished)
    assert min(counted.values()) >= 0  # every episode handed out was counted
    assert sum(counted.values()) > 0  # and some counted ones were dropped by the resets

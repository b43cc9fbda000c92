"""One add that evicts many episodes leaves the buffer as evicting them one add at a time would.

What the buffer then holds, draws and weighs: the stored priorities, a sample's items (all
stored) and the draw frequencies (chi-square at a fixed seed).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._stats import chi_square_p


def _episode(id_: str, n: int, t0: int = 0, done: bool = True) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t0 + t]) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=done,
        t_started=t0,
        len_lookback_buffer=0,
    )


# (name, episodes added one per add first, then the one add that evicts many)
CASES = [
    ("one long episode evicts 30 short ones", [("s", 30, 1)], [("big", 40)]),
    ("several new episodes evict in turns", [("s", 20, 2)], [("a", 15), ("b", 12), ("c", 18)]),
    ("evictions between continuing chunks", [("s", 12, 3)], [("a", 10), ("b", 9), ("a2", 20)]),
]


@pytest.mark.parametrize(("first", "then"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_add_evicting_many_keeps_priorities_and_draws(first, then):
    (prefix, count, length) = first[0]
    buf = PrioritizedEpisodeReplayBuffer(50, alpha=1.0, seed=3)
    for i in range(count):
        buf.add(_episode(f"{prefix}{i}", length), weight=float(i + 1))
    big = []
    for id_, n in then:  # "a2": a's continuation in the same add
        if id_ == "a2":
            big.append(_episode("a", n, t0=10))
        else:
            big.append(_episode(id_, n, done=id_ != "a"))
    buf.add(big, weight=7.0)

    stored = buf.get_episode_ids()
    assert buf.get_num_timesteps() <= 50 or len(stored) == 1
    evicted = set(buf.get_evicted_ids())
    assert evicted and not evicted & set(stored)
    items = np.concatenate([buf.get_episode_indices(i) for i in stored])
    want = np.array(
        [
            7.0 if not i.startswith(prefix) else float(int(i[len(prefix) :]) + 1)
            for i in stored
            for _ in buf.get_episode_indices(i)
        ]
    )
    assert buf.get_priorities(items).tolist() == want.tolist()
    leaves = buf.get_state()["prioritized"]["leaves"]
    assert sorted(np.asarray(leaves).tolist()) == sorted(want.tolist())

    batch = buf.sample(20_000, beta=0.0)
    drawn = batch["indices"]
    assert np.isin(drawn, items).all()  # no evicted item is drawn
    counts = np.array([(drawn == i).sum() for i in items])
    assert chi_square_p(counts, 20_000 * want / want.sum()) > 1e-4


def test_uniform_buffer_evicting_many_in_one_add_matches_one_by_one():
    together, apart = EpisodeReplayBuffer(40, seed=0), EpisodeReplayBuffer(40, seed=0)
    for buf in (together, apart):
        buf.add([_episode(f"s{i}", 1) for i in range(40)])
    together.add([_episode("x", 25), _episode("y", 10)])
    apart.add(_episode("x", 25))
    apart.add(_episode("y", 10))
    assert together.get_episode_ids() == apart.get_episode_ids()
    assert together.get_evicted_ids() == apart.get_evicted_ids()
    got = together.sample(500, n_step=2, gamma=0.5)
    want = apart.sample(500, n_step=2, gamma=0.5)
    for key in ("obs", "next_obs", "rewards", "discounts", "indices"):
        np.testing.assert_array_equal(got[key], want[key])

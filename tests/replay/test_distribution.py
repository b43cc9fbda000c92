"""Sampling distributions, checked with chi-square tests at fixed seeds."""

from __future__ import annotations

import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, SumTree

from ._episodes import chunk, episode, make_episode_data
from ._stats import chi_square_p
from .reference import RefBuffer


def _interleaved_buffer(cls, ref=None, **kwargs):
    buf = cls(60, seed=11, **kwargs)
    datas = [make_episode_data(i, 15) for i in range(6)]
    adds = [
        [chunk(f"e{i}", d, a, a + 5, terminated=a == 10) for i, d in enumerate(datas)]
        for a in range(0, 15, 5)  # interleaved, with evictions and a compaction on the way
    ]
    for chunks in [*adds, [episode("late", 9, 7)]]:
        buf.add(chunks)
        if ref is not None:
            ref.add(chunks)
    return buf


def test_uniform_transitions_chi_square():
    buf = _interleaved_buffer(EpisodeReplayBuffer)
    n = len(buf)
    uids = buf.sample(200 * n)["indices"]
    values, counts = np.unique(uids, return_counts=True)
    assert len(values) == n  # every stored step is reachable
    assert chi_square_p(counts, np.full(n, counts.sum() / n)) > 1e-3


def test_uniform_sequence_starts_chi_square():
    ref = RefBuffer(60)
    buf = _interleaved_buffer(EpisodeReplayBuffer, ref)
    T = 4
    starts = buf.sample(20_000, batch_length_T=T)["indices"][:, 0]
    values, counts = np.unique(starts, return_counts=True)
    # Valid starts: every step with at least T steps left in its episode.
    valid = sorted(uid for ep in ref.episodes.values() for uid in ep.uids[: len(ep) - T + 1])
    assert values.tolist() == valid
    assert chi_square_p(counts, np.full(len(counts), counts.sum() / len(counts))) > 1e-3


def test_whole_episodes_are_drawn_uniformly_among_the_stored_ones():
    """Drawn over the table's rows (evicted rows left free), not from a list of every id."""
    buf = EpisodeReplayBuffer(40, seed=3)
    for i in range(30):  # 30 episodes of 4 steps through a 40-step buffer: rows freed, reused
        buf.add(episode(f"e{i}", i, 4))
    stored = buf.get_episode_ids()
    drawn = [ep.id_ for ep in buf.sample(4000, sample_episodes=True)]
    values, counts = np.unique(drawn, return_counts=True)
    assert sorted(values.tolist()) == sorted(stored)
    assert chi_square_p(counts, np.full(len(counts), counts.sum() / len(counts))) > 1e-3


@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_prioritized_chi_square(alpha):
    buf = _interleaved_buffer(PrioritizedEpisodeReplayBuffer, alpha=alpha)
    ids = buf.sample(len(buf))["indices"]
    uniq = np.unique(ids)
    prio = np.random.default_rng(0).uniform(0.1, 5.0, len(uniq))
    buf.update_priorities(prio, uniq)
    all_ids = np.unique(buf.sample(50 * len(buf))["indices"])
    draws = buf.sample(300_000, beta=0.5)
    values, counts = np.unique(draws["indices"], return_counts=True)
    p = buf.get_priorities(all_ids) ** alpha
    expected = p / p.sum() * counts.sum()
    got = np.zeros(len(all_ids))
    got[np.searchsorted(all_ids, values)] = counts
    assert chi_square_p(got, expected) > 1e-3
    # PER weights: (N P(i))^-beta over the largest such weight.
    pos = np.searchsorted(all_ids, draws["indices"][:50])
    probs = p[pos] / p.sum()
    want = (len(buf) * probs) ** -0.5 / (len(buf) * p.min() / p.sum()) ** -0.5
    np.testing.assert_allclose(draws["weights"][:50], want, rtol=1e-5)


@pytest.mark.parametrize("size", [1, 5, 16, 37, 300, 5000])
def test_sum_tree_find_matches_cumsum(size):
    rng = np.random.default_rng(size)
    tree = SumTree(size)
    values = rng.uniform(0, 2, size) * (rng.random(size) < 0.7)
    values[0] = 0.5  # at least one non-zero leaf
    tree.update(np.arange(size), values)
    picks = rng.integers(0, size, 40)
    new = rng.uniform(0, 3, 40) * (rng.random(40) < 0.8)
    tree.update(picks, new)  # small updates walk the levels; repeated leaves: the last wins
    for i, v in zip(picks, new):
        values[i] = v
    np.testing.assert_allclose(tree.leaves(), values)
    assert np.isclose(tree.total, values.sum())
    assert tree.min == (values[values > 0].min() if (values > 0).any() else np.inf)
    masses = rng.uniform(0, tree.total, 5000)
    want = np.searchsorted(np.cumsum(values), masses, side="right")
    np.testing.assert_array_equal(tree.find(masses), want)
    assert (tree.leaves(tree.find(np.array([tree.total, tree.total * (1 + 1e-15)]))) > 0).all()
    rebuilt = SumTree(size)
    rebuilt.rebuild(values)
    assert np.isclose(rebuilt.total, tree.total) and rebuilt.min == tree.min
    np.testing.assert_array_equal(rebuilt.find(masses), want)

"""SumTree: searches agree with ``searchsorted`` over the leaves' prefix sums at every depth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.replay import SumTree


def _check(tree: SumTree, values: np.ndarray, rng: np.random.Generator) -> None:
    np.testing.assert_array_equal(tree.leaves(), values)
    assert tree.total == pytest.approx(values.sum(), rel=1e-12, abs=1e-12)
    positive = values[values > 0]
    assert tree.min == (positive.min() if len(positive) else np.inf)
    if not len(positive):
        return
    masses = rng.uniform(0, tree.total, 2000)
    want = np.searchsorted(np.cumsum(values), masses, side="right")
    np.testing.assert_array_equal(tree.find(masses), want)
    # Out-of-range masses land on the nearest non-zero leaf.
    nonzero = np.flatnonzero(values)
    edges = np.array([-1.0, 0.0, tree.total, tree.total * (1 + 1e-15), np.inf])
    assert tree.find(edges).tolist() == [nonzero[0]] * 2 + [nonzero[-1]] * 3


@pytest.mark.parametrize(
    ("capacity", "depth"),
    [(1, 0), (8, 0), (2048, 0), (2049, 1), (16_384, 1), (16_385, 2), (200_000, 3)],
)
def test_depth_keeps_the_top_small(capacity, depth):
    tree = SumTree(capacity)
    assert tree.depth == depth
    assert tree.leaves().shape == (capacity,)


@pytest.mark.parametrize(
    ("values", "masses", "want"),
    [
        ([1.0, 2.0, 1.0], [0.0, 0.999, 1.0, 2.999, 3.0, 3.999], [0, 0, 1, 1, 2, 2]),
        ([0.0, 1.0, 0.0, 0.0, 2.0, 0.0], [0.0, 1.0, 2.5], [1, 4, 4]),  # zeros are skipped
        ([0.5] * 9 + [0.0] * 7 + [4.0], [4.49, 4.5, 8.49], [8, 16, 16]),  # across children
    ],
)
def test_find_table(values, masses, want):
    tree = SumTree(len(values))
    tree.update(np.arange(len(values)), np.array(values))
    assert tree.find(np.array(masses)).tolist() == want


@pytest.mark.parametrize("capacity", [3, 2048, 3000, 20_000])
def test_find_table_deep(capacity):
    # Exactly representable values: every prefix sum is exact, so edges are decided exactly.
    values = np.zeros(capacity)
    values[[0, capacity // 2, capacity - 1]] = [1.0, 2.0, 0.5]
    tree = SumTree(capacity)
    tree.rebuild(values)
    got = tree.find(np.array([0.0, 0.5, 1.0, 2.99, 3.0, 3.49]))
    assert got.tolist() == [0, 0, capacity // 2, capacity // 2, capacity - 1, capacity - 1]
    assert (tree.total, tree.min) == (3.5, 0.5)


@settings(max_examples=40, deadline=None)
@given(
    capacity=st.sampled_from([1, 7, 64, 2048, 2049, 5000, 16_385, 40_000]),
    rounds=st.lists(
        st.tuples(st.integers(1, 300), st.floats(0.0, 1.0), st.integers(0, 2**31)),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**31),
)
def test_updates_keep_sums_minima_and_searches(capacity, rounds, seed):
    """Random batches of updates (repeats, zeros, big and small) against a plain array."""
    rng = np.random.default_rng(seed)
    tree = SumTree(capacity)
    values = np.zeros(capacity)
    for count, zeros, sub_seed in rounds:
        r = np.random.default_rng(sub_seed)
        idx = r.integers(0, capacity, count)
        new = r.uniform(0, 10, count) * (r.random(count) >= zeros)
        tree.update(idx, new)
        values[idx] = new  # repeated indices: the last value wins, as in the tree
        _check(tree, values, rng)
    rebuilt = SumTree(capacity)
    rebuilt.rebuild(values)
    _check(rebuilt, values, rng)


def test_big_update_refreshes_every_level():
    rng = np.random.default_rng(0)
    tree = SumTree(30_000)
    values = rng.uniform(0.5, 2.0, 30_000)
    tree.update(np.arange(30_000), values)  # the whole-tree refresh path
    values[:10] = 0.0
    tree.update(np.arange(10), np.zeros(10))  # then the per-parent path
    _check(tree, values, rng)


@pytest.mark.parametrize("capacity", [5, 2049, 20_000, 1_000_000])
def test_masses_outside_the_total_land_on_the_edge_leaves(capacity):
    """Every leaf non-zero (so a search that strays lands on a real leaf, not a zero one that
    a second search would catch): below 0 is the first leaf, from the total on the last."""
    values = np.random.default_rng(0).uniform(0.5, 1.5, capacity)
    tree = SumTree(capacity)
    tree.rebuild(values)
    masses = np.array([-1e-9, -1.0, -1e300, -np.inf, tree.total, tree.total + 1.0, np.inf])
    assert tree.find(masses).tolist() == [0] * 4 + [capacity - 1] * 3

"""``SumTree.update`` with finite values whose sum is beyond float64.

Each value was finite, so the tree took them and its total became inf (a later ``find`` has
no mass to search); under ``-W error`` the overflow warning left it half written. The
prioritized buffer refused such priorities itself; the tree now refuses them too, unchanged.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.replay import SumTree

BIG = 1e308

# (leaves set first, indices, values, accepted)
CASES = {
    "two-big-leaves": ({0: BIG}, [1], [BIG], False),
    "two-big-in-one-call": ({}, [0, 1], [BIG, BIG], False),
    "replacing-the-big-leaf": ({0: BIG}, [0], [BIG], True),
    "repeated-index-last-wins": ({0: BIG}, [0, 0], [5.0, BIG], True),
    "repeated-index-last-overflows": ({1: BIG}, [0, 0], [1.0, BIG], False),
    "big-beside-small": ({0: 3.0, 1: 4.0}, [2], [BIG], True),
    "sum-just-finite": ({0: 8e307}, [1], [9e307], True),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("capacity", [4, 5_000])  # one level, and a tree with levels
def test_values_whose_sum_would_be_infinite_are_refused_and_the_tree_is_unchanged(case, capacity):
    first, indices, values, accepted = case
    tree = SumTree(capacity)
    if first:
        tree.update(np.array(list(first)), np.array(list(first.values())))
    before = (tree.leaves(), tree.total, tree.min)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way either
        if accepted:
            tree.update(np.array(indices), np.array(values))
        else:
            with pytest.raises(ValueError, match="sum of all leaves infinite"):
                tree.update(np.array(indices), np.array(values))
    assert np.isfinite(tree.total)
    if accepted:
        want = before[0].copy()
        for i, v in zip(indices, values):
            want[i] = v
        assert np.array_equal(tree.leaves(), want)
        assert tree.total == pytest.approx(want.sum(), rel=1e-12)
    else:
        assert np.array_equal(tree.leaves(), before[0])
        assert (tree.total, tree.min) == before[1:]


@pytest.mark.parametrize("capacity", [4, 5_000])
def test_rebuild_refuses_values_whose_sum_is_infinite_and_keeps_the_tree(capacity):
    tree = SumTree(capacity)
    tree.rebuild(np.array([1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="sum of all leaves infinite"):
            tree.rebuild(np.array([BIG, 3.0, BIG]))
        tree.rebuild(np.array([8e307, 9e307]))  # just finite: taken
    assert tree.leaves()[:2].tolist() == [8e307, 9e307]
    tree.rebuild(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="sum of all leaves infinite"):
        tree.rebuild(np.array([BIG, BIG]))
    assert (tree.total, tree.min, tree.leaves()[:3].tolist()) == (3.0, 1.0, [1.0, 2.0, 0.0])


MAX = float(np.finfo(np.float64).max)
NEAR_MAX = st.sampled_from([MAX, MAX / 2, MAX / 3, MAX * 0.6, 1e308, 8e307, 1.0, 0.0])


@settings(max_examples=300, deadline=None)
@given(
    updates=st.lists(
        st.lists(st.tuples(st.integers(0, 8), NEAR_MAX | st.floats(0, MAX)), min_size=1),
        min_size=1,
        max_size=6,
    )
)
def test_near_the_maximum_an_update_is_taken_whole_or_refused_and_the_total_stays_finite(
    updates,
):
    # The check estimates the new total in one order, the levels add in another: rounding at
    # the edge of float64 must neither make the total inf nor leave a refused update half done.
    tree = SumTree(9)
    for pairs in updates:
        indices = np.array([i for i, _ in pairs])
        values = np.array([v for _, v in pairs])
        before = (tree.leaves(), tree.total, tree.min)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                tree.update(indices, values)
            except ValueError as error:
                assert "sum of all leaves infinite" in str(error)
                assert np.array_equal(tree.leaves(), before[0])
                assert (tree.total, tree.min) == before[1:]
                continue
        assert np.isfinite(tree.total)
        assert tree.total == pytest.approx(math.fsum(tree.leaves()), rel=1e-12)


def test_the_review_case_leaves_no_infinite_total():
    half_ulp = (MAX - np.nextafter(MAX, 0)) / 2
    tree = SumTree(8)
    for indices, values in [([0, 2], [0.6 * half_ulp, MAX]), ([1], [0.6 * half_ulp])]:
        with contextlib.suppress(ValueError):
            tree.update(np.array(indices), np.array(values))
        assert np.isfinite(tree.total)

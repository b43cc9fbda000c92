"""Properties of the pure index arithmetic in ``episodes.indexing``."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from episodes import indexing

sizes = st.integers(0, 8).flatmap(lambda total: st.tuples(st.integers(0, total), st.just(total)))
bounds = st.none() | st.integers(-12, 12)


@given(sizes, bounds, bounds, st.booleans())
def test_plan_slice_with_fill_yields_stop_minus_start_items(size, start, stop, neg):
    lookback, total = size
    plan = indexing.plan_slice(
        slice(start, stop), lookback=lookback, total=total, neg_index_as_lookback=neg, fill=True
    )
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    lo = lookback if start is None else indexing.resolve_int(start, **kw)
    hi = total if stop is None else indexing.resolve_int(stop, **kw)
    assert plan.length == max(hi - lo, 0)
    assert 0 <= plan.start <= plan.stop <= total
    assert min(plan.fill_left, plan.fill_right, plan.stored) >= 0


@given(sizes, bounds, bounds, st.booleans())
def test_plan_slice_without_fill_is_python_slicing_of_positions(size, start, stop, neg):
    lookback, total = size
    plan = indexing.plan_slice(
        slice(start, stop), lookback=lookback, total=total, neg_index_as_lookback=neg, fill=False
    )
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    lo = lookback if start is None else indexing.resolve_int(start, **kw)
    hi = total if stop is None else indexing.resolve_int(stop, **kw)
    # Clip resolved positions the way a Python slice clips non-negative bounds.
    expected = list(range(total))[max(lo, 0) : max(hi, 0)]
    assert list(range(plan.start, plan.stop)) == expected
    assert plan.fill_left == plan.fill_right == 0


@given(sizes, bounds, bounds, st.booleans())
def test_filled_plan_places_stored_window_between_fillers(size, start, stop, neg):
    lookback, total = size
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    filled = indexing.plan_slice(slice(start, stop), fill=True, **kw)
    # Positions of the whole window, with out-of-range ones marked None, must match the plan.
    lo = lookback if start is None else indexing.resolve_int(start, **kw)
    hi = total if stop is None else indexing.resolve_int(stop, **kw)
    window = [p if 0 <= p < total else None for p in range(lo, hi)]
    planned = [None] * filled.fill_left + list(range(filled.start, filled.stop))
    planned += [None] * filled.fill_right
    assert planned == window


@given(sizes, st.integers(-12, 12))
def test_resolve_int_rules(size, index):
    lookback, total = size
    plain = indexing.resolve_int(index, lookback=lookback, total=total, neg_index_as_lookback=False)
    as_lb = indexing.resolve_int(index, lookback=lookback, total=total, neg_index_as_lookback=True)
    if index >= 0:
        assert plain == as_lb == lookback + index
    else:
        assert plain == total + index and as_lb == lookback + index
    # Integer indexing stops exactly at len(buffer): the iteration protocol relies on it.
    n = total - lookback
    assert (
        indexing.in_range(
            indexing.resolve_int(n, lookback=lookback, total=total, neg_index_as_lookback=False),
            total,
        )
        is False
    )


@given(sizes, st.lists(st.integers(-10, 10), max_size=5), st.booleans())
def test_resolve_list_is_resolve_int_per_index(size, idx, neg):
    lookback, total = size
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    assert indexing.resolve_list(idx, **kw).tolist() == [indexing.resolve_int(i, **kw) for i in idx]


@given(sizes, st.integers(-10, 10), st.booleans())
def test_set_positions_raises_exactly_when_out_of_range(size, index, neg):
    lookback, total = size
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    position = indexing.resolve_int(index, **kw)
    if indexing.in_range(position, total):
        assert indexing.set_positions(index, **kw) == position
    else:
        with pytest.raises(IndexError):
            indexing.set_positions(index, **kw)


@given(st.integers(1, 3), sizes, bounds, bounds)
def test_steps_apply_after_the_plan(step, size, start, stop):
    lookback, total = size
    assume(step >= 1)
    plan = indexing.plan_slice(
        slice(start, stop, step),
        lookback=lookback,
        total=total,
        neg_index_as_lookback=False,
        fill=False,
    )
    assert plan.step == step


steps = st.integers(-3, 3).filter(lambda s: s != 0)


@given(sizes, bounds, bounds, steps, st.booleans())
def test_slice_positions_are_python_slicing_of_resolved_positions(size, start, stop, step, neg):
    lookback, total = size
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=neg)
    forward = step > 0
    # Open bounds cover ts=0 .. the last item, in either direction (the lookback stays out).
    default_lo, default_hi = (lookback, total) if forward else (total - 1, lookback - 1)
    lo = default_lo if start is None else indexing.resolve_int(start, **kw)
    hi = default_hi if stop is None else indexing.resolve_int(stop, **kw)
    got = indexing.slice_positions(slice(start, stop, step), fill=False, **kw).tolist()
    positions = list(range(total))
    if forward:
        expected = positions[max(lo, 0) : max(hi, 0) : step]
    else:  # a resolved stop below 0 runs through position 0, which Python spells as None
        expected = [] if lo < 0 else positions[lo : hi if hi >= 0 else None : step]
    assert got == expected

    # With fill every position of the resolved range is kept; the out-of-range ones (filled by
    # the caller) only need to stay out of range.
    def marked(ps):
        return [p if 0 <= p < total else None for p in ps]

    filled = indexing.slice_positions(slice(start, stop, step), fill=True, **kw).tolist()
    assert marked(filled) == marked(range(lo, hi, step))


def test_slice_positions_refuse_a_zero_step():
    with pytest.raises(ValueError, match="zero"):
        indexing.slice_positions(
            slice(0, 2, 0), lookback=0, total=3, neg_index_as_lookback=False, fill=False
        )


@given(
    st.integers(0, 7), st.integers(0, 6), st.integers(0, 6), st.integers(0, 7), st.integers(1, 4)
)
def test_step_first_keeps_exactly_what_the_step_keeps_of_the_padded_window(
    fill_left, start, stored, fill_right, step
):
    plan = indexing.SlicePlan(fill_left, start, start + stored, fill_right, step)
    assembled = [None] * fill_left + list(range(plan.start, plan.stop)) + [None] * fill_right
    strided = plan.step_first()
    parts = [None] * strided.fill_left + list(range(strided.start, strided.stop, step))
    assert parts + [None] * strided.fill_right == assembled[::step]
    assert plan.start <= strided.start <= strided.stop == plan.stop
    assert min(strided.fill_left, strided.fill_right) >= 0 and strided.step == step

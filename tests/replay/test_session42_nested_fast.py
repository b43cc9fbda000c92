"""The fast paths of nested observations' records agree with the general, field-by-field ones.

``episodes.replay.nested`` packs a chunk's leaves into records through a plan of each leaf's
(offset, dtype) worked out once per record dtype, takes a numpy'd leaf column as it is, and
unpacks records one field view per leaf. The references below are the general forms: records
built and read field name by field name (``rows[name][name]``), keys parsed from the field
names each time. Hypothesis draws structures (Dicts with any str keys, Tuples, any depth),
leaf dtypes (big-endian ones too) and shapes, and the records' layout (gathered, strided, 2-d,
one record).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.replay.nested import describe, nested_rows, records_equal, unpack

LEAF_DTYPES = ["<f4", "<f8", ">f4", "<i8", ">i2", "|u1", "|b1", "<c8"]
LEAF_SHAPES = [(), (1,), (2,), (1, 3), (0,)]


# ------------------------------------------------------------------------------- references
def _ref_unpack(records: np.ndarray) -> Any:
    dtype = records.dtype
    if dtype.names is None:
        return np.array(records, order="C")
    parts = [_ref_unpack(records[name]) for name in dtype.names]
    if dtype.names[0][:1] in ("'", '"'):
        return {ast.literal_eval(name): part for name, part in zip(dtype.names, parts)}
    return tuple(parts)


def _ref_leaves(dtype: np.dtype, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if dtype.names is None:
        return [path]
    return [p for name in dtype.names for p in _ref_leaves(dtype.fields[name][0], (*path, name))]


def _ref_field(rows: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        rows = rows[name]
    return rows


def _ref_equal(a: Any, b: Any) -> bool:
    for path in _ref_leaves(a.dtype):
        x, y = np.asarray(_ref_field(a, path)), np.asarray(_ref_field(b, path))
        if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
            return False
    return True


def _assert_same(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            _assert_same(got[key], want[key])
    elif isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    else:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.c_contiguous and got.flags.owndata
        assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc")


# ------------------------------------------------------------------------------- strategies
_keys = st.text(alphabet=st.sampled_from("ab'\"_ \\é"), min_size=1, max_size=4)
_leaf = st.tuples(st.sampled_from(LEAF_DTYPES), st.sampled_from(LEAF_SHAPES))
_structure = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.dictionaries(_keys, inner, min_size=1, max_size=3),
        st.lists(inner, min_size=1, max_size=3).map(tuple),
    ),
    max_leaves=6,
).filter(lambda s: not isinstance(s, tuple) or not isinstance(s[0], str))


def _columns(structure: Any, count: int, rng: np.random.Generator) -> Any:
    """Per-leaf columns of ``count`` steps (a numpy'd chunk's nested observations)."""
    if isinstance(structure, dict):
        return {key: _columns(sub, count, rng) for key, sub in structure.items()}
    if isinstance(structure[0], str):  # a leaf
        dtype, shape = np.dtype(structure[0]), structure[1]
        values = rng.normal(0, 50, (count, *shape))
        values[rng.random(values.shape) < 0.2] = np.nan if dtype.kind in "fc" else 0
        if dtype.kind in "iub":
            values = np.nan_to_num(values)
        with np.errstate(invalid="ignore"):
            return values.astype(dtype)
    return tuple(_columns(sub, count, rng) for sub in structure)


def _item(columns: Any, t: int) -> Any:
    if isinstance(columns, dict):
        return {key: _item(sub, t) for key, sub in columns.items()}
    if isinstance(columns, tuple):
        return tuple(_item(sub, t) for sub in columns)
    return columns[t]


def _ref_rows(columns: Any, count: int) -> np.ndarray:
    """Records as the general path packs them: each leaf written through its field names."""
    rows = np.zeros(count, nested_rows(columns, "obs", count, True).dtype)
    for path in _ref_leaves(rows.dtype):
        _ref_field(rows, path)[...] = _ref_field(columns, [_parse(n) for n in path])
    return rows


def _parse(name: str) -> Any:
    return ast.literal_eval(name) if name[:1] in ("'", '"') else int(name)


LAYOUTS = {
    "all": lambda rows: rows,
    "gathered": lambda rows: rows[np.arange(len(rows))[::-1]],
    "strided": lambda rows: rows[::2],
    "two_d": lambda rows: rows[np.array([[0, len(rows) - 1], [1 % len(rows), 0]])],
    "one_record": lambda rows: rows[len(rows) // 2],
    "zero_rows": lambda rows: rows[:0],
}


# ------------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(structure=_structure, count=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_packing_agrees_with_field_by_field(structure: Any, count: int, seed: int) -> None:
    """A numpy'd chunk's and a list-mode chunk's records hold what the general path writes."""
    columns = _columns(structure, count, np.random.default_rng(seed))
    fast = nested_rows(columns, "obs", count, True)
    items = nested_rows([_item(columns, t) for t in range(count)], "obs", count, False)
    ref = _ref_rows(columns, count)
    assert fast.dtype == ref.dtype == items.dtype, describe(fast.dtype)
    assert fast.tobytes() == ref.tobytes() == items.tobytes()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(max_examples=25, deadline=None)
@given(structure=_structure, count=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_unpack_agrees_with_field_by_field(
    layout: str, structure: Any, count: int, seed: int
) -> None:
    """One view per leaf, copied once: the same nested arrays as field-by-field recursion."""
    rows = nested_rows(_columns(structure, count, np.random.default_rng(seed)), "obs", count, True)
    records = LAYOUTS[layout](rows)
    want = _ref_unpack(records)
    got = unpack(records)
    _assert_same(got, want)
    if isinstance(records, np.ndarray):  # copies: zeroing the records leaves them as they were
        records[...] = np.zeros((), records.dtype)
        _assert_same(got, want)


@settings(max_examples=60, deadline=None)
@given(structure=_structure, count=st.integers(2, 5), seed=st.integers(0, 2**16))
def test_records_equal_agrees_with_field_by_field(structure: Any, count: int, seed: int) -> None:
    """Leaf by leaf at each leaf's offset, NaNs equal: as the general comparison decides."""
    rows = nested_rows(_columns(structure, count, np.random.default_rng(seed)), "obs", count, True)
    copy = rows.copy()
    for i in range(count):
        for j in range(count):
            assert records_equal(rows[i], copy[j]) == _ref_equal(rows[i], copy[j])
        assert records_equal(rows[i], copy[i])

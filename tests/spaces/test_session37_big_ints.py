"""``batch`` keeps ints float64 would round exact whether the leaves are items or dict leaves.

The flat path (items that are arrays) joins int arrays of both signednesses (int64 beside
uint64) with ``_exact_int_rows``: uint64 where every value fits, else an object array. Leaves of
dicts and tuples were stacked with ``np.asarray`` and only Python/numpy scalars checked, so the
same arrays under a key came back float64, rounded. And arrays numpy finds no common dtype for
(a datetime beside an int) raised numpy's ``DTypePromotionError`` as items, where as dict leaves
``np.asarray`` gives an object array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.spaces import batch
from episodes.spaces.batching import batch_one_class

BIG = 2**63 + 1


def _outcome(fn: Any) -> Any:
    try:
        out = fn()
    except (ValueError, TypeError) as err:
        return type(err).__name__
    return out.dtype, out.shape, out.tolist()


def _forms(items: list[Any]) -> dict[str, Any]:
    """Every form of batching ``items``: as items, as dict leaves, as tuple parts, by class."""
    forms = {
        "flat": lambda: batch(items),
        "dict": lambda: batch([{"k": item} for item in items])["k"],
        "tuple": lambda: batch([(item, 0) for item in items])[0],
        "nested dict": lambda: batch([{"a": {"k": item}} for item in items])["a"]["k"],
    }
    if len({type(item) for item in items}) == 1:
        forms["one class"] = lambda: batch_one_class(items, type(items[0]))
    return {name: _outcome(fn) for name, fn in forms.items()}


CASES = [
    # uint64 beside int64: exact uint64 where all fit, objects where one is negative
    ([np.array([BIG], np.uint64), np.array([1])], np.uint64, [[BIG], [1]]),
    ([np.array([BIG], np.uint64), np.array([-1])], object, [[BIG], [-1]]),
    ([np.array([1]), np.array([BIG, 2], np.uint64)[:1]], np.uint64, [[1], [BIG]]),
    (
        [np.array([[BIG, 0]], np.uint64), np.array([[3, 4]], np.int8)],
        np.uint64,
        [[[BIG, 0]], [[3, 4]]],
    ),
    # ints a float64 holds stay float64, as numpy stacks them
    ([np.array([2**52], np.uint64), np.array([-1])], np.float64, [[2.0**52], [-1.0]]),
    # ints beside floats stay floats
    ([np.array([BIG], np.uint64), np.array([0.5])], np.float64, [[float(BIG)], [0.5]]),
    # scalars, as before
    ([np.uint64(BIG), np.int64(1)], np.uint64, [BIG, 1]),
    ([BIG, -1], object, [BIG, -1]),
]


@pytest.mark.parametrize(("items", "dtype", "values"), CASES)
def test_every_form_keeps_big_ints_exact(items: list[Any], dtype: Any, values: list[Any]) -> None:
    outcomes = _forms(items)
    expected = (np.dtype(dtype), np.asarray(values, dtype=object).shape, values)
    assert outcomes == dict.fromkeys(outcomes, expected)


def test_arrays_of_no_common_dtype_make_objects_as_items_too() -> None:
    day, one = np.array(["2020-01-01"], "M8[D]"), np.array([1])
    outcomes = _forms([day, one])
    flat = outcomes["flat"]
    assert flat[0] == np.dtype(object) and flat[1] == (2, 1)
    assert outcomes == dict.fromkeys(outcomes, flat)
    # one class: batch_one_class joins arrays too, and now agrees rather than raising
    assert _outcome(lambda: batch_one_class([day, one], np.ndarray)) == flat


_DTYPES = [np.int8, np.uint8, np.int64, np.uint64, np.float64]
_VALUES = st.sampled_from([0, 1, -1, 2**52, 2**53 + 1, 2**63 - 1, 2**63, BIG, 2**64 - 1, 0.5])


@st.composite
def _arrays(draw: Any) -> list[np.ndarray]:
    shape = draw(st.sampled_from([(1,), (2,), (1, 2)]))
    count = draw(st.integers(1, 4))
    items = []
    for _ in range(count):
        dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
        size = int(np.prod(shape))
        values = draw(st.lists(_VALUES, min_size=size, max_size=size))
        try:
            with np.errstate(all="ignore"):
                array = np.array(values).astype(dtype).reshape(shape)
        except (OverflowError, ValueError):
            array = np.zeros(shape, dtype)
        items.append(array)
    return items


@settings(max_examples=300, deadline=None)
@given(_arrays())
def test_dict_and_tuple_leaves_batch_as_the_items_do(items: list[np.ndarray]) -> None:
    outcomes = _forms(items)
    assert outcomes == dict.fromkeys(outcomes, outcomes["flat"])

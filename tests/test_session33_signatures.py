"""Signatures that match their docstrings: shapes, argument checks, names, documented arguments.

The numpy numbers that annotations now take are type-checked in ``tests/user_typing``.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.buffer.store import Store
from episodes.buffer.view_store import ViewStore
from episodes.converter import bootstrap_truncated_rewards
from episodes.io.minari_io import export_minari, import_minari
from episodes.replay import SumTree
from episodes.runner.device_recorder import DeviceRecorder

DOCS = Path(__file__).parent.parent / "docs"

# ------------------------------------------------------------- bootstrap_truncated_rewards
BOOTSTRAP_REFUSED = {
    # name: (rewards, truncated, final_values, message)
    "a [1] mask bootstrapping every step": (
        np.zeros(3), np.array([True]), np.full(3, 2.0), r"truncated has shape \(1,\), expected \(3"
    ),
    "a transposed mask": (
        np.zeros((2, 3)), np.zeros((3, 2), bool), np.ones((2, 3)), r"truncated has shape \(3, 2\)"
    ),
    "values of another length": (
        np.zeros(3), np.array([0, 0, 1], bool), np.ones(2), r"final_values has shape \(2,\)"
    ),
    "one value for every step": (
        np.zeros(3), np.array([0, 0, 1], bool), np.float64(2.0), r"final_values has shape \(\)"
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BOOTSTRAP_REFUSED))
def test_bootstrap_refuses_shapes_that_would_broadcast(name: str) -> None:
    rewards, truncated, values, message = BOOTSTRAP_REFUSED[name]
    with pytest.raises(ValueError, match=message):
        bootstrap_truncated_rewards(rewards, truncated, values, 0.5)


BOOTSTRAP_SHAPES = {
    # name: (rewards, truncated, final_values, expected)
    "[T, 1] rewards, [T] mask and values": (
        np.zeros((3, 1)), np.array([0, 0, 1], bool), np.full(3, 2.0), [[0.0], [0.0], [1.0]]
    ),
    "[T] rewards, [T, 1] mask and values": (
        np.zeros(3), np.array([[0], [0], [1]], bool), np.full((3, 1), 2.0), [0.0, 0.0, 1.0]
    ),
    "[T, N] everywhere": (
        np.ones((2, 2)), np.array([[0, 1], [1, 0]], bool), np.full((2, 2), 4.0),
        [[1.0, 3.0], [3.0, 1.0]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BOOTSTRAP_SHAPES))
def test_bootstrap_keeps_the_rewards_shape(name: str) -> None:
    rewards, truncated, values, expected = BOOTSTRAP_SHAPES[name]
    out = bootstrap_truncated_rewards(rewards, truncated, values, 0.5)
    assert out.shape == rewards.shape
    assert out.tolist() == expected


# ------------------------------------------------------------------------------- SumTree
@pytest.mark.parametrize("capacity", [2.5, 2.0, -1, 0, True, "3", None, np.array([3])])
def test_sum_tree_refuses_a_capacity_that_is_no_int_from_1(capacity: Any) -> None:
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        SumTree(capacity)


@pytest.mark.parametrize("capacity", [1, np.int64(5), np.uint8(3)])
def test_sum_tree_takes_int_capacities(capacity: Any) -> None:
    tree = SumTree(capacity)
    assert tree.capacity == int(capacity) and type(tree.capacity) is int
    assert tree.leaves().tolist() == [0.0] * int(capacity)


UPDATE_REFUSED = {
    # name: (indices, values, error, message); a tree of capacity 3 (padded to 8 leaves)
    "lengths differ": ([0, 1], [1.0], ValueError, r"shape \(2,\).*shape \(1,\).*equally long"),
    "2-D indices": ([[0], [1]], [1.0, 2.0], ValueError, "1-D"),
    "2-D values": ([0, 1], [[1.0], [2.0]], ValueError, "1-D"),
    "one index": (1, 2.0, ValueError, "1-D"),
    "a negative value": ([0, 1], [1.0, -0.5], ValueError, r"finite and >= 0, got \[-0.5\]"),
    "NaN": ([2], [np.nan], ValueError, r"finite and >= 0, got \[nan\]"),
    "inf": ([2], [np.inf], ValueError, r"finite and >= 0, got \[inf\]"),
    "-inf": ([2], [-np.inf], ValueError, r"finite and >= 0, got \[-inf\]"),
    "a negative index": ([-1], [1.0], ValueError, r"in \[0, 3\), got \[-1\]"),
    "the capacity as index": ([3], [1.0], ValueError, r"in \[0, 3\), got \[3\]"),
    "a padding leaf": ([0, 7], [1.0, 1.0], ValueError, r"got \[7\]"),
    "past the padding": ([9], [1.0], ValueError, r"got \[9\]"),
    "uint64 past int64": (
        np.array([2**64 - 1], np.uint64), [1.0], ValueError, r"got \[18446744073709551615\]"
    ),
    "float indices": ([0.5], [1.0], TypeError, "indices must be integers, got dtype float64"),
    "bool indices": ([True], [1.0], TypeError, "got dtype bool"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(UPDATE_REFUSED))
def test_sum_tree_update_refuses_and_keeps_the_tree(name: str) -> None:
    indices, values, error, message = UPDATE_REFUSED[name]
    tree = SumTree(3)
    tree.update(np.array([0, 2]), np.array([1.0, 0.5]))
    before = (tree.leaves().tolist(), tree.total, tree.min, tree._sums[0].tolist())
    with pytest.raises(error, match=message):
        tree.update(np.asarray(indices), np.asarray(values))
    assert (tree.leaves().tolist(), tree.total, tree.min, tree._sums[0].tolist()) == before
    assert tree.find(np.array([0.5, 1.2])).tolist() == [0, 2]


def test_sum_tree_rebuild_refuses_values_that_are_no_priorities() -> None:
    tree = SumTree(3)
    tree.rebuild(np.array([1.0, 2.0]))
    for values in ([1.0, -1.0], [np.nan], [np.inf, 1.0]):
        with pytest.raises(ValueError, match="finite and >= 0"):
            tree.rebuild(np.array(values))
    assert (tree.leaves().tolist(), tree.total, tree.min) == ([1.0, 2.0, 0.0], 3.0, 1.0)


ODD_VALUES = [
    0.0, -0.0, 5e-324, -5e-324, 1e-300, 1.0, 1e308, np.finfo(np.float64).max, -1e-300, -1.0,
    np.inf, -np.inf, np.nan, -np.nan, np.float64(np.nan) * -1,
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.sampled_from(ODD_VALUES) | st.floats(allow_nan=True, allow_infinity=True),
        min_size=1,
        max_size=12,
    )
)
def test_sum_tree_value_check_is_finite_and_non_negative(values: list[float]) -> None:
    """The bit-pattern check refuses exactly what ``isfinite(v) and v >= 0`` refuses."""
    array = np.array(values, np.float64)
    tree = SumTree(16)
    indices = np.arange(len(array))
    if bool(np.all(np.isfinite(array) & (array >= 0))):
        # A total within 2**-20 of float64's largest value is refused, as an infinite one.
        # Divided by 16: fsum's exact sum of up to 12 values near float64's largest overflows
        # where a quarter of each would still (5 of them, quartered, overflowed).
        total = math.fsum(v / 16 for v in values)
        limit = np.finfo(np.float64).max * (1 - 2.0**-20) / 16
        if total > limit * (1 + 1e-9):
            with pytest.raises(ValueError, match="sum of all leaves infinite"):
                tree.update(indices, array)
            assert tree.total == 0.0 and tree.min == np.inf
            return
        if total > limit * (1 - 1e-9):  # at the limit, the rounding of the estimate decides
            return
        tree.update(indices, array)
        assert tree.leaves(indices).tolist() == array.tolist()
    else:
        with pytest.raises(ValueError, match="finite and >= 0"):
            tree.update(indices, array)
        assert tree.total == 0.0 and tree.min == np.inf


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.sampled_from([1, 5, 2048, 2049, 20_000]),
    seed=st.integers(0, 2**31),
    count=st.integers(0, 300),
)
def test_sum_tree_top_prefix_sums_and_minimum_are_exact(
    capacity: int, seed: int, count: int
) -> None:
    """The top's prefix sums equal ``np.cumsum`` bit for bit, the minimum the smallest
    positive leaf (the ufunc calls that replaced the wrappers compute the same)."""
    rng = np.random.default_rng(seed)
    tree = SumTree(capacity)
    values = np.zeros(capacity)
    for _ in range(3):
        idx = rng.integers(0, capacity, count)
        new = rng.uniform(0, 10, count) * (rng.random(count) < 0.8)
        tree.update(idx, new)
        values[idx] = new
        assert tree._starts[1:].tolist() == np.cumsum(tree._sums[-1]).tolist()
        positive = values[values > 0]
        assert tree.min == (positive.min() if len(positive) else np.inf)
        assert tree.leaves().tolist() == values.tolist()


def test_sum_tree_takes_empty_updates_and_negative_zero() -> None:
    tree = SumTree(4)
    tree.update(np.array([], np.int64), np.array([]))
    tree.update([], [])  # an empty list is float64 to numpy: nothing to truncate
    tree.update(np.array([1, 3], np.uint32), np.array([-0.0, 2.0]))
    assert (tree.total, tree.min, tree.leaves().tolist()) == (2.0, 2.0, [0.0, -0.0, 0.0, 2.0])


# ----------------------------------------------------------------------- store signatures
STORES = {
    "ListStore": lambda: ListStore([1]),
    "ArrayStore": lambda: ArrayStore.from_batch(np.array([1])),
    "ViewStore": lambda: ViewStore.from_batch(np.array([[1, 0]])[:, 0]),
}


@pytest.mark.parametrize("name", sorted(STORES))
def test_extend_batch_takes_the_protocol_keyword(name: str) -> None:
    store = STORES[name]()
    assert list(inspect.signature(type(store).extend_batch).parameters) == list(
        inspect.signature(Store.extend_batch).parameters
    )
    store.extend_batch(batch=np.array([2, 3]))
    assert [int(item) for item in store.items(0)] == [1, 2, 3]


# ----------------------------------------------------------------------- doc signatures
def _shown(fn: Any) -> str:
    """``fn``'s signature as the docs write it: names and defaults, without annotations."""
    parts, star = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"{fn.__name__}({', '.join(parts)})"


@pytest.mark.parametrize("doc", ["api.md", "format.md"])
@pytest.mark.parametrize("fn", [export_minari, import_minari], ids=lambda f: f.__name__)
def test_docs_show_the_minari_signatures(doc: str, fn: Any) -> None:
    text = (DOCS / doc).read_text()
    shown = re.findall(rf"\b{fn.__name__}\([^)]*\)", text)
    assert shown, f"{doc} shows no signature of {fn.__name__}"
    assert set(shown) == {_shown(fn)}


# ------------------------------------------------------------------------- Args sections
def _documented_args(cls: type) -> set[str]:
    doc = inspect.getdoc(cls) or ""
    section = doc.split("Args:\n", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^    (\w+):", section, re.M))


def _slot_segments() -> type:
    pytest.importorskip("ray")  # the distributed package needs it
    from episodes.distributed import shared_memory

    return shared_memory.SlotSegments


ARGS_OF = {"DeviceRecorder": lambda: DeviceRecorder, "SlotSegments": _slot_segments}


@pytest.mark.parametrize("name", sorted(ARGS_OF))
def test_every_init_argument_is_documented(name: str) -> None:
    cls = ARGS_OF[name]()
    params = {p for p in inspect.signature(cls).parameters if not p.startswith("_") and p != "self"}
    assert params - _documented_args(cls) == set()

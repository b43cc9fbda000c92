"""Joining a list chunk onto a numpy'd episode: the quicker paths equal the general ones.

``ArrayStore.extend`` writes the leaves ``staged_leaves`` cast and checked without passing
them through ``extend_batch``'s checks again (items of the column's dtype and item shape
stack with no cast), a batch leaf already of its column's dtype and item shape skips
``batch_misfit``, and ``concat`` takes the first and last observations from
the stores, compares arrays with the same bytes without a walk and reads a list chunk's items
from its list. Each must give what the general path gives: the same contents and dtypes, or
the same error (type and message), and a refused call changes neither episode nor column.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.plain_arrays import check_items_unmasked
from episodes.buffer.value_fit import batch_misfit, staged_rows
from episodes.episode import chunks
from episodes.structs import data_equal, unflatten

_ERRORS = (ValueError, TypeError, OverflowError, AssertionError)


class GeneralStore(ArrayStore):
    """The general path: items cast one by one, then ``extend_batch``, every leaf checked."""

    __slots__ = ()

    def extend(self, items: list[Any]) -> None:
        if not items or not self.typed:
            super().extend(items)
            return
        check_items_unmasked(items)
        rows = [staged_rows(self.leaves, item, self.structure) for item in items]
        leaves = [
            np.fromiter(values, object, len(values))
            if column.ndim == 1 and column.dtype == object
            else np.stack(values)
            for column, values in zip(self.leaves, zip(*rows))
        ]
        self.extend_batch(unflatten(self.structure, leaves), count=len(items))

    def _write_batch(self, arrays: list[np.ndarray], n: int) -> None:
        for column, leaf in zip(self.leaves, arrays):  # as extend_batch checked every leaf
            error = batch_misfit(column, leaf, n)
            if error is not None:
                self._forget_adopted_layout()
                raise error
        super()._write_batch(arrays, n)


def _masked(values: list[float], mask: list[int]) -> np.ma.MaskedArray:
    return np.ma.masked_array(values, mask=mask)


ODD_ITEMS: list[Any] = [
    0,
    1,
    -1,
    300,
    2**63,
    2**64,
    -(2**70),
    0.5,
    -0.0,
    1e40,
    float("nan"),
    float("inf"),
    True,
    None,
    "ab",
    b"ab",
    1 + 2j,
    np.int8(5),
    np.uint8(250),
    np.float32(1.5),
    np.float64(1e39),
    np.bool_(True),
    np.array(3.0),
    np.array([1.0, 2.0], np.float32),
    np.array([1.0, np.nan], np.float32),
    np.array([1e40, 0.0]),
    np.array([-0.0, 0.5], np.float32),
    np.array([1, 2]),
    np.array([-1, 2]),
    np.array([1, 2], np.uint8),
    np.array([0.5, 1.5], ">f4"),
    np.array([1.0, 2.0, 3.0], np.float32),
    np.array([[1.0, 2.0]], np.float32),
    np.array(["a", "b"]),
    np.array([None, 1], dtype=object),
    [1.0, 2.0],
    [1, 2],
    [2**70, 1],
    [1e40, 0.0],
    [None, 1.0],
    [1.0],
    (1.0, 2.0),
    _masked([1.0, 2.0], [0, 1]),
    _masked([1.0, 2.0], [0, 0]),
    {"a": np.zeros(2, np.float32), "b": 1},
    {"a": [0.5, 0.5], "b": 2**70},
    {"a": np.zeros(3, np.float32), "b": 1},
    {"a": np.zeros(2, np.float32), "c": 1},
    {"a": _masked([1.0, 2.0], [1, 0]), "b": 1},
    {"a": np.zeros(2), "b": None},
]

LAYOUTS: dict[str, Any] = {
    "float64 scalars": np.zeros(3),
    "float32 scalars": np.zeros(3, np.float32),
    "float16 scalars": np.zeros(3, np.float16),
    "int64 scalars": np.arange(3),
    "int8 scalars": np.zeros(3, np.int8),
    "uint8 scalars": np.zeros(3, np.uint8),
    "uint64 scalars": np.zeros(3, np.uint64),
    "bools": np.zeros(3, bool),
    "float32 rows": np.zeros((3, 2), np.float32),
    "float64 rows": np.zeros((3, 2)),
    "int64 rows": np.zeros((3, 2), np.int64),
    "uint8 rows": np.zeros((3, 2), np.uint8),
    "objects": np.array([None, 1, "x"], dtype=object),
    "strings": np.array(["ab", "c", ""]),
    "complex": np.zeros(3, complex),
    "records": np.zeros(3, [("a", "<f4"), ("b", "<i2")]),
    "dict": {"a": np.zeros((3, 2), np.float32), "b": np.arange(3)},
    "dict with objects": {"a": np.zeros((3, 2), np.float32), "b": np.array([1, None, 2**70])},
    "tuple": (np.zeros((3, 2)), np.zeros(3, np.int64)),
}


def _snapshot(store: ArrayStore) -> tuple[Any, ...]:
    views = [leaf.copy() for leaf in store.leaf_views()]
    return store.size, store.typed, [(v.dtype, v.shape) for v in views], views


def _same_snapshot(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a[:3] == b[:3] and all(data_equal(x, y) for x, y in zip(a[3], b[3]))


def _extended(cls: type[ArrayStore], layout: Any, items: list[Any]) -> tuple[Any, ...]:
    store = cls.from_batch(copy.deepcopy(layout))
    before = _snapshot(store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            store.extend(items)
        except _ERRORS as error:
            assert _same_snapshot(_snapshot(store), before), "a refused extend changed the store"
            return "error", type(error).__name__, str(error)
    return "ok", _snapshot(store)


def _fitting(layout: Any) -> list[Any]:
    """Items a column of ``layout`` takes: its own rows, as arrays, scalars and lists."""
    store = ArrayStore.from_batch(copy.deepcopy(layout))
    rows = [store.get(i) for i in range(len(store))]
    as_lists = [row.tolist() if isinstance(row, np.ndarray | np.generic) else row for row in rows]
    return [*rows, *as_lists]


@settings(max_examples=1500, deadline=None)
@given(layout=st.sampled_from(sorted(LAYOUTS)), data=st.data())
def test_store_extend_equals_the_general_path(layout: str, data: st.DataObject) -> None:
    pool = st.sampled_from(_fitting(LAYOUTS[layout])) | st.sampled_from(ODD_ITEMS)
    items = data.draw(st.lists(pool, min_size=1, max_size=4))
    quick = _extended(ArrayStore, LAYOUTS[layout], items)
    general = _extended(GeneralStore, LAYOUTS[layout], items)
    assert quick[0] == general[0], (quick, general)
    if quick[0] == "error":
        assert quick == general
    else:
        assert _same_snapshot(quick[1], general[1]), (quick, general)


BATCH_LEAVES: list[Any] = [
    np.zeros(2),
    np.array([1.5, 2.5], np.float32),
    np.full(2, 1e40),
    np.array([np.nan, -0.0], np.float32),
    np.array([-1, 300]),
    np.array([0.5, 1.0]),
    np.array([1, 2], np.uint8),
    np.array([2**63, 1], np.uint64),
    np.array([True, False]),
    np.array(["ab", "c"]),
    np.array([b"ab", b"c"]),
    np.array([1, None], dtype=object),
    np.array([1 + 1j, 2]),
    np.array([1.0, 2.0], ">f8"),
    np.zeros((2, 2), np.float32),
    np.full((2, 2), 1e40),
    np.zeros((2, 2), ">f4"),
    np.arange(4).reshape(2, 2),
    np.array([[0.5, 1.0], [1.0, 2.0]]),
    np.array([[-1, 1], [2, 3]]),
    np.zeros((2, 3)),
    np.zeros((1, 2), np.float32),
    np.zeros(3),
    np.zeros(2, [("a", "<f4"), ("b", "<i2")]),
    np.zeros(2, [("a", "<f8"), ("b", "<i2")]),
]


def _batch_extended(cls: type[ArrayStore], layout: Any, batch: Any) -> tuple[Any, ...]:
    store = cls.from_batch(copy.deepcopy(layout))
    before = _snapshot(store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            store.extend_batch(copy.deepcopy(batch))
        except _ERRORS as error:
            assert _same_snapshot(_snapshot(store), before), "a refused batch changed the store"
            return "error", type(error).__name__, str(error)
    return "ok", _snapshot(store)


@settings(max_examples=1000, deadline=None)
@given(
    layout=st.sampled_from(sorted(LAYOUTS)),
    leaves=st.lists(st.sampled_from(BATCH_LEAVES), min_size=2, max_size=2),
    nesting=st.sampled_from(["flat", "dict", "tuple"]),
)
def test_store_extend_batch_equals_the_general_path(
    layout: str, leaves: list[Any], nesting: str
) -> None:
    batch = {
        "flat": leaves[0],
        "dict": {"a": leaves[0], "b": leaves[1]},
        "tuple": (leaves[0], leaves[1]),
    }[nesting]
    quick = _batch_extended(ArrayStore, LAYOUTS[layout], batch)
    general = _batch_extended(GeneralStore, LAYOUTS[layout], batch)
    assert quick[0] == general[0], (quick, general)
    if quick[0] == "error":
        assert quick == general
    else:
        assert _same_snapshot(quick[1], general[1]), (quick, general)


@pytest.mark.parametrize(
    "dtype",
    [
        np.float16, np.float32, np.float64, np.int8, np.int64, np.uint8, np.uint64, np.bool_,
        np.complex64, "<U3", "S2", object, ">f4", "<M8[s]", [("a", "<f4"), ("b", "<i2")],
    ],
)  # fmt: skip
@pytest.mark.parametrize("item_shape", [(), (2,), (2, 1)])
def test_a_batch_of_the_column_layout_always_fits(dtype: Any, item_shape: tuple[int, ...]) -> None:
    # What lets ArrayStore skip batch_misfit for such a leaf.
    column = np.zeros((5, *item_shape), dtype)
    for n in (1, 3):
        leaf = np.ones((n, *item_shape), dtype) if np.dtype(dtype).names is None else column[:n]
        assert batch_misfit(column, leaf, n) is None


def test_a_view_store_keeps_its_extend_batch() -> None:
    # A subclass's extend_batch (a view store copies the block's views first) still runs.
    from episodes.buffer.view_store import ViewStore

    block = np.zeros((3, 2))
    store = ViewStore.from_batch(block[:, 0])
    store.extend([1.0, 2.0])
    assert store.detached and block.tolist() == [[0.0, 0.0]] * 3
    assert store.data.tolist() == [0.0, 0.0, 0.0, 1.0, 2.0]


# ------------------------------------------------------------------------ concat_episode
OBS_VALUES: list[Any] = [
    np.full(2, 0.3, np.float32),  # the episode's last row, then in other forms
    np.full(2, 0.3),
    [0.3, 0.3],
    np.array([0.3, np.float32(0.3)]),
    np.array([0.5, -0.5], np.float32),
    np.array([0.0, 0.0], np.float32),
    np.array([-0.0, 0.0], np.float32),
    np.array([np.nan, 0.0], np.float32),
    np.array([2.0, 0.0], np.float32),
    np.array([0.5, 0.5]),
    np.array([0.5, 0.5], ">f4"),
    np.array([1e40, 0.0]),
    np.array([0.5, 0.5, 0.5], np.float32),
    np.array([1, 0]),
    [0.5, 0.5],
    [1e40, 0.0],
    [None, 0.0],
    _masked([0.5, 0.5], [0, 1]),
    None,
    0.5,
]
ACTION_VALUES: list[Any] = [0, 1, 2, 3, -1, 2**70, 1.5, np.int64(1), np.uint8(2), True, None, "a"]
REWARD_VALUES: list[Any] = [0.5, -1, 2**70, 1e40, float("nan"), None, "x", np.float32(2.0)]


def _pair(
    spaces: bool, steps: list[tuple[Any, ...]], first: Any, lookback: Any = None
) -> tuple[Any, Any]:
    kwargs: dict[str, Any] = {}
    if spaces:
        kwargs = {
            "observation_space": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "action_space": gym.spaces.Discrete(3),
        }
    ep = SingleAgentEpisode(id_="same", **kwargs)
    ep.add_env_reset(np.zeros(2, np.float32))
    for t in range(1, 4):
        row = np.full(2, 0.1 * t, np.float32)
        ep.add_env_step(row, t % 3, 0.5 * t, extra_model_outputs={"v": float(t)})
    nxt = ep.cut(len_lookback_buffer=1)
    if first is not None:  # another first observation than the one the chunk was cut with
        nxt.observations.store.pylist[nxt.observations.lookback] = copy.deepcopy(first)
    if lookback is not None:  # the chunk's lookback is the episode's: neither checked nor joined
        nxt.observations.store.pylist[0] = copy.deepcopy(lookback)
        nxt.actions.store.pylist[0] = lookback
    for obs, action, reward, extra in steps:
        nxt.add_env_step(copy.deepcopy(obs), action, reward, extra_model_outputs={"v": extra})
    ep.to_numpy()
    return ep, nxt


def _old_check_in_spaces(episode: Any, other: Any) -> None:
    """``chunks._check_in_spaces`` before: every item read through the buffer's getter."""
    columns = (
        (episode.observations, other.observations, 1, "observation", episode._obs_check),
        (episode.actions, other.actions, 0, "action", episode._action_check),
    )
    for mine, theirs, skip, what, check in columns:
        if check is None or not mine.store.is_numpy or theirs.store.is_numpy:
            continue
        space = getattr(episode, f"{what}_space")
        for item in theirs.get(slice(skip, None)):
            if not check(item):
                raise ValueError(
                    f"cannot concat: other's {what} {item!r} is not in this episode's {what} "
                    f"space {space}; nothing was changed"
                )


def _joined(
    general: bool, spaces: bool, steps: list[tuple[Any, ...]], first: Any, lookback: Any
) -> Any:
    ep, nxt = _pair(spaces, steps, first, lookback)
    patches = []
    if general:
        for column in (ep.observations, ep.actions, ep.rewards, *ep.extra_model_outputs.values()):
            assert type(column.store) is ArrayStore
            column.store.__class__ = GeneralStore
        patches = [
            mock.patch.object(chunks, "_same_bytes", lambda a, b: False),
            mock.patch.object(chunks, "_check_in_spaces", _old_check_in_spaces),
        ]
    before = copy.deepcopy(ep), copy.deepcopy(nxt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for patch in patches:
            patch.start()
        try:
            ep.concat_episode(nxt)
        except _ERRORS as error:
            assert ep == before[0] and nxt == before[1], "a refused concat changed an episode"
            return "error", type(error).__name__, str(error)
        finally:
            for patch in patches:
                patch.stop()
    for column in (ep.observations, ep.actions, ep.rewards, *ep.extra_model_outputs.values()):
        column.store.__class__ = ArrayStore  # compared as the same class of store
    dtypes = [str(np.asarray(ep.get_observations()).dtype), str(ep.get_rewards().dtype)]
    return "ok", ep, dtypes


@settings(max_examples=600, deadline=None)
@given(
    spaces=st.booleans(),
    first=st.sampled_from([None] * len(OBS_VALUES) + OBS_VALUES),
    lookback=st.sampled_from([None] * len(OBS_VALUES) + OBS_VALUES),
    steps=st.lists(
        st.tuples(
            st.sampled_from(OBS_VALUES),
            st.sampled_from(ACTION_VALUES),
            st.sampled_from(REWARD_VALUES),
            st.sampled_from(REWARD_VALUES),
        ),
        min_size=0,
        max_size=3,
    ),
)
def test_concat_equals_the_general_path(
    spaces: bool, first: Any, lookback: Any, steps: list[tuple[Any, ...]]
) -> None:
    quick = _joined(False, spaces, steps, first, lookback)
    general = _joined(True, spaces, steps, first, lookback)
    assert quick[0] == general[0], (quick, general)
    if quick[0] == "error":
        assert quick == general
    else:
        assert quick[1] == general[1] and quick[2] == general[2]


@pytest.mark.parametrize(
    "name, last, first, joined",
    [
        ("the same row", [0.25, 0.0], None, True),
        ("-0.0 for 0.0: equal, other bytes", [0.0, 0.0], np.array([-0.0, 0.0], np.float32), True),
        ("the row as float64: equal in the space", [0.25, 0.0], np.array([0.25, 0.0]), True),
        ("the row as a list", [0.25, 0.0], [0.25, 0.0], True),
        ("another row", [0.25, 0.0], np.array([0.5, 0.0], np.float32), False),
        ("NaN for 0.0", [0.0, 0.0], np.array([np.nan, 0.0], np.float32), False),
        ("NaN for NaN", [np.nan, 0.0], np.array([np.nan, 0.0], np.float32), True),
        ("another shape", [0.25, 0.0], np.array([[0.25, 0.0]], np.float32), False),
        ("int32 zeros: equal by value", [0.0, 0.0], np.zeros(2, np.int32), True),
        ("int32, the same bytes", [1.0, 0.0], np.array([1065353216, 0], np.int32), False),
    ],
)
def test_join_observation_compared_in_the_space(
    name: str, last: list[float], first: Any, joined: bool
) -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    ep = SingleAgentEpisode(id_="same", observation_space=space)
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.add_env_step(np.array(last, np.float32), 1, 1.0)
    nxt = ep.cut(len_lookback_buffer=1)  # its first observation after a lookback one
    if first is not None:
        nxt.observations.store.pylist[1] = first
    nxt.add_env_step(np.zeros(2, np.float32), 0, 1.0)
    ep.to_numpy()
    if joined:
        ep.concat_episode(nxt)
        assert len(ep) == 2, name
    else:
        with pytest.raises(AssertionError, match="first observation differs"):
            ep.concat_episode(nxt)

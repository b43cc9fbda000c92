"""Padded index-list reads of numpy'd columns build their result once.

A read mixing stored items and fillers (an index list, or a negative-step slice, with ``fill``
and positions out of range) used to concatenate the gathered rows with a batch of fillers and
then reorder that copy: with fillers on both sides it peaked at about 3.2 times the result's
bytes. Each leaf is now allocated once, in the dtype the join gives, and takes the stored rows
(views of the column where the positions run on by one) and one filler row in place.

The property below checks the result against the previous implementation (kept here as
``_old_filled_gather``) for every read form and a wide range of columns, spaces and fills:
values, dtypes, shapes, nesting (dict key order, tuples against lists) and errors.
"""

from __future__ import annotations

import gc
import math
import tracemalloc
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer import reading
from episodes.buffer.array_store import ArrayStore
from episodes.structs import flatten, same_nesting, unflatten


def _old_filled_gather(
    store: Any,
    space: Any,
    positions: np.ndarray,
    valid: np.ndarray,
    filler: Any,
    fill: Any,
    one_hot_discrete: bool,
) -> Any:
    """The implementation before this change: join the stored rows and fillers, reorder."""
    taken = np.flatnonzero(valid)
    missing = np.flatnonzero(~valid)
    try:
        fillers = reading._fillers(store, space, fill, len(missing), one_hot_discrete)
    except (ValueError, TypeError):
        return None
    gathered = store.gather(positions[taken]) if len(taken) else fillers
    if one_hot_discrete and len(taken):
        gathered = store.encode_one_hot(gathered, space)
    plain = reading._plain
    if not (plain(gathered) and plain(filler) and same_nesting(gathered, filler)):
        return None
    stored_leaves = flatten(gathered)[0]
    filler_leaves = flatten(fillers)[0]
    item_leaves = flatten(filler)[0]
    if not len(stored_leaves) == len(filler_leaves) == len(item_leaves):
        return None
    for stored, padded, item in zip(stored_leaves, filler_leaves, item_leaves):
        own = np.asarray(item)
        if padded.dtype != own.dtype or padded.shape[1:] != own.shape:
            return None
        if stored.dtype.kind not in "biufc" or own.dtype.kind not in "biufc":
            return None
    if not len(taken):
        return fillers
    first_stored = bool(valid[0])
    parts = [gathered, fillers] if first_stored else [fillers, gathered]
    try:
        joined = store.join(parts)
    except (ValueError, TypeError):
        return None
    if taken[-1] == len(taken) - 1 if first_stored else missing[-1] == len(missing) - 1:
        return joined
    order = np.empty(len(positions), np.intp)
    stored_rows = np.arange(len(taken))
    filler_rows = np.arange(len(missing))
    if first_stored:
        order[taken], order[missing] = stored_rows, filler_rows + len(taken)
    else:
        order[missing], order[taken] = filler_rows, stored_rows + len(missing)
    leaves, structure = flatten(joined)
    return unflatten(structure, [leaf[order] for leaf in leaves])


def _canonical(value: Any) -> Any:
    """Everything a read's result is compared by: nesting, key order, dtypes, shapes, bytes."""
    if isinstance(value, dict):
        return ("dict", [(key, _canonical(part)) for key, part in value.items()])
    if isinstance(value, (tuple, list)):
        return (value.__class__.__name__, [_canonical(part) for part in value])
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("objects", value.shape, repr(value.tolist()))
        return ("array", value.dtype.str, value.shape, value.tobytes())
    return ("other", type(value).__name__, repr(value))


def _outcome(read: Any) -> Any:
    try:
        return ("ok", _canonical(read()))
    except Exception as error:  # noqa: BLE001 - the errors are compared too
        return ("error", type(error).__name__, str(error))


def _both(read: Any) -> tuple[Any, Any]:
    """The read's outcome now and with the previous implementation.

    A padded numpy read of stored items is C-contiguous now (checked here); before, a one-sided
    one could come in Fortran order (the layout ``np.concatenate`` picked from its parts), so
    only the bytes compare.
    """
    layouts: list[bool] = []

    def recorded(*args: Any) -> Any:
        out = filled_gather(*args)
        if out is not None and args[3].any():  # fillers alone are the filler batch, unchanged
            layouts.extend(leaf.flags.c_contiguous for leaf in flatten(out)[0])
        return out

    filled_gather = reading._filled_gather
    with mock.patch.object(reading, "_filled_gather", recorded):
        new = _outcome(read)
        with mock.patch.object(reading, "_VIEWS", 1):  # short runs of positions read as views
            assert _outcome(read) == new
    assert all(layouts)
    with mock.patch.object(reading, "_filled_gather", _old_filled_gather):
        old = _outcome(read)
    return new, old


# --------------------------------------------------------------------------- columns
_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_]
_FILLS = [0, 0.0, -1, 1, 2, 0.5, -3.25, True, False, math.nan, 1e40, 2**53 + 1, np.float32(1.5)]


def _values(draw: Any, dtype: Any, shape: tuple[int, ...], low: int = 0, high: int = 9) -> Any:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    values = rng.integers(low, high + 1, size=shape)
    if np.dtype(dtype).kind == "f":
        values = values + rng.choice([0.0, 0.5, 0.25], size=shape)
    return values.astype(dtype)


def _layout(draw: Any, data: np.ndarray) -> np.ndarray:
    """``data`` as it is, in Fortran order, byte-swapped, or as a strided view."""
    layout = draw(st.sampled_from(["c", "fortran", "swapped", "strided"]))
    if layout == "fortran":
        return np.asfortranarray(data)
    if layout == "swapped":
        return data.astype(data.dtype.newbyteorder())
    if layout == "strided":
        return np.repeat(data, 2, axis=-1)[..., ::2] if data.ndim > 1 else np.repeat(data, 2)[::2]
    return data


@st.composite
def _column(draw: Any) -> tuple[Any, Any, bool]:
    """(data of ``n`` items batched, space or None, whether a one-hot read fits)."""
    n = draw(st.integers(1, 7))
    kind = draw(
        st.sampled_from(["box", "discrete", "multi", "dict", "tuple", "nested", "none", "text"])
    )
    if kind == "text":
        words = draw(st.lists(st.text("abc", max_size=3), min_size=n, max_size=n))
        return np.array(words), gym.spaces.Text(5, charset="abc"), False
    shape = draw(st.sampled_from([(), (2,), (2, 3)]))
    box = gym.spaces.Box(-9, 9, shape, draw(st.sampled_from([np.float32, np.float64, np.int64])))
    box_data = _layout(draw, _values(draw, draw(st.sampled_from(_DTYPES)), (n, *shape)))
    start = draw(st.sampled_from([0, 2]))
    discrete = gym.spaces.Discrete(4, start=start)
    index_dtype = draw(st.sampled_from([np.int64, np.int32]))
    discrete_data = _values(draw, index_dtype, (n,), start, start + 3)
    if kind == "box":
        return box_data, box, False
    if kind == "discrete":
        return discrete_data, discrete, True
    if kind == "multi":
        data = _values(draw, np.int64, (n, 2), 0, 1)
        return data, gym.spaces.MultiDiscrete([2, 3]), True
    if kind == "dict":
        data = {"z": box_data, "a": discrete_data}
        return data, gym.spaces.Dict({"z": box, "a": discrete}), True
    if kind == "tuple":  # items recorded as tuples or as lists
        pair = (discrete_data, box_data) if draw(st.booleans()) else [discrete_data, box_data]
        return pair, gym.spaces.Tuple((discrete, box)), True
    if kind == "nested":
        data = {"t": (box_data, {"d": discrete_data}), "a": discrete_data}
        space = gym.spaces.Dict(
            {"t": gym.spaces.Tuple((box, gym.spaces.Dict({"d": discrete}))), "a": discrete}
        )
        return data, space, True
    return (box_data if draw(st.booleans()) else {"b": box_data, "a": discrete_data}), None, False


@st.composite
def _read(draw: Any) -> tuple[Any, Any, dict[str, Any]]:
    data, space, can_encode = draw(_column())
    n = len(flatten(data)[0][0])
    lookback = draw(st.integers(0, n))
    reach = 2 * n + 4  # out of range on both sides, whatever the lookback
    if draw(st.integers(0, 3)):
        index = st.integers(-n, n - 1) | st.integers(-reach, reach)  # in range, or most not
        indices: Any = draw(st.lists(index, min_size=2, max_size=16))
        if draw(st.booleans()):
            indices = np.array(indices, np.int64)
    else:
        ends = st.none() | st.integers(-reach, reach)
        step = draw(st.sampled_from([None, 2, -1, -1, -2, -3]))
        indices = slice(draw(ends), draw(ends), step)
    fill = draw(st.sampled_from(_FILLS))
    if space is None and draw(st.booleans()):  # a fill shaped like one item of the column
        fill = flatten(ArrayStore.from_batch(data).get(0))[0][0].tolist()
    options = {
        "fill": fill,
        "neg_index_as_lookback": draw(st.booleans()),
        "one_hot_discrete": can_encode and draw(st.booleans()),
    }
    return (data, space, lookback), indices, options


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_read(), st.integers(0, 3))
def test_padded_reads_equal_the_previous_implementation(read: Any, mode: int) -> None:
    (data, space, lookback), indices, options = read
    buffer = InfiniteLookbackBuffer(data, lookback=lookback, space=space)
    if not mode:  # list mode never takes the numpy path: compared all the same
        items = [buffer.store.get(i) for i in range(len(buffer.store))]
        buffer = InfiniteLookbackBuffer(items, lookback=lookback, space=space)
    new, old = _both(lambda: buffer.get(indices, **options))
    assert new == old


# --------------------------------------------------------------------------- named cases
def _padded_rows(column: np.ndarray, fill: Any, space: Any = None, hot: bool = False) -> Any:
    buffer = InfiniteLookbackBuffer(column, space=space)
    return buffer.get([-9, 0, 9, 1, -8], fill=fill, one_hot_discrete=hot)


CASES = [
    # (name, column, fill, space, one-hot, expected values, expected dtype)
    ("0.5 into ints", np.array([3, 4]), 0.5, None, False, [0.5, 3, 0.5, 4, 0.5], "float64"),
    ("NaN into float32", np.array([1, 2], np.float32), math.nan, None, False, None, "float64"),
    ("bool column, int fill", np.array([True, False]), 7, None, False, [7, 1, 7, 0, 7], "int64"),
    ("bool column, bool fill", np.array([True, True]), False, None, False, None, "bool"),
    ("2**53+1 kept", np.array([2**53 + 1, 1]), 0, None, False, None, "int64"),
    (
        "int64 rewards under a float32 Box take no rounding",
        np.array([2**53 + 1, 5]),
        0,
        gym.spaces.Box(-np.inf, np.inf, (), np.float32),
        False,
        [0, 2**53 + 1, 0, 5, 0],
        "int64",
    ),
    (
        "one-hot Discrete",
        np.array([1, 0]),
        0,
        gym.spaces.Discrete(2),
        True,
        [[0, 0], [0, 1], [0, 0], [1, 0], [0, 0]],
        "float32",
    ),
]


@pytest.mark.parametrize(
    ("column", "fill", "space", "hot", "values", "dtype"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_padded_rows_keep_the_join_dtype(
    column: np.ndarray, fill: Any, space: Any, hot: bool, values: Any, dtype: str
) -> None:
    out = _padded_rows(column, fill, space, hot)
    assert out.dtype == np.dtype(dtype)
    assert out.flags.c_contiguous and out.flags.writeable
    assert not np.shares_memory(out, column)
    if values is not None:
        assert out.tolist() == values
    new, old = _both(lambda: _padded_rows(column, fill, space, hot))
    assert new == old


def test_padded_dict_read_keeps_the_first_parts_key_order() -> None:
    column = {"b": np.arange(3, dtype=np.int32), "a": np.ones((3, 2), np.float32)}
    buffer = InfiniteLookbackBuffer(column)
    for indices in ([5, 0, 1, -9], [0, 5, 1, 2], [-9, 1, 9]):
        out = buffer.get(indices, fill={"b": 0, "a": [0.5, 0.5]})
        new, old = _both(lambda indices=indices: buffer.get(indices, fill={"b": 0, "a": [0, 0]}))
        assert new == old
        assert [leaf.shape[0] for leaf in out.values()] == [len(indices)] * 2


# --------------------------------------------------------------------------- memory
def _peak_ratio(read: Any) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / out.nbytes


@pytest.mark.parametrize(
    ("name", "positions", "bound"),
    [
        # Fillers on both sides, positions running on by one: views of the column, no gather.
        ("both sides", np.arange(-2050, 2050), 1.3),
        ("one side", np.arange(0, 2050), 1.3),
        # Positions in another order: the gathered rows and the result, no more.
        ("shuffled", np.random.default_rng(0).permutation(np.arange(-2050, 2050)), 1.8),
    ],
)
def test_a_padded_read_allocates_its_result_once(
    name: str, positions: np.ndarray, bound: float
) -> None:
    steps = 2000
    episode = SingleAgentEpisode(
        observations=np.ones((steps + 1, 48), np.float32),
        actions=np.zeros(steps, np.int64),
        rewards=np.ones(steps),
        observation_space=gym.spaces.Box(-np.inf, np.inf, (48,), np.float32),
        len_lookback_buffer=0,
    ).to_numpy()

    def read() -> np.ndarray:
        return episode.get_observations(positions, fill=0.0, neg_index_as_lookback=True)

    expected = np.zeros((len(positions), 48), np.float32)
    expected[(positions >= 0) & (positions <= steps)] = 1.0
    np.testing.assert_array_equal(read(), expected)
    assert _peak_ratio(read) < bound  # 3.2x (both sides), 2.1x (one side) before

"""Slice reads of a numpy'd buffer are views wherever no filler is needed, whatever the step.

docs/contract.md §3.1: a read of a numpy'd column for an int or a slice without fillers returns
views of the stored arrays, as RLlib's does. A negative step used to gather (a copy); it now
reads the forward window its positions span, stepped backwards. The values must be exactly what
the gather gave, so the property test checks every read against that gather
(``reading.read_positions`` over ``indexing.slice_positions``, the path a negative step took
before): same containers, keys, dtypes, shapes and values, the same item objects in list mode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, indexing
from episodes.buffer import reading
from episodes.structs import flatten

SPACES: dict[str, gym.Space[Any] | None] = {
    "none": None,
    "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    "discrete": gym.spaces.Discrete(4, start=1),
    "nested_dict": gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "inner": gym.spaces.Dict(
                {
                    "k": gym.spaces.Discrete(3),
                    "pair": gym.spaces.Tuple(
                        (gym.spaces.MultiDiscrete([2, 3]), gym.spaces.Box(0, 9, (), np.int32))
                    ),
                }
            ),
        }
    ),
}


def _buffer(space_name: str, size: int, lookback: int, finalized: bool, seed: int) -> Any:
    space = SPACES[space_name]
    if space is None:
        items: list[Any] = [float(i) + 0.5 for i in range(size)]
    else:
        space.seed(seed)
        items = [space.sample() for _ in range(size)]
    buf = InfiniteLookbackBuffer(items, lookback=min(lookback, size), space=space)
    if finalized:
        buf.finalize()
    return buf


def _assert_identical(got: Any, want: Any, path: str = "read") -> None:
    """Same container types, key order, leaf types, dtypes, shapes and values (NaN included)."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for key in want:
            _assert_identical(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want)):
            _assert_identical(a, b, f"{path}[{i}]")
    elif isinstance(want, (np.ndarray, np.generic)):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), path
        assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), path
    else:
        assert got == want or (got != got and want != want), f"{path}: {got!r} != {want!r}"


def _gathered(buf: Any, index: slice, neg: bool, fill: Any, one_hot: bool) -> Any:
    """What the read gave before the fix: the addressed positions gathered one by one."""
    positions = indexing.slice_positions(
        index,
        lookback=buf.lookback,
        total=buf.len_incl_lookback(),
        neg_index_as_lookback=neg,
        fill=fill is not None,
    )
    return reading.read_positions(buf.store, buf.space, positions, fill, one_hot, buf.lookback)


def _reads_stored_items_only(buf: Any, index: slice, neg: bool, fill: Any) -> bool:
    """Whether the read is served from stored items alone (contract §3.1: then a view).

    Without ``fill`` the positions are clipped, so every one holds an item. A positive step with
    ``fill`` pads the whole run between the bounds before it steps (§3.3), so a filler the step
    skips still makes it a padded, copied read; a negative step gathers only its own positions.
    """
    step = 1 if index.step is None else index.step
    run = slice(index.start, index.stop) if step > 0 else index
    positions = indexing.slice_positions(
        run,
        lookback=buf.lookback,
        total=buf.len_incl_lookback(),
        neg_index_as_lookback=neg,
        fill=fill is not None,
    )
    inside = bool(((positions >= 0) & (positions < buf.len_incl_lookback())).all())
    return inside and len(positions) > 0


@st.composite
def reads(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(0, 7), label="size")
    # Bounds mostly inside the data and steps mostly negative: the reads a view can serve.
    bound = st.none() | st.integers(-size - 3, size + 3) | st.integers(-size, size)
    space_name = draw(st.sampled_from(sorted(SPACES)), label="space")
    start, stop = draw(bound, label="start"), draw(bound, label="stop")
    step = draw(st.sampled_from([None, 1, 2, 3, -1, -1, -2, -2, -3]), label="step")
    if start is not None and stop is not None and (start - stop) * (step or 1) > 0:
        # Mostly bounds in the step's direction: a read that is not empty.
        if draw(st.booleans(), label="swap bounds"):
            start, stop = stop, start
    return {
        "space": space_name,
        "size": size,
        "lookback": draw(st.integers(0, 3), label="lookback"),
        "finalized": draw(st.booleans(), label="finalized"),
        "seed": draw(st.integers(0, 3), label="seed"),
        "index": slice(start, stop, step),
        "neg": draw(st.booleans(), label="neg_index_as_lookback"),
        "fill": draw(st.sampled_from([None, None, 0]), label="fill"),
        "one_hot": space_name != "none"
        and draw(st.sampled_from([False, False, True]), label="one_hot"),
    }


@settings(derandomize=True, deadline=None, max_examples=2500)
@given(reads())
def test_slice_reads_keep_their_values_and_view_where_no_filler_is_needed(
    case: dict[str, Any],
) -> None:
    buf = _buffer(case["space"], case["size"], case["lookback"], case["finalized"], case["seed"])
    index, neg, fill, one_hot = case["index"], case["neg"], case["fill"], case["one_hot"]
    got = buf.get(index, neg_index_as_lookback=neg, fill=fill, one_hot_discrete=one_hot)
    stored_only = _reads_stored_items_only(buf, index, neg, fill)
    negative = index.step is not None and index.step < 0
    if negative or fill is None or stored_only:
        # A positive step with fillers takes the padding path, whose list of fillers and items
        # need not come back in the gather's containers; every other read must.
        _assert_identical(got, _gathered(buf, index, neg, fill, one_hot))
    if not stored_only or one_hot:
        return  # fillers or one-hot vectors: new arrays (contract §3.1)
    if buf.finalized:
        stored = flatten(buf.data)[0]
        for leaf, column in zip(flatten(got)[0], stored, strict=True):
            assert np.shares_memory(leaf, column), "a read needing no filler must be a view"
    else:
        gathered = _gathered(buf, index, neg, None, False)
        assert all(a is b for a, b in zip(got, gathered, strict=True))


# Named cases: storage [0.0, 1.0 | 2.0, 3.0, 4.0] (lookback 2), numpy'd.
VIEWS = [
    ("reversed", slice(2, 0, -1), False, None, [4.0, 3.0]),
    ("open_reversed", slice(None, None, -1), False, None, [4.0, 3.0, 2.0]),
    ("into_the_lookback", slice(0, -3, -1), True, None, [2.0, 1.0, 0.0]),
    ("step_minus_two", slice(None, None, -2), False, None, [4.0, 2.0]),
    ("fill_not_needed", slice(2, -1, -1), True, 0.0, [4.0, 3.0, 2.0]),
    ("clipped", slice(9, 0, -1), False, None, [4.0, 3.0]),
]


@pytest.mark.parametrize("name,index,neg,fill,expected", VIEWS, ids=[v[0] for v in VIEWS])
def test_negative_step_read_is_a_view(
    name: str, index: slice, neg: bool, fill: Any, expected: list[float]
) -> None:
    buf = InfiniteLookbackBuffer([0.0, 1.0, 2.0, 3.0, 4.0], lookback=2)
    buf.finalize()
    got = buf.get(index, neg_index_as_lookback=neg, fill=fill)
    assert got.tolist() == expected
    assert np.shares_memory(got, buf.data)
    buf.data[:] = -1.0  # the stored data itself: a later write shows through, as for step 1
    assert got.tolist() == [-1.0] * len(expected)


def test_nested_negative_step_read_views_every_leaf() -> None:
    space = SPACES["nested_dict"]
    buf = _buffer("nested_dict", 5, 1, True, 0)
    got = buf.get(slice(3, 0, -2))
    stored = flatten(buf.data)[0]
    assert all(np.shares_memory(a, b) for a, b in zip(flatten(got)[0], stored, strict=True))
    assert space is not None and got["pos"].shape == (2, 2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fill": 0.0, "index": slice(5, 1, -1)},  # ts=5 and 4 are fillers
        {"one_hot_discrete": True, "index": slice(2, 0, -1)},
    ],
    ids=["fillers", "one_hot"],
)
def test_reads_that_build_new_arrays_stay_copies(kwargs: dict[str, Any]) -> None:
    buf = InfiniteLookbackBuffer([0, 1, 2, 3, 0], lookback=2, space=gym.spaces.Discrete(4))
    buf.finalize()
    index = kwargs.pop("index")
    got = buf.get(index, **kwargs)
    assert not np.shares_memory(got, buf.data)


# contract.md §3.6's named case of a 2-D MultiDiscrete: one-hots laid end to end, row-major.
@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_one_hot_of_a_2d_multidiscrete_named_case(mode: str) -> None:
    space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 2]]))
    buf = InfiniteLookbackBuffer([np.array([[1, 0], [3, 1]])], space=space)
    if mode == "numpy":
        buf.finalize()
    got = buf.get(0, one_hot_discrete=True)
    assert got.dtype == np.float32
    assert got.tolist() == [0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1]
    assert np.asarray(buf.get(one_hot_discrete=True)).shape == (1, 11)

"""Refusals name the argument in the library's words, and leave the object as it was (contract §8).

Each case used to surface numpy's, torch's or Python's own words ("setting an array element
with a sequence", "'int' object is not iterable", "truth value of an array", "Expected one of
cpu, cuda", an OverflowError), or, for ``SumTree.rebuild``, to zero the leaves before refusing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.replay import PrioritizedEpisodeReplayBuffer, SumTree

BOX = gym.spaces.Box(-10, 10, (2,), np.float32)
RAW = ("inhomogeneous", "setting an array element", "not iterable", "truth value", "Expected one")


def _state(buf: InfiniteLookbackBuffer) -> Any:
    state = buf.get_state()
    return (repr(state), buf.finalized, len(buf), buf.len_incl_lookback(), buf.lookback)


def _finalized(items: list[Any], space: gym.Space[Any] | None = None) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer(items, space=space)
    buf.finalize()
    return buf


# -------------------------------------------------------------------------------- SumTree
def test_sum_tree_rebuild_with_too_many_values_is_refused_before_any_change() -> None:
    tree = SumTree(3)
    tree.rebuild(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"values.*capacity=3"):
        tree.rebuild(np.arange(5.0))
    assert tree.leaves().tolist() == [1.0, 2.0, 3.0]
    assert (tree.total, tree.min) == (6.0, 1.0)
    assert tree.find(np.array([0.5, 2.5, 5.5])).tolist() == [0, 1, 2]


def test_sum_tree_rebuild_with_two_dimensional_values_is_refused() -> None:
    tree = SumTree(4)
    tree.rebuild(np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="1-D"):
        tree.rebuild(np.ones((2, 2)))
    assert tree.leaves().tolist() == [1.0, 1.0, 0.0, 0.0] and tree.total == 2.0


# ----------------------------------------------------------------- InfiniteLookbackBuffer
BUFFER_CASES: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], Any, type, str]] = {
    # (make the buffer, call on it, error, message)
    "empty Box column extend([row, None])": (
        lambda: _finalized([], BOX),
        lambda b: b.extend([np.ones(2, np.float32), None]),
        ValueError,
        r"None does not fit a numpy column of dtype float32 and item shape \(2,\)",
    ),
    "empty Box column extend([None, row])": (
        lambda: _finalized([], BOX),
        lambda b: b.extend([None, np.ones(2, np.float32)]),
        ValueError,
        r"None does not fit a numpy column .* item shape \(2,\)",
    ),
    "empty Box column extend([row, row of 3])": (
        lambda: _finalized([], BOX),
        lambda b: b.extend([np.ones(2, np.float32), np.ones(3, np.float32)]),
        ValueError,
        r"shape \(3,\) .* does not fit a numpy column",
    ),
    "empty Dict column extend with a ragged part": (
        lambda: _finalized([], gym.spaces.Dict({"a": BOX, "b": gym.spaces.Discrete(3)})),
        lambda b: b.extend([{"a": np.ones(2, np.float32), "b": 1}, {"a": [1, [2]], "b": 1}]),
        ValueError,
        r"\[1, \[2\]\] does not fit a numpy column",
    ),
    "empty untyped column extend ragged rows": (
        lambda: _finalized([]),
        lambda b: b.extend([np.zeros(2), np.zeros(3)]),
        ValueError,
        r"do not stack: item 0 has shape \(2,\), item 1 has shape \(3,\)",
    ),
    "finalize of ragged rows": (
        lambda: InfiniteLookbackBuffer([np.zeros(2), np.zeros(3)]),
        lambda b: b.finalize(),
        ValueError,
        r"do not stack: item 0 has shape \(2,\), item 1 has shape \(3,\)",
    ),
    "finalize of a row then None (Box space)": (
        lambda: InfiniteLookbackBuffer([np.zeros(2), np.zeros(2), None], space=BOX),
        lambda b: b.finalize(),
        ValueError,
        r"item 0 has shape \(2,\), item 2 has type NoneType",
    ),
    "stacked() of ragged dict parts": (
        lambda: InfiniteLookbackBuffer([{"a": np.zeros(2)}, {"a": np.zeros(3)}]),
        lambda b: b.stacked(),
        ValueError,
        r"do not stack: item 0 has .*\(2,\).*item 1 has .*\(3,\)",
    ),
    "list-mode extend(5)": (
        lambda: InfiniteLookbackBuffer([1, 2]),
        lambda b: b.extend(5),
        TypeError,
        "extend: items must be a list .* got int",
    ),
    "list-mode extend(None)": (
        lambda: InfiniteLookbackBuffer([1, 2]),
        lambda b: b.extend(None),
        TypeError,
        "extend: items must be a list .* got NoneType",
    ),
    "get(neg_index_as_lookback=array)": (
        lambda: InfiniteLookbackBuffer([1, 2], lookback=1),
        lambda b: b.get(-1, neg_index_as_lookback=np.array([1, 0])),
        TypeError,
        "neg_index_as_lookback must be a bool",
    ),
    "get(slice, neg_index_as_lookback=array)": (
        lambda: InfiniteLookbackBuffer([1, 2], lookback=1),
        lambda b: b.get(slice(-1, None), neg_index_as_lookback=np.array([1, 0])),
        TypeError,
        "neg_index_as_lookback must be a bool",
    ),
    "get(one_hot_discrete=array)": (
        lambda: InfiniteLookbackBuffer([1, 2], lookback=1),
        lambda b: b.get(-1, one_hot_discrete=np.array([1, 0])),
        TypeError,
        "one_hot_discrete must be a bool",
    ),
    "set(neg_index_as_lookback=array)": (
        lambda: InfiniteLookbackBuffer([1, 2], lookback=1),
        lambda b: b.set(5, at_indices=-1, neg_index_as_lookback=np.array([1, 0])),
        TypeError,
        "neg_index_as_lookback must be a bool",
    ),
}


@pytest.mark.parametrize("case", list(BUFFER_CASES))
def test_buffer_refusals_name_the_problem_and_change_nothing(case: str) -> None:
    make, call, error, message = BUFFER_CASES[case]
    buf, before = make(), _state(make())
    with pytest.raises(error, match=message) as raised:
        call(buf)
    assert not any(raw in str(raised.value) for raw in RAW), str(raised.value)
    assert _state(buf) == before


def test_numpy_bools_are_still_flags() -> None:
    buf = InfiniteLookbackBuffer([1, 2, 3], lookback=1)
    assert buf.get(-1, neg_index_as_lookback=np.True_) == 1
    buf.set(9, at_indices=-1, neg_index_as_lookback=np.True_)
    assert buf.get(-1, neg_index_as_lookback=True) == 9


def test_an_empty_column_refusing_an_extend_still_takes_good_rows() -> None:
    buf = _finalized([], BOX)
    with pytest.raises(ValueError):
        buf.extend([np.ones(2, np.float32), None])
    buf.extend([np.ones(2, np.float32)])
    assert buf.get().tolist() == [[1.0, 1.0]] and buf.get().dtype == np.float32


def test_to_numpy_names_the_column_and_the_items() -> None:
    ep = SingleAgentEpisode(observations=[np.zeros(2), np.zeros(3)], actions=[0], rewards=[1.0])
    with pytest.raises(ValueError, match=r"observations cannot be stacked: .*item 1 has shape"):
        ep.to_numpy()
    assert not ep.is_numpy


# ---------------------------------------------------------------------------------- replay
def _replay() -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
    )
    return buf


@pytest.mark.parametrize(
    ("priorities", "indices", "name"),
    [([1.0, [1, 2]], [0, 1], "priorities"), ([1.0, 2.0], [0, [1, 2]], "indices")],
    ids=["ragged priorities", "ragged indices"],
)
def test_update_priorities_with_ragged_values_names_them(
    priorities: Any, indices: Any, name: str
) -> None:
    buf = _replay()
    before = buf.get_priorities(np.array([0, 1])).tolist()
    with pytest.raises(ValueError, match=f"{name} must be a 1-d sequence of numbers") as raised:
        buf.update_priorities(priorities, indices)
    assert not any(raw in str(raised.value) for raw in RAW)
    assert buf.get_priorities(np.array([0, 1])).tolist() == before


@pytest.mark.parametrize(
    ("device", "error"), [("abc", ValueError), ("cuda:x", ValueError), (2.5, TypeError)]
)
def test_sample_with_a_bad_device_names_device(device: Any, error: type) -> None:
    pytest.importorskip("torch")
    buf = _replay()
    state = buf.rng.bit_generator.state
    with pytest.raises(error, match="device must be a torch device") as raised:
        buf.sample(1, device=device)
    assert not any(raw in str(raised.value) for raw in RAW)
    if error is ValueError:  # still a RuntimeError, as torch's own error was
        assert isinstance(raised.value, RuntimeError)
    assert buf.rng.bit_generator.state == state and buf.get_counters()["sampled_timesteps"] == 0
    assert buf.sample(1, device="cpu")["obs"].device.type == "cpu"


# ------------------------------------------------------------------------------ connectors
def _first(episodes: Any, batch: Any) -> Any:
    return batch


def _second(episodes: Any, batch: Any) -> Any:
    return batch


@pytest.mark.parametrize("index", ["1", 1.0, True, None], ids=repr)
def test_pipeline_insert_refuses_a_non_int_index(index: Any) -> None:
    pipe = ConnectorPipeline([_first])
    with pytest.raises(TypeError, match="insert index must be an int"):
        pipe.insert(index, _second)
    assert pipe.connectors == [_first]


@pytest.mark.parametrize(
    ("index", "order"),
    [(10**30, [_first, _second]), (-(10**30), [_second, _first]), (np.int64(0), [_second, _first])],
    ids=["huge", "huge negative", "numpy int"],
)
def test_pipeline_insert_clamps_a_huge_index_as_a_list_does(index: Any, order: list[Any]) -> None:
    pipe = ConnectorPipeline([_first])
    pipe.insert(index, _second)  # list.insert would raise OverflowError past a C ssize_t
    assert pipe.connectors == order


def test_an_int_read_pads_as_list_and_slice_reads_do() -> None:
    rows = InfiniteLookbackBuffer([np.zeros(2), np.ones(2)])
    rows.finalize()
    for index in (5, [5], slice(0, 4)):
        with pytest.raises(ValueError, match="cannot pad this buffer's items"):
            rows.get(index, fill=[9.0, 9.0, 9.0])
    assert rows.get(5, fill=[7.0, 7.0]) == [7.0, 7.0]  # a fitting fill comes as given
    assert rows.get([5], fill=[7.0, 7.0]).tolist() == [[7.0, 7.0]]


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("count, visible", [(-1, 0), (2, -1)])
def test_copy_tail_refuses_negative_counts(numpy: bool, count: int, visible: int) -> None:
    buffer = InfiniteLookbackBuffer([1, 2, 3])
    if numpy:
        buffer.finalize()
    with pytest.raises(ValueError, match="copy_tail: count and visible must be >= 0"):
        buffer.copy_tail(count, visible)
    assert buffer.copy_tail(2, 1).get() == [3] or buffer.copy_tail(2, 1).get().tolist() == [3]


def test_an_int_read_gives_a_fitting_fill_as_it_is() -> None:
    objects = InfiniteLookbackBuffer([None, None])
    objects.finalize()
    nested = InfiniteLookbackBuffer([{"a": 1, "h": np.zeros(2)}, {"a": 2, "h": np.ones(2)}])
    nested.finalize()
    fill = {}
    assert objects.get(10, fill=fill) is fill
    nested_fill = {"a": 0, "h": [0.0, 0.0]}
    assert nested.get(9, fill=nested_fill) is nested_fill


@pytest.mark.parametrize(
    "make",
    [
        lambda: FlattenObservations(one_hot_discrete=0),
        lambda: FlattenObservations(inference=1),
        lambda: PrevActionsPrevRewards(one_hot_discrete="no"),
        lambda: FrameStack(2, inference="yes"),
        lambda: FrameStack(2, flatten=1),
        lambda: AddLearnerColumns(extra_model_outputs="no"),
    ],
)
def test_connector_flags_are_bools_when_made(make) -> None:
    with pytest.raises(
        TypeError, match=r"^(one_hot_discrete|inference|flatten|extra_model_outputs) must be a"
    ):
        make()

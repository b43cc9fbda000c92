"""Bools among integer indices, times and priorities are refused, not read as 0 and 1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.integers import holds_bool
from episodes.replay.sampling import int_array


def _buffer() -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 1, 0],
            rewards=[1.0, 2.0, 3.0],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    buf.update_priorities([2.0, 3.0, 4.0], [0, 1, 2])
    return buf


def _snapshot(buf: PrioritizedEpisodeReplayBuffer) -> Any:
    return buf.get_priorities([0, 1, 2]).tolist(), buf.max_priority, buf.get_counters()


# (entry point, the mixed list it is given, the word the refusal names)
CALLS: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("get_transitions", lambda buf, v: buf.get_transitions(v), "indices"),
    ("uniform get_transitions", lambda buf, v: _uniform(buf).get_transitions(v), "indices"),
    ("locate", lambda buf, v: buf.locate("a", v), "times"),
    ("uniform locate", lambda buf, v: _uniform(buf).locate("a", v), "times"),
    ("update_priorities indices", lambda buf, v: buf.update_priorities([5.0, 6.0], v), "indices"),
    ("get_priorities", lambda buf, v: buf.get_priorities(v), "indices"),
]
MIXED = [
    [True, 2],
    [False, 2],
    (2, True),
    [np.True_, 2],
    [np.int64(1), np.False_],
    [np.array(True), 2],
    [2, torch.tensor(False)],
]


def _uniform(buf: PrioritizedEpisodeReplayBuffer) -> EpisodeReplayBuffer:
    uniform = EpisodeReplayBuffer(10)
    uniform.add(buf.get_episodes()[0])
    return uniform


@pytest.mark.parametrize("call", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("values", MIXED, ids=repr)
def test_bools_among_indices_and_times_are_refused(call: Any, values: Any) -> None:
    _, method, word = call
    buf = _buffer()
    before = _snapshot(buf)
    with pytest.raises(ValueError, match=rf"^{word} must be integers, got dtype bool$"):
        method(buf, values)
    assert _snapshot(buf) == before
    with pytest.raises(ValueError, match=rf"^{word} must be integers, got dtype bool$"):
        method(buf, [True, False])  # all bools: the same words as before


@pytest.mark.parametrize(
    "priorities", [[1.0, np.False_, 2.0], [True, 2.0, 3.0], (1, 2, np.True_), [1.0, 2, False]]
)
def test_bools_among_priorities_are_refused(priorities: Any) -> None:
    buf = _buffer()
    buf.sample(3)
    before = _snapshot(buf)
    for indices in ([0, 1, 2], None):  # given, or the last sample's
        with pytest.raises(ValueError, match=r"^priorities must be real numbers, got dtype bool$"):
            buf.update_priorities(priorities, indices)
        assert _snapshot(buf) == before
    with pytest.raises(ValueError, match=r"^priorities must be real numbers, got dtype bool$"):
        buf.update_priorities([True, False, True], [0, 1, 2])  # all bools, as before


def test_integers_and_numbers_are_still_taken() -> None:
    buf = _buffer()
    assert buf.get_transitions([np.int64(1), 2])["indices"].tolist() == [1, 2]
    assert buf.locate("a", (np.uint8(2), 0)).tolist() == [2, 0]
    assert buf.get_priorities(np.array([2, 0])).tolist() == [4.0, 2.0]
    buf.update_priorities([1, 2.5, np.float32(3.0)], torch.tensor([0, 1, 2]))
    assert buf.get_priorities([[0, 1], [2, 2]]).tolist() == [[1.0, 2.5], [3.0, 3.0]]
    with pytest.raises(ValueError, match="got dtype bool"):
        buf.get_priorities([[0, 1], [2, True]])


def test_int_array_table() -> None:
    for values, expected in [([3, 1], [3, 1]), ((0,), [0]), (np.array([2], np.uint8), [2])]:
        assert int_array(values, "indices").tolist() == expected
    for values in ([True], [1, True], [[1, 2], [np.False_, 3]], (np.int32(1), True)):
        with pytest.raises(ValueError, match="must be integers"):
            int_array(values, "indices")


_ITEM = st.one_of(
    st.integers(-(2**40), 2**40),
    st.booleans(),
    st.sampled_from([np.True_, np.False_, np.int64(3), np.int8(-1), np.uint16(7)]),
)


@given(st.lists(_ITEM, min_size=1, max_size=8))
def test_holds_bool_fast_path_agrees_with_items(items: list[Any]) -> None:
    one_by_one = any(isinstance(item, (bool, np.bool_)) for item in items)
    assert holds_bool(items) == one_by_one == holds_bool(tuple(items))
    assert holds_bool([items]) == one_by_one  # nested: judged item by item
    if not one_by_one:
        assert int_array(items, "indices").tolist() == [int(i) for i in items]
    else:
        with pytest.raises(ValueError, match="must be integers"):
            int_array(items, "indices")

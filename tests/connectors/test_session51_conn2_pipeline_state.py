"""``ConnectorPipeline.get_state``/``set_state``: the states of its stateful connectors.

RLlib's pipelines have them; a port checkpointing a pipeline that holds a filter with running
statistics needs them. The state is keyed by each stateful connector's position and class
name; connectors without ``get_state`` are skipped; a state of another pipeline shape is a
``ValueError`` with every connector left as it was.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, ConnectorPipeline, FrameStack


class Running:
    """A stateful connector: a running sum of the rewards it was shown (kept as plain state)."""

    def __init__(self, total: float = 0.0):
        self.total = total

    def update(self, episodes: list[SingleAgentEpisode]) -> None:
        self.total += float(sum(sum(ep.get_rewards()) for ep in episodes))

    def __call__(self, episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> Any:
        return {**batch, f"total_{id(self)}": self.total}

    def get_state(self) -> dict[str, Any]:
        return {"total": self.total}

    def set_state(self, state: dict[str, Any]) -> None:
        self.total = float(state["total"])


class Other(Running):
    """Another class of stateful connector, same state layout."""


class Picky(Running):
    """Refuses a negative total, after writing it (a half-set connector)."""

    def set_state(self, state: dict[str, Any]) -> None:
        self.total = float(state["total"])
        if self.total < 0:
            raise ValueError("Picky: a total is never negative")


class ReadOnly:
    """Has a state to read but none to take."""

    def __call__(self, episodes: Any, batch: Any) -> Any:
        return batch

    def get_state(self) -> dict[str, Any]:
        return {"fixed": 1}


def _stateless(episodes: Any, batch: Any) -> Any:
    return batch


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.float32(i) for i in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        len_lookback_buffer=0,
    )


def _totals(pipe: ConnectorPipeline) -> list[float]:
    return [c.total for c in pipe if isinstance(c, Running)]


# ------------------------------------------------------------------------------ get_state
GET_CASES = {
    "empty": ([], {}),
    "shipped connectors hold no state": ([FrameStack(2), AddLearnerColumns()], {}),
    "a function is skipped": ([_stateless, Running(2.0)], {"1:Running": {"total": 2.0}}),
    "two of one class stay apart": (
        [Running(1.0), _stateless, Running(3.0)],
        {"0:Running": {"total": 1.0}, "2:Running": {"total": 3.0}},
    ),
    "a pipeline inside a pipeline": (
        [ConnectorPipeline([_stateless, Other(5.0)])],
        {"0:ConnectorPipeline": {"1:Other": {"total": 5.0}}},
    ),
}


@pytest.mark.parametrize("case", list(GET_CASES))
def test_get_state_keys_stateful_connectors_by_position_and_class(case: str) -> None:
    connectors, expected = GET_CASES[case]
    assert ConnectorPipeline(connectors).get_state() == expected


def test_a_restored_pipeline_gives_the_same_batch() -> None:
    trained = ConnectorPipeline([FrameStack(2), Running(), _stateless, Other()])
    trained[1].update([_episode()])
    trained[3].update([_episode(), _episode()])
    state = pickle.loads(pickle.dumps(trained.get_state()))  # as a checkpoint holds it
    fresh = ConnectorPipeline([FrameStack(2), Running(), _stateless, Other()])
    fresh.set_state(state)
    assert _totals(fresh) == [6.0, 12.0]
    assert fresh.get_state() == trained.get_state()
    out = fresh([_episode()])
    assert sorted(v for k, v in out.items() if k.startswith("total_")) == [6.0, 12.0]


def test_a_copy_shares_the_connectors_and_so_their_state() -> None:
    pipe = ConnectorPipeline([Running(1.0)])
    copied = copy.copy(pipe)
    copied.set_state({"0:Running": {"total": 4.0}})
    assert pipe.get_state() == {"0:Running": {"total": 4.0}}


# ------------------------------------------------------------------------------ set_state
def _three() -> ConnectorPipeline:
    return ConnectorPipeline([Running(1.0), _stateless, Other(2.0)])


REFUSED = {
    "a key missing": ({"0:Running": {"total": 9.0}}, r"lacks \['2:Other'\]"),
    "a key too many": (
        {"0:Running": {"total": 9.0}, "2:Other": {"total": 9.0}, "3:Running": {"total": 9.0}},
        r"holds \['3:Running'\], which this pipeline does not",
    ),
    "another class at a position": (
        {"0:Running": {"total": 9.0}, "2:Running": {"total": 9.0}},
        r"lacks \['2:Other'\], it holds \['2:Running'\]",
    ),
    "positions moved by a stateless connector": (
        {"1:Running": {"total": 9.0}, "3:Other": {"total": 9.0}},
        r"this pipeline's keys: \['0:Running', '2:Other'\]",
    ),
    "an empty state": ({}, r"lacks \['0:Running', '2:Other'\]"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_state_of_another_shape_is_refused_and_nothing_changes(case: str) -> None:
    state, match = REFUSED[case]
    pipe = _three()
    with pytest.raises(ValueError, match=match) as caught:
        pipe.set_state(state)
    assert "ConnectorPipeline.set_state" in str(caught.value)
    assert _totals(pipe) == [1.0, 2.0]  # the first one's key fitted: still not applied


@pytest.mark.parametrize("state", [None, [("0:Running", {"total": 1.0})], "state"], ids=repr)
def test_a_state_that_is_no_mapping_is_a_type_error(state: Any) -> None:
    pipe = _three()
    with pytest.raises(TypeError, match="set_state takes a dict as get_state gives it, got"):
        pipe.set_state(state)
    assert _totals(pipe) == [1.0, 2.0]


def test_a_connector_without_set_state_is_refused_before_any_is_set() -> None:
    pipe = ConnectorPipeline([Running(1.0), ReadOnly()])
    state = {"0:Running": {"total": 7.0}, "1:ReadOnly": {"fixed": 1}}
    with pytest.raises(ValueError, match="connector 1:ReadOnly has get_state but no set_state"):
        pipe.set_state(state)
    assert _totals(pipe) == [1.0]


def test_a_connector_refusing_its_entry_puts_every_state_back() -> None:
    pipe = ConnectorPipeline([Running(1.0), Picky(2.0), Other(3.0)])
    state = {"0:Running": {"total": 7.0}, "1:Picky": {"total": -1.0}, "2:Other": {"total": 8.0}}
    with pytest.raises(ValueError, match="never negative"):
        pipe.set_state(state)
    assert _totals(pipe) == [1.0, 2.0, 3.0]


KINDS = {"running": Running, "other": Other, "stateless": None}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(list(KINDS)), max_size=6),
    st.lists(st.floats(-1e6, 1e6), min_size=6, max_size=6),
    st.lists(st.sampled_from(list(KINDS)), max_size=6),
)
def test_a_state_restores_exactly_the_pipelines_of_its_shape(
    kinds: list[str], totals: list[float], others: list[str]
) -> None:
    def build(names: list[str], values: list[float]) -> ConnectorPipeline:
        return ConnectorPipeline(
            [_stateless if KINDS[n] is None else KINDS[n](v) for n, v in zip(names, values)]
        )

    source = build(kinds, totals)
    target = build(others, [0.5] * 6)
    before = target.get_state()

    def keys(names: list[str]) -> set[str]:
        return {f"{i}:{KINDS[n].__name__}" for i, n in enumerate(names) if KINDS[n] is not None}

    if keys(kinds) == keys(others):
        target.set_state(source.get_state())
        assert target.get_state() == source.get_state()
    else:
        with pytest.raises(ValueError, match="not this pipeline's"):
            target.set_state(source.get_state())
        assert target.get_state() == before

"""AddLearnerColumns refuses chunks of two agents under one episode id, as the converter does.

A chunk without steps that ended its episode ends the chunk of its id whose steps stop where it
starts. Two agents of one game recorded under the game's id would have one agent's end close
the other agent's chunk: a wrong ``terminateds`` row, with no error. Such chunks are refused
(a ``ValueError`` naming both chunks and agents); chunks whose ``agent_id`` is None are read as
before, and one id per agent gives each agent its own end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, ConnectorPipeline
from episodes.episode.agent_ids import check_agent_ids


def _obs(value: float) -> np.ndarray:
    return np.array([value], np.float32)


def _agent(id_: Any, agent: Any, actions: list[int]) -> SingleAgentEpisode:
    """One agent's first chunk of a game: two steps, no reward yet."""
    return SingleAgentEpisode(
        id_=id_,
        agent_id=agent,
        multi_agent_episode_id="game",
        observations=[_obs(0), _obs(2), _obs(4)],
        actions=actions,
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
    )


def _game(red: Any, blue: Any, blue_id: Any = "game") -> list[SingleAgentEpisode]:
    """Red and blue move together; blue is killed (a chunk without steps ends it), red goes on
    for one truncated step. Red's chunks are under ``"game"``, blue's under ``blue_id``."""
    a, b = _agent("game", red, [0, 1]), _agent(blue_id, blue, [1, 1])
    b_end = b.cut()
    b_end.is_terminated = True
    a_next = a.cut()
    a_next.add_env_step(_obs(6), 0, 1.0, truncated=True)
    return [a, b, b_end, a_next]


def _terminateds(chunks: list[SingleAgentEpisode]) -> list[bool]:
    return AddLearnerColumns(["terminateds"])(chunks, {})["terminateds"].tolist()


# (chunks, the two chunks and agents the message names)
REFUSED = {
    "red first": (lambda: _game("red", "blue"), "chunk 0 and chunk 1", "'red' and 'blue'"),
    "blue first": (
        lambda: [_game("red", "blue")[i] for i in (1, 0, 2, 3)],
        "chunk 0 and chunk 1",
        "'blue' and 'red'",
    ),
    "end before steps": (
        lambda: [_game("red", "blue")[i] for i in (2, 0, 1, 3)],
        "chunk 0 and chunk 1",
        "'blue' and 'red'",
    ),
    "no stepless end": (
        lambda: [_game("red", "blue")[i] for i in (0, 1)],
        "chunk 0 and chunk 1",
        "'red' and 'blue'",
    ),
    "an unnamed chunk between": (
        lambda: [_game("red", None, blue_id="game")[1], *_game("red", "blue")],
        "chunk 1 and chunk 2",
        "'red' and 'blue'",
    ),
    "a list id": (
        lambda: [_agent(["g", 1], "red", [0, 1]), _agent(["g", 1], "blue", [1, 0])],
        "chunk 0 and chunk 1",
        "'red' and 'blue'",
    ),
    "int agents": (
        lambda: [_agent("g", 0, [0, 1]), _agent("x", 1, [0, 1]), _agent("g", 1, [1, 0])],
        "chunk 0 and chunk 2",
        "0 and 1",
    ),
}


@pytest.mark.parametrize(("make", "chunks", "agents"), REFUSED.values(), ids=REFUSED)
def test_two_agents_under_one_id_are_refused(make: Any, chunks: str, agents: str) -> None:
    episodes = make()
    batch: dict[str, Any] = {"kept": 1}
    with pytest.raises(ValueError) as err:
        AddLearnerColumns()(episodes, batch)
    message = str(err.value)
    assert message.startswith(f"AddLearnerColumns: {chunks} share the episode id")
    assert f"belong to agents {agents}," in message
    assert "give each agent's episode its own id_" in message
    assert batch == {"kept": 1}  # nothing written


def test_a_pipeline_passes_the_refusal_on() -> None:
    with pytest.raises(ValueError, match="^AddLearnerColumns: chunk 0 and chunk 1 share"):
        ConnectorPipeline([AddLearnerColumns()])(_game("red", "blue"))


def test_with_an_id_each_the_killed_agent_ends_its_own_chunk() -> None:
    # rows: red's 2 steps, blue's 2 steps, red's truncated step
    chunks = _game("red", "blue", blue_id="game/blue")
    assert _terminateds(chunks) == [False, False, False, True, False]
    out = AddLearnerColumns(["truncateds", "eps_id"])(chunks, {})
    assert out["truncateds"].tolist() == [False, False, False, False, True]
    assert out["eps_id"].tolist() == ["game"] * 2 + ["game/blue"] * 2 + ["game"]


# chunks whose agent_id is None say nothing of their agent: read as one episode's, as before
UNJUDGED = {
    # one id: the end closes every chunk of it whose steps stop where it starts (both here)
    "both unnamed, one id": (lambda: _game(None, None), [False, True, False, True, False]),
    "both unnamed, an id each": (
        lambda: _game(None, None, blue_id="game/blue"),
        [False, False, False, True, False],
    ),
    "blue unnamed": (lambda: _game("red", None), [False, True, False, True, False]),
    "red unnamed": (lambda: _game(None, "blue"), [False, True, False, True, False]),
}


@pytest.mark.parametrize(("make", "want"), UNJUDGED.values(), ids=UNJUDGED)
def test_chunks_without_an_agent_id_are_read_as_before(make: Any, want: list[bool]) -> None:
    assert _terminateds(make()) == want


def test_one_agent_chunks_and_end_under_its_id() -> None:
    steps = _agent("red-1", "red", [0, 1])
    end = steps.cut()
    end.is_terminated = True
    out = AddLearnerColumns()([steps, end], {})
    assert out["terminateds"].tolist() == [False, True]
    assert out["actions"].tolist() == [0, 1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["g", "h", ("g",)]), st.sampled_from([None, "red", "blue"])),
        max_size=6,
    )
)
def test_refused_exactly_when_an_id_has_two_named_agents(chunks: list[tuple[Any, Any]]) -> None:
    episodes = [_agent(id_, agent, [0, 1]) for id_, agent in chunks]
    agents: dict[Any, set[Any]] = {}
    for id_, agent in chunks:
        if agent is not None:
            agents.setdefault(id_, set()).add(agent)
    clash = any(len(named) > 1 for named in agents.values())
    for call in (
        lambda: AddLearnerColumns()(episodes, {}),
        lambda: check_agent_ids(episodes, "f"),
        lambda: check_agent_ids([episodes[:2], episodes[2:]], "f"),  # per-env lists: same rule
    ):
        if clash:
            with pytest.raises(ValueError, match="share the episode id"):
                call()
        else:
            call()

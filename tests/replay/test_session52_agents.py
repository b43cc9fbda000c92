"""An add's refusal of a second agent under one id depends on the chunks, not on the adds.

The buffer remembers, per stored episode, the first agent any of its chunks named (the
episode's own ``agent_id`` stays the first chunk's, as ``concat_episode`` keeps it); the memory
goes through get_state/set_state and save/load, and leaves with the episode at eviction.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.saved_files import seal

from .reference import assert_states_equal
from .test_session49_replay_fixes import game_chunk

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def chunks_of(agents: list[Any], id_: Any = "game") -> list[Any]:
    """One episode's consecutive chunks, the i-th of ``agents[i]``."""
    return [game_chunk(agent, 2 * i, id_=id_) for i, agent in enumerate(agents)]


def refused(chunks: list[Any]) -> bool:
    """Whether one add of ``chunks`` into a new buffer is refused."""
    try:
        EpisodeReplayBuffer(1000).add(chunks)
    except ValueError:
        return True
    return False


def saved_and_loaded(buf: Any) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        buf.save(Path(tmp) / "saved")
        return type(buf).load(Path(tmp) / "saved")


def state_copy(buf: Any) -> Any:
    copy = type(buf)(7)
    copy.set_state(buf.get_state())
    return copy


# --------------------------------------------------------------- the hypothesis example
@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
def test_a_second_agent_after_unnamed_chunks_is_refused_in_a_later_add_too(cls):
    chunks = chunks_of([None, None, None, "A", "B"])
    with pytest.raises(ValueError, match="chunk 3 and chunk 4 share the episode id 'game' but "
                       "belong to agents 'A' and 'B'"):  # fmt: skip
        cls(100).add(chunks)
    buf = cls(100, seed=0)
    buf.add(chunks[:4])
    before = buf.get_state()
    with pytest.raises(ValueError, match=r"^chunk 0 \(episode 'game'\) belongs to agent 'B', but "
                       "the buffer holds that episode for agent 'A'"):  # fmt: skip
        buf.add(chunks[4:])
    assert_states_equal(buf.get_state(), before)
    buf.add(game_chunk("A", 8))  # the first agent named continues it
    (ep,) = buf.get_episodes()
    assert ep.agent_id is None and len(ep) == 10  # the first chunk's, as concat_episode
    assert all(ep.agent_id is None for ep in buf.sample(3, sample_episodes=True))


# ------------------------------------------------------------------- property test
STEPS = st.lists(
    st.tuples(st.sampled_from(["g", ("h", 1)]), st.sampled_from([None, "A", "B", 0])),
    min_size=1,
    max_size=8,
)
TRIPS = st.lists(st.sampled_from(["none", "state", "save"]), min_size=8, max_size=8)
FOUND = [("g", None)] * 3 + [("g", "A"), ("g", "B")]  # the example hypothesis found


@settings(max_examples=80, deadline=None)
@given(
    cls=st.sampled_from(BUFFERS),
    steps=STEPS,
    cuts=st.lists(st.booleans(), min_size=7, max_size=7),
    trips=TRIPS,
)
@example(EpisodeReplayBuffer, FOUND, [False] * 3 + [True] + [False] * 3, ["none"] * 8)
@example(EpisodeReplayBuffer, FOUND, [False] * 3 + [True] + [False] * 3, ["none", "state"] * 4)
@example(PrioritizedEpisodeReplayBuffer, FOUND, [True] * 7, ["save"] * 8)
@example(
    EpisodeReplayBuffer,
    [("g", None), ("h", "A"), ("g", "A"), ("h", 0)],
    [True] * 7,
    ["state", "save"] * 4,
)
def test_an_add_is_refused_iff_one_add_of_the_whole_prefix_would_be(cls, steps, cuts, trips):
    """Chunks of one or more ids, random agents, random adds (a cut after chunk i where
    ``cuts[i]``), round trips between adds."""
    counts: dict[Any, int] = {}
    chunks = []
    for id_, agent in steps:
        t0 = 2 * counts.get(id_, 0)
        counts[id_] = counts.get(id_, 0) + 1
        chunks.append(game_chunk(agent, t0, id_=id_))
    bounds = [0, *(i + 1 for i, cut in enumerate(cuts[: len(chunks) - 1]) if cut), len(chunks)]
    buf = cls(1000, seed=0)
    for (a, b), trip in zip(zip(bounds, bounds[1:]), trips):
        if trip == "state":
            buf = state_copy(buf)
        elif trip == "save":
            buf = saved_and_loaded(buf)
        before = buf.get_state()
        if refused(chunks[:b]):
            with pytest.raises(ValueError, match="its own id_"):
                buf.add(chunks[a:b])
            assert_states_equal(buf.get_state(), before)
            assert not refused(chunks[:a])
            return
        buf.add(chunks[a:b])
    firsts = {id_: agent for id_, agent in reversed(steps)}  # the first chunk's agent
    assert {ep.id_: ep.agent_id for ep in buf.get_episodes()} == firsts


# ------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("trip", [state_copy, saved_and_loaded], ids=["state", "save"])
def test_the_first_agent_named_survives_a_round_trip(cls, trip):
    buf = cls(100, seed=0)
    buf.add(chunks_of([None, None]))
    buf.add(game_chunk("A", 4))
    episodes = buf.get_state()["episodes"]
    assert episodes["agent_id"] == [None] and episodes["first_agent"] == ["A"]
    restored = trip(buf)
    assert_states_equal(restored.get_state(), buf.get_state())
    before = restored.get_state()
    with pytest.raises(ValueError, match="holds that episode for agent 'A'"):
        restored.add(game_chunk("B", 6))
    assert_states_equal(restored.get_state(), before)
    restored.add(game_chunk("A", 6))
    assert restored.get_episodes()[0].agent_id is None


def test_a_save_records_only_first_agents_that_are_not_the_agent_id(tmp_path):
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of(["A", "A"], id_="named") + chunks_of([None, ("B", 2)], id_=("later", 1)))
    buf.save(tmp_path / "saved")
    meta = json.loads((tmp_path / "saved" / "replay.json").read_text())
    assert meta["first_agents"] == [[{"__ep_tuple__": ["later", 1]}, {"__ep_tuple__": ["B", 2]}]]
    loaded = EpisodeReplayBuffer.load(tmp_path / "saved")
    assert loaded.get_state()["episodes"]["first_agent"] == ["A", ("B", 2)]
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of(["A", None]))
    buf.save(tmp_path / "plain")
    assert "first_agents" not in json.loads((tmp_path / "plain" / "replay.json").read_text())


def test_a_first_agent_the_dataset_cannot_store_is_refused_before_writing(tmp_path):
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of([None, b"agent"]))
    with pytest.raises(Exception, match=r"agent b'agent', the first any chunk of stored "
                       "episode 'game' named, cannot be saved"):  # fmt: skip
        buf.save(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


# ------------------------------------------------------------------------- old formats
@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    ("stored", "other_refused"),
    [(["A"], True), ([None, "A"], False), ([None], False)],
    ids=["named_first", "named_later_unknown_to_the_state", "none_named"],
)
def test_a_state_without_first_agent_gives_each_episode_its_agent_id(cls, stored, other_refused):
    buf = cls(100, seed=0)
    buf.add(chunks_of(stored))
    state = buf.get_state()
    del state["episodes"]["first_agent"]  # a state made before it was kept
    copy = cls(7)
    copy.set_state(state)
    later = game_chunk("B", 2 * len(stored))
    if other_refused:
        with pytest.raises(ValueError, match="for agent 'A'"):
            copy.add(later)
    else:
        copy.add(later)
        assert copy.get_state()["episodes"]["first_agent"] == ["B"]


def test_a_state_whose_first_agent_contradicts_the_agent_id_is_refused():
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of(["A"]))
    state = buf.get_state()
    state["episodes"]["first_agent"] = ["B"]
    copy = EpisodeReplayBuffer(100)
    before = copy.get_state()
    with pytest.raises(ValueError, match=r"episodes\['first_agent'\]\[0\] is 'B' for an episode "
                       "of agent_id 'A'"):  # fmt: skip
        copy.set_state(state)
    assert_states_equal(copy.get_state(), before)


def rewritten(path: Path, change: Any) -> None:
    """``path``'s replay.json changed by ``change`` and sealed again (a consistent file)."""
    file = path / "replay.json"
    meta = json.loads(file.read_text())
    change(meta)
    del meta["crc32"]
    file.write_text(json.dumps(seal(meta)))


def test_a_save_without_first_agents_loads_with_each_agent_id(tmp_path):
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of([None, "A"]))
    buf.save(tmp_path / "saved")
    rewritten(tmp_path / "saved", lambda meta: meta.pop("first_agents"))  # an older save
    loaded = EpisodeReplayBuffer.load(tmp_path / "saved")
    loaded.add(game_chunk("B", 4))  # nothing tells the agent: joins, as before
    assert loaded.get_episodes()[0].agent_id is None


DAMAGED = [
    ("no_list", {"a": 1}, "first_agents: {'a': 1}"),
    ("no_pair", [["game"]], r"first_agents\[0\] is no \[id, agent\] pair"),
    ("not_stored", [["other", "A"]], r"first_agents\[0\] names episode 'other', which is not"),
    ("none_agent", [["game", None]], "gives episode 'game' the first agent None"),
    ("unhashable_id", [[["game"], "A"]], r"first_agents\[0\]: "),
]


@pytest.mark.parametrize(("record", "match"), [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED])
def test_a_damaged_first_agents_record_is_refused(tmp_path, record, match):
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of([None, "A"]))
    buf.save(tmp_path / "saved")
    rewritten(tmp_path / "saved", lambda meta: meta.update(first_agents=record))
    with pytest.raises(ValueError, match="damaged replay buffer") as info:
        EpisodeReplayBuffer.load(tmp_path / "saved")
    assert info.match(match)


def test_a_record_for_an_episode_that_names_its_agent_is_refused(tmp_path):
    buf = EpisodeReplayBuffer(100)
    buf.add(chunks_of(["A"]))
    buf.save(tmp_path / "saved")
    rewritten(tmp_path / "saved", lambda meta: meta.update(first_agents=[["game", "B"]]))
    with pytest.raises(ValueError, match="but its agent_id is 'A'"):
        EpisodeReplayBuffer.load(tmp_path / "saved")


# ---------------------------------------------------------------------------- eviction
@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
def test_the_first_agent_leaves_with_its_evicted_episode(cls):
    buf = cls(4, seed=0)
    buf.add(chunks_of([None, "A"]))
    buf.add(chunks_of([None, None], id_="x"))  # 8 steps > 4: "game" evicted, its row freed
    assert buf.get_episode_ids() == ["x"]
    assert buf.get_state()["episodes"]["first_agent"] == [None]
    buf.add(game_chunk("B", 4), on_evicted="restart")  # a new episode under the id
    assert [ep.agent_id for ep in buf.get_episodes()] == ["B"]
    buf.add(chunks_of([None, "C"], id_="y"))  # evicts "x"; "y" may take a freed row
    assert buf.get_state()["episodes"]["first_agent"] == ["C"]

"""Replay fixes: chunks of two agents under one episode id, a reused id of a finished episode,
and priorities kept by save/load whichever import of the prioritized module made the buffer."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import episodes.replay.prioritized as prioritized_module
from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

from .reference import assert_states_equal

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def game_chunk(agent: Any, t0: int = 0, n: int = 2, *, id_: Any = "game", **flags: Any) -> Any:
    """Steps ``t0 .. t0 + n`` of a game whose observation at time t is ``[t]`` (any agent)."""
    return SingleAgentEpisode(
        id_,
        observations=[np.full(1, t, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[float(t) for t in range(t0, t0 + n)],
        agent_id=agent,
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


# ------------------------------------------------------------------ agents under one id
REFUSED = [
    # (name, chunks of a first add, chunks of a second add)
    ("stored_then_other_agent", [game_chunk("A")], [game_chunk("B", 2, terminated=True)]),
    ("both_in_one_add", [], [game_chunk("A"), game_chunk("B")]),
    ("successor_in_one_add", [], [game_chunk("A"), game_chunk("B", 2)]),
    ("stored_then_none_then_other", [game_chunk("A")], [game_chunk(None, 2), game_chunk("B", 4)]),
    ("ending_chunk_of_other_agent", [game_chunk("A")], [game_chunk("B", 2, 0, terminated=True)]),
    ("int_agents", [game_chunk(0)], [game_chunk(1, 2)]),
]


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("first", "second"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_chunks_of_another_agent_under_an_id_are_refused(cls, first, second):
    buf = cls(100, seed=0)
    if first:
        buf.add(first)
    before = buf.get_state()
    with pytest.raises(ValueError, match="'game'") as info:
        buf.add(second)
    message = str(info.value)
    owner = first[0].agent_id if first else second[0].agent_id
    assert f"agent {owner!r}" in message or f"agents {owner!r}" in message
    assert repr(second[-1].agent_id) in message
    assert "its own id_" in message
    assert_states_equal(buf.get_state(), before)


def test_the_refusal_names_the_stored_episode_or_the_earlier_chunk():
    buf = EpisodeReplayBuffer(100)
    buf.add(game_chunk("A"))
    with pytest.raises(ValueError, match=r"^chunk 1 \(episode 'game'\) belongs to agent 'B', but "
                       "the buffer holds that episode for agent 'A'"):  # fmt: skip
        buf.add([game_chunk(None, 2), game_chunk("B", 4)])
    with pytest.raises(ValueError, match="^chunk 0 and chunk 2 share the episode id 'other' but "
                       "belong to agents 'A' and 'B'"):  # fmt: skip
        EpisodeReplayBuffer(100).add(
            [game_chunk("A", id_="other"), game_chunk(None, 2, id_="other"),
             game_chunk("B", 4, id_="other")]
        )  # fmt: skip


JOINED = [
    # (name, agent of the stored chunk, agents of the chunks continuing it)
    ("same_agent", "A", ["A", "A"]),
    ("chunk_without_agent", "A", [None, "A"]),
    ("stored_without_agent", None, ["B", "B"]),
    ("none_at_all", None, [None, None]),
    ("equal_agents_of_other_types", 1, [1.0, np.int64(1)]),
]


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("stored", "later"), [c[1:] for c in JOINED], ids=[c[0] for c in JOINED])
def test_chunks_without_an_agent_or_of_the_same_agent_join_as_before(cls, stored, later):
    buf = cls(100, seed=0)
    buf.add(game_chunk(stored))
    buf.add(game_chunk(later[0], 2))
    buf.add([game_chunk(later[1], 4, terminated=True)])
    (ep,) = buf.get_episodes()
    assert ep.get_actions().tolist() == [0, 1, 0, 1, 0, 1]
    assert ep.is_terminated and buf.get_num_timesteps() == 6
    assert ep.agent_id == stored  # the first chunk's, as concat_episode keeps it


def test_a_restored_buffer_knows_its_episodes_agents(tmp_path):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(game_chunk("A"))
    copy = EpisodeReplayBuffer(100)
    copy.set_state(buf.get_state())
    buf.save(tmp_path / "saved")
    for restored in (copy, EpisodeReplayBuffer.load(tmp_path / "saved")):
        with pytest.raises(ValueError, match="holds that episode for agent 'A'"):
            restored.add(game_chunk("B", 2))
        restored.add(game_chunk("A", 2))
        assert restored.get_num_timesteps() == 4


def test_an_evicted_episode_id_may_start_another_agents_episode():
    buf = EpisodeReplayBuffer(3)
    buf.add([game_chunk("A"), game_chunk("X", id_="x")])  # 4 steps > 3: "game" evicted
    assert buf.get_episode_ids() == ["x"]
    buf.add(game_chunk("B", 5), on_evicted="restart")  # a new episode under the id
    assert [ep.agent_id for ep in buf.get_episodes()] == ["B"]


@settings(max_examples=60, deadline=None)
@given(
    agents=st.lists(st.sampled_from([None, "A", "B"]), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 5), max_size=3),
)
def test_an_add_is_refused_exactly_when_it_brings_a_second_agent(agents, cuts):
    """One game's consecutive chunks, each of a drawn agent, given in a few adds."""
    chunks = [game_chunk(agent, 2 * i, terminated=i == len(agents) - 1) for i, agent in
              enumerate(agents)]  # fmt: skip
    bounds = sorted({0, len(chunks), *(c for c in cuts if c < len(chunks))})
    buf = EpisodeReplayBuffer(100)
    seen: set[str] = set()
    for a, b in zip(bounds, bounds[1:]):
        named = seen | {agent for agent in agents[a:b] if agent is not None}
        before = buf.get_state()
        if len(named) > 1:
            with pytest.raises(ValueError, match="'A'.*'B'|'B'.*'A'"):
                buf.add(chunks[a:b])
            assert_states_equal(buf.get_state(), before)
            return
        buf.add(chunks[a:b])
        seen = named
    (ep,) = buf.get_episodes()
    assert len(ep) == 2 * len(agents) and ep.is_terminated
    assert ep.agent_id == agents[0]  # the first chunk's, None included (as concat_episode)


# ------------------------------------------------------------ reused id of a done episode
def env_chunk(n: int, **flags: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        0, observations=[float(t) for t in range(n + 1)], actions=[0] * n, rewards=[1.0] * n,
        len_lookback_buffer=0, **flags,
    )  # fmt: skip


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("one_add", [False, True], ids=["two_adds", "one_add"])
def test_reusing_a_finished_episodes_id_says_each_episode_needs_its_own(cls, one_add):
    buf = cls(100, seed=0)
    first, second = env_chunk(3, terminated=True), env_chunk(3)
    if not one_add:
        buf.add(first)
    before = buf.get_state()
    with pytest.raises(ValueError) as info:
        buf.add([first, second] if one_add else [second])
    message = str(info.value)
    assert message.startswith("episode 0 is already done; cannot append a chunk (")
    assert "an id of its own" in message and "uuid4" in message and "env index" in message
    assert_states_equal(buf.get_state(), before)


# ------------------------------------------------- priorities of another import's buffer
def _second_import() -> Any:
    """``episodes.replay.prioritized`` imported again (sys.modules left as it is).

    As pytest's importlib mode does when the module's own file is collected, or a reload in a
    notebook: a second ``PrioritizedEpisodeReplayBuffer`` class, of the same module and name.
    """
    spec = importlib.util.spec_from_file_location(
        prioritized_module.__name__, prioritized_module.__file__
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sys.modules[prioritized_module.__name__] is prioritized_module
    return module.PrioritizedEpisodeReplayBuffer


@pytest.mark.parametrize("loader", ["canonical", "second_import", "uniform_class"])
def test_save_and_load_keep_the_priorities_of_another_imports_buffer(tmp_path, loader):
    from episodes.replay.kinds import prioritized_class

    other = _second_import()
    assert other is not PrioritizedEpisodeReplayBuffer
    assert not issubclass(other, PrioritizedEpisodeReplayBuffer)  # what the checks tripped on
    assert prioritized_class(other)
    buf = other(100, alpha=0.5, seed=0)
    buf.add(game_chunk("A", n=3))
    buf.update_priorities([5.0, 2.0, 0.5], [0, 1, 2])
    buf.save(tmp_path / "saved")
    meta = json.loads((tmp_path / "saved" / "replay.json").read_text())
    assert (meta["kind"], meta["alpha"]) == ("prioritized", 0.5)
    make = {"canonical": PrioritizedEpisodeReplayBuffer, "second_import": other}.get(
        loader, EpisodeReplayBuffer
    )
    loaded = make.load(tmp_path / "saved")
    assert type(loaded) is (other if loader == "second_import" else PrioritizedEpisodeReplayBuffer)
    assert loaded.alpha == 0.5
    assert loaded.get_priorities([0, 1, 2]).tolist() == [5.0, 2.0, 0.5]


def test_a_uniform_subclass_still_refuses_a_prioritized_save(tmp_path):
    from episodes.replay.kinds import prioritized_class

    class Mine(EpisodeReplayBuffer):
        pass

    buf = _second_import()(10, seed=0)
    buf.add(game_chunk("A"))
    buf.save(tmp_path / "saved")
    with pytest.raises(ValueError, match="holds a prioritized replay buffer: Mine is not a"):
        Mine.load(tmp_path / "saved")
    assert prioritized_class(PrioritizedEpisodeReplayBuffer) and not prioritized_class(Mine)

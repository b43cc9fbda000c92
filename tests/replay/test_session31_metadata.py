"""The replay buffers keep each stored episode's id, custom_data, agent/module ids and clocks.

``get_episodes``, ``sample(sample_episodes=True)``, ``get_state``/``set_state``, ``save``/``load``
and ``from_dataset`` all carry them, joined over continuing chunks as ``concat_episode`` joins.
"""

from __future__ import annotations

import copy
import os
import threading

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, UnstorableValueError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _obs(value: float) -> np.ndarray:
    return np.full(2, value, np.float32)


def _recorded(id_: object = "a", steps: int = 3) -> SingleAgentEpisode:
    """An episode recorded step by step, so that it has clocks, with ids and custom_data."""
    ep = SingleAgentEpisode(id_, agent_id="ag", module_id="mod", multi_agent_episode_id="ma")
    ep.custom_data.update(task="reach", nested={"rows": [1]})
    ep.add_env_reset(_obs(0))
    for t in range(steps):
        ep.add_env_step(_obs(t + 1), 0, 1.0)
    return ep


def _two_chunks() -> tuple[SingleAgentEpisode, SingleAgentEpisode, SingleAgentEpisode]:
    """A head, its continuation (other custom_data keys and clocks) and the joined episode."""
    head = _recorded()
    tail = head.cut()
    tail.custom_data["task"] = "push"
    tail.custom_data["extra"] = 7
    for t in range(2):
        tail.add_env_step(_obs(t + 4), 1, 2.0)
    joined = copy.deepcopy(head)
    joined.concat_episode(copy.deepcopy(tail))
    return head, tail, joined


def _clocks(ep: SingleAgentEpisode) -> tuple[object, object]:
    values = ep.field_values()
    return values["start_time"], values["last_step_time"]


def _meta(ep: SingleAgentEpisode) -> tuple[object, ...]:
    return (
        ep.id_,
        ep.custom_data,
        ep.agent_id,
        ep.module_id,
        ep.multi_agent_episode_id,
        *_clocks(ep),
    )


def _none_id_episode() -> SingleAgentEpisode:
    fields = SingleAgentEpisode(
        "x", observations=[_obs(0), _obs(1), _obs(2)], actions=[0, 1], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).field_values()  # fmt: skip
    fields["id_"] = None
    return SingleAgentEpisode.from_fields(fields)


# ------------------------------------------------------------------------------ None ids
@pytest.mark.parametrize("make", BUFFERS)
def test_none_id_is_kept_by_get_episodes_and_sample(make):
    buf = make(10, seed=0)
    buf.add(_none_id_episode())
    assert buf.get_episode_ids() == [None]
    assert [ep.id_ for ep in buf.get_episodes()] == [None]
    assert [ep.id_ for ep in buf.sample(3, sample_episodes=True)] == [None] * 3
    assert [ep.id_ for ep in buf.sample(2, sample_episodes=True, batch_length_T=1)] == [None] * 2


@pytest.mark.parametrize("make", BUFFERS)
def test_none_id_saves_and_loads_as_none(make, tmp_path):
    buf = make(10, seed=0)
    buf.add(_none_id_episode())
    buf.save(tmp_path / "buf")
    back = make.load(tmp_path / "buf")
    assert back.get_episode_ids() == [None]
    assert [ep.id_ for ep in back.get_episodes()] == [None]


# ------------------------------------------------------------------- metadata in episodes
@pytest.mark.parametrize("make", BUFFERS)
def test_get_episodes_keeps_what_the_joined_episode_holds(make):
    head, tail, joined = _two_chunks()
    buf = make(100, seed=0)
    buf.add([head, tail])
    (got,) = buf.get_episodes()
    assert _meta(got) == _meta(joined)
    assert got.custom_data == {"task": "push", "nested": {"rows": [1]}, "extra": 7}
    assert got.get_duration_s() == joined.get_duration_s() > 0
    assert _clocks(got) == (_clocks(head)[0], _clocks(tail)[1])


def test_chunks_added_in_separate_adds_join_as_in_one():
    head, tail, joined = _two_chunks()
    buf = EpisodeReplayBuffer(100)
    buf.add(head)
    buf.add(tail)
    assert _meta(buf.get_episodes()[0]) == _meta(joined)


def test_ending_chunk_without_steps_joins_custom_data():
    head = _recorded()
    end = head.cut()
    end.is_truncated = True
    end.custom_data["bootstrap_value"] = 0.5
    buf = EpisodeReplayBuffer(100)
    buf.add([head, end])
    got = buf.get_episodes()[0]
    assert got.is_truncated and got.custom_data["bootstrap_value"] == 0.5
    assert _clocks(got) == _clocks(head)  # no step recorded: the head's clocks stay


@pytest.mark.parametrize("make", BUFFERS)
def test_sampled_whole_episodes_carry_clocks_and_chunks_none(make):
    ep = _recorded(steps=5)
    buf = make(100, seed=0)
    buf.add(ep)
    for whole in buf.sample(3, sample_episodes=True):
        assert _meta(whole) == _meta(ep)
    # A chunk is what a slice of the episode gives: ids and custom_data, no clocks.
    sliced = ep[1:3]
    for part in buf.sample(3, sample_episodes=True, batch_length_T=2, lookback=1):
        assert _meta(part) == _meta(sliced)
        assert part.custom_data == ep.custom_data and part.get_duration_s() == 0.0


def test_custom_data_is_the_buffers_own_copy():
    ep = _recorded()
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(ep)
    ep.custom_data["nested"]["rows"].append(2)  # the added chunk, changed after add
    ep.custom_data["late"] = 1
    got = buf.get_episodes()[0]
    assert got.custom_data == {"task": "reach", "nested": {"rows": [1]}}
    got.custom_data["nested"]["rows"].append(3)  # a returned copy, changed
    buf.sample(1, sample_episodes=True)[0].custom_data["task"] = "other"
    assert buf.get_episodes()[0].custom_data == {"task": "reach", "nested": {"rows": [1]}}


def test_uncopyable_custom_data_value_is_shared_not_refused():
    ep = _recorded()
    lock = threading.Lock()
    ep.custom_data["lock"] = lock
    buf = EpisodeReplayBuffer(100)
    buf.add(ep)
    assert buf.get_episodes()[0].custom_data["lock"] is lock


def test_refused_add_leaves_metadata_unchanged():
    head = _recorded()
    buf = EpisodeReplayBuffer(100)
    buf.add(head)
    bad = head.cut()
    bad.custom_data["task"] = "changed"
    bad.add_env_step(_obs(9), 0, 1.0)
    wrong = SingleAgentEpisode(
        "a", observations=[_obs(-1), _obs(-2)], actions=[0], rewards=[1.0],
        t_started=bad.t, len_lookback_buffer=0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="differs"):
        buf.add([bad, wrong])  # the second chunk does not join: nothing is stored
    assert _meta(buf.get_episodes()[0]) == _meta(head)


def test_evicted_episode_drops_its_metadata():
    buf = EpisodeReplayBuffer(3)
    buf.add(_recorded("a"))
    plain = SingleAgentEpisode(
        "b", observations=[_obs(0), _obs(1), _obs(2)], actions=[0, 0], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )  # fmt: skip
    buf.add(plain)  # evicts "a"
    assert buf.get_episode_ids() == ["b"]
    got = buf.get_episodes()[0]
    assert (got.custom_data, got.agent_id, _clocks(got)) == ({}, None, (None, None))
    stored = set(buf._table.order.values())
    assert all(buf._table.meta[r] is None for r in range(buf._table.size) if r not in stored)


# --------------------------------------------------------------------------------- state
@pytest.mark.parametrize("make", BUFFERS)
def test_state_keeps_metadata_and_old_states_restore_without(make):
    head, tail, joined = _two_chunks()
    buf = make(100, seed=0)
    buf.add([head, tail])
    state = buf.get_state()
    state["episodes"]["custom_data"][0]["nested"]["rows"].append(5)  # the state shares nothing
    assert buf.get_episodes()[0].custom_data["nested"] == {"rows": [1]}
    back = make(5)
    back.set_state(buf.get_state())
    assert _meta(back.get_episodes()[0]) == _meta(joined)
    old = buf.get_state()
    for key in ("custom_data", "agent_id", "module_id", "multi_agent_episode_id"):
        del old["episodes"][key]
    del old["episodes"]["start_time"], old["episodes"]["last_step_time"]
    older = make(5)
    older.set_state(old)
    assert _meta(older.get_episodes()[0]) == ("a", {}, None, None, None, None, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [("custom_data", ["not a dict"]), ("start_time", ["x"]), ("last_step_time", [float("inf")]),
     ("agent_id", [None, None])],
)  # fmt: skip
def test_broken_metadata_in_state_is_refused_and_changes_nothing(key, value):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_recorded())
    state = buf.get_state()
    state["episodes"][key] = value
    target = EpisodeReplayBuffer(7)
    target.add(_recorded("keep"))
    before = target.get_state()
    with pytest.raises(ValueError, match="broken replay buffer state"):
        target.set_state(state)
    assert target.capacity == 7 and _meta(target.get_episodes()[0])[0] == "keep"
    assert target.get_state()["episodes"]["custom_data"] == before["episodes"]["custom_data"]


# ------------------------------------------------------------------------- save and load
@pytest.mark.parametrize("make", BUFFERS)
def test_save_and_load_keep_metadata(make, tmp_path):
    head, tail, joined = _two_chunks()
    buf = make(100, seed=0)
    buf.add([head, tail])
    buf.save(tmp_path / "buf")
    back = make.load(tmp_path / "buf")
    assert _meta(back.get_episodes()[0]) == _meta(joined)


def test_save_refuses_unstorable_custom_data_and_writes_nothing(tmp_path):
    buf = EpisodeReplayBuffer(100)
    buf.add(_recorded("ok"))
    bad = _recorded("bad")
    bad.custom_data["seen"] = {1, 2}  # a set: no dataset stores it
    buf.add(bad)
    with pytest.raises(UnstorableValueError, match=r"stored episode 1 of 2.*custom_data"):
        buf.save(tmp_path / "buf")
    assert os.listdir(tmp_path) == []


def test_from_dataset_keeps_merged_metadata(tmp_path):
    head, tail, joined = _two_chunks()
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(tail)  # written out of time order: added in time order
        writer.write(head)
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds")
    assert _meta(buf.get_episodes()[0]) == _meta(joined)

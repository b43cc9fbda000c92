"""Replay state infos: copied once per call, not deep-copied step by step."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.state import copied_infos


def _episode(i: int, infos=None) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=np.zeros((6, 2), np.float32),
        infos=infos,
        actions=np.zeros(5, np.int64),
        rewards=np.ones(5),
        len_lookback_buffer=0,
    ).to_numpy()


@pytest.fixture
def count_deepcopies(monkeypatch):
    calls = []
    real = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda x, *a: calls.append(1) or real(x, *a))
    return calls


def test_state_round_trip_of_empty_infos_copies_no_info(count_deepcopies):
    buffer = EpisodeReplayBuffer(capacity=1000)
    buffer.add([_episode(i) for i in range(100)])
    state = buffer.get_state()
    EpisodeReplayBuffer(capacity=1000).set_state(state)
    # Per episode (their final infos) at most, none per step: 100 episodes, 500 steps.
    assert len(count_deepcopies) <= 100 + 8


def test_recorded_infos_are_copies_both_ways():
    infos = [{"k": [i]} for i in range(6)]
    buffer = EpisodeReplayBuffer(capacity=100)
    buffer.add([_episode(0, infos)])
    state = buffer.get_state()
    state["steps"]["infos"][1]["k"].append("changed in the state")
    restored = EpisodeReplayBuffer(capacity=100)
    restored.set_state(state)
    state["steps"]["infos"][2]["k"].append("changed after set_state")
    got = restored.get_episodes()[0].get_infos()
    original = buffer.get_episodes()[0].get_infos()
    assert original[1] == {"k": [1]}  # the state was a copy
    assert got[1]["k"][-1] == "changed in the state" and got[2] == {"k": [2]}


def test_copied_infos_keeps_nones_and_sharing():
    shared = {"a": [1]}
    out = copied_infos([None, shared, shared, {}])
    assert out[0] is None and out[1] is out[2] and out[1] is not shared
    assert out[1] == shared and out[3] == {}

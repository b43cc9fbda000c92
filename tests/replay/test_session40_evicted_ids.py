"""A replay buffer keeps only its latest evicted episodes' ids: a long run evicts without end."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
    counters,
)

KINDS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}


def _chunk(id_: Any, start: int = 0, steps: int = 1, done: bool = True) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(start, start + steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        terminated=done,
        t_started=start,
        len_lookback_buffer=0,
    )


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(counters, "EVICTED_IDS_KEPT", 3)
    return 3


@pytest.mark.parametrize("kind", KINDS)
def test_only_the_latest_evicted_ids_are_kept(kind: str, small_cap: int) -> None:
    buf = KINDS[kind](1, seed=0)
    for i in range(6):
        buf.add(_chunk(f"e{i}"))
    assert buf.get_evicted_ids() == ["e2", "e3", "e4"]
    assert buf.get_num_episodes_evicted() == 5  # every eviction still counted
    assert buf.get_episode_ids() == ["e5"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_kept_id_is_refused_a_forgotten_one_starts_anew(kind: str, small_cap: int) -> None:
    buf = KINDS[kind](2, seed=0)
    buf.add(_chunk("run", steps=2, done=False))  # running when evicted below
    for i in range(3):
        buf.add(_chunk(f"d{i}", steps=2))
    assert buf.get_evicted_ids() == ["run", "d0", "d1"]
    with pytest.raises(EvictedEpisodeError):
        buf.add(_chunk("run", start=2, steps=1))
    for i in range(3, 5):  # two more evictions push "run" out of the kept ids
        buf.add(_chunk(f"d{i}", steps=2))
    assert "run" not in buf.get_evicted_ids()
    buf.add(_chunk("run", start=2, steps=1))  # stored as a new episode, as RLlib stores it
    assert buf.get_episode_ids()[-1] == "run"
    assert buf.get_episodes()[-1].t_started == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_longer_list_in_a_state_is_trimmed_to_its_latest(kind: str, small_cap: int) -> None:
    buf = KINDS[kind](4, seed=0)
    buf.add(_chunk("s"))
    state = buf.get_state()
    state["evicted"] = ["a", "b", "c", "d", "e"]
    state["num_episodes_evicted"] = 7
    buf.set_state(state)
    assert buf.get_evicted_ids() == ["c", "d", "e"]
    assert buf.get_num_episodes_evicted() == 7
    counts = {"added_timesteps": 9, "sampled_timesteps": 0, "episodes_evicted": 5}
    buf.set_counters(counts, ["v", "w", "x", "y", "z"])
    assert buf.get_evicted_ids() == ["x", "y", "z"]


def test_a_long_run_holds_a_bounded_number_of_ids() -> None:
    # The real bound: 70,000 one-step episodes through a one-step buffer.
    buf = EpisodeReplayBuffer(1, seed=0)
    total = counters.EVICTED_IDS_KEPT + 4_464
    for start in range(0, total, 10_000):
        buf.add([_chunk(i) for i in range(start, min(start + 10_000, total))])
    evicted = buf.get_evicted_ids()
    assert len(evicted) == counters.EVICTED_IDS_KEPT
    assert evicted[0] == total - 1 - counters.EVICTED_IDS_KEPT and evicted[-1] == total - 2
    assert buf.get_num_episodes_evicted() == total - 1
    assert len(pickle.dumps(buf.get_state())) < 2_000_000


def test_saved_and_loaded_keeps_the_kept_ids(tmp_path: Any, small_cap: int) -> None:
    buf = EpisodeReplayBuffer(1, seed=0)
    for i in range(5):
        buf.add(_chunk(f"e{i}"))
    buf.save(tmp_path / "buf")
    loaded = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert loaded.get_evicted_ids() == buf.get_evicted_ids() == ["e1", "e2", "e3"]
    assert loaded.get_num_episodes_evicted() == 4


def test_a_long_list_of_evicted_ids_in_a_state_is_cut_in_one_pass() -> None:
    # 300,000 ids: cutting them one by one from the front of a dict rescans the deleted
    # entries each time (minutes at this size); the cut keeps the latest, in order.
    n = 300_000
    buf = EpisodeReplayBuffer(100, seed=0)
    state = buf.get_state()
    state["evicted"] = [f"old-{i}" for i in range(n)]
    state["num_episodes_evicted"] = n
    buf.set_state(state)
    kept = buf.get_evicted_ids()
    assert len(kept) == counters.EVICTED_IDS_KEPT
    assert kept[0] == f"old-{n - counters.EVICTED_IDS_KEPT}" and kept[-1] == f"old-{n - 1}"


def test_an_evicted_dict_pickled_before_the_bound_is_cut_back_in_passes(small_cap: int) -> None:
    # A plain dict, as buffers pickled before the bound hold: cut back to the bound once it
    # holds an eighth more (3 + 0 here), never left to grow.
    evicted: dict[Any, None] = dict.fromkeys(["a", "b", "c"])
    for new in "defg":
        counters.remember_evicted(evicted, new)
        assert len(evicted) <= small_cap + max(small_cap // 8, 1)
    assert list(evicted)[-1] == "g" and len(evicted) == small_cap


def test_a_buffer_keeps_its_evicted_ids_in_eviction_order_exactly(small_cap: int) -> None:
    buf = EpisodeReplayBuffer(1, seed=0)
    for i in range(10):
        buf.add(_chunk(f"e{i}"))
        assert len(buf.get_evicted_ids()) == min(i, small_cap)
    assert buf.get_evicted_ids() == ["e6", "e7", "e8"]

"""Regression tests for confirmed replay-buffer bugs (bug hunt 7): each failed before its fix."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter
from episodes.replay import (
    EmptyBufferError,
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)
from episodes.replay.table import EpisodeTable


def _ep(id_: Any, n: int = 2, t0: int = 0, **flags: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


def _snapshot(buf: EpisodeReplayBuffer) -> tuple:
    return (
        buf.capacity,
        buf.batch_size_B,
        buf.get_episode_ids(),
        buf.get_num_timesteps(),
        buf.get_counters(),
        buf.get_evicted_ids(),
        buf.rng.bit_generator.state,
    )


# ---------------------------------------------------------------- 1: mixed-type evicted ids
def test_mixed_type_evicted_ids_are_kept_in_eviction_order(tmp_path):
    buf = EpisodeReplayBuffer(2, seed=0)
    for id_ in [7, "a", ("t", 1), 3]:  # each add evicts the one before
        buf.add(_ep(id_, terminated=True))
    assert buf.get_evicted_ids() == [7, "a", ("t", 1)]
    assert buf.get_state()["evicted"] == [7, "a", ("t", 1)]
    buf.save(tmp_path / "buf")
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert back.get_evicted_ids() == [7, "a", ("t", 1)]
    restored = EpisodeReplayBuffer(1)
    restored.set_state(buf.get_state())
    assert restored.get_evicted_ids() == [7, "a", ("t", 1)]
    with pytest.raises(EvictedEpisodeError):
        restored.add(_ep("a", 2, t0=2))


# ------------------------------------------------ 2: restored buffers draw the same episodes
def _evicted_once(cls: type = EpisodeReplayBuffer) -> EpisodeReplayBuffer:
    buf = cls(8, seed=0)
    buf.add([_ep("a", 4), _ep("b", 4)])
    buf.add(_ep("c", 4))  # evicts "a": "c" takes its table row
    return buf


def _table_grown_then_shrunk(cls: type = EpisodeReplayBuffer) -> EpisodeReplayBuffer:
    buf = cls(40, seed=0)
    buf.add([_ep(f"e{i}", 1) for i in range(20)])  # 32 table rows
    buf.add(_ep("long", 30))  # evicts e0..e10
    return buf


@pytest.mark.parametrize("make", [_evicted_once, _table_grown_then_shrunk])
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_restored_buffer_draws_the_same_whole_episodes(make, cls):
    original = make(cls)
    restored = cls(1)
    restored.set_state(original.get_state())
    for _ in range(3):
        a = [ep.id_ for ep in original.sample(16, sample_episodes=True)]
        b = [ep.id_ for ep in restored.sample(16, sample_episodes=True)]
        assert a == b
    np.testing.assert_array_equal(original.sample(8)["indices"], restored.sample(8)["indices"])
    # And after more adds and evictions on both.
    for buf in (original, restored):
        buf.add([_ep("x", 5), _ep("y", 3)])
    assert [e.id_ for e in original.sample(16, sample_episodes=True)] == [
        e.id_ for e in restored.sample(16, sample_episodes=True)
    ]


def test_table_rows_by_age_follow_the_stored_order():
    rng = np.random.default_rng(0)
    table = EpisodeTable()
    for n in range(2000):
        if table.order and rng.random() < 0.45:
            ids = list(table.order)
            # The buffers evict the oldest; any other episode is closed correctly too.
            table.close(ids[0] if rng.random() < 0.7 else ids[rng.integers(len(ids))])
        else:
            table.open(n, t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
        assert table.rows_by_age().tolist() == list(table.order.values())


def test_whole_episode_draws_stay_uniform_over_stored_episodes():
    buf = _table_grown_then_shrunk()
    drawn = [ep.id_ for ep in buf.sample(4000, sample_episodes=True)]
    ids = buf.get_episode_ids()
    assert set(drawn) == set(ids)
    counts = np.array([drawn.count(i) for i in ids])
    assert counts.min() > 4000 / len(ids) * 0.6


# ------------------------------------------------- 3 and 4: damaged saves are ValueErrors
def _saved(tmp_path: Path) -> Path:
    buf = EpisodeReplayBuffer(8, seed=0)
    buf.add([_ep("a", 4), _ep("b", 4)])
    buf.add(_ep("c", 4, terminated=True))  # evicts "a"; "b" is ongoing
    buf.save(tmp_path / "orig")
    return tmp_path / "orig"


def _damaged(orig: Path, name: str, change) -> Path:
    copy_ = orig.parent / name
    shutil.copytree(orig, copy_)
    meta = json.loads((copy_ / "replay.json").read_text())
    change(meta)
    (copy_ / "replay.json").write_text(json.dumps(meta))
    return copy_


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda m: m["counters"].update(added_timesteps=-5), "must be an int >= 0"),
        (lambda m: m["counters"].update(episodes_evicted=-1), "must be an int >= 0"),
        (lambda m: m["counters"].update(added_timesteps="12"), "must be an int >= 0"),
        (lambda m: m["counters"].update(sampled_timesteps=3.9), "must be an int >= 0"),
        (lambda m: m["counters"].update(added_timesteps=True), "must be an int >= 0"),
        (lambda m: m["counters"].update(added_timesteps=float("inf")), "must be an int >= 0"),
        (lambda m: m["counters"].pop("sampled_timesteps"), "counters must be a dict with keys"),
        (lambda m: m["counters"].update(added_timesteps=1), "below the 8 steps stored"),
        (lambda m: m.update(evicted=["a", "b"]), "stored episodes too"),
        (lambda m: m.update(evicted=["a", "a"]), "listed twice"),
        (lambda m: m.update(evicted=[{"k": 1}]), "evicted id .* is unhashable"),
        (lambda m: m["rng"]["state"].update(state=-1), "generator"),
    ],
    ids=[
        "negative-added",
        "negative-evicted",
        "string",
        "float",
        "bool",
        "infinity",
        "missing",
        "added-below-stored",
        "stored-id-evicted",
        "evicted-twice",
        "unhashable-evicted",
        "rng-out-of-range",
    ],
)
def test_load_refuses_damaged_bookkeeping(tmp_path, change, match):
    path = _damaged(_saved(tmp_path), "bad", change)
    with pytest.raises(ValueError, match=match):
        EpisodeReplayBuffer.load(path)


def test_load_refuses_too_deeply_nested_json(tmp_path):
    path = _saved(tmp_path)
    (path / "replay.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="holds no saved replay buffer"):
        EpisodeReplayBuffer.load(path)


@pytest.mark.parametrize(
    "priorities",
    [np.array(["1", "2", "3", "4"]), np.ones(4, bool), np.ones(4, complex)],
    ids=["strings", "bools", "complex"],
)
def test_load_refuses_priorities_that_are_not_real_numbers(tmp_path, priorities):
    buf = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buf.add(_ep("a", 4))
    buf.save(tmp_path / "buf")
    np.save(tmp_path / "buf" / "priorities.npy", priorities)
    with pytest.raises(ValueError, match="damaged replay buffer"):
        EpisodeReplayBuffer.load(tmp_path / "buf")


def test_load_refuses_a_max_priority_beyond_float(tmp_path):
    buf = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buf.add(_ep("a", 4))
    buf.save(tmp_path / "buf")
    meta = json.loads((tmp_path / "buf" / "replay.json").read_text())
    meta["max_priority"] = 10**400
    (tmp_path / "buf" / "replay.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="max_priority"):
        EpisodeReplayBuffer.load(tmp_path / "buf")


def test_set_counters_refuses_and_leaves_the_buffer_unchanged():
    buf = _evicted_once()
    before = _snapshot(buf)
    good = buf.get_counters()
    for counters, evicted in [
        ({**good, "added_timesteps": -1}, ["a"]),
        (good, ["b"]),  # a stored id
        (good, "a"),  # not a list
    ]:
        with pytest.raises(ValueError):
            buf.set_counters(counters, evicted)
    with pytest.raises(TypeError, match="unhashable"):
        buf.set_counters(good, [["a"]])
    assert _snapshot(buf) == before


# ------------------------------------------------------------ 5: set_state checks the state
def _state() -> dict:
    src = EpisodeReplayBuffer(100, seed=0)
    src.add([_ep("a", 4), _ep("b", 3)])
    return src.get_state()


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update(capacity=0),
        lambda s: s.update(capacity=-3),
        lambda s: s.update(capacity=2.5),
        lambda s: s.update(capacity=True),
        lambda s: s.update(batch_size_B=0),
        lambda s: s["episodes"].update(ids=["a", "a"]),
        lambda s: s.update(evicted="xyz"),
        lambda s: s.update(evicted=["a"]),
        lambda s: s.update(evicted=["x", "x"]),
        lambda s: s.update(num_added=-1),
        lambda s: s.update(num_added=2),
        lambda s: s.update(num_sampled=1.5),
        lambda s: s["rng"]["state"].update(state=-1),
    ],
    ids=[
        "capacity-0",
        "capacity-negative",
        "capacity-float",
        "capacity-bool",
        "batch-size-0",
        "duplicate-ids",
        "evicted-str",
        "evicted-stored-id",
        "evicted-twice",
        "num-added-negative",
        "num-added-below-stored",
        "num-sampled-float",
        "rng-out-of-range",
    ],
)
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_set_state_refuses_impossible_states(change, cls):
    state = copy.deepcopy(_state())
    change(state)
    buf = cls(50, seed=1)
    buf.add(_ep("z", 2))
    before = _snapshot(buf)
    with pytest.raises(ValueError, match="broken replay buffer state"):
        buf.set_state(state)
    assert _snapshot(buf) == before


# ------------------------------------------------- 6: indices and times must be integers
@pytest.mark.parametrize(
    "indices",
    [[1.7, 2.2], np.array([True, False]), ["3"], np.array([1.0])],
    ids=["floats", "bools", "strings", "whole-floats"],
)
def test_get_transitions_refuses_non_integer_indices(indices):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_ep("a", 4))
    with pytest.raises(ValueError, match="indices must be integers"):
        buf.get_transitions(indices)
    with pytest.raises(ValueError, match="indices must be integers"):
        buf.get_priorities(indices)


@pytest.mark.parametrize("t", [2.9, 1.0, True, [0, 1.5], np.array(["1"])])
def test_locate_refuses_non_integer_times(t):
    buf = EpisodeReplayBuffer(100)
    buf.add(_ep("a", 4))
    with pytest.raises(ValueError, match="times must be integers"):
        buf.locate("a", t)
    assert buf.locate("a", np.int32(2)).tolist() == [2]


# ----------------------------------------------------- 7: ids a buffer cannot keep apart
@pytest.mark.parametrize(
    "ids, error, match",
    [
        ([1, 1.0], ValueError, "1 and 1.0 are different episodes in the dataset"),
        ([1, True], ValueError, "1 and True are different episodes in the dataset"),
        ([["run", 3]], TypeError, r"\['run', 3\] is unhashable"),
    ],
    ids=["int-float", "int-bool", "list"],
)
def test_from_dataset_refuses_ids_it_cannot_keep_apart(tmp_path, ids, error, match):
    with EpisodeWriter(tmp_path / "d") as writer:
        for id_ in ids:
            writer.write(_ep(id_, terminated=True))
    with pytest.raises(error, match=match):
        EpisodeReplayBuffer.from_dataset(tmp_path / "d")


def test_add_refuses_unhashable_ids_and_changes_nothing():
    buf = EpisodeReplayBuffer(100)
    buf.add(_ep("a"))
    before = _snapshot(buf)
    with pytest.raises(TypeError, match=r"episode id \['run', 3\] is unhashable"):
        buf.add([_ep("b"), _ep(["run", 3])])
    assert _snapshot(buf) == before


# --------------------------------------------------- 8: pad with episode chunks is refused
@pytest.mark.parametrize(
    "kwargs",
    [
        {"sample_episodes": True, "batch_length_T": 5},
        {"sample_episodes": True, "batch_length_T": 1},
        {"sample_episodes": True},
        {},
    ],
    ids=["episodes-too-long", "episodes-fitting", "whole-episodes", "transitions"],
)
def test_pad_where_nothing_is_padded_is_refused(kwargs):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_ep("a", terminated=True))
    state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="pad applies to sequences"):
        buf.sample(2, pad=True, **kwargs)
    assert buf.rng.bit_generator.state == state and buf.get_sampled_timesteps() == 0
    assert buf.sample(2, batch_length_T=5, pad=True)["mask"].shape == (2, 5)


def test_episode_chunks_that_do_not_fit_do_not_suggest_pad():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_ep("a", terminated=True))
    with pytest.raises(EmptyBufferError) as info:
        buf.sample(2, sample_episodes=True, batch_length_T=5)
    assert "pad=True" not in str(info.value) and "never padded" in str(info.value)
    with pytest.raises(EmptyBufferError, match="pass pad=True"):  # sequences still say it
        buf.sample(2, batch_length_T=5)


# --------------------------------------------------- suspicious: priorities and beta types
@pytest.mark.parametrize(
    "priorities",
    [["2.5", "3.0"], np.array([True, True]), np.array([1 + 1j, 2 + 0j])],
    ids=["strings", "bools", "complex"],
)
def test_update_priorities_refuses_values_that_are_not_real_numbers(priorities):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_ep("a", 4))
    with pytest.raises(ValueError, match="priorities must be real numbers"):
        buf.update_priorities(priorities, [0, 1])
    assert buf.get_priorities([0, 1]).tolist() == [1.0, 1.0]
    buf.update_priorities(np.array([2, 3]), [0, 1])  # integers are numbers
    assert buf.get_priorities([0, 1]).tolist() == [2.0, 3.0]


@pytest.mark.parametrize("beta", [True, np.bool_(True)])
def test_sample_refuses_a_bool_beta(beta):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_ep("a", 4))
    with pytest.raises(ValueError, match="beta must be"):
        buf.sample(2, beta=beta)


def test_a_prioritized_state_whose_priorities_sum_to_inf_is_refused():
    # Every draw went to the one finite-sum item: the tree's total was inf.
    from episodes.replay import PrioritizedEpisodeReplayBuffer

    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    obs = [np.array([float(t)], np.float32) for t in range(5)]
    buf.add(
        SingleAgentEpisode(
            "a", observations=obs, actions=[0] * 4, rewards=[1.0] * 4, len_lookback_buffer=0
        )
    )
    state = buf.get_state()
    state["prioritized"]["leaves"] = np.array([1e308, 1e308, 1.0, 1.0])
    state["prioritized"]["priorities"] = np.array([1e308, 1e308, 1.0, 1.0])
    other = PrioritizedEpisodeReplayBuffer(100, seed=0)
    before = other.get_state()
    with pytest.raises(ValueError, match="sum of all priorities infinite"):
        other.set_state(state)
    assert other.get_num_timesteps() == 0 and other.get_state().keys() == before.keys()

"""Session 30: replay counters, dataset piecing, mixed index lists and sizes no batch holds.

- ``set_counters``, ``set_state`` and ``load`` took fewer evicted episodes than evicted ids,
  which no buffer can reach (an evicted id is never stored again).
- ``from_dataset`` dropped the later piece of an episode evicted while loading without
  counting it, so ``get_added_timesteps`` depended on how the dataset was split into pieces.
- ``get_priorities`` / ``update_priorities`` refused a list mixing numpy int64 and uint64
  indices (numpy made it float64 first); ``get_transitions`` took it.
- ``sample`` with sizes no array holds raised an internal ``IndexError`` or numpy's raw
  "Maximum allowed size exceeded"; 0-d int arrays were taken for ``batch_length_T`` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.saved_files import seal
from episodes.replay.sizes import MAX_BATCH_CELLS


def _piece(id_: str, t0: int, n: int, *, shift: float = 0.0, **flags: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(1, t + shift, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


def _evicted_buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(5, seed=0)
    buf.add([_piece("a", 0, 4), _piece("b", 0, 4)])  # "a" is evicted: one id, one eviction
    assert buf.get_evicted_ids() == ["a"] and buf.get_num_episodes_evicted() == 1
    return buf


def _summary(buf: EpisodeReplayBuffer) -> tuple[Any, ...]:
    return buf.get_counters(), buf.get_evicted_ids(), buf.get_episode_ids()


# ------------------------------------------------------------------- evicted-episode count


@pytest.mark.parametrize(
    ("count", "ids", "ok"),
    [(0, ["a"], False), (1, ["a", "z"], False), (1, ["a"], True), (7, ["a"], True), (0, [], True)],
)
def test_set_counters_refuses_fewer_evictions_than_evicted_ids(
    count: int, ids: list[str], ok: bool
) -> None:
    buf = _evicted_buffer()
    before = _summary(buf)
    counters = {**buf.get_counters(), "episodes_evicted": count}
    if ok:
        buf.set_counters(counters, ids)
        assert buf.get_num_episodes_evicted() == count and buf.get_evicted_ids() == ids
        return
    with pytest.raises(ValueError, match=rf"episodes_evicted'\] is {count}, below the {len(ids)}"):
        buf.set_counters(counters, ids)
    assert _summary(buf) == before


def test_set_state_refuses_fewer_evictions_than_evicted_ids() -> None:
    state = _evicted_buffer().get_state()
    state["num_episodes_evicted"] = 0
    target = EpisodeReplayBuffer(5, seed=1)
    target.add(_piece("x", 0, 2))
    before = _summary(target)
    with pytest.raises(ValueError, match=r"episodes_evicted'\] is 0, below the 1 evicted ids"):
        target.set_state(state)
    assert _summary(target) == before


def test_load_refuses_fewer_evictions_than_evicted_ids(tmp_path: Path) -> None:
    _evicted_buffer().save(tmp_path / "s")
    meta = json.loads((tmp_path / "s" / "replay.json").read_text())
    meta.pop("crc32")
    meta["counters"]["episodes_evicted"] = 0
    (tmp_path / "s" / "replay.json").write_text(json.dumps(seal(meta)))
    with pytest.raises(ValueError, match=r"damaged replay buffer .*is 0, below the 1 evicted"):
        EpisodeReplayBuffer.load(tmp_path / "s")


# ------------------------------------------------------------ from_dataset and the piecing

# The same three episodes ("a" of 8 steps, "b" of 4, "c" of 3), pieced in different ways.
_PIECINGS = {
    "joined": [_piece("a", 0, 8), _piece("b", 0, 4), _piece("c", 0, 3)],
    "a in two": [_piece("a", 0, 5), _piece("b", 0, 4), _piece("a", 5, 3), _piece("c", 0, 3)],
    "a in three": [
        _piece("a", 0, 2),
        _piece("b", 0, 4),
        _piece("a", 2, 3),
        _piece("c", 0, 3),
        _piece("a", 5, 3),
    ],
    "a ended apart": [
        _piece("a", 0, 5),
        _piece("b", 0, 4),
        _piece("a", 5, 3),
        _piece("a", 8, 0, terminated=True),
        _piece("c", 0, 3),
    ],
}


@pytest.mark.parametrize("capacity", [4, 6, 9, 15])
def test_from_dataset_counters_do_not_depend_on_piecing(tmp_path: Path, capacity: int) -> None:
    seen = set()
    for name, pieces in _PIECINGS.items():
        with DatasetWriter(tmp_path / name) as writer:
            writer.write_many(pieces)
        buf = EpisodeReplayBuffer.from_dataset(tmp_path / name, capacity=capacity)
        assert buf.get_added_timesteps() == 15, name  # every step of the dataset
        seen.add(repr(_summary(buf)))
    assert len(seen) == 1


def test_from_dataset_matches_one_add_of_the_pieces(tmp_path: Path) -> None:
    # One add of all pieces keeps a piece of an episode it evicted with it: the same counters.
    pieces = _PIECINGS["a in two"]
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write_many(pieces)
    loaded = EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=6)
    by_hand = EpisodeReplayBuffer(6)
    by_hand.add(pieces)
    assert _summary(loaded) == _summary(by_hand)


@pytest.mark.parametrize(
    ("late", "match"),
    [
        (_piece("a", 6, 3), "starts at t=6, but the buffer holds it up to t=5"),
        (_piece("a", 5, 3, shift=1.0), "observation that differs"),
        (_piece("a", 5, 0, shift=2.0, terminated=True), "observation that differs"),
    ],
    ids=["gap", "other observation", "end with other observation"],
)
def test_from_dataset_checks_a_late_piece_of_an_evicted_episode(
    tmp_path: Path, late: SingleAgentEpisode, match: str
) -> None:
    # Refused as add refuses it for a stored episode, or as one add holding both pieces does.
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write_many([_piece("a", 0, 5), _piece("b", 0, 4), late])
    with pytest.raises(ValueError, match=match) as refused:
        EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=6)
    assert "evicted while the dataset was loaded" in str(refused.value)  # it holds none of it
    # In one add the step the late piece misses is an earlier chunk's, not a stored one's.
    in_one_add = match.replace("the buffer holds it", "an earlier chunk of this add takes it")
    with pytest.raises(ValueError, match=in_one_add):
        EpisodeReplayBuffer(6).add([_piece("a", 0, 5), _piece("b", 0, 4), late])


def test_from_dataset_refuses_a_piece_after_an_evicted_done_episode(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write_many(
            [_piece("a", 0, 5, terminated=True), _piece("b", 0, 4), _piece("a", 5, 2)]
        )
    with pytest.raises(ValueError, match="already done"):
        EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=6)


# ------------------------------------------------------------------ mixed index lists


def _prioritized() -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_piece("a", 0, 10))
    return buf


@pytest.mark.parametrize(
    "indices",
    [
        [np.int64(0), np.uint64(1)],
        [np.uint64(2), np.int64(3), 4],
        (np.int32(5), np.uint64(6)),
    ],
    ids=["int64-uint64", "uint64-int64-int", "tuple"],
)
def test_priorities_take_mixed_numpy_int_lists(indices: Any) -> None:
    buf = _prioritized()
    want = [int(i) for i in indices]
    assert buf.get_transitions(indices)["indices"].tolist() == want
    buf.update_priorities([2.0 + i for i in want], indices)
    assert buf.get_priorities(indices).tolist() == [2.0 + i for i in want]


@pytest.mark.parametrize(
    ("indices", "match"),
    [
        ([np.int64(0), np.uint64(2**63)], "lie beyond int64"),
        ([np.int64(-1), np.uint64(1)], "never issued"),
        ([np.int64(0), 1.5], "must be integers"),
    ],
)
def test_priorities_still_refuse_mixed_lists_of_bad_indices(indices: Any, match: str) -> None:
    buf = _prioritized()
    before = buf.get_priorities(list(range(10))).tolist()
    with pytest.raises(ValueError, match=match):
        buf.get_priorities(indices)
    with pytest.raises(ValueError, match=match):
        buf.update_priorities([1.0] * len(indices), indices)
    assert buf.get_priorities(list(range(10))).tolist() == before


# ----------------------------------------------------------------------- sample sizes


def _filled(prioritized: bool = False) -> EpisodeReplayBuffer:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(1000, seed=0)
    buf.add(_piece("a", 0, 10))
    return buf


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_items": 2, "batch_length_T": 2**63 - 1, "pad": True}, "batch_length_T=9223"),
        ({"num_items": 2, "batch_length_T": 2**63, "pad": True}, "batch_length_T=9223"),
        ({"num_items": 2, "batch_length_T": 2**70, "pad": True}, "batch_length_T=1180"),
        ({"num_items": 1, "batch_length_T": MAX_BATCH_CELLS + 1, "pad": True}, "num_items=1"),
        ({"num_items": 2, "batch_length_T": 3, "lookback": 2**62}, "lookback=4611"),
        ({"num_items": 2**62, "batch_length_T": 3}, "num_items"),
        ({"num_items": 2**62}, "num_items"),
        ({"batch_size_B": MAX_BATCH_CELLS + 1}, "batch_size_B"),
        ({"num_items": 2**62, "sample_episodes": True}, "num_items"),
    ],
)
def test_sample_refuses_batches_no_array_holds(
    prioritized: bool, kwargs: dict[str, Any], match: str
) -> None:
    buf = _filled(prioritized)
    rng_state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match=match):
        buf.sample(**kwargs)
    assert buf.rng.bit_generator.state == rng_state and buf.get_sampled_timesteps() == 0
    with pytest.raises(ValueError, match=match):  # checked before the contents, as every argument
        type(buf)(10).sample(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_items": 1, "batch_length_T": MAX_BATCH_CELLS, "pad": True},
        {"num_items": MAX_BATCH_CELLS},
        {"num_items": 2, "batch_length_T": 1, "lookback": MAX_BATCH_CELLS // 2 - 1},
    ],
)
def test_sample_names_its_sizes_when_memory_runs_out(kwargs: dict[str, Any]) -> None:
    # At the limit the batch would need 2**62 bytes and more: no machine allocates that.
    buf = _filled()
    rng_state = buf.rng.bit_generator.state
    with pytest.raises(MemoryError, match=r"sample\(num_items=.*needs more memory"):
        buf.sample(**kwargs)
    assert buf.rng.bit_generator.state == rng_state and buf.get_sampled_timesteps() == 0


def test_a_long_lookback_of_episode_chunks_is_no_size() -> None:
    # A chunk's lookback is what is stored, whatever was asked: nothing to refuse.
    chunks = _filled().sample(2, batch_length_T=3, lookback=2**62, sample_episodes=True)
    assert [len(c) for c in chunks] == [3, 3]


# ----------------------------------------------------------- 0-d int arrays as counts


@pytest.mark.parametrize(
    ("kwargs", "same_as"),
    [
        ({"num_items": np.array(3)}, {"num_items": 3}),
        ({"batch_size_B": np.array(3)}, {"batch_size_B": 3}),
        (
            {"num_items": np.array(2, np.uint8), "n_step": np.array(2)},
            {"num_items": 2, "n_step": 2},
        ),
        (
            {"num_items": 2, "n_step": (np.array(1), np.int64(3))},
            {"num_items": 2, "n_step": (1, 3)},
        ),
        (
            {"num_items": 2, "batch_length_T": np.array(3), "lookback": np.array(1)},
            {"num_items": 2, "batch_length_T": 3, "lookback": 1},
        ),
        (
            {"num_items": 2, "batch_length_T": 3, "n_step": np.array(1)},
            {"num_items": 2, "batch_length_T": 3},
        ),
    ],
)
def test_sample_takes_0d_int_arrays_as_counts(
    kwargs: dict[str, Any], same_as: dict[str, Any]
) -> None:
    got, want = _filled().sample(**kwargs), _filled().sample(**same_as)
    assert got.keys() == want.keys()
    for key in got:
        np.testing.assert_array_equal(got[key], want[key])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_items": np.array([2])}, "num_items must be an int >= 1"),
        ({"num_items": np.array(2.0)}, "num_items must be an int >= 1"),
        ({"num_items": np.array(True)}, "num_items must be an int >= 1"),
        ({"num_items": 2, "n_step": np.array(0)}, "n_step must be an int >= 1"),
        ({"num_items": 2, "n_step": (np.array(1.0), 3)}, "n_step range must be"),
        ({"num_items": 2, "batch_length_T": 3, "lookback": np.array(-1)}, "lookback must be"),
        ({"num_items": 2, "batch_length_T": 3, "n_step": np.array(2)}, "n_step applies"),
    ],
)
def test_sample_still_refuses_other_arrays(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _filled().sample(**kwargs)


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_constructors_take_0d_int_arrays(cls: type[EpisodeReplayBuffer]) -> None:
    buf = cls(np.array(7), batch_size_B=np.array(3, np.uint16))
    assert (buf.capacity, buf.batch_size_B) == (7, 3)
    assert type(buf.capacity) is int and type(buf.batch_size_B) is int
    for bad in (np.array([7]), np.array(7.0), np.array(0)):
        with pytest.raises(ValueError, match="capacity must be an int >= 1"):
            cls(bad)

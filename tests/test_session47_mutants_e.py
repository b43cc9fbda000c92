"""Behaviour that hand-made mutants of ``episodes.replay.sampling``, ``episodes.replay.item_slots``,
``episodes.replay.store`` and ``episodes.replay.table`` showed no test pinned (session 47, fifth
batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
buffers are driven through ``add`` (interleaved chunks, evictions, compactions), ``sample``,
``get_transitions`` and ``update_priorities``, and what they give is compared with the plain-list
model of ``tests/replay/reference.py`` and with fixed-seed chi-square tests.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._episodes import chunk, make_episode_data
from tests.replay._stats import chi_square_p
from tests.replay.reference import RefBuffer, check_transition_batch


def _stream(num_episodes: int, length: int, piece: int, lanes: int, *, seed: int = 0):
    """Adds of ``lanes`` interleaved episodes, ``piece`` steps a chunk, with varied infos."""
    ends = ["terminated", "truncated", "ongoing"]
    datas = [make_episode_data(i, length, seed) for i in range(num_episodes)]
    adds = []
    for first in range(0, num_episodes, lanes):
        group = range(first, min(first + lanes, num_episodes))
        for a in range(0, length, piece):
            b = min(a + piece, length)
            adds.append(
                [
                    chunk(
                        f"e{i}",
                        datas[i],
                        a,
                        b,
                        terminated=b == length and ends[i % 3] == "terminated",
                        truncated=b == length and ends[i % 3] == "truncated",
                    )
                    for i in group
                ]
            )
    return adds


def _fill(buf, ref, adds):
    for chunks in adds:
        buf.add(chunks)
        ref.add(chunks)


def _stored(ref: RefBuffer) -> list[int]:
    return sorted(uid for ep in ref.episodes.values() for uid in ep.uids)


STREAMS = {
    # name: (capacity, episodes, length, steps a chunk, episodes interleaved)
    "one lane, whole episodes": (40, 12, 9, 9, 1),
    "interleaved pieces": (60, 18, 15, 4, 3),
    "many short episodes": (50, 40, 3, 2, 5),
    "long episodes in long pieces": (100, 6, 45, 11, 2),
}


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
# mutant: compaction's `np.take(remap, links[:count], out=...)` dropped (links left unmapped)
def test_every_stored_step_is_found_after_each_add(cls, name):
    capacity, episodes, length, piece, lanes = STREAMS[name]
    buf, ref = cls(capacity, seed=3), RefBuffer(capacity)
    for chunks in _stream(episodes, length, piece, lanes):
        buf.add(chunks)
        ref.add(chunks)
        uids = _stored(ref)
        assert len(buf) == len(uids)
        order = np.random.default_rng(len(uids)).permutation(uids)
        batch = buf.get_transitions(order, n_step=3, gamma=0.9, include_infos=True)
        check_transition_batch(ref, batch, 3, 3, 0.9)
        gone = sorted(set(range(ref.next_uid)) - set(uids))
        for uid in gone[-3:] + gone[:2]:
            with pytest.raises(KeyError):
                buf.get_transitions([uid])
        with pytest.raises(KeyError):
            buf.get_transitions([ref.next_uid])


def _plain(id_: str, n: int, t0: int = 0, *, infos: bool) -> SingleAgentEpisode:
    """``n`` steps whose observations are ``t0 ..``; infos ``{"id", "t"}`` or all empty."""
    return SingleAgentEpisode(
        id_,
        observations=[np.array([t], np.float32) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        infos=[{"id": id_, "t": t} for t in range(t0, t0 + n + 1)] if infos else None,
        terminated=True,
        t_started=t0,
        len_lookback_buffer=0,
    )


# mutant: `self.infos[count : self.end] = None` dropped from StepStore.compact
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_steps_without_infos_added_after_a_compaction_read_empty_infos(cls):
    buf = cls(100, seed=0)
    for i in range(30):  # steps with infos, most of them evicted and compacted away
        buf.add(_plain(f"old{i}", 10, infos=True))
    for i in range(30):  # steps without infos fill the rows the old ones held
        buf.add(_plain(f"new{i}", 10, infos=False))
    stored = buf.get_transitions(np.arange(600 - len(buf), 600), include_infos=True)
    assert [info for info in stored["infos"]] == [{}] * len(buf)
    sampled = buf.sample(500, include_infos=True)["infos"]
    assert all(info == {} for info in sampled)


RARE = {
    # name: (short episodes before, long episodes, long length, short episodes after, T)
    "rare starts in the middle": (150, 2, 40, 150, 30),
    "one long episode first": (0, 1, 60, 300, 25),
    "starts in the last rows": (300, 3, 35, 0, 33),
}


# mutants: the listed draw's `size - have` plus one; `*picked` dropped from its concatenation;
# the next round's rate from `drawn` where none was accepted (a division by zero)
@pytest.mark.parametrize("name", list(RARE))
def test_rare_sequence_starts_are_drawn_uniformly(name):
    before, longs, long_len, after, T = RARE[name]
    buf, ref = EpisodeReplayBuffer(10_000, seed=5), RefBuffer(10_000)
    episodes = [_plain(f"s{i}", 8, infos=False) for i in range(before)]
    episodes += [_plain(f"L{i}", long_len, infos=False) for i in range(longs)]
    episodes += [_plain(f"t{i}", 8, infos=False) for i in range(after)]
    buf.add(episodes)
    ref.add(episodes)
    valid = sorted(uid for ep in ref.episodes.values() for uid in ep.uids[: len(ep) - T + 1])
    for size in (3, 4000):
        batch = buf.sample(size, batch_length_T=T)
        assert batch["obs"].shape[:2] == batch["indices"].shape == (size, T)
        assert set(batch["indices"][:, 0].tolist()) <= set(valid)
    values, counts = np.unique(
        buf.sample(20_000, batch_length_T=T)["indices"][:, 0], return_counts=True
    )
    assert values.tolist() == valid
    assert chi_square_p(counts, np.full(len(counts), counts.sum() / len(counts))) > 1e-3


# Pins find_slots / slots_of through update_priorities and get_priorities after evictions.
@pytest.mark.parametrize("name", list(STREAMS))
def test_priorities_set_by_index_after_evictions_drive_the_draws(name):
    capacity, episodes, length, piece, lanes = STREAMS[name]
    buf, ref = PrioritizedEpisodeReplayBuffer(capacity, alpha=1.0, seed=7), RefBuffer(capacity)
    adds = _stream(episodes, length, piece, lanes)
    _fill(buf, ref, adds[: len(adds) // 2])
    early = np.array(_stored(ref))
    _fill(buf, ref, adds[len(adds) // 2 :])
    uids = np.array(_stored(ref))
    rng = np.random.default_rng(1)
    # Stored items get 1 + uid % 5; items evicted since are skipped, whatever they get.
    asked = rng.permutation(np.concatenate([uids, early]))
    buf.update_priorities(1.0 + asked % 5, asked)
    want = 1.0 + uids % 5
    np.testing.assert_allclose(buf.get_priorities(uids), want)
    values, counts = np.unique(buf.sample(30 * len(uids) * 3)["indices"], return_counts=True)
    assert values.tolist() == uids.tolist()
    assert chi_square_p(counts, counts.sum() * want / want.sum()) > 1e-3


# Pins draw_live over dead, uncompacted slots at batch sizes on both sides of a round.
@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("size", [1, 7, 5000])
def test_uniform_draws_cover_exactly_the_stored_steps(name, size):
    capacity, episodes, length, piece, lanes = STREAMS[name]
    buf, ref = EpisodeReplayBuffer(capacity, seed=11), RefBuffer(capacity)
    _fill(buf, ref, _stream(episodes, length, piece, lanes))
    uids = _stored(ref)
    draws = np.concatenate([buf.sample(size)["indices"] for _ in range(-(-40 * len(uids) // size))])
    assert len(buf.sample(size)["indices"]) == size
    values, counts = np.unique(draws, return_counts=True)
    assert values.tolist() == uids
    assert chi_square_p(counts, np.full(len(uids), counts.sum() / len(uids))) > 1e-3


# mutants: `and store.ep[last] == row` dropped in episode_slots' fast path; locate's
# `t >= t_end` as `t > t_end`, `t < t_begin` as `t <= t_begin`
@pytest.mark.parametrize("name", list(STREAMS))
def test_episode_indices_locate_and_episode_steps_follow_the_stream(name):
    capacity, episodes, length, piece, lanes = STREAMS[name]
    buf, ref = EpisodeReplayBuffer(capacity, seed=2), RefBuffer(capacity)
    for chunks in _stream(episodes, length, piece, lanes):
        buf.add(chunks)
        ref.add(chunks)
        stored = buf.get_episodes()
        assert [ep.id_ for ep in stored] == list(ref.episodes)
        for got, (id_, ep) in zip(stored, ref.episodes.items()):
            assert buf.get_episode_indices(id_).tolist() == ep.uids
            np.testing.assert_array_equal(got.get_observations(), np.array(ep.obs))
            times = np.arange(ep.t_begin, ep.t_begin + len(ep))
            assert buf.locate(id_, times[::-1]).tolist() == ep.uids[::-1]
            for outside in (ep.t_begin - 1, ep.t_begin + len(ep)):
                with pytest.raises(KeyError):
                    buf.locate(id_, [outside])
            ids, t = buf.episode_steps(ep.uids)
            assert ids.tolist() == [id_] * len(ep) and t.tolist() == times.tolist()


def _piece(id_: str, t0: int, n: int) -> SingleAgentEpisode:
    """An ongoing chunk whose observations name its episode and times."""
    return SingleAgentEpisode(
        id_,
        observations=[np.array([ord(id_[0]), t], np.float32) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[float(t) for t in range(t0, t0 + n)],
        t_started=t0,
        len_lookback_buffer=0,
    )


# A chunk of another episode whose time at the slot after the first chunk matches the time the
# first episode would have there (mutant: `and store.ep[last] == row` dropped).
LINK_CASES = {
    "other episode starts later": [("a", 0, 2), ("b", 2, 1), ("a", 2, 1)],
    "other episode continues": [("b", 0, 2), ("a", 0, 2), ("b", 2, 3), ("a", 2, 3)],
    "three episodes, runs of one": [("a", 0, 1), ("b", 1, 1), ("c", 2, 1), ("a", 1, 2)],
}


@pytest.mark.parametrize("name", list(LINK_CASES))
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_interleaved_episodes_whose_times_line_up_stay_apart(cls, name):
    buf, ref = cls(100, seed=0), RefBuffer(100)
    for id_, t0, n in LINK_CASES[name]:
        piece = _piece(id_, t0, n)
        buf.add(piece)
        ref.add([piece])
    for got, (id_, ep) in zip(buf.get_episodes(), ref.episodes.items()):
        assert buf.get_episode_indices(id_).tolist() == ep.uids
        np.testing.assert_array_equal(got.get_observations(), np.array(ep.obs))
        times = np.arange(ep.t_begin, ep.t_begin + len(ep))
        assert buf.locate(id_, times).tolist() == ep.uids
    for episode in buf.sample(50, sample_episodes=True):
        ep = ref.episodes[episode.id_]
        np.testing.assert_array_equal(episode.get_observations(), np.array(ep.obs))


# Reads a sparse episode through episode_slots' run-by-run walk (no mutant of it survives this
# file: a broken walk falls back to the links, so its mutants change only the cost).
@pytest.mark.parametrize("steps", [[1] * 6, [3, 12, 1, 20, 2], [9, 9, 9, 1]])
def test_a_sparse_episode_among_many_others_is_read_in_order(steps):
    buf, ref = EpisodeReplayBuffer(2_000, seed=0), RefBuffer(2_000)
    t0 = 0
    for k, n in enumerate(steps):
        pieces = [_piece(f"f{k}_{j}", 0, 50) for j in range(2)]
        pieces.append(_piece("a", t0, n))
        t0 += n
        buf.add(pieces)
        ref.add(pieces)
    ep = ref.episodes["a"]
    assert buf.get_episode_indices("a").tolist() == ep.uids
    assert buf.locate("a", np.arange(t0)).tolist() == ep.uids
    (got,) = [e for e in buf.get_episodes() if e.id_ == "a"]
    np.testing.assert_array_equal(got.get_observations(), np.array(ep.obs))


# mutant: `self.moves + 1` as `self.moves` in StepStore.compact (slots cached by the last sample
# taken as still valid after a compaction moved the rows)
@pytest.mark.parametrize("name", list(STREAMS))
def test_last_sample_priorities_land_on_its_items_after_adds_that_compact(name):
    capacity, episodes, length, piece, lanes = STREAMS[name]
    buf, ref = PrioritizedEpisodeReplayBuffer(capacity, alpha=1.0, seed=4), RefBuffer(capacity)
    adds = _stream(episodes, length, piece, lanes)
    for k, chunks in enumerate(adds):
        buf.add(chunks)
        ref.add(chunks)
        if k % 2 == 0:
            batch = buf.sample(16)
            continue
        stored = set(_stored(ref))
        priorities = 2.0 + np.arange(16.0)
        buf.update_priorities(priorities)  # the last sample's items, some since evicted
        last = {int(i): p for i, p in zip(batch["indices"], priorities)}  # a repeat: its last
        kept = np.array(sorted(set(last) & stored), np.int64)
        want = [last[int(i)] for i in kept]
        np.testing.assert_allclose(buf.get_priorities(kept), want)


def _ended(id_: str, t0: int, n: int, **end: bool) -> SingleAgentEpisode:
    piece = _piece(id_, t0, n)
    return SingleAgentEpisode(
        id_,
        observations=list(piece.get_observations()),
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        **end,
    )


# mutants: StoredEpisodes' done as `terminated` alone; its length as `t_end` (no `- t_begin`)
@pytest.mark.parametrize(
    "first, then, refused",
    [
        pytest.param(_ended("a", 0, 3, truncated=True), _piece("a", 3, 2), True, id="truncated"),
        pytest.param(_ended("a", 0, 3, terminated=True), _piece("a", 3, 2), True, id="terminated"),
        pytest.param(_piece("a", 0, 3), _piece("a", 3, 2), False, id="ongoing"),
        pytest.param(_piece("a", 5, 3), _piece("a", 8, 2), False, id="ongoing from t=5"),
    ],
)
def test_a_chunk_after_its_episode_ended_is_refused(first, then, refused):
    buf = EpisodeReplayBuffer(6, seed=0)
    buf.add(first)
    if refused:
        with pytest.raises(ValueError):
            buf.add(then)
        assert len(buf) == 3
    else:
        buf.add(then)  # 5 steps of the capacity of 6: nothing evicted
        assert len(buf) == 5 and buf.get_episode_indices("a").tolist() == list(range(5))

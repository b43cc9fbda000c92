"""Whole-episode reads follow an episode's links one run of adjacent slots at a time.

An episode recorded by a vector env of more than 32 sub-envs (a chunk of every sub-env added
each round, as ``EnvRunner.sample()`` chunks are) spreads over a span holding more than 32
slots per step of its own, so ``episode_slots`` does not scan the span but follows the links.
It walked them one Python iteration per step; it now follows each added chunk (a run of
adjacent slots) in O(1) probes, and O(log run) when the chunk sizes change, then checks the
result against the links in one gather (falling back to the walk when they disagree).

The slots are compared with the old step-by-step walk (kept below as the reference) for a table
of layouts; the work is counted as reads of the store's columns, never timed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, sampling

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _chunk(id_: str, t0: int, n: int, done: bool = False) -> SingleAgentEpisode:
    obs = np.arange(t0, t0 + n + 1, dtype=np.float32)[:, None]
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=np.zeros(n, np.int64),
        rewards=np.ones(n),
        t_started=t0,
        terminated=done,
        len_lookback_buffer=0,
    ).to_numpy()


def _rounds(cls: type, envs: int, sizes: Callable[[int, int], int], rounds: int) -> Any:
    """``rounds`` adds of one chunk per sub-env; ``sizes(round, env)`` is the chunk's length."""
    buf = cls(10**7, seed=0)
    for r in range(rounds):
        t0 = sum(sizes(q, 0) for q in range(r))  # equal-sized envs share their times
        buf.add([_chunk(f"e{i}", t0, sizes(r, i), done=r == rounds - 1) for i in range(envs)])
    return buf


def _ragged(cls: type, envs: int, rounds: int, seed: int = 0) -> Any:
    """Chunks of random lengths; episodes end at random and the sub-env starts a new one."""
    rng = np.random.default_rng(seed)
    buf = cls(10**7, seed=0)
    episode = [0] * envs
    t = [0] * envs
    for _ in range(rounds):
        chunks = []
        for i in range(envs):
            n = int(rng.integers(1, 41))
            done = bool(rng.random() < 0.15)
            chunks.append(_chunk(f"e{i}_{episode[i]}", t[i], n, done))
            t[i] += n
            if done:
                episode[i] += 1
                t[i] = 0
        buf.add(chunks)
    return buf


def _generations(
    cls: type, gens: int, capacity: int, through: Callable[[Any], Any] = lambda b: b
) -> Any:
    """Generations of 64 sub-envs' episodes, 8 rounds of 10-step chunks each; the oldest are
    evicted (and the rows compacted) by the capacity. ``through`` gets the buffer half-way
    through the last generation (a state round trip, a save and load) and the rounds go on.
    """
    buf = cls(capacity, seed=0)
    for g in range(gens):
        for r in range(8):
            if g == gens - 1 and r == 4:
                buf = through(buf)
            buf.add([_chunk(f"g{g}e{i}", 10 * r, 10, done=r == 7) for i in range(64)])
    return buf


def _reloaded(buf: Any, tmp_path: Path) -> Any:
    buf.save(tmp_path / "saved")
    return type(buf).load(tmp_path / "saved")


def _restated(buf: Any) -> Any:
    back = type(buf)(buf.capacity, seed=0)
    back.set_state(buf.get_state())
    return back


def _walk(store: Any, table: Any, row: int) -> np.ndarray:
    """The old ``_follow_links``: one Python iteration per step, as the reference."""
    first = int(table.first_slot[row])
    length = int(table.t_end[row] - table.t_begin[row])
    slots = np.empty(length, np.int64)
    cur = first
    for i in range(length):
        slots[i] = cur
        cur = int(store.nxt[cur])
    return slots


def _all(k: int) -> Callable[[int, int], int]:
    """Chunks of ``k`` steps in every round and sub-env."""
    return lambda r, i: k


LAYOUTS: dict[str, Callable[[type, Path], Any]] = {
    "single_env": lambda cls, p: _rounds(cls, 1, _all(50), 10),
    "few_envs_span_scan": lambda cls, p: _rounds(cls, 4, _all(8), 30),
    "many_envs_equal_chunks": lambda cls, p: _rounds(cls, 64, _all(50), 12),
    "many_envs_one_step_chunks": lambda cls, p: _rounds(cls, 64, _all(1), 40),
    "many_envs_two_step_chunks": lambda cls, p: _rounds(cls, 64, _all(2), 30),
    "many_envs_growing_chunks": lambda cls, p: _rounds(cls, 40, lambda r, i: 3 * r + 1, 12),
    "many_envs_shrinking_chunks": lambda cls, p: _rounds(cls, 40, lambda r, i: 80 >> r, 7),
    "many_envs_ragged_chunks": lambda cls, p: _ragged(cls, 48, 30),
    "ragged_then_set_state": lambda cls, p: _restated(_ragged(cls, 40, 25, seed=4)),
    "ragged_then_save_load": lambda cls, p: _reloaded(_ragged(cls, 40, 25, seed=5), p),
    "evicting_generations": lambda cls, p: _generations(cls, 4, 6000),
    "evicting_set_state_mid_generation": lambda cls, p: _generations(cls, 3, 6000, _restated),
    "evicting_save_load_mid_generation": lambda cls, p: _generations(
        cls, 3, 6000, lambda b: _reloaded(b, p)
    ),
}

# Layouts holding episodes spread too thinly for the span scan: they follow the runs.
FOLLOWED = {
    name for name in LAYOUTS if name.startswith(("many_", "evicting_")) or name.endswith("state")
}


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_episode_slots_are_the_link_walk(layout, cls, tmp_path, monkeypatch):
    buf = LAYOUTS[layout](cls, tmp_path)
    followed = []
    original = sampling._follow_runs

    def recording(*args: Any) -> Any:
        followed.append(args[1])
        return original(*args)

    monkeypatch.setattr(sampling, "_follow_runs", recording)
    store, table = buf._store, buf._table
    ids = buf.get_episode_ids()
    assert len(ids) >= 1
    for id_ in ids:
        row = table.order[id_]
        expected = _walk(store, table, row)
        slots = sampling.episode_slots(store, table, row)
        assert slots.dtype == np.int64, id_
        np.testing.assert_array_equal(slots, expected, err_msg=id_)
        np.testing.assert_array_equal(buf.get_episode_indices(id_), store.uid[expected])
    if layout in FOLLOWED:  # the table exercises the run following, not only the scans
        assert followed
    if layout.startswith("evicting_"):  # a loaded buffer's rows have not moved yet
        assert buf.get_evicted_ids(), "no eviction"
        assert store.moves or layout.startswith("evicting_save_load"), "no compaction"


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
def test_reads_through_the_buffer_match_the_link_walk(cls, monkeypatch):
    buf = _ragged(cls, 48, 30, seed=6)
    got = {e.id_: e for e in buf.get_episodes()}
    ids = buf.get_episode_ids()
    with monkeypatch.context() as mp:
        mp.setattr(sampling, "_follow_runs", lambda *args: None)  # every read walks
        walked = {e.id_: e for e in buf.get_episodes()}
    assert list(got) == list(walked) == ids
    for id_ in ids:
        np.testing.assert_array_equal(
            np.asarray(got[id_].observations), np.asarray(walked[id_].observations)
        )
        assert got[id_].t_started == walked[id_].t_started


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda store, s: store.t.__setitem__(s[len(s) // 2], 10**9), id="time"),
        pytest.param(lambda store, s: store.t.__setitem__(s[3:], store.t[s[3:]] + 7), id="times"),
        pytest.param(lambda store, s: store.ep.__setitem__(s[-1], 10**6), id="episode_row"),
        # The last run's size is the rest of the episode: 39 steps (e63: past the end).
        pytest.param(
            lambda store, s: store.t.__setitem__(s[-20], store.t[s[-20]] - 19), id="last_run"
        ),
    ],
)
@pytest.mark.parametrize("env", [5, 63])
def test_columns_that_disagree_with_the_links_fall_back_to_the_walk(corrupt, env):
    buf = _rounds(EpisodeReplayBuffer, 64, _all(20), 10)
    store, table = buf._store, buf._table
    row = table.order[f"e{env}"]
    expected = _walk(store, table, row)
    corrupt(store, expected)
    runs = sampling._follow_runs(store, row, int(table.first_slot[row]), len(expected))
    assert runs is None or np.array_equal(runs, expected)  # None: checked, refused, walked
    np.testing.assert_array_equal(sampling.episode_slots(store, table, row), expected)


class _CountingReads(np.ndarray):
    reads = 0

    def __getitem__(self, item: Any) -> Any:
        _CountingReads.reads += 1
        return super().__getitem__(item)

    def item(self, *args: Any) -> Any:
        _CountingReads.reads += 1
        return super().item(*args)


def _column_reads(buf: Any, id_: str) -> tuple[int, int]:
    """Reads of the store's link and step columns for one episode read, and its length."""
    store, table = buf._store, buf._table
    row = table.order[id_]
    expected = _walk(store, table, row)
    for name in ("nxt", "t", "ep", "live"):
        setattr(store, name, getattr(store, name).view(_CountingReads))
    _CountingReads.reads = 0
    slots = sampling.episode_slots(store, table, row)
    reads = _CountingReads.reads
    np.testing.assert_array_equal(slots, expected)
    return reads, len(expected)


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
def test_python_work_grows_with_the_chunks_not_the_steps(cls):
    # 64 sub-envs, 8 rounds: the same 8 chunks per episode, of 16 or of 2048 steps.
    short_reads, short_len = _column_reads(_rounds(cls, 64, _all(16), 8), "e7")
    long_reads, long_len = _column_reads(_rounds(cls, 64, _all(2048), 8), "e7")
    assert (short_len, long_len) == (128, 16384)
    # The old walk read the links once per step: 16384 reads for the long episode.
    assert long_reads <= short_reads + 64, (short_reads, long_reads)
    assert long_reads <= 200, long_reads

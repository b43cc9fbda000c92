"""Batched episode reads for hindsight relabelling: `episode_bounds`, `items_at`, id errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._episodes import chunk, chunk_streams, make_episode_data

KINDS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _all_items(buf: EpisodeReplayBuffer) -> np.ndarray:
    parts = [buf.get_episode_indices(id_) for id_ in buf.get_episode_ids()]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _check_against_locate(buf: EpisodeReplayBuffer) -> None:
    """Every item's bounds and every (item, time) pair of its episode, against the one-id API."""
    items = _all_items(buf)
    ids, t = buf.episode_steps(items)
    t_begin, t_end, done = buf.episode_bounds(items)
    assert t_begin.dtype == t_end.dtype == np.int64 and done.dtype == bool
    finished = {ep.id_: ep.is_done for ep in buf.get_episodes()}
    for item, id_, time, begin, end, ended in zip(items, ids, t, t_begin, t_end, done):
        steps = buf.get_episode_indices(id_)
        first = buf.episode_steps(steps[:1])[1][0]
        assert (begin, end, ended) == (first, first + len(steps), finished[id_])
        assert steps[time - begin] == item
        assert begin <= time < end
    # items_at, for every item and every stored time of its episode, in one call
    lengths = t_end - t_begin
    pairs = np.repeat(items, lengths)
    times = np.concatenate([np.arange(b, e) for b, e in zip(t_begin, t_end)] or [[]])
    got = buf.items_at(pairs, times.astype(np.int64))
    pair_ids = np.repeat(ids, lengths)
    want = [buf.locate(id_, int(time))[0] for id_, time in zip(pair_ids, times)]
    assert got.tolist() == want


@settings(max_examples=60, deadline=None)
@given(
    streams=chunk_streams(max_episodes=6, max_len=12),
    capacity=st.integers(4, 40),
    kind=st.sampled_from(KINDS),
    group=st.integers(1, 4),
    reload_at=st.integers(0, 6),
)
def test_bounds_and_items_at_match_locate_item_by_item(
    streams: list[SingleAgentEpisode], capacity: int, kind: Any, group: int, reload_at: int
) -> None:
    # Interleaved continuing chunks, evictions (chunks of evicted episodes restart them at
    # their t_started), the compactions those evictions bring, and a state round trip.
    buf = kind(capacity, seed=0)
    for at in range(0, len(streams), group):
        buf.add(streams[at : at + group], on_evicted="restart")
        if at // group == reload_at:
            again = kind(capacity, seed=0)
            again.set_state(buf.get_state())
            buf = again
        _check_against_locate(buf)


@st.composite
def _ragged_streams(draw: Any) -> list[SingleAgentEpisode]:
    """Episodes of many chunks of varied lengths, interleaved in a random order."""
    queues = []
    for i in range(draw(st.integers(1, 5))):
        length = draw(st.integers(1, 40))
        data = make_episode_data(i, length)
        parts, a = [], 0
        while a < length:
            b = min(length, a + draw(st.integers(1, 6)))
            parts.append(chunk(f"r{i}", data, a, b, terminated=b == length and i % 2 == 0))
            a = b
        queues.append(parts)
    out = []
    while any(queues):
        live = [q for q in queues if q]
        out.append(live[draw(st.integers(0, len(live) - 1))].pop(0))
    return out


@settings(max_examples=60, deadline=None)
@given(streams=_ragged_streams(), capacity=st.integers(10, 120), group=st.integers(1, 5))
def test_many_ragged_chunks_match_locate(
    streams: list[SingleAgentEpisode], capacity: int, group: int
) -> None:
    # Runs of unlike lengths and distances: the skips that guess from the last run miss.
    buf = EpisodeReplayBuffer(capacity, seed=0)
    for at in range(0, len(streams), group):
        buf.add(streams[at : at + group], on_evicted="restart")
    _check_against_locate(buf)


def _interleaved(kind: Any, runs: int, run_length: int, capacity: int = 10_000) -> Any:
    """Episodes "a" and "b" of ``runs`` chunks each, their chunks alternating."""
    buf = kind(capacity, seed=0)
    length = runs * run_length
    data = {name: make_episode_data(i, length) for i, name in enumerate("ab")}
    for r in range(runs):
        a, b = r * run_length, (r + 1) * run_length
        for name in "ab":
            buf.add(chunk(name, data[name], a, b, terminated=b == length and name == "a"))
    return buf


@pytest.mark.parametrize("rounds", [None, 1], ids=["walked", "listed_after_one_round"])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize(
    ("runs", "run_length"),
    [(1, 5), (2, 25), (7, 3), (40, 1)],
    ids=["one_run", "two_runs", "seven_runs", "forty_runs_of_one"],
)
def test_every_pair_of_an_interleaved_episode(
    kind: Any, runs: int, run_length: int, rounds: int | None, monkeypatch: Any
) -> None:
    if rounds is not None:  # targets the walk leaves are listed one episode at a time
        monkeypatch.setattr("episodes.replay.episode_lookup._ROUNDS", rounds)
    buf = _interleaved(kind, runs, run_length)
    _check_against_locate(buf)
    t_begin, t_end, done = buf.episode_bounds(buf.get_episode_indices("a")[:1])
    assert (t_begin.tolist(), t_end.tolist(), done.tolist()) == ([0], [runs * run_length], [True])


@pytest.mark.parametrize(
    ("envs", "length", "cut"), [(8, 50, 25), (16, 200, 5)], ids=["two_chunks", "forty_chunks"]
)
def test_interleaved_chunks_are_walked_without_per_episode_lookups(
    envs: int, length: int, cut: int, monkeypatch: Any
) -> None:
    # A vector env's chunks, interleaved: every target is reached by the vectorized walk (a
    # few rounds: runs alike long and alike far apart are skipped at once), none by listing an
    # episode's steps (one Python call per episode).
    buf = EpisodeReplayBuffer(10_000, seed=0)
    data = [make_episode_data(i, length) for i in range(envs)]
    for a in range(0, length, cut):
        b = a + cut
        buf.add([chunk(f"e{i}", data[i], a, b, truncated=b == length) for i in range(envs)])
    items = buf.sample(256)["indices"]
    _, t = buf.episode_steps(items)
    t_begin, t_end, _ = buf.episode_bounds(items)
    ids = buf.episode_steps(items)[0]
    targets = np.random.default_rng(0).integers(t_begin, t_end)
    expected = [buf.locate(i, int(x))[0] for i, x in zip(ids, targets)]

    def refuse(*args: Any) -> Any:
        raise AssertionError("items_at listed an episode's steps")

    monkeypatch.setattr("episodes.replay.sampling.episode_slots", refuse)
    monkeypatch.setattr("episodes.replay.episode_lookup._ROUNDS", 4)  # 40 runs: skipped
    assert buf.items_at(items, targets).tolist() == expected
    assert buf.items_at(items, t).tolist() == items.tolist()  # their own times: themselves


def test_compacted_buffer_is_read_from_the_moved_rows() -> None:
    buf = EpisodeReplayBuffer(30, seed=0)
    for i in range(12):  # each add evicts: compactions move the survivors forward
        data = make_episode_data(i, 6)
        buf.add([chunk(f"e{i}", data, 0, 3), chunk(f"x{i}", data, 0, 2)])
        buf.add(chunk(f"e{i}", data, 3, 6, truncated=True))
    assert buf._store.moves > 0  # a compaction happened
    _check_against_locate(buf)


def _buf() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    data = make_episode_data(0, 5)
    buf.add([chunk("a", data, 0, 5, terminated=True), chunk("b", data, 2, 4)])
    return buf


FORMS: dict[str, tuple[Any, Any, list[int]]] = {
    # name: (indices, t, items_at's answer); "a" holds items 0-4 (t 0-4), "b" 5-6 (t 2-3)
    "one_index_one_time": (6, 2, [5]),
    "list_and_one_time_for_all": ([0, 3], 4, [4, 4]),
    "numpy_per_item": (np.array([5, 1]), np.array([3, 0]), [6, 0]),
    "tensors": (torch.tensor([6, 0]), torch.tensor([2, 2]), [5, 2]),
    "uint_times": (np.array([2]), np.array([1], np.uint8), [1]),
    "empty": ([], [], []),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_index_and_time_forms(name: str) -> None:
    indices, t, want = FORMS[name]
    buf = _buf()
    got = buf.items_at(indices, t)
    assert got.dtype == np.int64 and got.tolist() == want
    begin, end, done = buf.episode_bounds(indices)
    count = len(np.atleast_1d(np.asarray(indices)))
    assert len(begin) == len(end) == len(done) == count


REFUSED: dict[str, tuple[Any, type[Exception], str]] = {
    # name: (call on _buf(), error, words the message holds)
    "locate_id_array": (
        lambda b: b.locate(np.array(["a", "b"], object), [0, 2]),
        TypeError,
        "episode_id must be one episode id",
    ),
    "locate_id_list_points_to_items_at": (
        lambda b: b.locate(["a"], [0]),
        TypeError,
        "pass item indices to items_at",
    ),
    "get_episode_indices_id_array": (
        lambda b: b.get_episode_indices(np.array(["a"], object)),
        TypeError,
        "episode_id must be one episode id (a hashable value), got ndarray",
    ),
    "get_episode_indices_missing_as_locate_says": (
        lambda b: b.get_episode_indices("zz"),
        KeyError,
        "episode 'zz' is not stored",
    ),
    "items_at_time_outside": (
        lambda b: b.items_at([0, 5], [1, 4]),
        KeyError,
        "times [4] outside the stored steps of their items' episodes: item 5 of episode 'b' "
        "holds [2, 4), asked 4",
    ),
    "items_at_time_before": (lambda b: b.items_at([5], -1), KeyError, "times [-1] outside"),
    "items_at_padding": (lambda b: b.items_at([0, -1], [0, 0]), KeyError, "padding"),
    "episode_bounds_padding": (lambda b: b.episode_bounds([-1]), KeyError, "padding"),
    "episode_bounds_never_issued": (lambda b: b.episode_bounds([7]), KeyError, "not stored"),
    "items_at_float_times": (lambda b: b.items_at([0], [1.0]), ValueError, "times must be"),
    "items_at_bool_indices": (lambda b: b.items_at([True], [0]), ValueError, "indices must"),
    "items_at_times_too_few": (
        lambda b: b.items_at([0, 1, 2], [0, 1]),
        ValueError,
        "times must be one time or one per index (3), got shape (2,)",
    ),
    "items_at_one_time_in_a_list_is_per_item": (
        lambda b: b.items_at([0, 1], [0]),
        ValueError,
        "one per index (2)",
    ),
    "items_at_2d_times": (lambda b: b.items_at([0], [[0]]), ValueError, "got shape (1, 1)"),
    "episode_bounds_2d": (lambda b: b.episode_bounds([[0]]), ValueError, "1-d sequence"),
    "items_at_beyond_int64": (lambda b: b.items_at([0], [2**64 - 1]), KeyError, "beyond int64"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refusals_name_the_argument(name: str) -> None:
    call, error, words = REFUSED[name]
    buf = _buf()
    before = buf.get_counters()
    with pytest.raises(error) as info:
        call(buf)
    text = info.value.args[0]
    assert words in text, text
    assert buf.get_counters() == before and buf.get_episode_ids() == ["a", "b"]


@pytest.mark.parametrize("method", ["locate", "get_episode_indices"])
def test_evicted_ids_are_named_evicted(method: str) -> None:
    buf = EpisodeReplayBuffer(6, seed=0)
    for name in "abc":
        buf.add(chunk(name, make_episode_data(0, 3), 0, 3))
    assert buf.get_evicted_ids() == ["a"]
    call = (lambda i: buf.locate(i, 0)) if method == "locate" else buf.get_episode_indices
    with pytest.raises(KeyError, match="episode 'a' is not stored: it was evicted"):
        call("a")
    with pytest.raises(KeyError) as info:
        call("never")
    assert info.value.args[0] == "episode 'never' is not stored"


def test_her_future_goals_of_a_sampled_batch() -> None:
    # The recipe: each item's goal is the achieved next observation of a step of its episode
    # from its own on; for a running episode the newest stored observation is the last goal.
    buf = _interleaved(EpisodeReplayBuffer, 3, 4)  # "a" terminated, "b" running
    batch = buf.sample(64, n_step=1)
    _, t = buf.episode_steps(batch["indices"])
    t_begin, t_end, done = buf.episode_bounds(batch["indices"])
    future = np.random.default_rng(0).integers(t, t_end)
    goals = buf.get_transitions(buf.items_at(batch["indices"], future))["next_obs"]
    ids = buf.episode_steps(batch["indices"])[0]
    assert (goals[:, 0] == np.where(ids == "a", 0, 1)).all()  # obs hold [episode, t]
    assert (goals[:, 1] == future + 1).all() and (future + 1 <= t_end).all()
    assert done.tolist() == (ids == "a").tolist() and (t_begin == 0).all()


def test_a_walk_that_meets_a_broken_link_lists_the_episode() -> None:
    # Should a run's link be lost, the episode's steps are listed as locate lists them.
    buf = _interleaved(EpisodeReplayBuffer, 3, 5)  # "a" at slots 0-4, 10-14, 20-24
    buf._store.nxt[4] = -1
    assert buf.items_at([0], [7]).tolist() == buf.locate("a", [7]).tolist() == [12]

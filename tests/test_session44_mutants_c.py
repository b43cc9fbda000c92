"""Behaviour that hand-made mutants of ``episodes.replay.nstep``, ``episodes.replay.sum_tree``
and ``episodes.io.writer`` showed no test pinned (session 44, third batch).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
The n-step and sequence tests compare every item against a plain-Python reference built from
the added episodes; the sum-tree tests use ``SumTree``'s public methods, the writer tests
``EpisodeWriter``, ``load_episode`` and ``removed_if_failed``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnsupportedVersionError,
    load_episode,
)
from episodes.io.tools import removed_if_failed
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, SumTree

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


# ------------------------------------------------------------------ replay.nstep


def _episode(id_: str, rewards: list[float], end: str, t0: int = 0) -> SingleAgentEpisode:
    """Observation ``[t]`` at env time ``t``; the observation after the last step is 99."""
    steps = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=[np.array([t], np.float32) for t in range(t0, t0 + steps)]
        + [np.array([99.0], np.float32)],
        actions=[0] * steps,
        rewards=rewards,
        terminated=end == "terminated",
        truncated=end == "truncated",
        t_started=t0,
        len_lookback_buffer=0,
    )


def _reference(rewards: list[float], end: str, t: int, n: int, gamma: float) -> dict[str, Any]:
    """The n-step transition from step ``t`` of a stored episode, in plain Python.

    Weights are Python powers of dyadic gammas (exact, so numpy's powers are the same), a
    weight of 0 leaves its term out, and the sum adds the terms in step order in float64.
    """
    m = min(n, len(rewards) - t)
    total = float(np.float32(rewards[t]))
    for k in range(1, m):
        weight = gamma**k
        if weight:
            total += weight * float(np.float32(rewards[t + k]))
    at_end = t + m == len(rewards)
    return {
        "rewards": total,
        "n_step": m,
        "next_obs": 99.0 if at_end else float(t + m),
        "terminateds": at_end and end == "terminated",
        "truncateds": at_end and end == "truncated",
        "discounts": gamma**m,
    }


def _chunks(id_: str, rewards: list[float], end: str, cuts: list[int]) -> list[SingleAgentEpisode]:
    """The episode as chunks ``[a, b)`` (``t_started=a``), the last one carrying its end."""
    obs = [np.array([t], np.float32) for t in range(len(rewards))] + [np.array([99.0], np.float32)]
    bounds = [0, *sorted(set(cuts) - {0, len(rewards)}), len(rewards)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        last = b == len(rewards)
        out.append(
            SingleAgentEpisode(
                id_,
                observations=obs[a : b + 1],
                actions=[0] * (b - a),
                rewards=rewards[a:b],
                terminated=last and end == "terminated",
                truncated=last and end == "truncated",
                t_started=a,
                len_lookback_buffer=0,
            )
        )
    return out


# Rewards as the buffer stores them (float32), infinities among them: a term of weight 0 must
# be left out, not added as 0 * inf (NaN).
_REWARD = st.one_of(
    st.floats(-4.0, 4.0, allow_nan=False, width=32),
    st.sampled_from([float("inf"), float("-inf")]),
)


@st.composite
def _stored_episodes(draw: Any) -> list[tuple[str, list[float], str, list[int]]]:
    count = draw(st.integers(1, 4))
    return [
        (
            f"e{i}",
            rewards := draw(st.lists(_REWARD, min_size=1, max_size=14)),
            draw(st.sampled_from(["terminated", "truncated", "ongoing"])),
            draw(st.lists(st.integers(1, len(rewards)), max_size=3)),
        )
        for i in range(count)
    ]


def _add_interleaved(buf: Any, episodes: list[tuple[str, list[float], str, list[int]]]) -> None:
    queues = [_chunks(*episode) for episode in episodes]
    while any(queues):  # one chunk of each episode in turn: the episodes' slots interleave
        buf.add([queue.pop(0) for queue in queues if queue])


def _assert_matches(batch: dict[str, Any], row: int, expected: dict[str, Any]) -> None:
    got = {
        "rewards": float(batch["rewards"][row]),
        "n_step": int(batch["n_step"][row]),
        "next_obs": float(batch["next_obs"][row][0]),
        "terminateds": bool(batch["terminateds"][row]),
        "truncateds": bool(batch["truncateds"][row]),
        "discounts": float(batch["discounts"][row]),
    }
    # The batch holds the float64 sum and power rounded once to float32 (a NaN sum, of inf
    # and -inf, compared as NaN).
    want = dict(
        expected,
        rewards=float(np.float32(expected["rewards"])),
        discounts=float(np.float32(expected["discounts"])),
    )
    if math.isnan(want["rewards"]):
        assert math.isnan(got.pop("rewards"))
        want.pop("rewards")
    assert got == want


# Named windows: each sum is checked against the reference rounded once.
WINDOWS = {
    # Mutant: a term of weight 0 added as ``0 * reward`` (``if weight:`` dropped): NaN.
    "gamma 0 leaves out an infinite later reward": ([1.0, float("inf"), 2.0], 0.0, 3),
    "a power below float64's range leaves out an infinite reward": (
        [1.0, 1.0, float("inf")],
        2.0**-600,
        3,
    ),
}


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name", WINDOWS)
def test_named_windows_match_the_reference(cls, name):
    rewards, gamma, n = WINDOWS[name]
    buf = cls(100, seed=0)
    buf.add(_episode("a", rewards, "terminated"))
    batch = buf.get_transitions(buf.locate("a", range(len(rewards))), n_step=n, gamma=gamma)
    for t in range(len(rewards)):
        _assert_matches(batch, t, _reference(rewards, "terminated", t, n, gamma))


@pytest.mark.parametrize("cls", BUFFERS)
@settings(max_examples=40, deadline=None)
@given(
    episodes=_stored_episodes(),
    n=st.integers(1, 20),
    gamma=st.sampled_from([0.0, 0.5, 0.75, 0.625, 1.0]),
)
def test_every_item_is_the_plain_python_n_step_transition(cls, episodes, n, gamma):
    # Mutant: a term of weight 0 (gamma 0, past the first step) added as ``0 * reward``
    # (``if weight:`` dropped): NaN where that reward is infinite.
    buf = cls(1000, seed=0)
    _add_interleaved(buf, episodes)
    for id_, rewards, end, _ in episodes:
        batch = buf.get_transitions(buf.locate(id_, range(len(rewards))), n_step=n, gamma=gamma)
        for t in range(len(rewards)):
            _assert_matches(batch, t, _reference(rewards, end, t, n, gamma))


@pytest.mark.parametrize("cls", BUFFERS)
@settings(max_examples=25, deadline=None)
@given(
    episodes=_stored_episodes(),
    lo=st.integers(1, 10),
    span=st.integers(1, 10),
    gamma=st.sampled_from([0.5, 0.75]),
)
def test_sampled_ranges_match_the_plain_python_reference(cls, episodes, lo, span, gamma):
    # Per sampled index, as above, for horizons drawn from a range (mixed horizons take the
    # other branch of the walk's stop test).
    buf = cls(1000, seed=1)
    _add_interleaved(buf, episodes)
    batch = buf.sample(64, n_step=(lo, lo + span), gamma=gamma)
    ids, times = buf.episode_steps(batch["indices"])
    stored = {id_: (rewards, end) for id_, rewards, end, _ in episodes}
    for row, (id_, t) in enumerate(zip(ids, times)):
        rewards, end = stored[id_]
        m = int(batch["n_step"][row])
        assert 1 <= m < lo + span
        if t + m < len(rewards):
            assert m >= lo  # a window the episode's end did not cut took a drawn horizon
        expected = _reference(rewards, end, int(t), m, gamma)
        _assert_matches(batch, row, expected)


def _check_sequence_rows(
    buf: Any, batch: dict[str, Any], stored: dict[str, tuple[int, int]], lookback: int
) -> None:
    """Every cell of a sequence batch against the stored steps ``[t0, t0 + length)`` of
    :func:`_episode`'s episodes (observation ``[t]``, 99 after the last step)."""
    rows, cols = batch["mask"].shape
    start_ids, start_t = buf.episode_steps(batch["indices"][:, lookback])
    for b in range(rows):
        t0, length = stored[start_ids[b]]
        for j in range(cols):
            t = int(start_t[b]) - lookback + j
            inside = t0 <= t < t0 + length
            assert bool(batch["mask"][b, j]) == inside, (b, j, t)
            if not inside:
                assert batch["indices"][b, j] == -1 and batch["obs"][b, j, 0] == 0.0
                continue
            ids, times = buf.episode_steps(batch["indices"][b, j])
            assert (ids[0], int(times[0])) == (start_ids[b], t)
            assert batch["obs"][b, j, 0] == float(t)
            assert batch["next_obs"][b, j, 0] == (99.0 if t == t0 + length - 1 else float(t + 1))


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("steps", [63, 64, 65])
def test_padded_sequences_reaching_past_a_full_store(cls, steps):
    # Mutant: the far end clipped to ``store.end`` rather than ``store.end - 1``: with an
    # episode filling the store exactly (64 or 65 steps; 63 leave a slot spare), a row
    # reaching past it read one slot past the store's arrays (IndexError).
    buf = cls(1000, seed=0)
    buf.add(_episode("a", [1.0] * steps, "truncated"))
    batch = buf.sample(400, batch_length_T=5, pad=True)
    _check_sequence_rows(buf, batch, {"a": (0, steps)}, 0)
    assert not batch["mask"].all()  # some rows did reach past the episode's end


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("lookback", [2, 3, 5])
def test_lookback_never_reaches_an_evicted_episode_on_a_reused_row(cls, lookback):
    # Mutant: the one-check path of the walk not asking whether the far slot is live: "b"
    # takes evicted "a"'s episode row, and "a"'s dead slots, just below "b"'s first slot
    # (after one slot of "c"), hold the env times "b"'s lookback would have: they were read
    # as "b"'s earlier steps instead of padding.
    buf = cls(10, seed=0)
    buf.add(_episode("a", [1.0] * 10, "terminated"))
    buf.add(_episode("c", [1.0], "ongoing"))  # evicts "a", whose slots stay until compaction
    buf.add(_episode("b", [1.0] * 3, "ongoing", t0=11))
    batch = buf.sample(200, batch_length_T=1, lookback=lookback)
    _check_sequence_rows(buf, batch, {"b": (11, 3), "c": (0, 1)}, lookback)


# ------------------------------------------------------------------ replay.sum_tree


def _tree(capacity: int, values: list[float]) -> SumTree:
    tree = SumTree(capacity)
    tree.rebuild(np.array(values))
    return tree


@pytest.mark.parametrize("capacity", [4, 2049])  # leaves only, and a padded tree with a level
def test_rebuild_refuses_one_value_more_than_the_capacity_and_keeps_the_tree(capacity):
    # Mutant: ``len(values) > capacity + 1`` refused: one value more was taken (into the
    # padding of a tree with levels, a leaf no index reaches), or half-written and refused by
    # numpy after every leaf was zeroed (leaves only).
    tree = _tree(capacity, [1.0, 2.0])
    with pytest.raises(ValueError, match="at most capacity"):
        tree.rebuild(np.ones(capacity + 1))
    assert tree.leaves()[:3].tolist() == [1.0, 2.0, 0.0]
    assert (tree.total, tree.min) == (3.0, 1.0)


@pytest.mark.parametrize("capacity", [4, 2049])
def test_a_shorter_rebuild_zeroes_the_leaves_past_its_values(capacity):
    # Mutant: the leaves not zeroed before the values are written: the earlier rebuild's
    # tail stayed, counted in the total and found.
    tree = _tree(capacity, [1.0, 2.0, 3.0])
    tree.rebuild(np.array([5.0]))
    assert tree.leaves()[:4].tolist() == [5.0, 0.0, 0.0, 0.0]
    assert (tree.total, tree.min) == (5.0, 5.0)
    assert tree.find(np.array([0.0, 4.9, 5.0, 7.0])).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("capacity", [2049, 20_000])  # one and two levels below the top
@pytest.mark.parametrize("where", [0, 1, 2, 7, 8, 9, 1000, 2048])
def test_the_minimum_is_found_at_every_child_position(capacity, where):
    # Mutant: the rebuild's column-by-column minimum starting at the third child (the second
    # child of each node left out): a smallest leaf there was missed above the leaves.
    values = np.ones(capacity)
    values[where] = 0.25
    tree = _tree(capacity, list(values))
    assert tree.min == 0.25
    tree.update(np.array([where]), np.array([0.5]))  # the few-leaves path recomputes it
    assert tree.min == 0.5


@pytest.mark.parametrize("capacity", [4096, 32_768])  # levels, and no padding past the leaves
@pytest.mark.parametrize("mass", [-1.0, -1e-300, -np.inf])
def test_a_negative_mass_lands_on_the_first_non_zero_leaf(capacity, mass):
    # Mutant: the rest of the mass below a top node not raised to 0 (``np.fmax`` dropped): a
    # negative one matched no child, the walk went one leaf left of the first, to index -1,
    # which numpy read as the last leaf (non-zero here, so returned).
    values = np.ones(capacity)
    values[:3] = 0.0
    tree = _tree(capacity, list(values))
    assert tree.find(np.array([mass, 0.0])).tolist() == [3, 3]


@pytest.mark.parametrize("capacity", [1, 5, 9, 4096, 2049])
def test_an_all_zero_tree_finds_leaves_inside_it(capacity):
    # Mutants: the search past every leaf not handling a tree without a non-zero leaf
    # (IndexError), or clipping its result to one past the last leaf. A capacity that pads the
    # leaf array (9, 2049: not a power of the fanout) returned a padding leaf's index, which
    # ``update`` then refused.
    tree = SumTree(capacity)
    found = tree.find(np.array([0.0, 0.5, 1.0, -1.0]))
    assert ((found >= 0) & (found < capacity)).all()
    assert tree.leaves(found).tolist() == [0.0] * 4
    tree.update(found, np.ones(4))  # indices the tree takes back


@pytest.mark.parametrize("capacity", [3, 2049])
def test_the_leaves_returned_are_a_copy(capacity):
    # Mutant: ``leaves()`` returning the tree's own leaf array: writing into the result
    # changed leaves behind the sums, so ``find`` returned a leaf that now reads 0.
    tree = _tree(capacity, [1.0, 2.0, 3.0])
    leaves = tree.leaves()
    leaves[:] = 0.0
    assert tree.leaves()[:3].tolist() == [1.0, 2.0, 3.0]
    assert tree.leaves(tree.find(np.array([0.5, 1.5, 5.5]))).tolist() == [1.0, 2.0, 3.0]


# ------------------------------------------------------------------ io.writer


def test_the_v1_writer_refuses_a_v2_dataset_naming_the_v2_writer(tmp_path):
    # Mutant: the check for a manifest without ``format.json`` dropped: the v2 dataset was
    # refused only as a directory holding something else, without naming DatasetWriter.
    with DatasetWriter(tmp_path) as writer:
        writer.write(
            SingleAgentEpisode(
                observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
            )
        )
    manifest = (tmp_path / "manifest.jsonl").read_bytes()
    with pytest.raises(NotADatasetError, match="use DatasetWriter"):
        EpisodeWriter(tmp_path)
    assert (tmp_path / "manifest.jsonl").read_bytes() == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.jsonl", "shards"]


def test_the_v1_writer_refuses_a_newer_format_version_and_leaves_its_format_file(tmp_path):
    # Mutant: the dataset's files made again on every open, not only for a new one: the
    # newer version's ``format.json`` was overwritten with version 1, and the open went on.
    with EpisodeWriter(tmp_path) as writer:
        writer.write(
            SingleAgentEpisode(
                observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
            )
        )
    fmt = tmp_path / "format.json"
    newer = json.dumps(dict(json.loads(fmt.read_text()), version=99))
    fmt.write_text(newer)
    with pytest.raises(UnsupportedVersionError, match="version 99"):
        EpisodeWriter(tmp_path)
    assert fmt.read_text() == newer


def test_a_closed_v1_writer_refuses_a_write_and_leaves_no_chunk(tmp_path):
    # Mutant: the closed check never true: the chunk was committed into ``chunks/`` before
    # the closed manifest descriptor failed the write (a TypeError, an orphan chunk).
    writer = EpisodeWriter(tmp_path)
    writer.close()
    with pytest.raises(DatasetError, match="closed"):
        writer.write(
            SingleAgentEpisode(
                observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
            )
        )
    assert list((tmp_path / "chunks").iterdir()) == []
    assert (tmp_path / "manifest.jsonl").read_bytes() == b""


def test_the_v1_writer_records_data_checksums_by_default(tmp_path):
    # Mutant: the checksum branch read the other way round: a default writer recorded no
    # data CRC-32, so a flipped data byte loaded silently under ``verify=True``.
    with EpisodeWriter(tmp_path) as writer:
        chunk = writer.write(
            SingleAgentEpisode(
                "a",
                observations=[np.zeros(8), np.ones(8)],
                actions=[0],
                rewards=[1.0],
                len_lookback_buffer=0,
            )
        )
    (obs,) = (tmp_path / chunk).glob("obs.*.npy")
    data = bytearray(obs.read_bytes())
    data[-1] ^= 1  # the last byte of the last observation
    obs.write_bytes(bytes(data))
    with pytest.raises(CorruptDatasetError, match="CRC-32 mismatch"):
        load_episode(tmp_path, "a", verify=True)


def test_a_large_array_s_checksum_covers_every_slice(tmp_path):
    # Mutant: the threaded CRC-32 of an array of 4 MiB or more not chained from one 1 MiB
    # slice to the next (the last slice's alone): an intact chunk failed verification.
    obs = [np.arange(300_000, dtype=np.float64) + t for t in range(2)]  # 4.8 MB
    with EpisodeWriter(tmp_path) as writer:
        writer.write(
            SingleAgentEpisode(
                "a", observations=obs, actions=[0], rewards=[1.0], len_lookback_buffer=0
            )
        )
    loaded = load_episode(tmp_path, "a", verify=True)
    assert np.array_equal(np.asarray(loaded.get_observations()), np.stack(obs))


def _fail_in(path: Any, commit: bool) -> None:
    with pytest.raises(RuntimeError, match="the block failed"), removed_if_failed(path):
        with EpisodeWriter(path) as writer:
            if commit:
                writer.write(
                    SingleAgentEpisode(
                        "a", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
                    )
                )
        raise RuntimeError("the block failed")


def test_a_failed_block_takes_its_files_back_from_a_given_empty_directory(tmp_path):
    # Mutant: only directories the block made counted, not an empty one it was given: the
    # writer's files stayed there after the failure.
    _fail_in(tmp_path, commit=False)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_block_keeps_a_dataset_holding_an_episode(tmp_path):
    # Mutants: the episodes stored not asked about, or a dataset counted as holding some only
    # from two chunks on: the one committed episode was taken back with the writer's files.
    path = tmp_path / "new" / "data"
    _fail_in(path, commit=True)
    assert list(load_episode(path, "a").get_rewards()) == [1.0]

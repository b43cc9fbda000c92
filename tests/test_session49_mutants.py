"""Behaviour that hand-made mutants of ``episodes.io.plain_rows``,
``episodes.replay.dataset_fill``, ``episodes.replay.episode_lookup`` and
``episodes.runner.finals`` showed no test pinned (session 49).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, shard_codec
from episodes.io.plain_rows import plain_rows
from episodes.io.shard_codec import decode_rows, encode_rows
from episodes.replay import EpisodeReplayBuffer, dataset_fill
from episodes.replay.dataset_fill import fill_from_dataset
from episodes.runner.finals import Finals

MODES = [None, True, False]


def _general(*args, **kwargs):
    """``decode_rows`` with the direct path switched off: the general path alone."""
    saved = shard_codec.plain_rows
    shard_codec.plain_rows = lambda *a, **k: None
    try:
        return decode_rows(*args, **kwargs)
    finally:
        shard_codec.plain_rows = saved


def _state(value):
    """A value with every part's type (and dtype, flags) spelt out, for exact comparison."""
    if isinstance(value, SingleAgentEpisode):
        return _state(value.get_state())
    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.str, value.shape, value.flags.writeable, value.tobytes())
    if isinstance(value, dict):
        return ("dict", type(value), [(k, _state(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [_state(v) for v in value])
    return (type(value), value)


def _piece(seed: int, *, extra_dtype=np.float32) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    ep = SingleAgentEpisode(
        f"p{seed}",
        observations=list(rng.normal(size=(5, 3)).astype(np.float32)),
        actions=list(rng.integers(0, 2, 4)),
        rewards=list(rng.normal(size=4)),
        infos=[{"seed": seed, "i": i} if i % 2 else {} for i in range(5)],
        extra_model_outputs={"logp": list(rng.normal(size=4).astype(extra_dtype))},
        observation_space=gym.spaces.Box(-9, 9, (3,), np.float32),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=1,
    )
    return ep.to_numpy()


def _outcome(read, entry, table, spaces, mode, start=0):
    try:
        got = read(entry, table, start, spaces=spaces, where="x", numpy=mode)
        return ("ok", _state(got))
    except Exception as err:  # the error's type and words
        return ("error", type(err).__name__, str(err))


# plain_rows mutants: items_slice (``column.slice(0, size)``), leaf_start0 (leaves read from row 0)
@pytest.mark.parametrize("mode", MODES)
def test_plain_rows_reads_a_piece_further_down_a_table(mode):
    first, second = _piece(1), _piece(2)
    enc1, enc2 = encode_rows(first), encode_rows(second)
    table = pa.concat_tables([pa.table(enc1.columns), pa.table(enc2.columns)]).combine_chunks()
    start = pa.table(enc1.columns).num_rows
    got = plain_rows(enc2.entry, table, start, spaces=enc2.spaces, where="x", numpy=mode)
    assert got is not None  # a plainly laid out piece: taken
    want = _general(enc2.entry, table, start, spaces=enc2.spaces, where="x", numpy=mode)
    assert _state(got) == _state(want)
    assert got.get_infos() == second.get_infos() != first.get_infos()
    assert np.asarray(got.get_observations()).tolist() == second.get_observations().tolist()
    assert np.asarray(got.get_extra_model_outputs("logp")).tolist() == (
        second.get_extra_model_outputs("logp").tolist()
    )


def _spare_logp(meta, leaves, table):
    """A second ``logp`` in the extras, its leaf a column of its own."""
    leaves["spare.npy"] = dict(leaves["extra0.0.npy"], path=["spare"])
    twin = copy.deepcopy(meta["extra_model_outputs"][0])
    twin[1]["leaves"] = [{"file": "spare.npy", "kind": "batched"}]
    meta["extra_model_outputs"].append(twin)
    logp = table.column("extra_model_outputs").combine_chunks().field("logp")
    return table.append_column("spare", pa.compute.negate(logp))  # other values


def _set(path, value):
    def mutate(meta, leaves, table):
        where = {"meta": meta, "leaves": leaves}
        for key in path[:-1]:
            where = where[key]
        if value is KeyError:
            del where[path[-1]]
        else:
            where[path[-1]] = value
        return table

    return mutate


def _extra_reads_rewards(meta, leaves, table):
    """The extras' leaf names the rewards' column (same dtype and length)."""
    leaves["extra0.0.npy"] = dict(leaves["rew.0.npy"])
    return table


# Each entry: what a damaged piece's index entry holds; the mutants it catches beside it.
DAMAGE = {
    "space reference -1": _set(["meta", "observation_space"], {"space_ref": -1}),  # ref_neg
    "column space reference -1": _set(
        ["meta", "columns", "actions", "space"], {"space_ref": -1}
    ),  # ref_neg
    "no custom data": _set(["meta", "custom_data"], KeyError),  # custom_missing
    "version True": _set(["meta", "version"], True),  # version_type
    "infos one row more": _set(["meta", "columns", "infos", "size"], 6),  # items_ge
    "extras key twice, two columns": _spare_logp,  # dup_extra
    "two columns read one leaf": _extra_reads_rewards,  # read_twice
}


@pytest.mark.parametrize("name", DAMAGE)
def test_plain_rows_damaged_entries_read_as_the_general_path_reads_them(name):
    enc = encode_rows(_piece(3, extra_dtype=np.float64))
    entry = copy.deepcopy(enc.entry)
    table = DAMAGE[name](entry["meta"], entry["leaves"], pa.table(enc.columns))
    for mode in MODES:
        want = _outcome(_general, entry, table, enc.spaces, mode)
        assert _outcome(decode_rows, entry, table, enc.spaces, mode) == want, mode


# --- episodes.replay.dataset_fill ----------------------------------------------------------------


def _fill_piece(id_, a, b, *, done=False):
    """Episode ``id_``'s steps ``a..b`` (observations a..b), terminated if ``done``."""
    return SingleAgentEpisode(
        id_,
        observations=list(range(a, b + 1)),
        actions=[0] * (b - a),
        rewards=[1.0] * (b - a),
        t_started=a,
        terminated=done,
        len_lookback_buffer=0,
    )


def _write(path, pieces):
    with EpisodeWriter(path) as writer:
        for p in pieces:
            writer.write(p)
    return path


# dataset_fill mutant begun_len_only (an episode of 0-step pieces never "begins")
def test_fill_an_episode_of_one_empty_piece_lets_the_next_begin(tmp_path):
    path = _write(tmp_path, [_fill_piece("A", 0, 0), _fill_piece("B", 0, 2)])
    buffer = EpisodeReplayBuffer(100)
    assert fill_from_dataset(buffer, path, False) == 2
    assert "B" in buffer.get_episode_ids()
    assert buffer.get_num_timesteps() == 2


# dataset_fill mutant stopped_gt1 (the last piece's join with evicted earlier ones unchecked)
@pytest.mark.parametrize(
    "last, joins",
    [("continues", True), ("skips a step", False)],
)
def test_fill_an_evicted_episodes_last_piece_is_checked_to_join(tmp_path, last, joins):
    later = _fill_piece("A", 3, 6) if joins else _fill_piece("A", 4, 6)
    # B's 4 steps evict A (capacity 4) before A's last piece comes, in an add of its own.
    path = _write(tmp_path, [_fill_piece("A", 0, 3), _fill_piece("B", 0, 4, done=True), later])
    buffer = EpisodeReplayBuffer(4)
    if joins:
        assert fill_from_dataset(buffer, path, False) == 10
        assert buffer.get_episode_ids() == ["B"]
    else:
        with pytest.raises(ValueError, match="does not continue where its earlier pieces"):
            fill_from_dataset(buffer, path, False)


# dataset_fill mutants key_none_nocontinue (a piece the first manifest read did not list is
# added twice) and pos_gt (a piece whose earlier piece never came is added)
@pytest.mark.parametrize(
    "ranks, ids, steps",
    [
        # index 2 committed after the time order was read: added as it comes, once
        ({0: ("B", 0), 1: ("A", 0)}, ["B", "A", "C"], 8),
        # A's earlier piece (index 3) is listed but never read: A's later piece is not added,
        # nor C, written after A began
        ({0: ("B", 0), 1: ("A", 1), 2: ("C", 0), 3: ("A", 0)}, ["B"], 4),
    ],
)
def test_fill_pieces_the_time_order_does_not_place(tmp_path, monkeypatch, ranks, ids, steps):
    path = _write(
        tmp_path,
        [_fill_piece("B", 0, 4, done=True), _fill_piece("A", 0, 3), _fill_piece("C", 0, 1)],
    )
    if 3 in ranks:  # A's piece there is then its later piece (t 3..6)
        path = _write(
            tmp_path / "later",
            [_fill_piece("B", 0, 4, done=True), _fill_piece("A", 3, 6), _fill_piece("C", 0, 1)],
        )
    monkeypatch.setattr(dataset_fill, "_time_ranks", lambda _path: ranks)
    buffer = EpisodeReplayBuffer(100)
    assert fill_from_dataset(buffer, path, False) == 8  # every piece read
    assert buffer.get_episode_ids() == ids
    assert buffer.get_num_timesteps() == steps


# dataset_fill mutant no_same_ids (a NaN-holding id's pieces read as two episodes)
@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter])
def test_fill_joins_the_pieces_of_an_episode_whose_id_holds_a_nan(tmp_path, writer):
    id_ = ("run", float("nan"))
    with writer(tmp_path) as w:
        for piece in (_fill_piece(id_, 0, 3), _fill_piece(id_, 3, 5, done=True)):
            w.write(piece)
    buffer = EpisodeReplayBuffer(100)
    assert fill_from_dataset(buffer, tmp_path, False) == 5
    assert buffer.get_num_episodes() == 1
    (episode,) = buffer.get_episodes()
    assert len(episode) == 5
    assert episode.get_observations().tolist() == [0, 1, 2, 3, 4, 5]


# dataset_fill mutant double_add (a batch ``add`` took is added again, piece by piece)
@pytest.mark.parametrize("done", [True, False])
def test_fill_adds_each_piece_of_a_batch_once(tmp_path, done):
    _write(tmp_path, [_fill_piece(x, 0, 2, done=done) for x in "ABC"])
    buffer = EpisodeReplayBuffer(100)
    assert fill_from_dataset(buffer, tmp_path, False) == 6
    assert buffer.get_num_episodes() == 3
    assert buffer.get_num_timesteps() == 6
    assert [len(e) for e in buffer.get_episodes()] == [2, 2, 2]


# --- episodes.replay.episode_lookup --------------------------------------------------------------


def _lookup_buffer():
    buffer = EpisodeReplayBuffer(100)
    buffer.add([_fill_piece("a", 0, 3), _fill_piece("b", 10, 12)])
    return buffer


# episode_lookup mutant at_last (the error names the last item asked outside, not the first)
@pytest.mark.parametrize(
    "indices, times, first",
    [
        ([0, 4, 1], [7, 9, 5], "item 0 of episode 'a' holds [0, 3), asked 7"),
        ([4, 0, 3], [20, 9, 0], "item 4 of episode 'b' holds [10, 12), asked 20"),
        ([1, 2], [3, -1], "item 1 of episode 'a' holds [0, 3), asked 3"),
    ],
)
def test_items_at_names_the_first_item_asked_outside_its_episode(indices, times, first):
    buffer = _lookup_buffer()
    with pytest.raises(KeyError) as info:
        buffer.items_at(indices, times)
    assert first in info.value.args[0]


# --- episodes.runner.finals ----------------------------------------------------------------------


def _finals(*steps):
    """A store of plain (one-leaf) finals, each step ``(rows, envs, values)`` added then frozen."""
    finals = Finals(None)
    for rows, envs, values in steps:
        finals.add(np.array(rows), np.array(envs), [np.array(values, np.float32)[:, None]])
        finals.freeze()
    return finals


# finals mutants no_prev, prev_last, keep_parts (a second freeze loses, reorders or repeats
# the entries of the first) and item_off
def test_finals_frozen_twice_keep_every_ending_in_order():
    finals = _finals(([1, 2], [0, 1], [1.0, 2.0]), ([4], [1], [3.0]))
    finals.freeze()  # nothing new: unchanged
    assert finals.rows.tolist() == [1, 2, 4]
    assert finals.envs.tolist() == [0, 1, 1]
    assert [finals.item(k).tolist() for k in range(3)] == [[1.0], [2.0], [3.0]]


# finals mutants key_swap and lookup_plus1 (an ending found by the wrong key)
@pytest.mark.parametrize(
    "rows, envs, want",
    [
        ([1, 3, 2], [2, 0, 1], [1, 0, 2]),
        ([3], [0], [0]),
        ([2, 2, 1, 6], [1, 0, 2, 0], [2, 3, 1, 4]),
    ],
)
def test_finals_index_of_finds_each_ending_by_row_and_env(rows, envs, want):
    finals = _finals(([3, 1, 2], [0, 2, 1], [10.0, 11.0, 12.0]), ([2, 6], [0, 0], [13.0, 14.0]))
    # entries (row, env): 0 (3, 0), 1 (1, 2), 2 (2, 1), 3 (2, 0), 4 (6, 0)
    got = finals.index_of(np.array(rows), np.array(envs), 10).tolist()
    assert got == want
    for k, row, env in zip(got, rows, envs, strict=True):
        assert (finals.rows[k], finals.envs[k]) == (row, env)


# finals mutants shift_neg, mask_all, envs_nomask, no_freeze_in_kept
@pytest.mark.parametrize(
    "mask, shift, rows, envs, values",
    [
        ([True, False, True], -2, [3, 5], [0, 2], [1.0, 3.0]),
        ([False, True, True], 4, [8, 11], [1, 2], [2.0, 3.0]),
        ([True, True, True], 0, [5, 4, 7], [0, 1, 2], [1.0, 2.0, 3.0]),
        ([False, False, False], 3, [], [], []),
    ],
)
def test_finals_kept_moves_the_masked_endings(mask, shift, rows, envs, values):
    finals = _finals(([5, 4, 7], [0, 1, 2], [1.0, 2.0, 3.0]))
    out = finals.kept(np.array(mask), shift)
    assert out.rows.tolist() == rows
    assert out.envs.tolist() == envs
    assert [out.item(k).tolist() for k in range(len(rows))] == [[v] for v in values]
    assert finals.rows.tolist() == [5, 4, 7]  # the store itself unchanged

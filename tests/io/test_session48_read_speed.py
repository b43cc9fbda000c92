"""Session 48: the faster read path gives the episodes, and raises the errors, it always did.

``decode_rows`` decodes plainly laid out pieces directly (``episodes.io.plain_rows``); the
general path (``prepare_meta`` + ``decode_episode``) still reads every other piece, and any
piece the direct path refuses. Leaf entries found good are remembered (``arrow_leaves``), a
batch's buffers are checked in one call (``ShardTable._check_inside``).
"""

from __future__ import annotations

import copy
import errno

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetWriter,
    arrow_leaves,
    shard_codec,
)
from episodes.io.arrow_leaves import check_leaf_info
from episodes.io.plain_rows import plain_rows
from episodes.io.shard_codec import decode_rows, encode_rows

MODES = [None, True, False]


def general(*args, **kwargs):
    """``decode_rows`` as it read every piece before the direct path."""
    saved = shard_codec.plain_rows
    shard_codec.plain_rows = lambda *a, **k: None
    try:
        return decode_rows(*args, **kwargs)
    finally:
        shard_codec.plain_rows = saved


def state_of(value):
    """A value with the type (and dtype, flags) of every part spelt out, for exact comparison."""
    if isinstance(value, SingleAgentEpisode):
        return state_of(value.get_state())
    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.str, value.shape, value.flags.writeable, value.tobytes())
    if isinstance(value, dict):
        return ("dict", type(value), [(k, state_of(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [state_of(v) for v in value])
    if isinstance(value, float) and value != value:
        return ("nan", type(value))
    return (type(value), value)


def piece(seed: int, steps: int = 4, lookback: int = 1, **kw) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    ep = SingleAgentEpisode(
        f"p{seed}",
        observations=list(rng.normal(size=(steps + lookback + 1, 3)).astype(np.float32)),
        actions=list(rng.integers(0, 2, steps + lookback)),
        rewards=list(rng.normal(size=steps + lookback)),
        infos=kw.pop("infos", None),
        extra_model_outputs={"logp": list(rng.normal(size=steps + lookback).astype(np.float32))},
        observation_space=gym.spaces.Box(-9, 9, (3,), np.float32),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=lookback,
        **kw,
    )
    ep.custom_data["env_index"] = seed
    return ep.to_numpy()


def outcome(read, entry, table, mode):
    try:
        return ("ok", state_of(read(entry, table, 0, spaces=SPACES[0], where="x", numpy=mode)))
    except Exception as err:  # the error's type and words
        return ("error", type(err), str(err))


SPACES: list[list] = [[]]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 1000),
    steps=st.integers(0, 5),
    lookback=st.integers(0, 2),
    info=st.sampled_from([{}, {"k": 1}, {"s": "x", "l": [1, (2, 3)]}, {"n": None}]),
    flags=st.sampled_from([(False, False), (True, False), (False, True)]),
)
def test_the_direct_path_gives_the_general_paths_episode(seed, steps, lookback, info, flags):
    infos = [dict(info) if i % 2 else {} for i in range(steps + lookback + 1)]
    ep = piece(seed, steps, lookback, infos=infos, terminated=flags[0], truncated=flags[1])
    enc = encode_rows(ep)
    table = pa.table(enc.columns)
    for mode in MODES:
        got = plain_rows(enc.entry, table, 0, spaces=enc.spaces, where="x", numpy=mode)
        assert got is not None  # taken: a plainly laid out piece
        want = general(enc.entry, table, 0, spaces=enc.spaces, where="x", numpy=mode)
        assert state_of(got) == state_of(want)
        assert got == ep if mode is not False else got.get_observations() is not None


def test_pieces_read_from_disk_equal_the_general_paths(tmp_path):
    eps = [piece(i, steps=i % 4, infos=None) for i in range(6)]
    eps.append(SingleAgentEpisode("listed", observations=[0, 1], actions=[1], rewards=[0.5]))
    eps.append(piece(9, infos=[{"a": np.float32(1)}] * 6))  # a blob: the general path
    with DatasetWriter(tmp_path) as w:
        w.write_many(eps)
    ds = Dataset(tmp_path)
    for i in range(len(eps)):
        shard, j = ds.locate(i)
        k, first = shard.part_of(j)
        args = (shard.entry_of(j), shard.parts[k], first)
        for mode in MODES:
            kw = {"spaces": shard.spaces, "where": "x", "numpy": mode}
            assert state_of(decode_rows(*args, **kw)) == state_of(general(*args, **kw))
            plain = plain_rows(*args, **kw)
            assert (plain is None) == (i >= 6), i  # list mode and a blob: not taken


def _entry(mutate):
    enc = encode_rows(piece(3, infos=[{"k": 1}, {}, {}, {}, {}, {}]))
    SPACES[0] = enc.spaces
    entry = copy.deepcopy(enc.entry)
    mutate(entry["meta"], entry["leaves"])
    return entry, pa.table(enc.columns)


def _set(path, value):
    def mutate(meta, leaves):
        where = {"meta": meta, "leaves": leaves}
        for key in path[:-1]:
            where = where[key]
        if value is KeyError:
            del where[path[-1]]
        else:
            where[path[-1]] = value

    return mutate


DAMAGE = {
    "negative t_started": _set(["meta", "t_started"], -1),
    "no id": _set(["meta", "id"], KeyError),
    "no agent id (a default)": _set(["meta", "agent_id"], KeyError),
    "no action space": _set(["meta", "action_space"], KeyError),
    "space reference out of range": _set(["meta", "observation_space"], {"space_ref": 99}),
    "space reference a bool": _set(["meta", "observation_space"], {"space_ref": True}),
    "clock a string": _set(["meta", "start_time"], "noon"),
    "clock an int": _set(["meta", "start_time"], 5),
    "clock missing": _set(["meta", "last_step_time"], KeyError),
    "flag an int": _set(["meta", "is_terminated"], 1),
    "time a float": _set(["meta", "t"], 4.0),
    "custom data a list": _set(["meta", "custom_data"], [1]),
    "id an int": _set(["meta", "id"], 7),
    "size too big": _set(["meta", "columns", "actions", "size"], 9),
    "lookback beyond size": _set(["meta", "columns", "rewards", "lookback"], 99),
    "finalized a string": _set(["meta", "columns", "rewards", "finalized"], "yes"),
    "unknown layout": _set(["meta", "columns", "rewards", "layout"], "zip"),
    "json column finalized": _set(["meta", "columns", "infos", "finalized"], True),
    "leaf named as the blob": _set(
        ["meta", "columns", "actions", "leaves"], [{"file": "blob.npy", "kind": "batched"}]
    ),  # fmt: skip
    "two leaves one column": _set(["leaves", "act.0.npy", "path"], ["observations"]),
    "leaf path not strs": _set(["leaves", "act.0.npy", "path"], [1]),
    "leaf dtype other": _set(["leaves", "rew.0.npy", "dtype"], "<f4"),
    "leaf shape a bool": _set(["leaves", "obs.0.npy", "shape"], [True, True, True]),
    "leaf count too big": _set(["leaves", "obs.0.npy", "count"], 99),
    "leaf kind unknown": _set(
        ["meta", "columns", "observations", "leaves"], [{"file": "obs.0.npy", "kind": "mystery"}]
    ),  # fmt: skip
    "nested structure": _set(["meta", "columns", "observations", "structure"], {"tuple": ["*"]}),
    "blob table not empty": _set(["meta", "blob"], [[0, 1]]),
    "blob table not a list": _set(["meta", "blob"], {}),
    "extra column": _set(["meta", "columns", "more"], {"layout": "json", "size": 0}),
    "extras key twice": lambda m, _: m["extra_model_outputs"].append(
        copy.deepcopy(m["extra_model_outputs"][0])
    ),
    "extras not a list": _set(["meta", "extra_model_outputs"], {}),
    "version 2": _set(["meta", "version"], 2),
    "format other": _set(["meta", "format"], "other"),
}


@pytest.mark.parametrize("name", DAMAGE)
def test_damaged_entries_read_as_the_general_path_reads_them(name):
    entry, table = _entry(DAMAGE[name])
    for mode in MODES:
        assert outcome(decode_rows, entry, table, mode) == outcome(general, entry, table, mode)


def test_null_json_text_raises_as_before():
    entry, table = _entry(lambda m, leaves: None)
    infos = pa.array([None] * table.num_rows, pa.large_string())
    table = table.set_column(table.schema.get_field_index("infos"), "infos", infos)
    got = outcome(decode_rows, entry, table, True)
    assert got == outcome(general, entry, table, True) and got[0] == "error"


@pytest.mark.parametrize("path", [plain_rows, general])
def test_reading_leaves_the_entry_as_it_was_and_items_fresh(path):
    entry, table = _entry(lambda m, leaves: None)
    before = copy.deepcopy(entry)
    kw = {"spaces": SPACES[0], "where": "x", "numpy": True}
    a, b = path(entry, table, 0, **kw), path(entry, table, 0, **kw)
    assert entry == before
    for info in a.get_infos():
        info["z"] = 1
    a.custom_data["env_index"] = -1
    assert b.get_infos() == [{}, {}, {}, {}, {}] and b.custom_data["env_index"] == 3
    assert a.get_infos()[0] is not b.get_infos()[0]


GOOD = {"path": ["x"], "dtype": "<f4", "shape": [2], "storage": "arrow", "count": 3}
BAD_AFTER_GOOD = {
    "shape of bools": {**GOOD, "shape": [True, True]},
    "storage raw": {**GOOD, "storage": "raw"},
    "storage a list": {**GOOD, "storage": ["arrow"]},
    "count a bool": {**GOOD, "count": True},
    "path not strs": {**GOOD, "path": [1]},
}


@pytest.mark.parametrize("name", BAD_AFTER_GOOD)
def test_a_leaf_entry_found_good_lets_no_other_pass(name):
    assert check_leaf_info(dict(GOOD), "x") == (np.dtype("<f4"), (2,))
    with pytest.raises(DatasetError):  # (raw float32: "written on the other byte order")
        check_leaf_info(BAD_AFTER_GOOD[name], "x")


def test_a_leaf_entry_found_good_is_checked_again_for_another_byte_order(monkeypatch):
    check_leaf_info(dict(GOOD), "x")
    other = ">" if arrow_leaves._NATIVE == "<" else "<"
    monkeypatch.setattr(arrow_leaves, "_NATIVE", other)
    with pytest.raises(DatasetError, match="byte orders"):
        check_leaf_info(dict(GOOD), "x")


def _table(tmp_path):
    with DatasetWriter(tmp_path) as w:
        w.write(piece(1))
    shard, _ = Dataset(tmp_path).locate(0)
    return shard.parts


def test_batch_buffers_outside_the_file_are_refused(tmp_path):
    table = _table(tmp_path / "a")
    table._check_inside(table[0])  # its own batch: inside
    other = _table(tmp_path / "b")  # a batch sliced from another file's map
    with pytest.raises(CorruptDatasetError, match="points outside itself"):
        table._check_inside(other._reader.get_batch(0))
    table._check_inside(pa.record_batch({"x": np.arange(3)}))  # its own memory: no parent


READ_ERRORS = {
    "arrow error": (pa.ArrowInvalid("bad"), CorruptDatasetError, "cannot read"),
    "value error": (ValueError("bad"), CorruptDatasetError, "cannot read"),
    "system error": (OSError(errno.EMFILE, "too many"), DatasetError, "too many"),
    "dataset error": (DatasetError("as is"), DatasetError, "as is"),
}


@pytest.mark.parametrize("name", READ_ERRORS)
def test_read_errors_become_the_librarys(tmp_path, name):
    table = _table(tmp_path)
    raised, kind, words = READ_ERRORS[name]
    with pytest.raises(kind, match=words) as caught:
        with table._reading():
            raise raised
    if isinstance(raised, DatasetError):
        assert caught.value is raised
    with pytest.raises(KeyboardInterrupt), table._reading():
        raise KeyboardInterrupt

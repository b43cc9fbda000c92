"""The batched save/load (``saved_shards``, ``loaded_shards``) after its review.

Each case is what the episode by episode path does, which the batched one must match: null
items inside shaped rows and forged first index entries refused with the reader's error,
clocks that JSON cannot hold refused with ``save``'s error, shards cut where the writer cuts
them (its byte count, long ids included), and the garbage collector left alone.
"""

from __future__ import annotations

import gc
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from episodes import SingleAgentEpisode
from episodes.io import UnstorableValueError
from episodes.io.manifest_lines import seal_lines
from episodes.io.shard_codec import encode_rows
from episodes.replay import EpisodeReplayBuffer, loaded_shards, saved_shards
from episodes.replay.persistence import _encoded_ids
from episodes.replay.saved_files import seal


def slow_save(monkeypatch: pytest.MonkeyPatch, buf: EpisodeReplayBuffer, path: Path) -> None:
    def refuse(*args: Any) -> None:
        raise saved_shards.BatchMismatch("forced")

    with monkeypatch.context() as m:
        m.setattr(saved_shards, "write_stored", refuse)
        buf.save(path)


def slow_load(monkeypatch: pytest.MonkeyPatch, path: Path) -> Any:
    with monkeypatch.context() as m:
        m.setattr(loaded_shards, "read_stored", lambda path: None)
        return EpisodeReplayBuffer.load(path)


def outcomes(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    out: list[Any] = []
    for load in (EpisodeReplayBuffer.load, lambda p: slow_load(monkeypatch, p)):
        try:
            back = load(path)
            out.append(("loaded", back.get_episodes()))
        except Exception as err:  # noqa: BLE001 - the refusal itself is compared
            out.append((type(err), str(err)))
    return out


def reseal(path: Path, lines: list[Any]) -> None:
    """The manifest and replay.json sealed again, as a forger would."""
    dataset = path / "episodes"
    (dataset / "manifest.jsonl").write_bytes(seal_lines(lines))
    meta = json.loads((path / "replay.json").read_text())
    meta["episodes"]["manifest_crc32"] = zlib.crc32((dataset / "manifest.jsonl").read_bytes())
    (path / "replay.json").write_text(
        json.dumps(seal({k: v for k, v in meta.items() if k != "crc32"}))
    )


def forge(path: Path, change_index: Any, change_table: Any = None) -> None:
    """Edits the (single) shard's index and data, every checksum recomputed."""
    dataset = path / "episodes"
    lines = [json.loads(line) for line in (dataset / "manifest.jsonl").read_bytes().splitlines()]
    for line in lines:
        line.pop("crc32")
    index_path = dataset / "shards" / f"{lines[-1]['shard']}.json"
    index = json.loads(index_path.read_text())
    if change_table is not None:
        data = dataset / "shards" / index["data"]["file"]
        with pa.memory_map(str(data)) as f:
            table = change_table(ipc.open_file(f).read_all())
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            for batch in table.to_batches():
                writer.write_batch(batch)
        raw = sink.getvalue().to_pybytes()
        data.write_bytes(raw)
        index["data"].update(size=len(raw), crc32=zlib.crc32(raw))
        if "data_size" in lines[-1]:
            lines[-1]["data_size"] = len(raw)
    change_index(index)
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines[-1].update(index_sha256=hashlib.sha256(raw).hexdigest(), index_size=len(raw))
    reseal(path, lines)


def with_null_item(row: int, field: str | None = None) -> Any:
    """A table whose actions (or extra ``field``) hold a null item in row ``row``."""

    def shaped(column: pa.Array) -> pa.Array:
        size = column.type.list_size
        mask = np.zeros(len(column.values), bool)
        mask[row * size] = True
        items = pa.array(column.values.to_numpy(zero_copy_only=False), mask=mask)
        valid = pa.array(~np.asarray(column.is_valid()))
        return pa.FixedSizeListArray.from_arrays(items, size, mask=valid)

    def change(table: pa.Table) -> pa.Table:
        name = "actions" if field is None else "extra_model_outputs"
        column = table.column(name).combine_chunks()
        if field is not None:
            fields = [shaped(f) if f.type.num_fields else f for f in column.flatten()]
            valid = pa.array(~np.asarray(column.is_valid()))
            column = pa.StructArray.from_arrays(fields, fields=list(column.type), mask=valid)
        else:
            column = shaped(column)
        return table.set_column(table.schema.get_field_index(name), name, column)

    return change


def shaped_buffer(extras: bool) -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        [
            SingleAgentEpisode(
                f"e{i}", observations=np.arange(8, dtype=np.float32).reshape(4, 2) + i,
                actions=np.full((3, 2), 7.0 + i, np.float32), rewards=[1.0] * 3,
                extra_model_outputs={"vf": np.full((3, 2), 5.0 + i)} if extras else None,
                len_lookback_buffer=0,
            )
            for i in range(3)
        ]
    )  # fmt: skip
    return buf


@pytest.mark.parametrize(
    ("row", "field", "refused"),
    [
        (9, None, True),  # a step of the last piece (rows 8 .. 11)
        (0, None, True),  # the first piece's first step
        (9, "vf", True),
        (11, None, False),  # the last piece's last row: no action there, never read
        (3, "vf", False),
    ],
)
def test_null_items_in_shaped_rows_are_refused_as_before(
    row, field, refused, tmp_path, monkeypatch
):
    shaped_buffer(field is not None).save(tmp_path / "b")
    forge(tmp_path / "b", lambda index: None, with_null_item(row, field))
    fast, slow = outcomes(tmp_path / "b", monkeypatch)
    assert fast == slow
    assert (fast[0] != "loaded") == refused
    if refused:
        assert "nulls" in fast[1]


def _first(change: Any) -> Any:
    return lambda index: change(index["episodes"][0])


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e.update(leaves=list(e["leaves"].items())),
        lambda e: e.update(leaves=None),
        lambda e: e["meta"].update(columns=list(e["meta"]["columns"].items())),
        lambda e: e["meta"].update(columns="x"),
        lambda e: e["meta"].update(extra_model_outputs=None),
        lambda e: e["meta"].update(extra_model_outputs={"a": 1}),
    ],
)
def test_forged_first_entries_are_refused_as_before(change, tmp_path, monkeypatch):
    shaped_buffer(False).save(tmp_path / "b")
    forge(tmp_path / "b", _first(change))
    fast, slow = outcomes(tmp_path / "b", monkeypatch)
    assert fast == slow and fast[0] != "loaded"


@pytest.mark.parametrize(
    ("clock", "value"),
    [("_start_time", float("nan")), ("_last_step_time", float("inf")), ("_start_time", -np.inf)],
)
def test_clocks_json_cannot_hold_are_refused_as_before(clock, value, tmp_path, monkeypatch):
    episodes = [shaped_buffer(False).get_episodes()[i] for i in range(3)]
    setattr(episodes[1], clock, value)
    buf = EpisodeReplayBuffer(100)
    buf.add(episodes)
    errors = []
    for k, save in enumerate((buf.save, lambda p: slow_save(monkeypatch, buf, p))):
        with pytest.raises(UnstorableValueError) as info:
            save(tmp_path / f"b{k}")
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "stored episode 1 of 3" in errors[0]


@pytest.mark.parametrize("id_", ["e", "x" * 41, "é" * 5, 7, ("run", 5), "y" * 3000])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 30])
@pytest.mark.parametrize(
    "kind",
    [
        {},
        {"obs": np.bool_, "act": np.bool_, "act_shape": (3,)},
        {"extras": {"vf": 1.5, "b": True, "w": np.int8(3)}},
        {"obs": np.float16, "obs_shape": (2, 3), "act": np.int8, "act_shape": (5,)},
    ],
)
def test_shard_budget_counts_what_the_writer_counts(id_, n, kind, monkeypatch):
    shape = kind.get("obs_shape", (4,))
    episode = SingleAgentEpisode(
        id_, observations=np.zeros((n + 1, *shape), kind.get("obs", np.float32)),
        actions=np.zeros((n, *kind.get("act_shape", ())), kind.get("act", np.int64)),
        rewards=np.ones(n, np.float32), len_lookback_buffer=0,
        extra_model_outputs={k: np.full(n, v) for k, v in kind.get("extras", {}).items()} or None,
    )  # fmt: skip
    buf = EpisodeReplayBuffer(10**6)
    buf.add(episode)
    stored = saved_shards._Stored(buf, _encoded_ids(buf.get_episode_ids(), "{i}"))
    real = encode_rows(buf.get_episodes()[0])
    template = saved_shards._Template(real.entry, n, real.rows, {})
    template.bytes = saved_shards._bytes_model(real.columns)
    assert saved_shards._row_bytes(stored, 0, 1, template).tolist() == [real.nbytes]


def test_long_ids_cut_shards_where_the_writer_cuts_them(tmp_path, monkeypatch):
    buf = EpisodeReplayBuffer(10**7)
    buf.add(
        [
            SingleAgentEpisode(
                f"{i:02000d}", observations=np.zeros((21, 4), np.float32),
                actions=np.zeros(20, np.int64), rewards=np.ones(20, np.float32),
                len_lookback_buffer=0,
            )
            for i in range(2800)
        ]
    )  # fmt: skip
    buf.save(tmp_path / "fast")
    slow_save(monkeypatch, buf, tmp_path / "slow")

    def counts(path: Path) -> list[int]:
        lines = (path / "episodes" / "manifest.jsonl").read_text().splitlines()[1:]
        return [len(json.loads(line)["episodes"]) for line in lines]

    assert counts(tmp_path / "fast") == counts(tmp_path / "slow")
    assert len(counts(tmp_path / "fast")) > 1


def test_save_and_load_leave_the_garbage_collector_alone(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: calls.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: calls.append("enable"))
    buf = shaped_buffer(True)
    buf.save(tmp_path / "b")
    back = EpisodeReplayBuffer.load(tmp_path / "b")
    assert back.get_episode_ids() == buf.get_episode_ids()
    assert calls == []

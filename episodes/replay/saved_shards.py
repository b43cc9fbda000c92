"""A buffer's stored episodes written as an ``episodes.io`` v2 dataset, columns batched.

``save`` writes the dataset ``DatasetWriter`` writes for ``buffer.get_episodes()``: the same
index entries, manifest lines and column values, shards cut at the writer's budget, every file
fsynced. It builds no episode for a *plain* stored episode (no infos, a simple ``custom_data``
such as the runner's ``{"env_index": i}`` or none, agent, module and multi-agent episode ids
that are None or str, times the dataset's int64 ``t`` column holds from 0:
:mod:`episodes.replay.saved_meta`): a run of them becomes one record batch gathered from the
buffer's columns in a few numpy calls, and their index entries are the writer's entry for one of
them with each episode's own fields (id, ids, flags, times, clocks, ``custom_data``, sizes) put
in (nested observations, actions and extras, records, gathered into the writer's ``struct`` column:
:mod:`episodes.replay.nested_saved`). Other episodes go through the writer's own encoding
(``encode_rows``), one record batch each, in their place, with its errors. Each shard's first
plain episode and its first of another length are encoded both ways and compared (entries,
columns bit for bit, returns): a difference raises :class:`BatchMismatch`, and ``save`` writes
episode by episode instead, so a change of the writer's encoding cannot make this path write
anything else. What is left per episode is mostly the writer's JSON index entry
(``publish_shard`` dumps about 1.4 KB an episode).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from itertools import repeat
from operator import is_not
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from episodes.io import DatasetWriter, UnstorableValueError
from episodes.io.format import MANIFEST_FILE, append_line, piece_return
from episodes.io.manifest_lines import chained_line
from episodes.io.shard_codec import EXTRAS, EncodedEpisode, encode_rows
from episodes.io.shard_commit import publish_shard
from episodes.io.shard_stream import ShardStream
from episodes.io.shard_writer import DEFAULT_SHARD_BYTES
from episodes.io.shards import SHARDS_DIR, temp_data_file
from episodes.replay.metadata import with_clocks
from episodes.replay.nested_saved import struct_column
from episodes.replay.saved_budget import _bytes_model, _row_bytes
from episodes.replay.saved_meta import _meta_fields
from episodes.replay.sequences import build_episode

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = ["BatchMismatch", "write_stored"]

_CHECKED_LENGTHS = 2  # episode lengths per shard whose batched encoding is compared


class BatchMismatch(Exception):
    """The batched encoding differs from the writer's, or does not apply: write one by one.

    Example:
        >>> issubclass(BatchMismatch, Exception)
        True
    """


class _Stored:
    """The stored episodes, oldest first: their table rows, steps, slots and fields."""

    def __init__(self, buffer: EpisodeReplayBuffer, ids: list[Any]):
        store, table = buffer._store, buffer._table
        self.buffer, self.store, self.table, self.ids = buffer, store, table, ids
        self.rows = np.fromiter(table.order.values(), np.int64, len(table.order))
        live = np.flatnonzero(store.live[: store.end])
        age = np.full(max(table.size, 1), -1, np.int64)
        age[self.rows] = np.arange(len(self.rows))
        owner = age[store.ep[live]]
        order = np.argsort(owner, kind="stable")  # episode by episode, slot (time) order kept
        self.slots, owner = live[order], owner[order]
        self.n = np.bincount(owner, minlength=len(self.rows)) if len(owner) else owner
        self.starts = np.cumsum(self.n) - self.n
        self.t0 = table.t_begin[self.rows]
        place = np.arange(len(self.slots)) - np.repeat(self.starts, self.n)
        if (
            (len(owner) and owner[0] < 0)
            or not np.array_equal(self.n, table.t_end[self.rows] - self.t0)
            or not np.array_equal(store.t[self.slots], np.repeat(self.t0, self.n) + place)
        ):
            raise BatchMismatch("the stored steps do not run their episodes' times in order")
        self.fields = self._fields()
        for k in _with_infos(store.infos[self.slots], np.repeat(np.arange(len(ids)), self.n)):
            self.fields[k] = None
        for k in _with_infos(table.final_info[self.rows], np.arange(len(ids))):
            self.fields[k] = None

    def _fields(self) -> list[dict[str, Any] | None]:
        """Each episode's own index entry fields, or None where it is not plain."""
        table, rows = self.table, self.rows
        out: list[dict[str, Any] | None] = []
        for id_, n, t0, meta, term, trunc in zip(
            self.ids,
            self.n.tolist(),
            self.t0.tolist(),
            table.meta[rows].tolist(),
            table.terminated[rows].tolist(),
            table.truncated[rows].tolist(),
            strict=True,
        ):
            # The writer refuses negative times; other custom_data and ids go its way.
            fields = None
            if 0 <= t0 <= t0 + n <= 2**63 - 1:
                fields = _meta_fields(meta)
            if fields is not None:
                fields.update(id=id_, is_terminated=term, is_truncated=trunc, t_started=t0)
                fields["t"] = t0 + n
            out.append(fields)
        return out

    def slots_of(self, k: int) -> np.ndarray:
        return self.slots[self.starts[k] : self.starts[k] + self.n[k]]

    def episode(self, k: int) -> Any:
        """Stored episode ``k`` as ``get_episodes`` builds it."""
        row, buffer = int(self.rows[k]), self.buffer
        built = build_episode(self.store, self.table, self.slots_of(k), 0, buffer._spaces)
        return with_clocks(built, self.table.meta[row])

    def encoded(self, k: int, spaces: list[Any], lookup: dict[str, int]) -> EncodedEpisode:
        """Episode ``k`` encoded by the writer (its refusal named as ``save`` names it)."""
        episode = self.episode(k)
        try:
            encoded = encode_rows(episode, spaces, lookup)
        except UnstorableValueError as err:
            raise UnstorableValueError(
                f"stored episode {k} of {len(self.ids)}, oldest first (id {episode.id_!r}), "
                f"cannot be saved: {err}"
            ) from err
        encoded.ret = piece_return(episode)
        return encoded


def _with_infos(infos: np.ndarray, owners: np.ndarray) -> set[int]:
    """The owners of infos that are neither None nor ``{}`` (the buffer's empty infos)."""
    given = np.flatnonzero(np.fromiter(map(is_not, infos, repeat(None)), bool, len(infos)))
    return {int(owners[i]) for i in given if infos[i].__class__ is not dict or infos[i]}


class _Template:
    """A shard's index entry model: the writer's entry of one plain episode of ``n`` steps."""

    def __init__(self, entry: dict[str, Any], n: int, rows: int, types: dict[str, Any]):
        self.meta, self.leaves, self.n, self.rows = entry["meta"], entry["leaves"], n, rows - n
        self.types = types  # the Arrow type of each column, in the writer's order
        self.bytes: tuple[int, list[int]] | None = None  # see _row_bytes
        self._sized: dict[int, tuple[Any, Any, Any]] = {}

    def parts(self, n: int, fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``meta`` and ``leaves`` of a plain episode of ``n`` steps with these fields."""
        sized = self._sized.get(n)
        if sized is None:  # shared by the entries of one length: json.dumps reads them alike
            d, meta = n - self.n, self.meta
            sized = self._sized[n] = (
                {key: {**c, "size": c["size"] + d} for key, c in meta["columns"].items()},
                [[key, {**c, "size": c["size"] + d}] for key, c in meta[EXTRAS]],
                {key: {**info, "count": info["count"] + d} for key, info in self.leaves.items()},
            )
        return {**self.meta, "columns": sized[0], EXTRAS: sized[1], **fields}, sized[2]

    def entry(self, n: int, fields: dict[str, Any], offset: float) -> dict[str, Any]:
        meta, leaves = self.parts(n, fields)
        start, last = fields["start_time"], fields["last_step_time"]
        return {
            "rows": n + self.rows,
            "meta": meta,
            "leaves": leaves,
            "wall_start": None if start is None else start + offset,
            "wall_end": None if last is None else last + offset,
        }


class _Shards:
    """The shards being written: the open one's data file, entries and spaces."""

    def __init__(self, root: Path):
        self.root = root
        self._begin()

    def _begin(self) -> None:
        self.spaces: list[Any] = []
        self.lookup: dict[str, int] = {}
        self.pending: list[EncodedEpisode] = []
        self.bytes = 0
        self.schema: pa.Schema | None = None
        self.stream: ShardStream | None = None
        self.name = secrets.token_hex(8)
        self.template: _Template | None = None
        self.lengths: set[int] = set()  # episode lengths whose batched encoding was compared
        self.offset = time.time() - time.perf_counter()  # clocks -> wall, as the writer's

    def fits(self, schema: pa.Schema) -> bool:
        return self.schema is None or schema.equals(self.schema)

    def append(self, columns: dict[str, pa.Array], encoded: list[EncodedEpisode]) -> None:
        names = list(columns)
        batch = pa.RecordBatch.from_arrays([columns[k] for k in names], names=names)
        if self.stream is None:
            path = temp_data_file(self.root / SHARDS_DIR, self.name, "arrow")  # no glob's match
            self.stream = ShardStream(path, batch.schema, sync=True)
            self.schema = batch.schema
        self.stream.append(batch)
        self.pending.extend(encoded)
        self.bytes += sum(e.nbytes for e in encoded)
        if self.bytes >= DEFAULT_SHARD_BYTES:
            self.commit()

    def commit(self) -> None:
        """The open shard published and listed in the manifest, as ``DatasetWriter.flush``."""
        if self.stream is None:
            return
        shards = self.root / SHARDS_DIR
        pending, spaces = self.pending, self.spaces
        entry = publish_shard(
            shards, self.name, self.stream, pending, spaces, "arrow", None, sync=True
        )
        fd = os.open(self.root / MANIFEST_FILE, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        try:
            append_line(fd, chained_line(fd, entry.to_json()), sync=True)
        finally:
            os.close(fd)
        self._begin()

    def discard(self) -> None:
        if self.stream is not None:
            self.stream.discard()


def write_stored(buffer: EpisodeReplayBuffer, path: Path, ids: list[Any]) -> None:
    """Writes the buffer's stored episodes, oldest first, as a new v2 dataset at ``path``.

    ``ids`` are the stored ids as the dataset encodes them, oldest first.

    Raises:
        BatchMismatch: The batched encoding does not apply or differs from the writer's
            (``path`` is left half-written: the caller removes it and writes one by one).
        episodes.io.UnstorableValueError: A value the writer refuses (named as ``save`` does).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import read_episodes
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(100)
        >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                             rewards=[1.0, 2.0], len_lookback_buffer=0) for i in "ab"])
        >>> path = Path(tempfile.mkdtemp()) / "episodes"
        >>> write_stored(buf, path, ["a", "b"])
        >>> [(e.id_, e.get_rewards().tolist()) for e in read_episodes(path, verify=True)]
        [('a', [1.0, 2.0]), ('b', [1.0, 2.0])]
    """
    stored = _Stored(buffer, ids)
    DatasetWriter(path).close()  # the manifest and shards/ of an empty dataset
    shards = _Shards(path)
    plain = np.array([f is not None for f in stored.fields] + [False])
    try:
        k, count = 0, len(ids)
        while k < count:
            if not plain[k]:
                _write_encoded(stored, shards, k)
                k += 1
                continue
            end = k + int(np.argmin(plain[k:]))  # the run of plain episodes from k
            k += _write_plain(stored, shards, k, end)
        shards.commit()
    except BaseException:
        shards.discard()
        raise


def _write_encoded(stored: _Stored, shards: _Shards, k: int) -> None:
    encoded = stored.encoded(k, shards.spaces, shards.lookup)
    schema = pa.schema([(key, v.type) for key, v in encoded.columns.items()])
    if not shards.fits(schema):  # a shard holds one schema, as the writer's
        shards.commit()
        encoded = stored.encoded(k, shards.spaces, shards.lookup)
    columns, encoded.columns = encoded.columns, {}
    shards.append(columns, [encoded])


def _write_plain(stored: _Stored, shards: _Shards, k: int, end: int) -> int:
    """Writes plain episodes ``k ..`` (before ``end``) as one record batch; returns how many."""
    if shards.template is None:  # the shard's model: its first plain episode, as written
        model = stored.encoded(k, shards.spaces, shards.lookup)
        types = {key: column.type for key, column in model.columns.items()}
        shards.template = _Template(model.entry, int(stored.n[k]), model.rows, types)
        shards.template.bytes = _bytes_model(model.columns)
    template = shards.template
    sizes = _row_bytes(stored, k, end, template)
    taken = np.cumsum(sizes) + shards.bytes
    end = k + min(end - k, int(np.searchsorted(taken, DEFAULT_SHARD_BYTES)) + 1)
    columns, rewards = _columns(stored, k, end, template)
    schema = pa.schema([(key, v.type) for key, v in columns.items()])
    if not shards.fits(schema):
        shards.commit()
        return 0  # written again into the next shard, under its own template
    encoded, at, spaces, offset = [], 0, shards.spaces, shards.offset
    with np.errstate(over="ignore", invalid="ignore"):  # as piece_return sums them
        for n, fields, size in zip(stored.n[k:end].tolist(), stored.fields[k:end], sizes.tolist()):
            assert fields is not None
            # The episode's float32 rewards, contiguous as its own array: the same sum.
            ret = float(rewards[at : at + n].sum(dtype=np.float64))
            encoded.append(
                EncodedEpisode({}, template.entry(n, fields, offset), spaces, n + 1, size, ret)
            )
            at += n + 1
    _compare(stored, shards, k, columns, encoded)
    shards.append(columns, encoded)
    return end - k


def _compare(
    stored: _Stored, shards: _Shards, k: int, columns: dict[str, pa.Array], encoded: list[Any]
) -> None:
    """Episodes of lengths not compared yet in this shard, encoded by the writer: the same?"""
    first = 0
    for j, mine in enumerate(encoded):
        if len(shards.lengths) >= _CHECKED_LENGTHS:
            return
        if mine.rows - 1 not in shards.lengths:
            shards.lengths.add(mine.rows - 1)
            real = stored.encoded(k + j, list(shards.spaces), dict(shards.lookup))
            if not _same(mine, real, columns, first):
                raise BatchMismatch(f"stored episode {k + j}: batched encoding differs")
        first += mine.rows


def _same(mine: EncodedEpisode, real: EncodedEpisode, columns: dict[str, Any], at: int) -> bool:
    walls = ("wall_start", "wall_end")
    if any((mine.entry[key] is None) != (real.entry[key] is None) for key in walls):
        return False
    if {**mine.entry, **dict.fromkeys(walls)} != {**real.entry, **dict.fromkeys(walls)}:
        return False
    if repr(mine.ret) != repr(real.ret) or mine.nbytes != real.nbytes:
        return False  # nbytes: the shard budget's count, so that shards end where the writer's do
    if list(columns) != list(real.columns):
        return False
    return all(
        columns[key].type == real.columns[key].type
        and _bits_of(columns[key].slice(at, mine.rows)).equals(_bits_of(real.columns[key]))
        for key in columns
    )


def _bits_of(column: pa.Array) -> pa.Array:
    """``column`` with its floats read as ints of their width: NaN equal to the same NaN."""
    return column.view(_bit_type(column.type))


def _bit_type(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_floating(kind):
        return pa.from_numpy_dtype(np.dtype(f"i{kind.bit_width // 8}"))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(_bit_type(kind.value_type), kind.list_size)
    if pa.types.is_struct(kind):
        return pa.struct([(f.name, _bit_type(f.type)) for f in kind])
    return kind


def _columns(
    stored: _Stored, k: int, end: int, template: _Template
) -> tuple[dict[str, pa.Array], np.ndarray]:
    """The record batch of plain episodes ``k .. end - 1``, as the writer's columns hold them.

    Also returns their rewards, a row each (the last row of an episode 0).
    """
    store, table = stored.store, stored.table
    assert store.obs is not None and store.actions is not None and table.final_obs is not None
    n = stored.n[k:end]
    r = n + 1  # rows: each step's observation and the last one
    base = np.cumsum(r) - r
    total = int(r.sum())
    slots = stored.slots[stored.starts[k] : stored.starts[k] + int(n.sum())]
    steps = np.arange(len(slots)) + np.repeat(np.arange(end - k), n)
    valid = np.ones(total, bool)
    valid[base + n] = False  # the last row holds the last observation only

    def rows(data: np.ndarray) -> np.ndarray:
        out = np.zeros((total, *data.shape[1:]), data.dtype)
        out[steps] = data[slots]
        return out

    obs, rewards = rows(store.obs.data), rows(store.rewards)
    obs[base + n] = table.final_obs.data[stored.rows[k:end]]
    texts = [
        (i if type(i) is str else json.dumps(e)).encode("utf-8")
        for i, e in zip(table.ids[stored.rows[k:end]], stored.ids[k:end], strict=True)
    ]
    found = {
        "observations": lambda kind: struct_column(obs, kind, _leaf),  # records: a struct
        "infos": lambda kind: _texts([b"{}"], np.full(1, total), kind),
        "actions": lambda kind: struct_column(rows(store.actions.data), kind, _leaf, valid),
        "rewards": lambda kind: _leaf(rewards, valid, kind),
        EXTRAS: lambda kind: pa.StructArray.from_arrays(
            [struct_column(rows(store.extras[f.name].data), f.type, _leaf, valid) for f in kind],
            fields=list(kind),
            mask=_bits(~valid, pa.bool_()),
        ),
        "blob": lambda kind: pa.nulls(total, kind),
        "episode_id": lambda kind: _texts(texts, r, kind),
        "t": lambda kind: _numbers(np.repeat(stored.t0[k:end] - base, r) + np.arange(total), kind),
    }
    try:
        return {key: found[key](kind) for key, kind in template.types.items()}, rewards
    except (KeyError, ValueError, TypeError, pa.ArrowException) as err:
        raise BatchMismatch(f"a column the batched encoding does not know: {err}") from None


def _bits(flags: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(kind, len(flags), [None, pa.py_buffer(_packed(flags))])


def _packed(flags: np.ndarray) -> np.ndarray:
    return np.packbits(flags, bitorder="little")  # Arrow's bit order


def _numbers(flat: np.ndarray, kind: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    validity = None if valid is None else pa.py_buffer(_packed(valid))
    nulls = 0 if valid is None else int(len(valid) - np.count_nonzero(valid))
    if pa.types.is_boolean(kind):
        data = pa.py_buffer(_packed(flat.astype(bool)))
    elif kind == pa.from_numpy_dtype(flat.dtype) and flat.dtype.isnative:
        data = pa.py_buffer(np.ascontiguousarray(flat))
    else:
        raise TypeError(f"{flat.dtype} values for an Arrow {kind} column")
    return pa.Array.from_buffers(kind, len(flat), [validity, data], null_count=nulls)


def _leaf(values: np.ndarray, valid: np.ndarray | None, kind: pa.DataType) -> pa.Array:
    """``values`` (one row per item) as the Arrow column of a leaf, null where not ``valid``."""
    flat = values.reshape(-1)
    if not pa.types.is_fixed_size_list(kind):
        if values.ndim != 1:
            raise TypeError(f"items of shape {values.shape[1:]} for an Arrow {kind} column")
        return _numbers(flat, kind, valid)
    if kind.list_size != flat.size // max(len(values), 1) or values.ndim < 2:
        raise TypeError(f"items of shape {values.shape[1:]} for an Arrow {kind} column")
    child = _numbers(flat, kind.value_type)
    validity = None if valid is None else pa.py_buffer(_packed(valid))
    nulls = 0 if valid is None else int(len(valid) - np.count_nonzero(valid))
    return pa.Array.from_buffers(kind, len(values), [validity], null_count=nulls, children=[child])


def _texts(texts: list[bytes], repeats: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Each of ``texts`` repeated ``repeats`` times, as a (large) string column."""
    lengths = np.repeat(np.fromiter(map(len, texts), np.int64, len(texts)), repeats)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if kind == pa.string():
        if offsets[-1] >= 2**31:
            raise ValueError("ids too long for a string column")
        offsets = offsets.astype(np.int32)
    elif kind != pa.large_string():
        raise TypeError(f"texts for an Arrow {kind} column")
    data = b"".join(t * int(c) for t, c in zip(texts, repeats, strict=True))
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, len(lengths), buffers, null_count=0)

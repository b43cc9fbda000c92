"""A saved buffer's episodes read into one buffer state, columns batched.

``load`` used to read every saved episode as a ``SingleAgentEpisode`` and add them.
:func:`read_stored` reads each shard's columns at once instead, and :meth:`Loaded.restore` gives
the buffer the state adding them would leave (through ``set_state``: the same columns, links,
table, sizes and counters). The dataset is opened and checked once, as
``read_episodes(verify=True)`` opens it (manifest, index checksums, every data file's CRC-32,
every record batch). A piece is *plain* (as ``save`` writes an episode without infos, its
``custom_data`` one the reader decodes as a dict, its other ids None or str:
:mod:`episodes.replay.saved_shards`, :mod:`episodes.replay.saved_meta`) where its index entry is
the shard's first plain piece's (the model, also read as an episode and prepared as ``add``
prepares it, which must give the same rows, flags, times, metadata and spaces) with its own
fields (id, ids, flags, times, clocks, ``custom_data``, sizes) put in, its infos rows are ``{}``
and its rows lie in one record batch, free of nulls: its rows are gathered (a nested
observation's leaf columns into records of the model piece's dtype). Any other piece is
read as ``read_episodes`` reads it and prepared as ``add`` does, in its place (a save holding a
few episodes with infos loads batched but for them). Saves written episode by episode (every
save before 2026-12-05) read the same way. Where the result could differ from adding the pieces
(no v2 dataset, pieces of other dtypes, shapes or outputs, ids that repeat or hold a NaN, a
piece without steps, damage) it gives None: the caller reads episode by episode, which raises
what it always raised.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.replay import EpisodeReplayBuffer
    >>> buf = EpisodeReplayBuffer(100)
    >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
    ...                             rewards=[1.0, 2.0], len_lookback_buffer=0) for i in "ab"])
    >>> path = Path(tempfile.mkdtemp()) / "buf"
    >>> buf.save(path)
    >>> loaded = read_stored(path / "episodes")
    >>> loaded.ids, loaded.steps
    (['a', 'b'], 4)
    >>> back = EpisodeReplayBuffer(100)
    >>> loaded.restore(back)
    >>> back.get_episode_ids(), back.sample(2, n_step=1)["rewards"].shape
    (['a', 'b'], (2,))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from episodes.io import Dataset, DatasetError
from episodes.io.arrow_leaves import leaf_from_arrow
from episodes.io.shard_codec import EXTRAS, column_of, decode_rows
from episodes.io.shard_reader import Shard
from episodes.io.shards import is_v2
from episodes.io.tool_args import holds_nan
from episodes.io.values import decode_value
from episodes.replay.adding import copied_space
from episodes.replay.ingest import Chunk, prepare
from episodes.replay.metadata import EpisodeMeta
from episodes.replay.nested_saved import gathered_records, struct_leaves
from episodes.replay.saved_meta import _CLOCKS, _IDS, _entry_fields, _loaded_custom
from episodes.replay.saved_shards import _Template
from episodes.spaces import space_from_dict

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = ["Loaded", "read_stored"]

_ARRAYS = ("observations", "actions", "rewards")


class Loaded:
    """The saved episodes as the columns of a buffer state (see :func:`read_stored`).

    Example:
        >>> Loaded().ids, Loaded().steps
        ([], 0)
    """

    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.steps = 0
        self._parts: list[dict[str, Any]] = []
        self._spaces: list[Any] = [None, None]
        self._kinds: list[Any] | None = None  # each step column's path, dtype and item shape

    def restore(self, buffer: EpisodeReplayBuffer, uid0: int = 0) -> None:
        """Gives ``buffer`` (new, empty) the episodes, as ``buffer.add`` of them would.

        Their steps' item ids are ``uid0``, ``uid0 + 1``, ... (a new buffer's next ids).

        Its generator (the object itself) and what else a state does not hold stay. The
        state holds zeros for the wide step columns (observations, actions, extra model
        outputs), written shard by shard into the store once it is set: the columns are in
        memory once (a state of them beside the store would be twice).

        Raises:
            ValueError: ``set_state`` refuses the state (nothing changed then).
        """
        if not self._parts:  # an add of no episodes changes only this
            buffer._store.capacity = int(buffer.capacity)
            return
        assert self._kinds is not None
        n = np.concatenate([p["n"] for p in self._parts])
        count, rows = len(n), int(n.sum())
        first = np.cumsum(n) - n
        place = _places(n)
        t0 = self._cat("t0")
        last = place == np.repeat(n, n) - 1
        zeros = {
            path: np.broadcast_to(np.zeros(1, dtype), (rows, *shape))
            for path, dtype, shape in self._kinds
            if path != ("rewards",)
        }
        steps = {
            "obs": zeros.pop(("observations",)),
            "actions": zeros.pop(("actions",)),
            "rewards": self._cat("rewards"),
            "extras": {path[1]: v for path, v in zeros.items()},
            "infos": [None] * rows,  # the pieces read as episodes: theirs written below
            "ep": np.repeat(np.arange(count), n),
            "t": np.repeat(t0, n) + place,
            "nxt": np.where(last, -1, np.arange(rows) + 1),
            "prv": np.where(place == 0, -1, np.arange(rows) - 1),
            "uid": np.arange(uid0, uid0 + rows),
        }
        metas = [m for p in self._parts for m in p["metas"]]
        episodes = {
            "ids": list(self.ids),
            "final_obs": self._cat("finals"),
            "final_info": [None] * count,
            "terminated": self._cat("terminated"),
            "truncated": self._cat("truncated"),
            "t_begin": t0,
            "t_end": t0 + n,
            "first_slot": first,
            "last_slot": first + n - 1,
            "custom_data": [m.custom if m.custom else {} for m in metas],
            **{key: [getattr(m, key) for m in metas] for key in (*_IDS, *_CLOCKS)},
        }
        state = {
            "version": 1,
            "capacity": buffer.capacity,
            "batch_size_B": buffer.batch_size_B,
            "num_added": rows,
            "num_sampled": 0,
            "num_episodes_evicted": 0,
            "evicted": [],
            "rng": buffer.rng.bit_generator.state,
            "spaces": [copied_space(space) for space in self._spaces],
            "next_uid": uid0 + rows,
            "steps": steps,
            "episodes": episodes,
        }
        kept = {key: value for key, value in vars(buffer).items() if key in ("rng", "_no_last")}
        buffer.set_state(state)
        vars(buffer).update(kept)  # the generator given to the constructor, unsampled
        store = buffer._store
        store.capacity = int(buffer.capacity)  # as an add leaves it
        assert store.obs is not None and store.actions is not None
        columns: dict[tuple[str, ...], Any] = {("observations",): store.obs.data}
        columns.update({("actions",): store.actions.data})
        columns.update({(EXTRAS, key): column.data for key, column in store.extras.items()})
        for part, at, k in self._placed():  # a shard's rows at a time: at most its size beside
            steps_of, dest = part["steps"], part["dest"]
            for path, view in part["views"].items():
                if dest is None:  # every piece of the shard plain: its rows in a run
                    columns[path][at : at + len(steps_of)] = view[steps_of]
                else:
                    columns[path][at + dest] = view[steps_of]
            for off, j, chunk in part["chunks"]:
                rows_of = slice(at + off, at + off + chunk.n)
                columns[("observations",)][rows_of] = chunk.obs[:-1]
                columns[("actions",)][rows_of] = chunk.actions
                for key, values in chunk.extras.items():
                    columns[EXTRAS, key][rows_of] = values
                # The infos prepare copied, as add stores them (a state's would be copied again).
                for i, info in enumerate(chunk.infos[:-1], at + off):
                    store.infos[i] = info
                buffer._table.final_info[k + j] = chunk.infos[-1]

    def _placed(self) -> Iterator[tuple[dict[str, Any], int, int]]:
        """Each part with the state's step row and episode where its own begin."""
        at = k = 0
        for part in self._parts:
            yield part, at, k
            at += int(part["n"].sum())
            k += len(part["n"])

    def _cat(self, key: str) -> Any:
        parts = [p[key] for p in self._parts]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def read_stored(path: Path) -> Loaded | None:
    """The pieces of the v2 dataset at ``path`` as one state's columns, where they can be.

    None where the dataset is no v2 one, pieces are of other dtypes, shapes or extra
    outputs, the pieces' ids are not unique, or anything is damaged: read it episode by
    episode then.

    Example:
        >>> import tempfile
        >>> read_stored(Path(tempfile.mkdtemp())) is None  # no dataset
        True
    """
    if not is_v2(path):
        return None
    try:
        return _read(Dataset(path, verify=True, max_open_shards=1))
    except (DatasetError, ValueError, TypeError, LookupError, OverflowError, pa.ArrowException):
        return None  # the reading episode by episode raises what is wrong, as it did


def _read(ds: Dataset) -> Loaded | None:
    loaded, first = Loaded(), 0
    for entry in ds.shards:
        count = len(entry.episodes)
        if not count:
            continue
        shard = Shard(ds.root, entry, verify=True, whole_index=True)
        part = _shard(shard, ds.summaries[first : first + count], loaded)
        if part is None:
            return None
        loaded._parts.append(part)
        first += count
    ids = loaded.ids
    if len(set(ids)) != len(ids):  # a buffer keys episodes by Python equality
        return None
    return loaded


def _shard(shard: Shard, summaries: Sequence[Any], loaded: Loaded) -> dict[str, Any] | None:
    """The shard's part of the state (or None): which pieces are plain, their columns."""
    entries = shard.index["episodes"]
    fields = [_entry_fields(e) for e in entries]
    table, ends = _table(shard)
    total = int(ends[-1])
    plain = np.array([f is not None for f in fields])
    n = np.array([f["t"] - f["t_started"] if f else 1 for f in fields], np.int64)
    rows = np.array([e["rows"][0] if f else 0 for e, f in zip(entries, fields)], np.int64)
    plain &= rows + n < total  # the rows within the table (the next observation too)
    infos = column_of(table, ["infos"], shard.where)
    plain = _all_in(plain, _empty_infos(infos, total), rows, n + 1)
    head, columns = -1, None  # the first plain piece, which models the others
    for head in np.flatnonzero(plain).tolist():
        columns = _plain_columns(entries[head]["meta"], entries[head]["leaves"])
        if columns is not None:
            break
    if columns is None:  # no plain piece: each is read as an episode
        plain[:] = False
        columns = []
    else:
        template = _Template(entries[head], int(n[head]), int(n[head]) + 1, {})
        for j in np.flatnonzero(plain).tolist():
            own, row = fields[j], summaries[j]
            assert own is not None
            meta, leaves = template.parts(int(n[j]), own)
            plain[j] = (
                entries[j]["meta"] == meta
                and entries[j]["leaves"] == leaves
                and (row.t_started, row.t) == (own["t_started"], own["t"])
            )
        # A piece straddling record batches is read (the reader refuses it).
        plain &= np.searchsorted(ends, rows, "right") == np.searchsorted(ends, rows + n, "right")
    views = {}
    for path, info in columns:
        column = column_of(table, path, shard.where)
        views[tuple(path)] = leaf_from_arrow(
            column, {**info, "count": len(column)}, 0, len(column), nulls_ok=True,
            where=shard.where,
        )  # fmt: skip
        valid = _valid(column)
        if valid is not None:  # a null where the rows hold data (or in their items): read
            plain = _all_in(plain, valid, rows, n + (path[0] == "observations"))
    if columns and not plain[head]:
        return None  # the model is no plain piece (the reader refuses it)
    return _part(shard, summaries, loaded, (fields, plain, views, rows, n, head))


def _part(
    shard: Shard, summaries: Sequence[Any], loaded: Loaded, found: tuple[Any, ...]
) -> dict[str, Any] | None:
    """The shard's pieces as state columns: plain ones gathered, the others read, or None."""
    fields, plain, views, rows, n, head = found
    chunks: dict[int, Chunk] = {}
    for j in np.flatnonzero(~plain).tolist():
        chunk = _read_piece(shard, j, summaries[j])
        if chunk is None:
            return None
        chunks[j], n[j] = chunk, chunk.n
    own = [_own(f) if j not in chunks else _own_of(chunks[j]) for j, f in enumerate(fields)]
    ids, t0, terminated, truncated, metas = (list(column) for column in zip(*own))
    model: list[Any] = []
    if views:  # the model piece, read and prepared as add does, must be what is gathered
        meta0 = shard.index["episodes"][head]["meta"]
        model = [space_from_dict(shard.spaces[meta0[k]["space_ref"]]) for k in _SPACE_KEYS]
        r, m = int(rows[head]), int(n[head])
        read = _read_piece(shard, head, summaries[head])
        if read is None:
            return None
        views = gathered_records(views, read.obs.dtype)  # nested leaves: the model's records
        views = gathered_records(views, read.actions.dtype, "actions")
        for key, values in read.extras.items():  # nested extras' leaves too, under their key
            views = gathered_records(views, values.dtype, (EXTRAS, key))
        mine = {path: v[r : r + m + (path == ("observations",))] for path, v in views.items()}
        if not _same_as_read(read, mine, own[head], model):
            return None
    kinds = [(path, v.dtype, v.shape[1:]) for path, v in views.items()]
    for chunk in chunks.values():
        own_kinds = [(path, v.dtype, v.shape[1:]) for path, v in _arrays(chunk).items()]
        kinds = kinds or own_kinds
        if own_kinds != kinds:
            return None  # other dtypes, shapes or outputs: add casts or refuses them
    loaded._kinds = kinds if loaded._kinds is None else loaded._kinds
    if kinds != loaded._kinds or any(holds_nan(i) for i in ids):
        return None
    starts, sizes = np.cumsum(n) - n, n[plain]
    steps = np.repeat(rows[plain], sizes) + _places(sizes)
    rewards = views.pop(("rewards",), None)
    part: dict[str, Any] = {
        "views": views, "steps": steps, "dest": None, "n": n, "metas": metas,
        "t0": np.array(t0, np.int64), "terminated": np.array(terminated, np.bool_),
        "truncated": np.array(truncated, np.bool_),
        "chunks": [(int(starts[j]), j, chunk) for j, chunk in chunks.items()],
    }  # fmt: skip
    if not chunks:
        part["rewards"], part["finals"] = rewards[steps], views[("observations",)][rows + n]
    else:
        kind = {path: (dtype, shape) for path, dtype, shape in kinds}
        part["dest"] = dest = np.repeat(starts[plain], sizes) + _places(sizes)
        part["rewards"] = out = np.empty(int(n.sum()), kind[("rewards",)][0])
        obs_dtype, obs_shape = kind[("observations",)]
        part["finals"] = finals = np.empty((len(n), *obs_shape), obs_dtype)
        if views:
            out[dest] = rewards[steps]
            finals[plain] = views[("observations",)][rows[plain] + sizes]
        for off, j, chunk in part["chunks"]:
            out[off : off + chunk.n] = chunk.rewards
            finals[j] = chunk.obs[-1]
    loaded.ids.extend(ids)
    loaded.steps += int(n.sum())
    at = int(np.argmax(plain)) if views else -1  # add adopts the first space of each kind
    pieces = [c.spaces for j, c in chunks.items() if j < at] + ([model] if views else [])
    for spaces in pieces + [c.spaces for j, c in chunks.items() if j > at]:
        loaded._spaces = [s if s is not None else new for s, new in zip(loaded._spaces, spaces)]
    return part


_SPACE_KEYS = ("observation_space", "action_space")


def _own(fields: dict[str, Any]) -> tuple[Any, ...]:
    """A plain piece's id, start, flags and metadata, from its index entry."""
    return (
        decode_value(fields["id"], blob=None, where="id"),
        fields["t_started"],
        fields["is_terminated"],
        fields["is_truncated"],
        EpisodeMeta(
            _loaded_custom(fields["custom_data"]),
            *(fields[k] for k in _IDS),
            *(fields[k] for k in _CLOCKS),
        ),
    )


def _own_of(chunk: Chunk) -> tuple[Any, ...]:
    return chunk.id_, chunk.t0, chunk.terminated, chunk.truncated, chunk.meta


def _arrays(chunk: Chunk) -> dict[tuple[str, ...], np.ndarray]:
    """A chunk's step columns by their paths, in a shard's column order."""
    out: dict[tuple[str, ...], np.ndarray] = {("observations",): chunk.obs}
    out.update({("actions",): chunk.actions, ("rewards",): chunk.rewards})
    return {**out, **{(EXTRAS, key): values for key, values in chunk.extras.items()}}


def _read_piece(shard: Shard, j: int, summary: Any) -> Chunk | None:
    """The shard's piece ``j`` as ``read_episodes`` reads it and ``add`` prepares it.

    None where the reader refuses it (its times disagree with the manifest) or ``add``
    stores nothing of it (no steps).
    """
    k, first = shard.part_of(j)
    episode = decode_rows(
        shard.entry_of(j), shard.parts[k], first, spaces=shard.spaces,
        where=f"{shard.where} episode {j}", numpy=True, table_where=shard.where,
    )  # fmt: skip
    if (episode.t_started, episode.t) != (summary.t_started, summary.t):
        return None
    return prepare(episode)


def _places(n: np.ndarray) -> np.ndarray:
    """Each row's place in its piece, for pieces of ``n`` rows in a run."""
    return np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)


def _all_in(plain: np.ndarray, mask: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> Any:
    """``plain`` without the pieces whose rows (``sizes`` from ``starts``) are not all ``mask``."""
    at = np.flatnonzero(plain)
    bad = np.concatenate([[0], np.cumsum(~mask)])
    out = plain.copy()
    out[at] = bad[starts[at] + sizes[at]] == bad[starts[at]]
    return out


def _plain_columns(meta: dict[str, Any], leaves: dict[str, Any]) -> list[Any] | None:
    """The leaf paths and entries of a plain entry's columns (observations first), or None."""
    columns, extras = meta.get("columns"), meta.get(EXTRAS)
    if not isinstance(columns, dict) or sorted(columns) != sorted([*_ARRAYS, "infos"]):
        return None
    if not isinstance(leaves, dict) or meta.get("blob") != []:
        return None
    if not isinstance(extras, list) or not all(isinstance(p, list) and len(p) == 2 for p in extras):
        return None
    infos = columns["infos"]
    if not isinstance(infos, dict) or infos.get("layout") != "json" or infos.get("lookback"):
        return None
    out = []
    for path, column in [([k], columns[k]) for k in _ARRAYS] + [
        ([EXTRAS, k], c) for k, c in extras
    ]:
        if not isinstance(column, dict) or column.get("layout") != "arrays":
            return None
        if path != ["rewards"] and column.get("structure") != "*":  # nested: leaves as records
            nested = struct_leaves(column, leaves, tuple(path))
            if nested is None:
                return None
            out.extend(nested)
            continue
        if column.get("lookback") != 0 or column.get("structure") != "*":
            return None
        names = column.get("leaves")
        if not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], dict):
            return None
        info = leaves.get(str(names[0].get("file")))
        if not isinstance(info, dict) or info.get("path") != path or info.get("storage") != "arrow":
            return None
        out.append((path, info))
    return out


def _table(shard: Shard) -> tuple[Any, np.ndarray]:
    """The shard's data as one table, and where each of its record batches ends."""
    parts = [shard.parts[k] for k in range(len(shard.parts))]
    ends = np.cumsum([p.num_rows for p in parts])
    table = parts[0] if len(parts) == 1 else pa.Table.from_batches(parts)
    return table, ends


def _valid(column: pa.Array) -> np.ndarray | None:
    """Which rows of ``column`` hold no null, in their items neither; None where all do.

    Read from the bitmaps (``to_numpy`` imports pandas); a null item inside a shaped row
    is what the reader refuses as a null in the row.
    """
    valid = None
    if column.null_count:
        bits = np.unpackbits(np.frombuffer(column.buffers()[0], np.uint8), bitorder="little")
        valid = bits[column.offset : column.offset + len(column)] == 1
    if pa.types.is_fixed_size_list(column.type):
        size = column.type.list_size
        items = _valid(column.values.slice(column.offset * size, len(column) * size))
        if items is not None:
            rows = items.reshape(len(column), size).all(axis=1)
            valid = rows if valid is None else valid & rows
    return valid


def _empty_infos(column: pa.Array, rows: int) -> np.ndarray:
    """Which of the infos column's ``rows`` rows hold ``{}``, no null (none: no such column)."""
    if column.type != pa.large_string() or len(column) != rows:
        return np.zeros(rows, np.bool_)
    offsets = np.frombuffer(column.buffers()[1], np.int64, column.offset + rows + 1)
    offsets = offsets[column.offset :]
    empty = np.diff(offsets) == 2
    data = column.buffers()[2]
    text = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    at = offsets[:-1][empty]
    if len(at) and (at.min() < 0 or at.max() + 2 > len(text)):
        return np.zeros(rows, np.bool_)
    empty[empty] = (text[at] == ord("{")) & (text[at + 1] == ord("}"))
    valid = _valid(column)
    return empty if valid is None else empty & valid


def _same_as_read(chunk: Chunk | None, mine: dict[Any, Any], own: Any, spaces: Any) -> bool:
    """Whether the model piece read and prepared as ``add`` does (``chunk``) is what is gathered.

    ``mine`` holds its gathered rows (observations, the next one too), ``own`` its id, start,
    flags and metadata, ``spaces`` its spaces.
    """
    if chunk is None or not chunk.empty_infos:
        return False
    read = _arrays(chunk)
    if list(mine) != list(read) or not all(_same_array(mine[k], read[k]) for k in mine):
        return False
    id_ = own[0]
    return (
        type(chunk.id_) is type(id_)
        and chunk.id_ == id_
        and (chunk.t0, chunk.terminated, chunk.truncated) == tuple(own[1:4])
        and chunk.meta == own[4]
        and list(chunk.spaces) == spaces
    )


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

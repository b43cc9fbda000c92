"""A saved buffer's episodes read into one buffer state, columns batched.

``load`` used to read every saved episode as a ``SingleAgentEpisode`` and add them. Where
every piece of the save's v2 dataset is *plain* (as ``save`` writes a stored episode without
infos or ``custom_data``, its other ids None or str: see
:mod:`episodes.replay.saved_shards`), :func:`read_stored` reads each shard's columns at once
instead, and :meth:`Loaded.restore` gives the buffer the state adding them would leave
(through ``set_state``: the same columns, links, table, sizes and counters). Saves written
episode by episode, one record batch each (every save before 2026-12-05), read the same way.
The dataset is opened and checked by ``episodes.io`` as ``read_episodes(verify=True)`` opens
it (manifest, index checksums, every data file's CRC-32, every record batch validated); a
piece is plain where its index entry is the shard's first entry with the piece's own fields
(id, ids, flags, times, clocks, sizes) put in, and the first piece of each shard is also read
as an episode and prepared as ``add`` prepares it, which must give the same rows, flags,
times, metadata and spaces. Anything else (a chunk dataset, a piece that is not plain,
nulls or texts where the rows must hold data, damage) gives None: the caller reads episode
by episode, which raises what it always raised.

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

from collections.abc import Sequence
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
from episodes.replay.ingest import prepare
from episodes.replay.metadata import EpisodeMeta
from episodes.replay.saved_shards import _IDS, _Template
from episodes.spaces import space_from_dict

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = ["Loaded", "read_stored"]

_FIELDS = ("id", *_IDS, "is_terminated", "is_truncated", "t_started", "t")
_CLOCKS = ("start_time", "last_step_time")
_OWN = (*_FIELDS, *_CLOCKS)
_MAX_T = 2**63 - 1
_ENTRY_KEYS = {"rows", "meta", "leaves", "wall_start", "wall_end"}
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

    def restore(self, buffer: EpisodeReplayBuffer) -> None:
        """Gives ``buffer`` (new, empty) the episodes, as ``buffer.add`` of them would.

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
        n = np.concatenate([p["n"] for p in self._parts])
        count, rows = len(n), int(n.sum())
        first = np.cumsum(n) - n
        place = np.arange(rows) - np.repeat(first, n)
        t0 = self._cat("t0")
        last = place == np.repeat(n, n) - 1
        zeros = {
            path: np.broadcast_to(np.zeros(1, v.dtype), (rows, *v.shape[1:]))
            for path, v in self._parts[0]["views"].items()
        }
        steps = {
            "obs": zeros.pop(("observations",)),
            "actions": zeros.pop(("actions",)),
            "rewards": self._cat("rewards"),
            "extras": {path[1]: v for path, v in zeros.items()},
            "infos": [None] * rows,
            "ep": np.repeat(np.arange(count), n),
            "t": np.repeat(t0, n) + place,
            "nxt": np.where(last, -1, np.arange(rows) + 1),
            "prv": np.where(place == 0, -1, np.arange(rows) - 1),
            "uid": np.arange(rows),
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
            "custom_data": [{}] * count,
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
            "next_uid": rows,
            "steps": steps,
            "episodes": episodes,
        }
        kept = {key: value for key, value in vars(buffer).items() if key in ("rng", "_no_last")}
        buffer.set_state(state)
        vars(buffer).update(kept)  # the generator given to the constructor, unsampled
        store = buffer._store
        store.capacity = int(buffer.capacity)  # as an add leaves it
        assert store.obs is not None and store.actions is not None
        columns: dict[tuple[str, ...], Any] = {("observations",): store.obs}
        columns.update({("actions",): store.actions})
        columns.update({(EXTRAS, key): column for key, column in store.extras.items()})
        at = 0
        for part in self._parts:  # a shard's rows at a time: at most its size beside them
            steps_of = part["steps"]
            for path, view in part["views"].items():
                columns[path].data[at : at + len(steps_of)] = view[steps_of]
            at += len(steps_of)

    def _cat(self, key: str) -> Any:
        parts = [p[key] for p in self._parts]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def read_stored(path: Path) -> Loaded | None:
    """The pieces of the v2 dataset at ``path`` as one state's columns, if all are plain.

    None where the dataset is no v2 one, a piece is not plain, the pieces' ids are not
    unique, or anything is damaged: read it episode by episode then.

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
    kinds = [[(k, v.dtype, v.shape[1:]) for k, v in p["views"].items()] for p in loaded._parts]
    if (
        any(kind != kinds[0] for kind in kinds)
        or len({p["rewards"].dtype for p in loaded._parts}) > 1
    ):
        return None  # shards of other dtypes: add casts or refuses them
    return loaded


def _fields(entry: Any) -> dict[str, Any] | None:
    """A plain entry's own fields (checked as the episode decoder checks them), else None."""
    if type(entry) is not dict or len(entry) != len(_ENTRY_KEYS) or entry.keys() != _ENTRY_KEYS:
        return None
    meta = entry["meta"]
    if type(meta) is not dict:
        return None
    fields = {key: meta.get(key) for key in _OWN}
    t0, t = fields["t_started"], fields["t"]
    if type(t0) is not int or type(t) is not int or not 0 <= t0 < t <= _MAX_T:
        return None
    if type(fields["is_terminated"]) is not bool or type(fields["is_truncated"]) is not bool:
        return None
    for key in _IDS:  # ids other than None or str take the decoder's own checks
        if fields[key] is not None and type(fields[key]) is not str:
            return None
    for key in _CLOCKS:
        if fields[key] is not None and type(fields[key]) is not float:
            return None
    return fields


def _shard(shard: Shard, summaries: Sequence[Any], loaded: Loaded) -> dict[str, Any] | None:
    entries = shard.index["episodes"]
    found = [_fields(e) for e in entries]
    fields = [f for f in found if f is not None]
    if len(fields) != len(found):
        return None
    head = entries[0]
    meta0 = head["meta"]
    columns = _plain_columns(meta0, head["leaves"])  # the template's parts checked first
    if columns is None or meta0.get("blob") != [] or meta0.get("custom_data") != {}:
        return None
    n = np.array([f["t"] - f["t_started"] for f in fields], np.int64)
    template = _Template(head, int(n[0]), int(n[0]) + 1, {})
    rows = np.empty(len(entries), np.int64)
    for j, (entry, own) in enumerate(zip(entries, fields, strict=True)):
        meta, leaves = template.parts(int(n[j]), own)
        got = entry["rows"]
        if entry["meta"] != meta or entry["leaves"] != leaves or got[1:] != [int(n[j]) + 1]:
            return None
        rows[j] = got[0]
        row = summaries[j]
        if (row.t_started, row.t) != (own["t_started"], own["t"]):
            return None  # the reader's refusal
    table, ends = _table(shard)
    if np.any(np.searchsorted(ends, rows, "right") != np.searchsorted(ends, rows + n, "right")):
        return None  # a piece straddling record batches: the reader refuses it
    if not _empty_infos(column_of(table, ["infos"], shard.where), int(ends[-1])):
        return None
    steps = np.repeat(rows, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    part: dict[str, Any] = {"views": {}, "steps": steps}
    for path, info in columns:
        column = column_of(table, path, shard.where)
        view = leaf_from_arrow(
            column, {**info, "count": len(column)}, 0, len(column), nulls_ok=True,
            where=shard.where,
        )  # fmt: skip
        needed = np.concatenate([steps, rows + n]) if path == ["observations"] else steps
        valid = _valid(column)
        if valid is not None and not valid[needed].all():
            return None  # a null where the rows hold data (or in their items): the reader's
        if path == ["rewards"]:
            part["rewards"] = view[steps]
        else:  # read into the store once it is made (Loaded.restore)
            part["views"][tuple(path)] = view
        if path == ["observations"]:
            part["finals"] = view[rows + n]
    ids = [decode_value(f["id"], blob=None, where="id") for f in fields]
    spaces = [space_from_dict(shard.spaces[meta0[k]["space_ref"]]) for k in _SPACE_KEYS]
    metas = [EpisodeMeta(None, *(f[k] for k in _IDS), *(f[k] for k in _CLOCKS)) for f in fields]
    part.update(
        n=n,
        t0=np.array([f["t_started"] for f in fields], np.int64),
        terminated=np.array([f["is_terminated"] for f in fields], np.bool_),
        truncated=np.array([f["is_truncated"] for f in fields], np.bool_),
        metas=metas,
    )
    if any(holds_nan(i) for i in ids) or not _same_as_read(shard, part, ids, spaces):
        return None
    loaded.ids.extend(ids)
    loaded.steps += int(n.sum())
    for i, space in enumerate(spaces):  # add adopts the first of each stored
        if loaded._spaces[i] is None:
            loaded._spaces[i] = space
    return part


_SPACE_KEYS = ("observation_space", "action_space")


def _plain_columns(meta: dict[str, Any], leaves: dict[str, Any]) -> list[Any] | None:
    """The leaf paths and entries of a plain entry's columns (observations first), or None."""
    columns = meta.get("columns")
    extras = meta.get(EXTRAS)
    if not isinstance(columns, dict) or sorted(columns) != sorted([*_ARRAYS, "infos"]):
        return None
    if not isinstance(leaves, dict):
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


def _empty_infos(column: pa.Array, rows: int) -> bool:
    """Whether the infos column holds ``{}`` in each of its ``rows`` rows (no null)."""
    if column.type != pa.large_string() or column.null_count or len(column) != rows:
        return False
    offsets = np.frombuffer(column.buffers()[1], np.int64, column.offset + rows + 1)
    offsets = offsets[column.offset :]
    if not np.all(np.diff(offsets) == 2):
        return False
    data = column.buffers()[2]
    return rows == 0 or data.slice(int(offsets[0]), 2 * rows).to_pybytes() == b"{}" * rows


def _same_as_read(shard: Shard, part: dict[str, Any], ids: list[Any], spaces: list[Any]) -> bool:
    """Whether the shard's first piece, read and prepared as ``add`` does, is ``part``'s."""
    k, first = shard.part_of(0)
    episode = decode_rows(
        shard.entry_of(0), shard.parts[k], first, spaces=shard.spaces,
        where=f"{shard.where} episode 0", numpy=True, table_where=shard.where,
    )  # fmt: skip
    chunk = prepare(episode)
    n = int(part["n"][0])
    if chunk is None or chunk.n != n or not chunk.empty_infos:
        return False
    views, steps = dict(part["views"]), part["steps"][:n]
    mine = {
        "obs": np.concatenate([views.pop(("observations",))[steps], part["finals"][:1]]),
        "actions": views.pop(("actions",))[steps],
        "rewards": part["rewards"][:n],
        **{f"extra {path[1]}": v[steps] for path, v in views.items()},
    }
    read = {
        "obs": chunk.obs,
        "actions": chunk.actions,
        "rewards": chunk.rewards,
        **{f"extra {key}": v for key, v in chunk.extras.items()},
    }
    if list(mine) != list(read) or not all(_same_array(mine[k], read[k]) for k in mine):
        return False
    return (
        type(chunk.id_) is type(ids[0])
        and chunk.id_ == ids[0]
        and (chunk.t0, chunk.terminated, chunk.truncated)
        == (int(part["t0"][0]), bool(part["terminated"][0]), bool(part["truncated"][0]))
        and chunk.meta == part["metas"][0]
        and list(chunk.spaces) == spaces
    )


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

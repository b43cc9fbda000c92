"""One episode <-> rows of a v2 shard (Arrow columns) plus its index entry.

The episode is first encoded exactly as a v1 chunk (:func:`episodes.io.encoding.encode_episode`:
a ``meta`` dict and named leaf arrays); each leaf then becomes an Arrow column instead of a
``.npy`` file, nested item structures become nested ``struct`` columns, JSON-layout items
(infos, mixed list columns) become one JSON text per row, and the blob becomes one binary
value in the episode's first row. An episode occupies ``max(column sizes)`` consecutive rows
(one per observation, lookback included); shorter columns (actions, rewards, extra model
outputs) are null in their last rows.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 0.5])
    >>> enc = encode_rows(ep)
    >>> enc.rows, sorted(enc.columns)[:3]
    (3, ['actions', 'blob', 'episode_id'])
    >>> table = pa.table(enc.columns)
    >>> decode_rows(enc.entry, table, 0, spaces=enc.spaces, where="x") == ep
    True
"""

from __future__ import annotations

import json
import marshal
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import tree

from episodes.episode import SingleAgentEpisode
from episodes.io.arrow_leaves import (
    leaf_from_arrow,
    leaf_info,
    leaf_to_arrow,
    numeric_array,
    text_array,
)
from episodes.io.arrow_types import check_column_type
from episodes.io.clock_meta import check_clocks
from episodes.io.encoding import decode_episode, encode_episode
from episodes.io.errors import CorruptDatasetError, DatasetError, UnstorableValueError
from episodes.io.plain_rows import plain_rows

__all__ = [
    "EncodedEpisode",
    "blob_of",
    "column_of",
    "decode_rows",
    "encode_rows",
    "skeleton_of",
    "skeleton_paths",
]

COLUMNS = ("observations", "infos", "actions", "rewards")
EXTRAS = "extra_model_outputs"
BLOB = "blob.npy"
_SPACE_KEYS = ("observation_space", "action_space")
_HELPER_COLUMNS = {EXTRAS, "blob", "episode_id", "t"}


@dataclass
class EncodedEpisode:
    """An episode ready to be appended to a shard.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> enc = encode_rows(SingleAgentEpisode("a", observations=[0, 1], actions=[1],
        ...                                      rewards=[1.0]))
        >>> enc.rows, enc.columns["episode_id"].to_pylist(), enc.columns["actions"].to_pylist()
        (2, ['a', 'a'], [1, None])
    """

    columns: dict[str, pa.Array]
    entry: dict[str, Any]
    spaces: list[Any]
    rows: int
    nbytes: int
    ret: float = 0.0

    def batch(self) -> pa.RecordBatch:
        """The columns as one record batch (the shard's file holds one per episode).

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[1.0])
            >>> encode_rows(ep).batch().num_rows
            2
        """
        return pa.RecordBatch.from_arrays(list(self.columns.values()), names=list(self.columns))


_ENTRY_ALLOWANCE = 8 << 10  # bytes of index entry and Python objects per buffered episode


# ----------------------------------------------------------------------------- structures


def skeleton_paths(enc: Any, where: str, depth: int = 0) -> list[tuple[str, ...]]:
    """Leaf paths of an encoded item structure, in the order its leaves are stored.

    Example:
        >>> skeleton_paths({"dict": [["b", "*"], ["a", {"tuple": ["*", "*"]}]]}, "x")
        [('a', '0'), ('a', '1'), ('b',)]
    """
    skeleton = _skeleton(enc, where, depth)
    if not isinstance(skeleton, (dict, list, tuple)):
        return [()]
    return [tuple(str(p) for p in path) for path, _ in tree.flatten_with_path(skeleton)]


def skeleton_of(enc: Any, where: str) -> Any:
    """An encoded item structure as a nested skeleton (leaves are 0), for ``tree.unflatten_as``.

    Example:
        >>> skeleton_of({"tuple": ["*", {"dict": [["x", "*"]]}]}, "x")
        (0, {'x': 0})
    """
    return _skeleton(enc, where, 0)


def _skeleton(enc: Any, where: str, depth: int) -> Any:
    if depth > 64:
        raise CorruptDatasetError(f"{where}: structure nested too deeply")
    if enc == "*":
        return 0
    if isinstance(enc, dict) and len(enc) == 1:
        ((kind, body),) = enc.items()
        if kind == "dict" and isinstance(body, list):
            out = {}
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise CorruptDatasetError(f"{where}: malformed structure entry {pair!r}")
                out[pair[0]] = _skeleton(pair[1], where, depth + 1)
            return out
        if kind in ("tuple", "list") and isinstance(body, list):
            parts = [_skeleton(v, where, depth + 1) for v in body]
            return tuple(parts) if kind == "tuple" else parts
    raise CorruptDatasetError(f"{where}: malformed item structure {enc!r}")


def _nest(items: list[tuple[tuple[str, ...], pa.Array]], where: str) -> pa.Array:
    if len(items) == 1 and not items[0][0]:
        return items[0][1]
    groups: dict[str, list[tuple[tuple[str, ...], pa.Array]]] = {}
    for path, array in items:
        groups.setdefault(path[0], []).append((path[1:], array))
    names = _field_names(list(groups), where)
    return pa.StructArray.from_arrays([_nest(g, where) for g in groups.values()], names=names)


def _null_past(column: pa.Array, size: int) -> pa.Array:
    """A struct column null in its rows past ``size``, where its leaves are null already.

    Other tools count a nested column's steps as a flat one's: ``count(actions)`` skips the
    piece's last row only if the struct itself is null there.

    Example:
        >>> column = pa.StructArray.from_arrays([pa.array([1, None])], names=["a"])
        >>> _null_past(column, 1).to_pylist()
        [{'a': 1}, None]
    """
    if not pa.types.is_struct(column.type) or size >= len(column):
        return column
    children = [column.field(i) for i in range(column.type.num_fields)]
    mask = pa.array(np.arange(len(column)) >= size)
    return pa.StructArray.from_arrays(children, fields=list(column.type), mask=mask)


def _field_names(names: list[str], where: str) -> list[str]:
    """``names`` as Arrow struct field names, which must be UTF-8 (a lone surrogate is not)."""
    for name in names:
        if not name.isascii():
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise UnstorableValueError(
                    f"{where}: the key {name!r} holds a lone surrogate (not UTF-8), which a v2 "
                    "shard's column names cannot hold (EpisodeWriter's v1 chunks can)"
                ) from None
    return names


def column_of(table: Any, path: list[str], where: str | None = None) -> pa.Array:
    """The (single-chunk) Arrow array at a leaf path (top-level name, then struct fields).

    ``where`` names the table (its shard) in the error for a missing column.

    Example:
        >>> column_of(pa.table({"x": [1, 2]}), ["x"]).to_pylist()
        [1, 2]
        >>> column_of(pa.table({"x": [1, 2]}), ["y"], "shard s")
        Traceback (most recent call last):
        episodes.io.errors.CorruptDatasetError: shard s: column y is missing from the shard
    """
    try:
        column = table.column(path[0])
        array = column.chunk(0) if isinstance(column, pa.ChunkedArray) else column
        if isinstance(column, pa.ChunkedArray) and column.num_chunks != 1:
            array = column.combine_chunks()
        for name in path[1:]:
            if not pa.types.is_struct(array.type):
                raise TypeError(f"{'/'.join(path)} passes through a non-struct column")
            array = array.field(name)
    except (KeyError, IndexError, TypeError, OverflowError, pa.ArrowException) as err:
        prefix = f"{where}: " if where else ""
        raise CorruptDatasetError(
            f"{prefix}column {'/'.join(path)} is missing from the shard"
        ) from err
    return array


# ------------------------------------------------------------------------------- encoding
def _encode_column(
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    rows: int,
    path: list[str],
    leaves: dict[str, Any],
    copy: Callable[[np.ndarray], np.ndarray] | None = None,
) -> pa.Array:
    if meta["layout"] == "json":
        items = meta.pop("items")
        meta["items"] = None  # the items live in the column: one JSON text per row
        if set(map(type, items)) <= {dict} and not any(items):
            # Infos are mostly all empty dicts: their texts are known, no Python per row.
            return text_array([b"{}"] * len(items), rows, pa.large_string())
        texts = [
            b"{}" if item == {} else json.dumps(item, allow_nan=False).encode("utf-8")
            for item in items
        ]
        return text_array(texts, rows, pa.large_string())
    paths = skeleton_paths(meta["structure"], "/".join(path))
    parts = []
    for sub, leaf in zip(paths, meta["leaves"], strict=True):
        info = leaf_info(arrays[leaf["file"]], [*path, *sub])
        leaves[leaf["file"]] = info
        array = arrays[leaf["file"]]
        width = array.dtype.itemsize * math.prod(info["shape"])
        if info["storage"] == "raw" and width > _ARROW_MAX_BYTE_WIDTH:  # readers refuse it
            raise UnstorableValueError(
                f"{'/'.join([*path, *sub])}: items of {width} bytes each (dtype "
                f"{info['dtype']}); an Arrow reader takes at most {_ARROW_MAX_BYTE_WIDTH} bytes "
                "an item of this kind; the v1 format stores it"
            )
        parts.append((sub, leaf_to_arrow(array, rows, info, copy)))
    column = _null_past(_nest(parts, "/".join(path)), meta["size"])
    # Arrow's IPC writer would fail part-way (a flat column has no depth to walk)
    if column.type.num_fields and _type_depth(column.type) > _ARROW_MAX_DEPTH:
        raise UnstorableValueError(
            f"{'/'.join(path)}: nested too deeply for an Arrow column (more than "
            f"{_ARROW_MAX_DEPTH} levels of structs and lists); the v1 format stores it"
        )
    return column


#: The deepest column type Arrow's IPC writer takes (its recursion limit is 64 nested types).
_ARROW_MAX_DEPTH = 63

#: The widest fixed-size binary item Arrow's IPC and Parquet readers take (a width of 2**28
#: bytes or more is written, then refused when read). Items stored raw (strings, complex,
#: datetimes, big-endian numbers) are one such item each.
_ARROW_MAX_BYTE_WIDTH = (1 << 28) - 1


def _type_depth(arrow_type: pa.DataType) -> int:
    depth, level = 0, [arrow_type]
    while level:  # breadth first: no recursion for a deep type
        level = [
            arrow_type.field(i).type for arrow_type in level for i in range(arrow_type.num_fields)
        ]
        depth += bool(level)
    return depth


def _intern(value: Any, spaces: list[Any], lookup: dict[str, int]) -> dict[str, int]:
    # Equal marshal bytes mean equal values (types included), so a space met before is found
    # without its sorted JSON text, ~10x dearer; equal values marshalled apart fall through.
    try:
        fast: str | None = "\0" + marshal.dumps(value).decode("latin-1")  # no JSON text
    except ValueError:
        fast = None
    if fast is None or fast not in lookup:
        key = json.dumps(value, sort_keys=True)
        if key not in lookup:
            lookup[key] = len(spaces)
            spaces.append(value)
        if fast is None:
            return {"space_ref": lookup[key]}
        lookup[fast] = lookup[key]
    return {"space_ref": lookup[fast]}


def encode_rows(
    episode: SingleAgentEpisode,
    spaces: list[Any] | None = None,
    lookup: dict[str, int] | None = None,
    *,
    copy: Callable[[np.ndarray], np.ndarray] | None = None,
    wall: tuple[float | None, float | None] | None = None,
) -> EncodedEpisode:
    """Encodes an episode as shard columns and an index entry (nothing is written).

    Spaces are replaced by references into ``spaces`` (shared by a shard's episodes); rows the
    columns would share with the episode are copied with ``copy`` (see ``leaf_to_arrow``).
    ``wall`` (internal: the copy tools') gives the entry's ``wall_start``/``wall_end`` as
    stored in the source, instead of converting the episode's ``perf_counter`` timing with
    this process's clock offset, which another boot or machine does not share.

    Raises:
        UnstorableValueError: A value cannot be stored (see ``EpisodeWriter``).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> spaces, lookup = [], {}
        >>> [encode_rows(SingleAgentEpisode(observations=[i]), spaces, lookup).rows
        ...  for i in range(3)]
        [1, 1, 1]
        >>> len(spaces), spaces[0]  # shared: no observation space, the rewards' default Box
        (2, None)
    """
    spaces = [] if spaces is None else spaces
    lookup = {} if lookup is None else lookup
    meta, arrays = encode_episode(episode)
    check_clocks(meta, episode.id_)  # the shard's JSON index could not be committed
    names = list(meta["columns"])  # every column field the episode declares
    if set(names) & _HELPER_COLUMNS:
        raise UnstorableValueError(f"column names {sorted(names)} clash with the shard's own")
    metas = [meta["columns"][name] for name in names] + [c for _, c in meta[EXTRAS]]
    rows = max([c["size"] for c in metas] + [1 if BLOB in arrays else 0])
    leaves: dict[str, Any] = {}
    columns = {
        name: _encode_column(meta["columns"][name], arrays, rows, [name], leaves, copy)
        for name in names
    }
    if meta[EXTRAS]:
        keys = [key for key, _ in meta[EXTRAS]]
        parts = [
            _encode_column(c, arrays, rows, [EXTRAS, k], leaves, copy) for k, c in meta[EXTRAS]
        ]
        names = _field_names(keys, EXTRAS)
        size = max(c["size"] for _, c in meta[EXTRAS])
        columns[EXTRAS] = _null_past(pa.StructArray.from_arrays(parts, names=names), size)
    blob = arrays.get(BLOB)
    if blob is None or not rows:
        columns["blob"] = pa.nulls(rows, pa.large_binary())
    else:
        columns["blob"] = text_array([blob.tobytes()], rows, pa.large_binary())
    id_ = episode.id_
    id_text = (id_ if isinstance(id_, str) else json.dumps(meta["id"])).encode("utf-8")
    columns["episode_id"] = text_array([id_text] * rows, rows, pa.string())
    first_t = meta["t_started"] - meta["columns"]["observations"]["lookback"]
    if first_t < -(2**63) or first_t + rows - 1 > 2**63 - 1:  # the t column is int64
        raise UnstorableValueError(
            f"episode {id_!r}: time steps from {first_t} do not fit the shard's int64 t column"
        )
    columns["t"] = numeric_array(np.arange(first_t, first_t + rows, dtype=np.int64))
    for c in metas:
        c["space"] = _intern(c["space"], spaces, lookup)
    for key in _SPACE_KEYS:
        meta[key] = _intern(meta[key], spaces, lookup)
    if wall is None:
        offset = time.time() - time.perf_counter()  # perf_counter readings -> wall clock
        start, end = meta["start_time"], meta["last_step_time"]
        wall = (None if start is None else start + offset, None if end is None else end + offset)
    entry = {
        "rows": rows,
        "meta": meta,
        "leaves": leaves,
        "wall_start": wall[0],
        "wall_end": wall[1],
    }
    # What buffering the episode holds: every column (ids, infos and t repeat per row), plus
    # an allowance for its index entry and Python objects, so that a writer of many short
    # episodes flushes at about shard_bytes of memory, not at 7-145x that.
    # Arrow's nbytes, which replay's save budget (saved_shards) models byte for byte.
    nbytes = sum(column.nbytes for column in columns.values()) + _ENTRY_ALLOWANCE
    return EncodedEpisode(columns, entry, spaces, rows, nbytes)


# ------------------------------------------------------------------------------- decoding
def blob_of(table: Any, start: int, where: str, table_where: str | None = None) -> bytes:
    """The blob of the episode whose rows begin at ``start`` (its ``large_binary`` value).

    The column's type is checked before its value is read: only a plain ``large_binary``
    value is converted to ``bytes``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> enc = encode_rows(SingleAgentEpisode(observations=[0], infos=[{"k": np.int8(1)}]))
        >>> len(blob_of(pa.table(enc.columns), 0, "x")) > 0
        True
    """
    array = column_of(table, ["blob"], table_where or where)
    check_column_type(array, pa.large_binary(), f"{where}: column blob")
    value = array[start].as_py() if start < len(array) else None
    if not isinstance(value, bytes):
        raise CorruptDatasetError(f"{where}: the episode's blob is missing")
    return value


def _restore(value: Any, spaces: list[Any], where: str) -> Any:
    ref = value.get("space_ref") if isinstance(value, dict) and len(value) == 1 else None
    if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(spaces):
        raise CorruptDatasetError(f"{where}: bad space reference {value!r}")
    return spaces[ref]


def _column_metas(meta: dict[str, Any], where: str) -> list[tuple[list[str], Any]]:
    columns = meta.get("columns")
    extras = meta.get(EXTRAS)
    if not isinstance(columns, dict) or not isinstance(extras, list):
        raise CorruptDatasetError(f"{where}: malformed episode metadata")
    out = [([name], col) for name, col in columns.items()]
    for pair in extras:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CorruptDatasetError(f"{where}: malformed extra_model_outputs entry")
        if pair[0] in (path[1] for path, _ in out[len(columns) :]):  # a few keys at most
            raise CorruptDatasetError(f"{where}: extra_model_outputs lists {pair[0]!r} twice")
        out.append(([EXTRAS, pair[0]], pair[1]))
    return out


def _own_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its own top level, column dicts and extras pairs (what is filled in)."""
    out = dict(meta)
    columns, extras = out.get("columns"), out.get(EXTRAS)
    if isinstance(columns, dict):
        out["columns"] = {k: dict(c) if isinstance(c, dict) else c for k, c in columns.items()}
    if isinstance(extras, list):
        out[EXTRAS] = [
            [p[0], dict(p[1])] if isinstance(p, list) and len(p) == 2 and isinstance(p[1], dict)
            else p
            for p in extras
        ]  # fmt: skip
    return out


def prepare_meta(
    entry: Any,
    table: Any,
    start: int,
    spaces: list[Any],
    where: str,
    table_where: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rebuilds an episode's v1-style meta from its index entry (spaces, JSON items).

    Returns ``(meta, leaves)``; the caller's ``entry`` is not modified: ``meta`` is a copy
    whose top level, column metadata and extras list are its own (what is filled in), the rest
    (structures, leaf lists, custom data) the entry's, read only. ``where`` names the
    episode in errors, ``table_where`` the table (default ``where``) for a missing column.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> enc = encode_rows(SingleAgentEpisode(observations=[0, 1], actions=[1],
        ...                                      rewards=[1.0], infos=[{"k": 1}, {}]))
        >>> meta, leaves = prepare_meta(enc.entry, pa.table(enc.columns), 0, enc.spaces, "x")
        >>> meta["columns"]["infos"]["items"], sorted(leaves)
        ([{'k': 1}, {}], ['act.0.npy', 'obs.0.npy', 'rew.0.npy'])
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("meta"), dict):
        raise CorruptDatasetError(f"{where}: malformed index entry")
    meta = _own_meta(entry["meta"])  # a copy to fill in (no JSON round trip: ~20 us)
    leaves = entry.get("leaves")
    if not isinstance(leaves, dict):
        raise CorruptDatasetError(f"{where}: index entry has no leaf table")
    for key in _SPACE_KEYS:
        meta[key] = _restore(meta.get(key), spaces, where)
    for path, col in _column_metas(meta, where):
        if not isinstance(col, dict):
            raise CorruptDatasetError(f"{where}: column {'/'.join(path)} metadata is malformed")
        col["space"] = _restore(col.get("space"), spaces, where)
        if col.get("layout") == "json":
            size = col.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise CorruptDatasetError(f"{where}: bad size in column {'/'.join(path)}")
            array = column_of(table, path, table_where or where)
            if start + size > len(array) or not pa.types.is_large_string(array.type):
                raise CorruptDatasetError(f"{where}: JSON column {'/'.join(path)} is malformed")
            texts = array.slice(start, size).to_pylist()
            try:
                # Most infos are empty dicts: skip the parser for them.
                col["items"] = [{} if t == "{}" else json.loads(t) for t in texts]
            except (TypeError, ValueError, RecursionError) as err:
                raise CorruptDatasetError(f"{where}: bad JSON item in {'/'.join(path)}") from err
    return meta, leaves


def decode_rows(
    entry: Any,
    table: Any,
    start: int,
    *,
    spaces: list[Any],
    where: str,
    numpy: bool | None = None,
    copy: Callable[[np.ndarray], np.ndarray] = np.array,
    table_where: str | None = None,
) -> SingleAgentEpisode:
    """Rebuilds the episode whose rows begin at ``start`` of ``table`` (see :func:`encode_rows`).

    ``copy`` turns each leaf (a read-only view into the table) into the episode's own array.
    Errors name the episode by ``where``, and a missing column the table by ``table_where``
    (default ``where``): the columns are the whole shard's.

    Raises:
        DatasetError: The index entry or the columns are malformed or inconsistent.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> enc = encode_rows(SingleAgentEpisode("a", observations=[0, 1], actions=[1],
        ...                                      rewards=[1.0], len_lookback_buffer=0))
        >>> ep = decode_rows(enc.entry, pa.table(enc.columns), 0, spaces=enc.spaces, where="x",
        ...                  numpy=True)
        >>> ep.id_, ep.is_numpy, ep.get_observations().tolist()
        ('a', True, [0, 1])
    """
    table_where = table_where or where
    # Most pieces are laid out plainly: decoded directly, the same episode (plain_rows).
    plain = plain_rows(entry, table, start, spaces=spaces, where=where, numpy=numpy, copy=copy)
    if plain is not None:
        return plain
    meta, leaves = prepare_meta(entry, table, start, spaces, where, table_where)
    # Writers give every leaf a column of its own: an index mapping many leaves to one column
    # would have each copy it (a small file asking for gigabytes).
    read: dict[str, str] = {}

    def load(name: str) -> np.ndarray:
        if name == BLOB:
            return np.frombuffer(blob_of(table, start, where, table_where), np.uint8).copy()
        info = leaves.get(name)
        if not isinstance(info, dict) or not isinstance(info.get("path"), list) or not info["path"]:
            raise CorruptDatasetError(f"{where}: leaf {name!r} is not in the index")
        key = repr(info["path"])
        if read.setdefault(key, name) != name:
            raise CorruptDatasetError(
                f"{where}: leaves {read[key]!r} and {name!r} name the same column {info['path']}"
            )
        column = column_of(table, info["path"], table_where)
        return copy(leaf_from_arrow(column, info, start, info.get("count", -1), where=where))

    try:
        return decode_episode(meta, load, where=where, numpy=numpy)
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as err:
        raise CorruptDatasetError(f"{where}: cannot rebuild the episode: {err}") from err

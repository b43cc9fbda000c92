"""A shard piece laid out as the writers lay most out, decoded without the general walk.

:func:`~episodes.io.shard_codec.decode_rows` rebuilds a v1-style ``meta`` from the piece's index
entry (a copy, spaces restored, JSON items read) and decodes it through the field table and the
column codec, each step checking what it reads. Most of a piece's read went there, about as
much as reading its values: a runner's pieces of ~17 steps cost ~0.3 ms each, whatever their
length. :func:`plain_rows` decodes the pieces the writers produce (no blob; every column one
batched array leaf, or JSON items such as infos) from the entry directly, making the same calls
on the same values (:func:`~episodes.io.arrow_leaves.leaf_from_arrow` with the reader's
``copy``, ``InfiniteLookbackBuffer.from_state``, ``SingleAgentEpisode.from_fields``,
:func:`~episodes.io.encoding.numpy_episode`), so the episode is the one the general path
gives. Anything else (another layout, a nested item structure, any value the general path
would refuse, any failure) gives None: the general path then decodes the piece, and raises what
it always raised.

Example:
    >>> import pyarrow as pa
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io.shard_codec import encode_rows
    >>> enc = encode_rows(SingleAgentEpisode("a", observations=[0, 1], actions=[1],
    ...                                      rewards=[1.0], len_lookback_buffer=0).to_numpy())
    >>> ep = plain_rows(enc.entry, pa.table(enc.columns), 0, spaces=enc.spaces, where="x",
    ...                 numpy=True)
    >>> ep.id_, ep.get_observations().tolist(), ep.get_infos()
    ('a', [0, 1], [{}, {}])
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import FIELDS, SingleAgentEpisode
from episodes.io.arrow_leaves import leaf_from_arrow
from episodes.io.encoding import BLOB_FILE, numpy_episode
from episodes.io.format import FORMAT_NAME, FORMAT_VERSION
from episodes.io.values import BlobReader, decode_value
from episodes.spaces import space_from_dict, unbatch

__all__ = ["plain_rows"]

_EXTRAS = "extra_model_outputs"
#: Each field with its name, kind and key in ``meta`` (the format names ``id_`` ``"id"``).
_PLAN = tuple((f, f.name, f.kind, "id" if f.name == "id_" else f.name) for f in FIELDS)
_COLUMNS = frozenset(f.name for f in FIELDS if f.kind == "column")


class _NotPlain(Exception):
    """The piece is not one this path decodes: the general path reads it."""


def plain_rows(
    entry: Any,
    table: Any,
    start: int,
    *,
    spaces: list[Any],
    where: str,
    numpy: bool | None = None,
    copy: Callable[[np.ndarray], np.ndarray] = np.array,
    table_where: str | None = None,
) -> SingleAgentEpisode | None:
    """``decode_rows``'s episode for a plainly laid out piece; None for any other piece.

    Arguments as :func:`~episodes.io.shard_codec.decode_rows`'s. Nothing is raised: a piece
    this path does not take, or one that fails, gives None (the general path then reads it).

    Example:
        >>> import pyarrow as pa
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io.shard_codec import encode_rows
        >>> enc = encode_rows(SingleAgentEpisode("a", observations=[0, 1], actions=[1],
        ...                                      rewards=[1.0]))  # list mode: items, not batched
        >>> plain_rows(enc.entry, pa.table(enc.columns), 0, spaces=enc.spaces, where="x") is None
        True
    """
    try:
        return _Piece(entry, table, start, spaces, where, copy, numpy is False).episode(numpy)
    except Exception:  # the general path decodes it, raising what it always raised
        return None


class _Piece:
    """One piece being decoded (what the general path's ``meta`` and loader hold)."""

    def __init__(
        self,
        entry: Any,
        table: Any,
        start: int,
        spaces: list[Any],
        where: str,
        copy: Callable[[np.ndarray], np.ndarray],
        as_list: bool,
    ):
        meta = entry["meta"] if type(entry) is dict else None
        leaves = entry.get("leaves") if type(entry) is dict else None
        if type(meta) is not dict or type(leaves) is not dict:
            raise _NotPlain
        version = meta.get("version")
        if meta.get("format") != FORMAT_NAME or type(version) is not int:
            raise _NotPlain
        blob = meta.get("blob")
        if version != FORMAT_VERSION or type(blob) is not list or blob:
            raise _NotPlain  # (a blob: numpy values in JSON items, read the general way)
        self.meta, self.leaves, self.table, self.start = meta, leaves, table, start
        self.spaces, self.where, self.copy, self.as_list = spaces, where, copy, as_list
        self.read: set[str] = set()  # the leaves' columns read (each at most once)
        self.reader: BlobReader | None = None

    def episode(self, numpy: bool | None) -> SingleAgentEpisode:
        meta, where = self.meta, self.where
        columns, extras = meta.get("columns"), meta.get(_EXTRAS)
        if type(columns) is not dict or columns.keys() != _COLUMNS or type(extras) is not list:
            raise _NotPlain
        values: dict[str, Any] = {}
        for field, name, kind, key in _PLAN:
            if kind == "column":
                values[name] = self.column(columns[name], [name], f"{where}/{name}")
            elif kind == "columns":
                out: dict[str, Any] = {}
                for pair in extras:
                    if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                        raise _NotPlain
                    if pair[0] in out:
                        raise _NotPlain  # a key twice: the general path's way
                    label = f"{where}/extra[{pair[0]!r}]"
                    out[pair[0]] = self.column(pair[1], [_EXTRAS, pair[0]], label)
                values[name] = out
            else:
                values[name] = self.scalar(field, kind, key)
        if values["t_started"] < 0:
            raise _NotPlain
        episode = SingleAgentEpisode.from_fields(values)
        return numpy_episode(episode, where) if numpy else episode

    def scalar(self, field: Any, kind: str, key: str) -> Any:
        """A field stored in ``meta``, as the general path's ``_decode_scalar`` reads it."""
        meta = self.meta
        if key not in meta:
            if kind in ("flag", "time", "space", "custom") or field.name == "id_":
                raise _NotPlain  # missing: the general path says so
            return field.default
        value = meta[key]
        if kind == "flag":
            if type(value) is not bool:
                raise _NotPlain
        elif kind == "time":
            if type(value) is not int:
                raise _NotPlain
        elif kind == "clock":
            if value is not None and type(value) is not float and type(value) is not int:
                raise _NotPlain
        elif kind == "space":
            return space_from_dict(self.space(value))
        elif kind == "custom":
            if type(value) is not dict:
                raise _NotPlain
            return decode_value(value, blob=None, where=f"{self.where}/{key}")
        elif value is not None and type(value) is not str:  # an id
            return decode_value(value, blob=None, where=f"{self.where}/{key}")
        return value

    def space(self, value: Any) -> Any:
        """The shard's space a ``{"space_ref": n}`` names."""
        ref = value.get("space_ref") if type(value) is dict and len(value) == 1 else None
        if type(ref) is not int or not 0 <= ref < len(self.spaces):
            raise _NotPlain
        return self.spaces[ref]

    def column(self, col: Any, path: list[str], where: str) -> InfiniteLookbackBuffer:
        """A column stored as one batched leaf, or as JSON items (one text per row)."""
        if type(col) is not dict:
            raise _NotPlain
        lookback, size, finalized = col.get("lookback"), col.get("size"), col.get("finalized")
        if type(lookback) is not int or type(size) is not int or not 0 <= lookback <= size:
            raise _NotPlain
        if type(finalized) is not bool:
            raise _NotPlain
        space = self.space(col.get("space"))
        layout = col.get("layout")
        data: Any
        if layout == "arrays" and finalized and col.get("structure") == "*":
            data = self.leaf(col.get("leaves"), size)
            if self.as_list:
                data, finalized = (unbatch(data) if size else []), False
        elif layout == "json" and not finalized:
            data = self.items(path, size, where)
        else:
            raise _NotPlain
        state = {"data": data, "lookback": lookback, "finalized": finalized, "space": space}
        if finalized and isinstance(col.get("typed"), bool):
            state["typed"] = col["typed"]
        return InfiniteLookbackBuffer.from_state(state, copy=False)

    def leaf(self, leaves: Any, size: int) -> np.ndarray:
        """The column's one leaf: its rows of the table, as the episode's own array."""
        if type(leaves) is not list or len(leaves) != 1:
            raise _NotPlain
        (spec,) = leaves
        if type(spec) is not dict or spec.get("kind") != "batched":
            raise _NotPlain
        name = spec.get("file")
        if type(name) is not str or name == BLOB_FILE:  # (that name loads the blob)
            raise _NotPlain
        info: Any = self.leaves.get(name)
        path = info.get("path") if type(info) is dict else None
        if type(path) is not list or not path or not all(type(p) is str for p in path):
            raise _NotPlain
        key = "\0".join(path)
        if key in self.read:
            raise _NotPlain  # two leaves, one column: the general path's way
        self.read.add(key)
        column = _column(self.table, path)
        view = leaf_from_arrow(column, info, self.start, info.get("count", -1), where=self.where)
        array = self.copy(view)
        if array.ndim == 0 or len(array) != size:
            raise _NotPlain
        return array

    def items(self, path: list[str], size: int, where: str) -> list[Any]:
        """A JSON column's items: one text per row, empty dicts the most."""
        column = _column(self.table, path)
        if self.start + size > len(column) or not pa.types.is_large_string(column.type):
            raise _NotPlain
        out: list[Any] = column.slice(self.start, size).to_pylist()
        for i, text in enumerate(out):
            if text == "{}":
                out[i] = {}
                continue
            item = json.loads(text)
            if item.__class__ is not dict or item:
                if self.reader is None:
                    self.reader = BlobReader(np.zeros(0, np.uint8), [], f"{self.where}/{BLOB_FILE}")
                item = decode_value(item, blob=self.reader, where=f"{where}[{i}]")
            out[i] = item
        return out


def _column(table: Any, path: list[str]) -> pa.Array:
    """The single-chunk Arrow array at a leaf path (a missing one raises)."""
    column = table.column(path[0])
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks != 1:
            raise _NotPlain
        column = column.chunk(0)
    for name in path[1:]:
        if not pa.types.is_struct(column.type):
            raise _NotPlain
        column = column.field(name)
    return column

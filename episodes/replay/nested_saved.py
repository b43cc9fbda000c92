"""Nested observation (action, extra) records as a saved shard's ``struct`` column, and back.

A record dtype (:mod:`episodes.replay.nested`) names a Dict's fields by the ``repr`` of their
keys (``"'pos'"``) and a Tuple's by their places (``"0"``); the dataset writer stores a nested
observation as an Arrow ``struct`` column whose fields are the keys and places themselves
(``pos``, ``0``), a leaf column each (``episodes.io.arrow_leaves``). :func:`struct_column`
gathers records into such a column (the writer's type given), :func:`records_of` reads the
leaf columns of a shard back into records of a given dtype. Both refuse (``TypeError``) what
they cannot match field for field; the callers then go episode by episode.

Example:
    >>> from episodes.replay.nested import nested_rows
    >>> rows = nested_rows({"pos": np.arange(4.0).reshape(2, 2), "id": np.arange(2)},
    ...                    "observations", 2, finalized=True)
    >>> kind = pa.struct([("id", pa.int64()), ("pos", pa.list_(pa.float64(), 2))])
    >>> column = struct_column(rows, kind, _leaf)
    >>> column.to_pylist()
    [{'id': 0, 'pos': [0.0, 1.0]}, {'id': 1, 'pos': [2.0, 3.0]}]
    >>> leaves = {("id",): np.arange(2), ("pos",): np.arange(4.0).reshape(2, 2)}
    >>> records_of(leaves, rows.dtype).tobytes() == rows.tobytes()
    True
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from episodes.io import DatasetError
from episodes.io.shard_codec import skeleton_paths

__all__ = ["gathered_records", "leaf_paths", "records_of", "struct_column", "struct_leaves"]


def _key(name: str) -> str:
    """A record field's name as the writer's struct field name: a Dict key or a place."""
    if name[:1] in ("'", '"'):
        key = ast.literal_eval(name)
        if type(key) is not str:
            raise TypeError(f"record field {name} is no str key")
        return key
    return name


def _by_key(dtype: np.dtype[Any]) -> dict[str, str]:
    names = dtype.names or ()
    out = {_key(name): name for name in names}
    if len(out) != len(names):
        raise TypeError("record fields that name the same struct field")
    return out


def struct_column(
    records: np.ndarray,
    kind: pa.DataType,
    leaf: Callable[[np.ndarray, Any, pa.DataType], pa.Array],
    valid: np.ndarray | None = None,
) -> pa.Array:
    """``records`` (one a row) as an Arrow column of the writer's ``kind``.

    ``leaf`` makes a leaf's column from its rows (as ``saved_shards`` makes flat ones).
    ``valid`` (None: every row) says which rows hold an item: the others are null in the
    struct and in each of its leaves, as the writer writes an actions column's last row.

    Raises:
        TypeError: The records' fields are not the struct's (names, count or nesting).

    Example:
        >>> rows = np.zeros(2, [("0", "i8"), ("'k'", "f4")])
        >>> struct_column(rows, pa.struct([("0", pa.int64()), ("k", pa.float32())]), _leaf)[0]
        <pyarrow.StructScalar: [('0', 0), ('k', 0.0)]>
    """
    if records.dtype.names is None:
        if pa.types.is_struct(kind):
            raise TypeError(f"a leaf of dtype {records.dtype} for an Arrow {kind} column")
        return leaf(np.ascontiguousarray(records), valid, kind)
    if not pa.types.is_struct(kind):
        raise TypeError(f"records for an Arrow {kind} column")
    names = _by_key(records.dtype)
    if sorted(names) != sorted(f.name for f in kind) or len(names) != kind.num_fields:
        raise TypeError(f"record fields {list(names)} for an Arrow {kind} column")
    children = [struct_column(records[names[f.name]], f.type, leaf, valid) for f in kind]
    mask = None if valid is None else pa.array(~valid)
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)


def leaf_paths(dtype: np.dtype[Any]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each leaf of a record dtype: its field path and its struct column path.

    Example:
        >>> leaf_paths(np.dtype([("'a'", [("0", "f4"), ("1", "i8")])]))
        [(("'a'", '0'), ('a', '0')), (("'a'", '1'), ('a', '1'))]
    """
    out: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def walk(level: np.dtype[Any], fields: tuple[str, ...], keys: tuple[str, ...]) -> None:
        if level.names is None:
            out.append((fields, keys))
            return
        _by_key(level)
        for name in level.names:
            walk(level.fields[name][0], (*fields, name), (*keys, _key(name)))  # type: ignore[index]

    walk(dtype, (), ())
    return out


def records_of(leaves: dict[tuple[str, ...], np.ndarray], dtype: np.dtype[Any]) -> np.ndarray:
    """Records of ``dtype`` whose leaves are ``leaves`` (by struct column path, rows alike).

    Raises:
        TypeError: The leaves are not the dtype's (paths, dtypes or item shapes).

    Example:
        >>> records_of({("k",): np.arange(2.0)}, np.dtype([("'k'", "f8")])).tolist()
        [(0.0,), (1.0,)]
    """
    paths = leaf_paths(dtype)
    if sorted(keys for _, keys in paths) != sorted(leaves):
        raise TypeError(f"leaves {sorted(leaves)} for records of {dtype}")
    rows = {len(v) for v in leaves.values()}
    if len(rows) != 1:
        raise TypeError("leaves of different lengths")
    out = np.empty(rows.pop(), dtype)
    for fields, keys in paths:
        target, values = out, leaves[keys]
        for name in fields:
            target = target[name]
        if values.dtype != target.dtype or values.shape != target.shape:
            raise TypeError(f"a leaf of {values.dtype} {values.shape[1:]} for {target.dtype}")
        target[...] = values
    return out


def struct_leaves(
    column: dict[str, Any], leaves: dict[str, Any], name: str | tuple[str, ...] = "observations"
) -> list[Any] | None:
    """A saved nested column's leaves: ``(path, leaf entry)`` each, or None.

    ``name`` is the column (``"observations"``) or its path (``("extra_model_outputs", key)``).

    None where the index entry is not the writer's for such a column, no lookback.

    Example:
        >>> column = {"layout": "arrays", "lookback": 0, "structure": {"tuple": ["*"]},
        ...           "leaves": [{"file": "o0"}]}
        >>> struct_leaves(column, {"o0": {"path": ["observations", "0"], "storage": "arrow"}})
        [(['observations', '0'], {'path': ['observations', '0'], 'storage': 'arrow'})]
    """
    names = column.get("leaves")
    if column.get("layout") != "arrays" or column.get("lookback") != 0:
        return None
    try:
        subs = skeleton_paths(column.get("structure"), "/".join(_prefix(name)))
    except DatasetError:  # a malformed structure: read as the reader reads it
        return None
    if not isinstance(names, list) or len(names) != len(subs) or subs == [()]:
        return None
    out = []
    for sub, file in zip(subs, names, strict=True):
        info = leaves.get(str(file.get("file"))) if isinstance(file, dict) else None
        path = [*_prefix(name), *sub]
        if not isinstance(info, dict) or info.get("path") != path or info.get("storage") != "arrow":
            return None
        out.append((path, info))
    return out


def gathered_records(
    views: dict[Any, np.ndarray], dtype: np.dtype[Any], name: str | tuple[str, ...] = "observations"
) -> dict[Any, Any]:
    """``views`` (leaf columns by path) with ``name``'s leaves as records of ``dtype``.

    ``name`` is a column (``"actions"``) or the path of one (``("extra_model_outputs", key)``).

    The records take the place of the first leaf; the other columns keep their order.

    Example:
        >>> views = {("observations",): np.zeros(2), ("actions", "0"): np.arange(2),
        ...          ("rewards",): np.zeros(2)}
        >>> out = gathered_records(views, np.dtype([("0", "i8")]), "actions")
        >>> list(out), out[("actions",)]["0"].tolist()
        ([('observations',), ('actions',), ('rewards',)], [0, 1])
    """
    prefix = _prefix(name)
    k = len(prefix)
    leaves = {p[k:]: v for p, v in views.items() if p[:k] == prefix and len(p) > k}
    if not leaves:
        return views
    out: dict[Any, Any] = {}
    for path, view in views.items():
        if path[:k] != prefix or len(path) == k:
            out[path] = view
        elif prefix not in out:
            out[prefix] = records_of(leaves, dtype)
    return out


def _prefix(name: str | tuple[str, ...]) -> tuple[str, ...]:
    return (name,) if isinstance(name, str) else tuple(name)


def _leaf(values: np.ndarray, valid: Any, kind: pa.DataType) -> pa.Array:
    """A leaf column as ``pa.array`` makes it (for the examples; saving passes its own)."""
    if pa.types.is_fixed_size_list(kind):
        flat = pa.array(values.reshape(-1), kind.value_type)
        return pa.FixedSizeListArray.from_arrays(flat, kind.list_size)
    return pa.array(values, kind)

"""Nested (Dict / Tuple) observations, actions, extras: a column of records, given back nested.

A Dict or Tuple observation (or action, or extra model output) becomes one row of a numpy
structured dtype whose fields mirror its structure: a Dict's fields are named by the ``repr``
of its str keys (``"'pos'"``), a Tuple's by the places ``"0"``, ``"1"`` ..., nested to any
depth, each leaf a numeric field of its own dtype and shape. The row moves as one through
everything that moves rows (appends, compaction, growth, eviction, ``get_state``); readers
take it apart at the edges (:func:`unpack`): a sample's ``obs``/``next_obs``/``actions`` (and
extras) are the same nested structure of arrays, an episode's column a numpy'd nested column.
Flat ones never come here.

Example:
    >>> rows = nested_rows({"pos": np.zeros((3, 2), np.float32), "id": np.arange(3)},
    ...                    "observations", 3, finalized=True)
    >>> rows.shape, describe(rows.dtype)
    ((3,), "{'pos': float32 (2,), 'id': int64}")
    >>> out = unpack(rows[[2, 0]])
    >>> out["pos"].shape, out["id"].tolist()
    ((2, 2), [2, 0])
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.plain_arrays import native_dtype
from episodes.spaces.batching import tuple_parts
from episodes.structs import arrays_equal

__all__ = [
    "NESTED_REFUSAL",
    "check_records",
    "describe",
    "fit_records",
    "is_records",
    "list_rows",
    "nested_rows",
    "put_rows",
    "raw_rows",
    "records_equal",
    "take_rows",
    "unpack",
    "unpack_batch",
    "zero_rows",
]

# The chunk columns stored as records where they nest, as ``ingest`` names them (an extra as
# "extra_model_outputs[...]"): rewards stay scalars.
NESTED_COLUMNS = ("observations", "actions", "extra")
NESTED_REFUSAL = (
    "{what}: replay stores numeric arrays only; nested values (dicts, tuples) are stored for "
    "observations, actions and extra model outputs, rewards are real scalars"
)


def list_rows(columns: list[Any], what: str) -> np.ndarray:
    """The rows a numpy'd column of list-structured items holds: ``np.asarray`` of each item.

    Example:
        >>> list_rows([np.array([0, 1]), np.array([0.5, 2.5])], "observations").tolist()
        [[0.0, 0.5], [1.0, 2.5]]
    """
    if not columns or not all(isinstance(c, (list, tuple, np.ndarray)) for c in columns):
        if what.startswith(NESTED_COLUMNS):  # these do nest, but as Dict or Tuple items
            raise TypeError(
                f"{what}: a list item holding a dict (or another non-numeric part) is no row "
                f"of numbers; nested {what.split('[')[0]} are Dict or Tuple items"
            )
        raise TypeError(NESTED_REFUSAL.format(what=what))
    # Tuples inside a list item are rows too, as np.asarray stacks them in list mode.
    leaves = [list_rows(list(c), what) if isinstance(c, (list, tuple)) else c for c in columns]
    try:
        return np.stack(leaves, axis=1)
    except ValueError as error:  # leaves of different shapes: list mode cannot stack them either
        raise TypeError(f"{what}: list-structured items do not stack into rows: {error}") from None


def is_records(array: Any) -> bool:
    """Whether ``array`` (an array or a numpy scalar) holds nested values as records.

    Example:
        >>> is_records(np.zeros(2)), is_records(np.zeros(2, [("0", "f4")]))
        (False, True)
    """
    return getattr(array, "dtype", None) is not None and array.dtype.names is not None


def raw_rows(array: np.ndarray) -> np.ndarray:
    """``array`` itself, or for records a view of each record as raw bytes (``np.void``).

    numpy gathers, scatters and moves records field by field, some 25 times slower than the
    same bytes as one opaque item: rows are moved through this view, which shares memory.

    Example:
        >>> rows = nested_rows({"a": np.arange(3.0)}, "obs", 3, True)
        >>> raw_rows(rows).dtype, raw_rows(np.zeros(2)).dtype
        (dtype('V8'), dtype('float64'))
    """
    dtype = array.dtype
    if dtype.names is None or not dtype.itemsize:
        return array
    return array.view(_void(dtype.itemsize))


@functools.lru_cache(maxsize=64)
def _void(itemsize: int) -> np.dtype[Any]:
    return np.dtype((np.void, itemsize))


def take_rows(data: np.ndarray, index: Any) -> np.ndarray:
    """``data[index]`` (a new array), records gathered as raw bytes (:func:`raw_rows`).

    Example:
        >>> rows = nested_rows({"a": np.arange(3.0)}, "obs", 3, True)
        >>> unpack(take_rows(rows, np.array([[2, 0]])))["a"].tolist()
        [[2.0, 0.0]]
    """
    if data.dtype.names is None:
        return data[index]
    return raw_rows(data)[index].view(data.dtype)


def zero_rows(out: np.ndarray, where: Any) -> None:
    """``out[where] = 0``: every leaf of the records there zero (padding).

    Example:
        >>> rows = nested_rows({"a": np.ones(2)}, "obs", 2, True)
        >>> zero_rows(rows, np.array([False, True])); unpack(rows)["a"].tolist()
        [1.0, 0.0]
    """
    if out.dtype.names is None:
        out[where] = 0
    else:
        raw = raw_rows(out)
        raw[where] = np.zeros((), raw.dtype)


def put_rows(out: np.ndarray, where: Any, values: np.ndarray) -> None:
    """``out[where] = values``, records of one dtype written as raw bytes.

    Example:
        >>> rows = nested_rows({"a": np.array([1.0, 2.0])}, "obs", 2, True)
        >>> put_rows(rows, np.array([True, False]), rows[1:].copy())
        >>> unpack(rows)["a"].tolist()
        [2.0, 2.0]
    """
    if out.dtype.names is None or values.dtype != out.dtype:
        out[where] = values
    else:
        raw_rows(out)[where] = raw_rows(values)


def nested_rows(
    values: Any, what: str, count: int, finalized: bool, space: Any = None
) -> np.ndarray:
    """``count`` nested items (observations, actions, extras) as one record row each.

    ``values`` is what the episode's getter returned: for a numpy'd episode the nested
    structure of per-leaf columns, in list mode a list of nested items. A declared Dict or
    Tuple space says where the structure is (a Tuple item given as a list too); without one,
    dicts and tuples are structure and everything else (lists and arrays) a leaf's rows.

    Raises:
        TypeError: A leaf that is not numeric, a non-str Dict key, an empty Dict or Tuple
            (no leaf to store), items that differ in structure.
        ValueError: A leaf whose items differ in shape.

    Example:
        >>> rows = nested_rows([(0, [1.0, 2.0]), (1, [3.0, 4.0])], "observations", 2, False)
        >>> describe(rows.dtype), unpack(rows)[1].tolist()
        ('(int64, float64 (2,))', [[1.0, 2.0], [3.0, 4.0]])
    """
    leaves: list[tuple[tuple[str, ...], np.ndarray]] = []
    if finalized:
        dtype = _walk_columns(values, space, what, (), leaves)
    else:
        if not isinstance(values, list):
            values = list(values)
        dtype = _walk_items(values, space, what, (), leaves)
    rows = np.empty(count, dtype)
    for (path, leaf), (_, offset, field) in zip(leaves, _offsets(dtype)):
        if len(leaf) != count:
            raise TypeError(f"{what}{_where(path)}: {len(leaf)} rows, expected {count}")
        rows.getfield(field, offset)[...] = leaf
    return rows


def _where(path: tuple[str, ...]) -> str:
    return "".join(f"[{name}]" for name in path)


def _field(rows: np.ndarray, path: tuple[str, ...]) -> np.ndarray:
    for name in path:
        rows = rows[name]
    return rows


def _kind(node: Any, space: Any) -> str | None:
    """``"dict"``, ``"tuple"`` or None (a leaf) for a node of ``space`` (or, without, by type)."""
    if isinstance(space, gym.spaces.Dict):
        return "dict"
    if isinstance(space, gym.spaces.Tuple):
        return "tuple"
    if space is not None:
        return None
    if isinstance(node, Mapping):
        return "dict"
    return "tuple" if isinstance(node, tuple) else None


def _names(kind: str, keys: list[Any], what: str, path: tuple[str, ...]) -> Sequence[str]:
    if not keys:
        raise TypeError(f"{what}{_where(path)}: an empty {kind.title()} holds no value to store")
    if kind == "tuple":
        return [str(i) for i in range(len(keys))]
    if all(type(key) is str for key in keys):
        return _key_names(tuple(keys))
    bad = next((key for key in keys if not isinstance(key, str)), None)
    if bad is not None:
        raise TypeError(f"{what}{_where(path)}: Dict key {bad!r} must be a str to be stored")
    return [repr(str(key)) for key in keys]


@functools.lru_cache(maxsize=256)
def _key_names(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(repr(key) for key in keys)


def _sub_spaces(space: Any, kind: str, keys: list[Any]) -> list[Any]:
    if space is None:
        return [None] * len(keys)
    return [space.spaces[key] for key in keys] if kind == "dict" else list(space.spaces)


@functools.lru_cache(maxsize=256)
def _leaf_dtype(dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.dtype[Any]:
    return np.dtype((native_dtype(dtype), shape))


@functools.lru_cache(maxsize=256)
def _struct(fields: tuple[tuple[str, np.dtype[Any]], ...]) -> np.dtype[Any]:
    return np.dtype(list(fields))


def _leaf(values: Any, what: str, path: tuple[str, ...], finalized: bool) -> np.ndarray:
    if type(values) is np.ndarray and values.ndim and values.dtype.kind in "biufc":
        return values  # a numpy'd leaf column, the usual case: as as_rows gives it back
    name = f"{what}{_where(path)}"
    if isinstance(values, Mapping) or (isinstance(values, tuple) and finalized):
        raise TypeError(f"{name}: items nested unlike the declared space")
    if finalized and isinstance(values, list):  # a numpy'd column of list-structured items
        values = list_rows(values, name)
    return _as_rows()(values, name)


@functools.cache
def _as_rows() -> Any:
    from episodes.replay.columns import as_rows  # columns imports this module

    return as_rows


def _walk_columns(
    node: Any, space: Any, what: str, path: tuple[str, ...], leaves: list[Any]
) -> Any:
    """The record dtype of a numpy'd nested column; appends each leaf's rows to ``leaves``."""
    kind = _kind(node, space)
    if kind is None:
        rows = _leaf(node, what, path, True)
        leaves.append((path, rows))
        return _leaf_dtype(rows.dtype, rows.shape[1:])
    if kind == "dict":
        keys = list(space.spaces) if space is not None else list(node.keys())
        mapping = type(node) is dict or isinstance(node, Mapping)
        if not mapping or set(node.keys()) != set(keys):
            raise TypeError(f"{what}{_where(path)}: values nested unlike the Dict space")
        parts = [node[key] for key in keys]
    else:
        keys = list(range(len(space.spaces))) if space is not None else list(node)
        if not isinstance(node, (tuple, list)) or len(node) != len(keys):
            raise TypeError(f"{what}{_where(path)}: values nested unlike the Tuple space")
        parts = list(node)
    names = _names(kind, keys, what, path)
    subs = _sub_spaces(space, kind, keys)
    return _struct(
        tuple(
            (name, _walk_columns(part, sub, what, (*path, name), leaves))
            for name, part, sub in zip(names, parts, subs)
        )
    )


def _walk_items(
    items: list[Any], space: Any, what: str, path: tuple[str, ...], leaves: list[Any]
) -> Any:
    """:func:`_walk_columns` for a list of nested items (a list-mode episode's)."""
    kind = _kind(items[0] if items else None, space)
    if kind is None:
        rows = _leaf(items, what, path, False)
        leaves.append((path, rows))
        return _leaf_dtype(rows.dtype, rows.shape[1:])
    first, unlike = items[0], "" if space is None else " from the declared space"
    differ = f"{what}{_where(path)}: the items differ in structure{unlike}"
    if kind == "dict":
        keys = list(space.spaces) if space is not None else list(first.keys())
        wanted = set(keys)
        if not all(_has_keys(item, wanted) for item in items):
            raise TypeError(f"{differ} (Dict keys)")
        parts = [[item[key] for item in items] for key in keys]
    else:
        keys = list(range(len(space.spaces) if space is not None else len(first)))
        # A Tuple space also holds an item given as one array of its parts' rows
        # (np.array([1, 0]) for two Discretes), as the episode's own batching reads it.
        split = [_tuple_parts(item, space, len(keys)) for item in items]
        if any(parts is None for parts in split):
            raise TypeError(f"{differ} (Tuple size)")
        parts = [[item[i] for item in split] for i in keys]
    names = _names(kind, keys, what, path)
    subs = _sub_spaces(space, kind, keys)
    return _struct(
        tuple(
            (name, _walk_items(part, sub, what, (*path, name), leaves))
            for name, part, sub in zip(names, parts, subs)
        )
    )


def _tuple_parts(item: Any, space: Any, size: int) -> Any:
    if space is not None:
        return tuple_parts(item, space)
    return item if isinstance(item, (tuple, list)) and len(item) == size else None


def _has_keys(item: Any, keys: set[Any]) -> bool:
    """Whether ``item`` is a Mapping of exactly ``keys`` (a dict's keys compare as a set)."""
    if type(item) is dict:
        return item.keys() == keys
    return isinstance(item, Mapping) and set(item.keys()) == keys


def _is_dict(dtype: np.dtype[Any]) -> bool:
    names = dtype.names or ()
    return bool(names) and names[0][:1] in ("'", '"')


def unpack(records: np.ndarray) -> Any:
    """Records as the nested structure they were added in: dicts, tuples, leaf arrays.

    Each leaf a new contiguous array of shape ``records.shape + leaf shape`` in its own dtype.

    Example:
        >>> rows = nested_rows({"a": (np.ones((2, 3)), np.arange(2))}, "obs", 2, True)
        >>> out = unpack(rows)
        >>> type(out["a"]).__name__, out["a"][0].shape, out["a"][1].dtype
        ('tuple', (2, 3), dtype('int64'))
    """
    dtype = records.dtype
    if dtype.names is None:
        return np.array(records, order="C")  # a copy: no view into the buffer
    records = np.asarray(records)  # a record (np.void) as a 0-d array
    # One view per leaf at its offset (any depth), copied once into a contiguous array.
    leaves = [records.getfield(leaf, offset).copy() for _, offset, leaf in _offsets(dtype)]
    return _nest(_nesting(dtype), leaves)


@functools.lru_cache(maxsize=256)
def _offsets(dtype: np.dtype[Any]) -> tuple[tuple[tuple[str, ...], int, np.dtype[Any]], ...]:
    """``(path, offset, leaf dtype)`` of every leaf of a record dtype, in field order."""
    out: list[tuple[tuple[str, ...], int, np.dtype[Any]]] = []

    def walk(level: np.dtype[Any], path: tuple[str, ...], offset: int) -> None:
        if level.names is None:
            out.append((path, offset, level))
        for name in level.names or ():
            sub, at = level.fields[name][:2]  # type: ignore[index]
            walk(sub, (*path, name), offset + at)

    walk(dtype, (), 0)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _nesting(dtype: np.dtype[Any]) -> Any:
    """A leaf's index (in :func:`_offsets` order), or (Dict keys or None, sub-nestings)."""
    count = iter(range(len(_offsets(dtype))))

    def walk(level: np.dtype[Any]) -> Any:
        if level.names is None:
            return next(count)
        subs = tuple(walk(level.fields[name][0]) for name in level.names)  # type: ignore[index]
        keys = tuple(ast.literal_eval(name) for name in level.names) if _is_dict(level) else None
        return (keys, subs)

    return walk(dtype)


def _nest(node: Any, leaves: list[np.ndarray]) -> Any:
    if type(node) is int:
        return leaves[node]
    keys, subs = node
    parts = [_nest(sub, leaves) for sub in subs]
    return tuple(parts) if keys is None else dict(zip(keys, parts))


def unpack_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """``batch`` with its record columns (any key: observations, actions, extras) unpacked.

    Example:
        >>> rows = nested_rows({"a": np.arange(2)}, "obs", 2, True)
        >>> unpack_batch({"obs": rows, "rewards": np.ones(2)})["obs"]
        {'a': array([0, 1])}
    """
    for key, value in batch.items():  # values replaced in place: the dict keeps its size
        if is_records(value):
            batch[key] = unpack(value)
    return batch


def _leaves(dtype: np.dtype[Any]) -> list[Any]:
    """``(path, leaf dtype)`` of every leaf of a record dtype, in field order."""
    return [(path, leaf) for path, _, leaf in _offsets(dtype)]


def describe(dtype: np.dtype[Any]) -> str:
    """A record dtype's structure with each leaf's dtype and shape, for error messages.

    Example:
        >>> describe(nested_rows(({"k": np.zeros((1, 2))},), "obs", 1, True).dtype)
        "({'k': float64 (2,)},)"
    """
    if dtype.names is None:
        base, shape = (dtype.base, dtype.shape)
        return f"{base} {shape}" if shape else str(base)
    parts = [describe(dtype.fields[name][0]) for name in dtype.names]  # type: ignore[index]
    if _is_dict(dtype):
        return "{" + ", ".join(f"{n}: {p}" for n, p in zip(dtype.names, parts)) + "}"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_records(rows: np.ndarray, what: str) -> np.ndarray:
    """``rows`` if they are nested values as :func:`nested_rows` makes them.

    For records that come from elsewhere (a state given to ``set_state``).

    Raises:
        TypeError: Field names that name no Dict key or Tuple place, leaves that are not
            numeric, or rows that are no 1-d array of records.

    Example:
        >>> check_records(np.zeros(2, [("x", "f4")]), "steps['obs']")
        Traceback (most recent call last):
        ...
        TypeError: steps['obs']: record fields ['x'] are no Dict keys or Tuple places
    """
    if rows.ndim != 1:
        raise TypeError(f"{what}: nested values must be a 1-d array of records")
    _check_level(rows.dtype, what)
    return rows


def _check_level(dtype: np.dtype[Any], what: str) -> None:
    if dtype.names is None:
        if dtype.base.names is not None:  # a sub-array of records: names only on its base
            raise TypeError(f"{what}: a Dict or Tuple part holds several items ({dtype.shape})")
        if dtype.base.kind not in "biufc":
            raise TypeError(f"{what}: a leaf of dtype {dtype.base} is not numeric")
        return
    names = list(dtype.names)
    tuple_names = names == [str(i) for i in range(len(names))]
    if not names or not (tuple_names or all(_is_key(name) for name in names)):
        raise TypeError(f"{what}: record fields {names} are no Dict keys or Tuple places")
    for name in names:
        _check_level(dtype.fields[name][0], what)  # type: ignore[index]


def _is_key(name: str) -> bool:
    if name[:1] not in ("'", '"'):
        return False
    try:
        key = ast.literal_eval(name)
    except (ValueError, SyntaxError):
        return False
    return isinstance(key, str) and repr(key) == name


def fit_records(column: Any, rows: np.ndarray, what: str) -> np.ndarray:
    """``rows`` in the dtype of ``column`` (a ``Column``), one of them nested, leaf by leaf.

    Each leaf is fitted as a flat column fits its rows (same shape and kind; cast where every
    value survives); a Dict's keys may come in another order (they are matched by name).

    Raises:
        ValueError: Another structure (keys, a Tuple's size, flat against nested), or a leaf
            that does not fit its column.

    Example:
        >>> from episodes.replay.columns import Column
        >>> stored = Column(4, nested_rows({"a": np.zeros(1, np.float32)}, "obs", 1, True))
        >>> fit_records(stored, nested_rows({"a": np.ones(2)}, "obs", 2, True), "obs").dtype
        dtype([("'a'", '<f4')])
        >>> fit_records(stored, nested_rows({"b": np.ones(2)}, "obs", 2, True), "observations")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: observations nested as {'b': float64} do not fit the buffer's nested ...
    """
    from episodes.replay.columns import Column

    dtype = column.data.dtype
    if rows.dtype == dtype:
        return rows
    mine = dict(_leaves(dtype))
    theirs = dict(_leaves(rows.dtype)) if is_records(rows) else {}
    if dtype.names is None or mine.keys() != theirs.keys():
        given = f"nested as {describe(rows.dtype)}" if theirs else f"of shape {rows.shape[1:]}"
        held = f"nested {what} {describe(dtype)}" if dtype.names else column.describe()
        raise ValueError(f"{what} {given} do not fit the buffer's {held}")
    out = np.empty(len(rows), dtype)
    for path, leaf in mine.items():
        fitted = Column(0, np.empty((0, *leaf.shape), leaf.base))
        _field(out, path)[...] = fitted.fit(_field(rows, path), f"{what}{_where(path)}")
    return out


def records_equal(a: Any, b: Any) -> bool:
    """Whether two records (one item each, same dtype) are equal leaf by leaf.

    NaNs are equal where both hold them, as a flat observation's join compares them.

    Example:
        >>> rows = nested_rows({"a": np.array([np.nan, np.nan])}, "obs", 2, True)
        >>> records_equal(rows[0], rows[1])
        True
    """
    if a.dtype != b.dtype:
        return False
    a, b = np.asarray(a), np.asarray(b)
    for _, offset, leaf in _offsets(a.dtype):
        x, y = a.getfield(leaf, offset), b.getfield(leaf, offset)
        same = arrays_equal(x, y) if leaf.base.kind in "fc" else np.array_equal(x, y)
        if not same:
            return False
    return True

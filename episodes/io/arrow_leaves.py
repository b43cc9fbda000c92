"""numpy leaf arrays <-> Arrow columns, for format v2 shards.

A *leaf* is one array of a column's items stacked along axis 0 (what a v1 chunk stores as
one ``.npy`` file). In a shard it becomes one Arrow column, padded with null rows to the
shard's row count:

- ``"arrow"`` storage (native-endian bool/int/uint/float): a primitive column for scalar
  items, else a ``fixed_size_list`` of the flattened item, so other tools read the values;
- ``"raw"`` storage (any other plain dtype: strings, complex, datetimes, big-endian): a
  ``fixed_size_binary`` column holding each item's bytes, the dtype recorded in the index;
- ``"empty"`` storage (items of zero bytes): a ``null`` column.

Reading returns read-only numpy views over the Arrow buffers (no copy for uncompressed,
memory-mapped shards), except for bool leaves, which Arrow packs into bits (read-only copies).

Example:
    >>> arr = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> info = leaf_info(arr, ["observations"])
    >>> col = leaf_to_arrow(arr, 4, info)
    >>> col.null_count, leaf_from_arrow(col, info, 1, 2).tolist()
    (1, [[2.0, 3.0], [4.0, 5.0]])
"""

from __future__ import annotations

import array
import functools
import itertools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from episodes.io.errors import CorruptDatasetError, UnsupportedVersionError
from episodes.io.values import SAFE_KINDS, check_code_points

__all__ = [
    "check_leaf_info",
    "leaf_from_arrow",
    "leaf_info",
    "leaf_to_arrow",
    "leaf_type",
    "numeric_array",
    "text_array",
]

_NATIVE = "<" if sys.byteorder == "little" else ">"
_ENDIAN = {"<": "little", ">": "big"}


def _storage(dtype: np.dtype[Any], shape: tuple[int, ...], order: str = "") -> str:
    """A leaf's storage on a machine of byte ``order`` (``"<"`` or ``">"``; default: this one).

    ``"arrow"`` holds numbers in the byte order of the machine that wrote them.
    """
    if dtype.itemsize * math.prod(shape) == 0:
        return "empty"
    native = dtype.str[0] in ("|", order or _NATIVE)  # "<" or ">", never "=", in ``str``
    # Arrow has no float128 (nor longdouble of any size): such leaves go as raw bytes.
    arrow_type = dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (2, 4, 8))
    return "arrow" if arrow_type and native else "raw"


def leaf_info(array: np.ndarray, path: list[str]) -> dict[str, Any]:
    """Describes how a stacked leaf is stored (its index entry, JSON-safe).

    Example:
        >>> leaf_info(np.zeros((5, 2), np.uint8), ["obs"])["storage"]
        'arrow'
    """
    shape = tuple(array.shape[1:])
    return {
        "path": list(path),
        "dtype": array.dtype.str,
        "shape": list(shape),
        "storage": _storage(array.dtype, shape),
        "count": int(array.shape[0]),
    }


def check_leaf_info(info: Any, where: str) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """Checks an index leaf entry read from disk; returns ``(dtype, item shape)``.

    Raises:
        CorruptDatasetError: The entry is malformed, or its storage disagrees with its dtype.
        UnsupportedVersionError: Its storage is what a machine of the other byte order gives
            its dtype: the dataset was written there, and the Arrow-stored numbers are in that
            byte order, which this machine does not read.

    Example:
        >>> check_leaf_info({"path": ["x"], "dtype": "<f4", "shape": [2], "storage": "arrow",
        ...                  "count": 3}, "x")
        (dtype('float32'), (2,))
    """
    dtype, shape, _ = _checked_leaf(info, where)
    return dtype, shape


#: ``(dtype text, item shape, storage, byte order)`` of leaf entries found good -> ``(dtype,
#: shape, Arrow type)``: a shard's pieces repeat a few, whose checks are worked out once.
_GOOD_LEAVES: dict[tuple[str, tuple[int, ...], str, str], tuple[Any, ...]] = {}
_MAX_GOOD_LEAVES = 1024


def _checked_leaf(info: Any, where: str) -> tuple[np.dtype[Any], tuple[int, ...], pa.DataType]:
    """``check_leaf_info`` plus the leaf's Arrow type (``leaf_type``)."""
    ok = (
        isinstance(info, dict)
        and isinstance(info.get("path"), list)
        and all(isinstance(p, str) for p in info["path"])
        and isinstance(info.get("dtype"), str)
        and isinstance(info.get("shape"), list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in info["shape"])
        and isinstance(info.get("count"), int)
        and not isinstance(info.get("count"), bool)
        and info["count"] >= 0
    )
    if not ok:
        raise CorruptDatasetError(f"{where}: malformed leaf entry {info!r}")
    # Plain ints only by now (True, equal to 1 as a key, was refused above). The byte order
    # the storage is checked against is part of the answer.
    storage = info.get("storage")
    key = (info["dtype"], tuple(info["shape"]), storage, _NATIVE) if type(storage) is str else None
    good = None if key is None else _GOOD_LEAVES.get(key)
    if good is not None:
        return good
    try:
        dtype = np.dtype(info["dtype"])
    except (TypeError, ValueError) as err:
        raise CorruptDatasetError(f"{where}: bad dtype {info['dtype']!r}") from err
    if dtype.hasobject or dtype.kind not in SAFE_KINDS or dtype.fields is not None:
        raise CorruptDatasetError(f"{where}: dtype {dtype} is not a plain dtype")
    shape = tuple(info["shape"])
    big = math.prod(shape) > 1 << 40
    if big or storage != _storage(dtype, shape):
        other = ">" if _NATIVE == "<" else "<"
        if not big and storage == _storage(dtype, shape, other):  # no place: one per dataset
            raise UnsupportedVersionError(
                f"this dataset was written on a {_ENDIAN[other]}-endian machine, and this one "
                f"is {_ENDIAN[_NATIVE]}-endian: reading a format v2 dataset across byte orders "
                "is not supported (read it on a machine of its byte order)"
            )
        raise CorruptDatasetError(f"{where}: leaf storage disagrees with its dtype and shape")
    good = (dtype, shape, leaf_type(dtype, shape))
    if key is not None:  # (always: a storage that is no str disagrees above)
        if len(_GOOD_LEAVES) >= _MAX_GOOD_LEAVES:
            _GOOD_LEAVES.clear()
        _GOOD_LEAVES[key] = good
    return good


def leaf_type(dtype: np.dtype[Any], shape: tuple[int, ...]) -> pa.DataType:
    """The Arrow type a leaf of this dtype and item shape is stored as.

    Example:
        >>> leaf_type(np.dtype("<U2"), ())
        FixedSizeBinaryType(fixed_size_binary[8])
    """
    return _leaf_type(dtype, tuple(shape))


@functools.lru_cache(maxsize=1024)
def _leaf_type(dtype: np.dtype[Any], shape: tuple[int, ...]) -> pa.DataType:
    # Worked out once per dtype and item shape: a writer of many short episodes asks for the
    # same few types again and again (Arrow types are immutable, so sharing them is safe).
    storage = _storage(dtype, shape)
    if storage == "empty":
        return pa.null()
    if storage == "raw":
        return pa.binary(dtype.itemsize * math.prod(shape))
    base = _arrow_dtype(dtype)
    return base if not shape else pa.list_(base, math.prod(shape))


def leaf_to_arrow(
    array: np.ndarray,
    rows: int,
    info: dict[str, Any],
    copy: Callable[[np.ndarray], np.ndarray] | None = None,
) -> pa.Array:
    """Stores a stacked leaf as an Arrow column of ``rows`` rows (the rest null).

    ``copy`` makes the copy of rows the column would otherwise share with ``array`` (a
    writer's :class:`~episodes.io.copy_arena.CopyArena`; ``np.copy`` by default).

    Example:
        >>> leaf_to_arrow(np.array([1, 2]), 3, leaf_info(np.array([1, 2]), ["r"])).to_pylist()
        [1, 2, None]
    """
    n = len(array)
    shape = tuple(info["shape"])
    storage = info["storage"]
    if storage == "empty":
        return pa.nulls(rows)
    flat = np.ascontiguousarray(array).reshape(-1)
    if n >= rows and np.may_share_memory(flat, array):
        # Arrow takes numpy memory without a copy, and a column that needs no null rows is
        # not copied by concat_arrays: the shard would hold the episode's own rows, written
        # at flush with whatever the caller put in them after write().
        flat = flat.copy() if copy is None else copy(flat)
    kind = leaf_type(array.dtype, shape)
    if storage == "raw":
        data = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(flat.view(np.uint8))])
    elif not shape:
        data = numeric_array(flat)
    else:
        data = pa.FixedSizeListArray.from_arrays(numeric_array(flat), math.prod(shape))
    if n < rows:  # the shorter columns of an episode end in null rows (one copy, small ones)
        pad = rows - n  # kept only when short: a long null padding would be held in the cache
        data = pa.concat_arrays([data, _nulls(pad, kind) if pad <= 4 else pa.nulls(pad, kind)])
    return data


@functools.lru_cache(maxsize=256)
def _nulls(count: int, kind: pa.DataType) -> pa.Array:
    """``pa.nulls`` kept: most episodes pad their actions and rewards by one null row."""
    return pa.nulls(count, kind)


def numeric_array(flat: np.ndarray) -> pa.Array:
    """A 1-d numeric array as Arrow over the same memory.

    ``pa.array`` would import pandas the first time it meets a numpy array (0.7 s, once per
    process, for every writer's first episode); the buffer is handed over as is instead.
    Bools (Arrow packs them into bits) and other byte orders still go through ``pa.array``.

    Example:
        >>> numeric_array(np.array([1.5, 2.0], np.float16)).to_pylist()
        [1.5, 2.0]
    """
    if flat.dtype.kind in "iuf" and flat.dtype.isnative:
        kind = _arrow_dtype(flat.dtype)
        return pa.Array.from_buffers(kind, len(flat), [None, pa.py_buffer(flat)])
    return pa.array(flat)


@functools.lru_cache(maxsize=64)
def _arrow_dtype(dtype: np.dtype[Any]) -> pa.DataType:
    return pa.from_numpy_dtype(dtype)  # once per dtype: a few us a column otherwise


def text_array(items: list[bytes], rows: int, kind: pa.DataType) -> pa.Array:
    """``items`` as a (large) string or binary column of ``rows`` rows, the rows after them null.

    Built from its buffers: ``pa.array`` of a list imports pandas the first time (0.7 s once
    per process that writes), and converts item by item.

    Example:
        >>> text_array([b"{}", b'{"a": 1}'], 3, pa.large_string()).to_pylist()
        ['{}', '{"a": 1}', None]
    """
    n = len(items)
    # Offsets built by the array module: numpy's fixed cost per call is most of a short
    # episode's column (an id on 3 rows), and the values are the same.
    if n and items.count(items[0]) == n:  # an id on every row, empty infos: no per-item pass
        width = len(items[0])
        ends: Any = range(0, width * n + 1, width) if width else itertools.repeat(0, n + 1)
        data = items[0] * n
    else:
        ends = itertools.accumulate(map(len, items), initial=0)
        data = b"".join(items)
    offsets = array.array("q" if kind in _WIDE else "i", ends)
    if rows > n:
        offsets.extend(itertools.repeat(offsets[-1], rows - n))
    validity = None if rows <= n else _validity(rows, n)
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, rows, buffers, null_count=rows - n)


_WIDE = (pa.large_string(), pa.large_binary())


@functools.lru_cache(maxsize=256)
def _validity(rows: int, n: int) -> pa.Buffer:
    """Arrow's validity bitmap of ``rows`` rows, the first ``n`` valid (low bit first).

    Kept: buffers are immutable, and short episodes repeat a few shapes.
    """
    return pa.py_buffer(np.packbits(np.arange(rows) < n, bitorder="little"))


def _numeric_view(values: pa.Array, dtype: np.dtype[Any]) -> np.ndarray | None:
    """A numpy view of a null-free numeric Arrow array of ``dtype`` (else None).

    Read from its data buffer, as ``to_numpy`` would, without ``to_numpy``'s first-call
    import of pandas (0.7 s once per process that reads).

    Example:
        >>> _numeric_view(pa.array(np.arange(4, dtype=np.int16)).slice(1), np.dtype(np.int16))
        array([1, 2, 3], dtype=int16)
    """
    if dtype.kind not in "iuf" or not dtype.isnative or values.null_count:
        return None
    if values.type != pa.from_numpy_dtype(dtype):
        return None
    buf = values.buffers()[1]
    end = values.offset + len(values)
    if buf is None or buf.size < end * dtype.itemsize:
        return None  # to_numpy's own checks and errors
    return np.frombuffer(buf, dtype, count=end)[values.offset :]


def _values_ignoring_nulls(
    part: pa.Array, dtype: np.dtype[Any], shape: tuple[int, ...], count: int
) -> np.ndarray:
    width = math.prod(shape)
    if dtype.kind == "b":
        import pyarrow.compute as pc

        # .values keeps the slots of null lists (flatten() would drop them).
        values = part.values.slice(part.offset * width, count * width) if shape else part
        filled = pc.fill_null(values, False)
        return filled.to_numpy(zero_copy_only=False).reshape((count, *shape))
    child = part.values if shape else part  # .values ignores the parent's offset
    first = child.offset + (part.offset * width if shape else 0)
    flat = np.frombuffer(child.buffers()[1], dtype, count=first + count * width)[first:]
    return flat.reshape((count, *shape))


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    if actual == expected:
        return True
    # Parquet renames a list's child field ("item" -> "element"); only the shape matters.
    if pa.types.is_fixed_size_list(actual) and pa.types.is_fixed_size_list(expected):
        return actual.list_size == expected.list_size and actual.value_type == expected.value_type
    return bool(actual == expected)


def leaf_from_arrow(
    column: pa.Array,
    info: dict[str, Any],
    start: int,
    count: int,
    *,
    nulls_ok: bool = False,
    where: str | None = None,
) -> np.ndarray:
    """Items ``[start, start + count)`` of a stored leaf as a read-only numpy array.

    A view over Arrow's buffers where Arrow allows it, a copy otherwise (bools, which Arrow
    packs into bits); read-only either way, as a reader may cache it: copy it to modify it.

    ``nulls_ok=True`` returns whatever null rows hold (zeros, as written) instead of raising:
    a view over a whole shard column, episodes' padding rows included. ``where`` names the
    shard or episode in errors.

    Raises:
        CorruptDatasetError: The column's type or nulls disagree with ``info``.

    Example:
        >>> a = np.array(["ab", "c"])
        >>> out = leaf_from_arrow(leaf_to_arrow(a, 2, leaf_info(a, ["x"])), leaf_info(a, ["x"]),
        ...                       0, 2)
        >>> out, out.flags.writeable
        (array(['ab', 'c'], dtype='<U2'), False)
    """
    name = "/".join(info["path"])
    label = f"{where}: column {name}" if where else f"column {name}"
    out = _leaf_values(column, info, start, count, nulls_ok, label)
    out.flags.writeable = False
    return out


def _leaf_values(
    column: pa.Array, info: dict[str, Any], start: int, count: int, nulls_ok: bool, label: str
) -> np.ndarray:
    dtype, shape, expected = _checked_leaf(info, label)
    if not _same_type(column.type, expected):
        raise CorruptDatasetError(f"{label} has Arrow type {column.type}, expected {expected}")
    rows = len(column)
    if start < 0 or count < 0 or start + count > rows:
        raise CorruptDatasetError(f"{label}: rows [{start}, {start + count}) out of range")
    part = column if start == 0 and count == rows else column.slice(start, count)
    storage = info["storage"]
    if storage == "empty":
        return np.zeros((count, *shape), dtype)
    if part.null_count:
        if not nulls_ok:
            raise CorruptDatasetError(f"{label}: null in rows that must hold data")
        if storage == "arrow":
            return _values_ignoring_nulls(part, dtype, shape, count)
    width = math.prod(shape)
    if storage == "raw":
        nbytes = dtype.itemsize * width
        buf = part.buffers()[1]
        if buf is None or buf.size < (part.offset + count) * nbytes:
            raise CorruptDatasetError(f"{label}: raw bytes shorter than its rows")
        raw = np.frombuffer(buf, np.uint8, count=(part.offset + count) * nbytes)
        out = raw[part.offset * nbytes :].view(dtype).reshape((count, *shape))
        check_code_points(out, label)
        return out
    # Null-free: the items' values are the child's rows of the slice (``flatten`` without
    # the compute call, ~4 us a leaf).
    values = part
    if shape:
        values = part.values
        if part.offset or len(values) != count * width:
            values = values.slice(part.offset * width, count * width)
    view = _numeric_view(values, dtype)
    if view is not None:
        return view.reshape((count, *shape))
    try:
        out = values.to_numpy(zero_copy_only=dtype.kind != "b")
    except pa.ArrowException as err:  # nulls inside the items: written by no writer of ours
        raise CorruptDatasetError(f"{label}: {err}") from err
    return out.astype(dtype, copy=False).reshape((count, *shape))

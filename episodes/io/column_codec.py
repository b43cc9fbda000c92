"""One column (an :class:`InfiniteLookbackBuffer`) <-> (column metadata, named numpy arrays).

A column is written in one of two layouts:

- ``"arrays"``: one ``.npy`` file per leaf of the item structure (time axis first). Used for
  finalized (numpy) columns, and for list columns whose items share one structure and whose
  leaves share one kind (``ndarray`` of one dtype/shape, numpy scalars of one dtype, or plain
  Python ``int``/``float``/``bool``/``complex``/``str``), so they come back as the same types.
- ``"json"``: every item JSON-encoded (see :mod:`episodes.io.values`), numpy arrays in the
  chunk's blob. Used for infos and for list columns of mixed items.

Only the buffer's public API is used: its ``data``, ``lookback``, ``finalized`` and ``space``
to encode, and :meth:`InfiniteLookbackBuffer.from_state` to rebuild.

Example:
    >>> from episodes.io.values import BlobWriter
    >>> arrays = {}
    >>> meta = encode_column(InfiniteLookbackBuffer([1, 2]), "act", arrays, BlobWriter(), "x")
    >>> decode_column(meta, arrays.__getitem__, BlobWriter, "x", as_list=False).get()
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import numpy as np
import tree

from episodes.buffer import InfiniteLookbackBuffer
from episodes.io.errors import CorruptDatasetError, UnstorableValueError
from episodes.io.values import (
    BlobReader,
    BlobWriter,
    check_array_dtype,
    check_array_type,
    decode_value,
    encode_value,
    ends_in_nul,
    plain_keys,
)
from episodes.spaces import space_to_dict, unbatch
from episodes.structs import flatten

__all__ = ["decode_column", "encode_column", "space_dict"]

_LEAF = "*"
_SCALAR_KINDS: dict[type, tuple[str, Any]] = {
    bool: ("bool", np.bool_),
    int: ("int", np.int64),
    float: ("float", np.float64),
    complex: ("complex", np.complex128),
    str: ("str", None),
}


# ---------------------------------------------------------------------------- structures
def _encode_structure(item: Any, where: str, depth: int = 0) -> Any:
    if depth > 64:
        raise UnstorableValueError(f"{where}: item nested deeper than 64 levels")
    if isinstance(item, dict):
        if not all(isinstance(k, str) for k in item):
            raise UnstorableValueError(f"{where}: dict items need string keys, got {list(item)}")
        keys = plain_keys(item, where)
        return {
            "dict": [
                [k, _encode_structure(v, where, depth + 1)] for k, v in zip(keys, item.values())
            ]
        }
    if isinstance(item, tuple):
        if type(item) is not tuple:
            raise UnstorableValueError(
                f"{where}: {type(item).__name__} (a namedtuple or tuple subclass) cannot be "
                "stored; use a plain tuple or dict"
            )
        return {"tuple": [_encode_structure(v, where, depth + 1) for v in item]}
    if isinstance(item, list):
        return {"list": [_encode_structure(v, where, depth + 1) for v in item]}
    if not isinstance(item, (np.ndarray, np.generic, bool, int, float, complex, str)) and (
        tree.is_nested(item)
    ):
        raise UnstorableValueError(f"{where}: nested type {type(item).__name__} cannot be stored")
    return _LEAF


def _keys_sorted(enc: Any) -> Any:
    """A structure encoding with each dict's keys in sorted order: equal for reordered dicts."""
    if not isinstance(enc, dict):
        return enc
    ((kind, parts),) = enc.items()
    if kind == "dict":
        return {"dict": sorted([key, _keys_sorted(value)] for key, value in parts)}
    return {kind: [_keys_sorted(value) for value in parts]}


def _skeleton(enc: Any, where: str, depth: int = 0) -> tuple[Any, int]:
    """Rebuilds an item structure (leaves are 0) from its encoding; returns (skeleton, leaves)."""
    if depth > 64:
        raise CorruptDatasetError(f"{where}: structure nested too deeply")
    if enc == _LEAF:
        return 0, 1
    if isinstance(enc, dict) and len(enc) == 1:
        ((kind, body),) = enc.items()
        if isinstance(body, list):
            if kind == "dict":
                out: dict[str, Any] = {}
                count = 0
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                        raise CorruptDatasetError(f"{where}: malformed structure entry {pair!r}")
                    out[pair[0]], n = _skeleton(pair[1], where, depth + 1)
                    count += n
                return out, count
            if kind in ("tuple", "list"):
                parts = [_skeleton(v, where, depth + 1) for v in body]
                seq = [p for p, _ in parts]
                return (tuple(seq) if kind == "tuple" else seq), sum(n for _, n in parts)
    raise CorruptDatasetError(f"{where}: malformed item structure {enc!r}")


# ---------------------------------------------------------------------------- leaf kinds
def _leaf_kind(leaf: Any) -> tuple[Any, ...] | None:
    kind = type(leaf)
    if kind is np.ndarray:
        return ("ndarray", leaf.dtype.str, leaf.shape) if _plain(leaf.dtype) else None
    if isinstance(leaf, np.generic):
        if ends_in_nul(leaf):
            return None  # numpy strips trailing NULs: the json layout keeps them
        return ("npscalar", leaf.dtype.str, ()) if _plain(leaf.dtype) else None
    if kind in _SCALAR_KINDS:
        if kind is str and leaf.endswith("\x00"):
            return None  # numpy strips trailing NULs
        return (_SCALAR_KINDS[kind][0],)
    return None


def _plain(dtype: np.dtype[Any]) -> bool:
    try:
        check_array_dtype(dtype, "")
    except UnstorableValueError:
        return False
    return True


def _stack_list(items: list[Any], where: str) -> tuple[Any, list[tuple[str, np.ndarray]]] | None:
    """Stacks a list column leaf-wise if every item has the same structure and leaf kinds."""
    if not items:
        return None
    flat = _stack_flat(items)
    if flat is not _GENERAL:
        return flat
    try:
        first, structure = flatten(items[0])
    except TypeError:  # dm-tree sorts dict keys: int and str keys together cannot be
        return None  # the json layout keeps such a dict as it is
    except RecursionError:  # nested past dm-tree's reach: the json layout refuses it by name
        return None
    try:
        struct_enc = _encode_structure(structure, where) if structure is not None else _LEAF
    except UnstorableValueError:
        return None
    kinds = [_leaf_kind(leaf) for leaf in first]
    if not kinds or any(k is None for k in kinds):
        return None  # no leaves (empty dicts or lists) or unstackable ones: the json layout
    columns: list[list[Any]] = [[leaf] for leaf in first]
    for item in items[1:]:
        try:
            leaves, st = flatten(item)
        except (TypeError, RecursionError):  # keys that do not sort, deep nesting (see above)
            return None
        if len(leaves) != len(kinds) or (st is None) != (structure is None):
            return None  # a leaf among nested items (or the reverse) is no column of its kind
        if structure is not None:
            try:
                enc = _encode_structure(st, where)
            except UnstorableValueError:
                return None
            # Dicts of the same keys in another order: the same leaves (dm-tree sorts keys),
            # read back in the first item's order. Only their layout differs.
            if enc != struct_enc and _keys_sorted(enc) != _keys_sorted(struct_enc):
                return None
        for j, leaf in enumerate(leaves):
            if _leaf_kind(leaf) != kinds[j]:
                return None
            columns[j].append(leaf)
    out = []
    for kind, col in zip(kinds, columns, strict=True):
        assert kind is not None
        name = kind[0]
        if name == "str" and _padding_wasted(col):
            return None
        try:
            if name == "ndarray":
                # np.stack gives native byte order; the items' own dtype must come back.
                arr = np.stack(col).astype(np.dtype(kind[1]), copy=False)
            elif name == "npscalar":
                arr = np.asarray(col, dtype=np.dtype(kind[1]))
            else:
                arr = np.asarray(col, dtype=_SCALAR_KINDS[type(col[0])][1])
        except (OverflowError, ValueError):
            return None
        out.append((name, arr))
    return struct_enc, out


_GENERAL: Any = object()  # _stack_flat's "not one flat kind: walk item by item"
_DTYPE = attrgetter("dtype")


def _stack_flat(items: list[Any]) -> Any:
    """``_stack_list``'s result for items that are all one flat kind, in numpy calls.

    Arrays of one dtype, Python numbers of one type, or numpy scalars of one type: what a
    list-mode episode records. The type and dtype checks run in C (``map``), so a long column
    costs no Python call per item; anything else is left to the item-by-item walk.
    """
    first = items[0]
    kind = type(first)
    if set(map(type, items)) != {kind}:
        return _GENERAL
    try:
        if kind is np.ndarray:
            if len(set(map(_DTYPE, items))) != 1 or not _plain(first.dtype):
                return _GENERAL
            return _LEAF, [("ndarray", np.stack(items).astype(first.dtype, copy=False))]
        if kind in _SCALAR_KINDS and kind is not str:
            name, dtype = _SCALAR_KINDS[kind]
            return _LEAF, [(name, np.asarray(items, dtype=dtype))]
        if issubclass(kind, (np.number, np.bool_)) and _plain(first.dtype):
            if len(set(map(_DTYPE, items))) != 1:  # timedelta64 scalars of several units
                return _GENERAL
            return _LEAF, [("npscalar", np.asarray(items, dtype=first.dtype))]
    except (OverflowError, ValueError):  # ragged shapes, ints past int64: not one column
        return None
    return _GENERAL


def _padding_wasted(strs: list[str]) -> bool:
    """Whether one fixed-width array of ``strs`` (each padded to the longest) wastes too much.

    A few long strings among short ones would multiply the column's size (a 20,000-character
    text among 2,000 one-character ones: 150 MiB for 22 KB); the json layout stores each item
    at its own length. Strings JSON cannot hold (a lone surrogate) keep the padded layout, and
    so do texts too long for a v1 ``meta.json`` (where json items live; 256 MiB at most).
    """
    total = sum(map(len, strs))
    if len(strs) * max(map(len, strs)) <= 4 * total + _PAD_SLACK or total > _JSON_TEXT_MAX:
        return False
    return all(s.isascii() or _utf8(s) for s in strs)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_PAD_SLACK = 16384  # characters of padding always allowed (64 KiB): short columns stay arrays
_JSON_TEXT_MAX = 4 << 20  # characters: at most 48 MiB of JSON (12 bytes for an escaped one)


def _unstack_list(kinds: list[str], arrays: list[np.ndarray], skeleton: Any) -> list[Any]:
    n = len(arrays[0]) if arrays else 0
    columns: list[list[Any]] = []
    for kind, arr in zip(kinds, arrays, strict=True):
        if kind == "ndarray":
            columns.append([arr[i, ...] for i in range(n)])
        elif kind == "npscalar":
            columns.append([arr[i] for i in range(n)])
        else:
            columns.append(arr.tolist())
    if skeleton is None:
        return columns[0]
    return [tree.unflatten_as(skeleton, [c[i] for c in columns]) for i in range(n)]


# ------------------------------------------------------------------------------- columns
def encode_column(
    buf: InfiniteLookbackBuffer,
    prefix: str,
    arrays: dict[str, np.ndarray],
    blob: BlobWriter,
    where: str,
) -> dict[str, Any]:
    """Encodes a column as metadata, adding its ``.npy`` arrays to ``arrays``.

    Raises:
        UnstorableValueError: A value cannot be stored safely (the message says where).

    Example:
        >>> arrays = {}
        >>> buf = InfiniteLookbackBuffer([1.0, 2.0, 3.0], lookback=1)
        >>> meta = encode_column(buf, "rew", arrays, BlobWriter(), "x")
        >>> meta["layout"], meta["leaves"], arrays["rew.0.npy"].tolist()
        ('arrays', [{'file': 'rew.0.npy', 'kind': 'float'}], [1.0, 2.0, 3.0])
        >>> encode_column(InfiniteLookbackBuffer([1, "a"]), "x", {}, BlobWriter(), "x")["items"]
        [1, 'a']
    """
    meta: dict[str, Any] = {
        "lookback": buf.lookback,
        "finalized": buf.finalized,
        "space": space_dict(buf.space, where),
        "size": buf.len_incl_lookback(),
    }
    if buf.finalized and buf.len_incl_lookback() == 0:
        # An empty numpy column may have its dtypes decided (a cut successor's): keep that.
        meta["typed"] = bool(buf.get_state()["typed"])
    data = buf.data
    if buf.finalized:
        try:
            leaves, structure = flatten(data)
        except RecursionError:
            raise UnstorableValueError(f"{where}: item nested too deeply") from None
        struct_enc = _encode_structure(structure, where) if structure is not None else _LEAF
        leaf_meta = []
        for i, leaf in enumerate(leaves):
            check_array_type(leaf, f"{where} leaf {i}")
            arr = np.asarray(leaf)
            check_array_dtype(arr.dtype, f"{where} leaf {i}")
            name = f"{prefix}.{i}.npy"
            arrays[name] = arr
            leaf_meta.append({"file": name, "kind": "batched"})
        meta.update(layout="arrays", structure=struct_enc, leaves=leaf_meta)
        return meta
    stacked = _stack_list(data, where) if prefix != "info" else None
    if stacked is not None:
        struct_enc, kinded = stacked
        leaf_meta = []
        for i, (kind, arr) in enumerate(kinded):
            name = f"{prefix}.{i}.npy"
            arrays[name] = arr
            leaf_meta.append({"file": name, "kind": kind})
        meta.update(layout="arrays", structure=struct_enc, leaves=leaf_meta)
        return meta
    # Most infos are empty dicts: they encode to themselves, without the per-item walk.
    items = [
        {} if v.__class__ is dict and not v else encode_value(v, blob=blob, where=f"{where}[{i}]")
        for i, v in enumerate(data)
    ]
    meta.update(layout="json", items=items)
    return meta


def decode_column(
    meta: Any,
    load: Callable[[str], np.ndarray],
    blob: Callable[[], BlobReader],
    where: str,
    *,
    as_list: bool,
) -> InfiniteLookbackBuffer:
    """Rebuilds a column from :func:`encode_column`'s metadata and a file loader.

    ``as_list`` turns a stored numpy column into list mode (one item per row).

    Raises:
        CorruptDatasetError: The metadata or the arrays are malformed or inconsistent.

    Example:
        >>> buf, arrays = InfiniteLookbackBuffer([1, 2, 3], lookback=1), {}
        >>> buf.finalize()
        >>> meta = encode_column(buf, "obs", arrays, BlobWriter(), "x")
        >>> back = decode_column(meta, arrays.__getitem__, BlobWriter, "x", as_list=True)
        >>> back.finalized, back.lookback, [int(x) for x in back.get()]
        (False, 1, [2, 3])
    """
    if not isinstance(meta, dict):
        raise CorruptDatasetError(f"{where}: column metadata must be an object")
    lookback, size, finalized = meta.get("lookback"), meta.get("size"), meta.get("finalized")
    if not (
        isinstance(lookback, int)
        and isinstance(size, int)
        and not isinstance(lookback, bool)  # JSON's true is no count
        and not isinstance(size, bool)
        and 0 <= lookback <= size
    ):
        raise CorruptDatasetError(f"{where}: bad lookback/size {lookback!r}/{size!r}")
    if not isinstance(finalized, bool):
        raise CorruptDatasetError(f"{where}: 'finalized' must be a bool")
    layout = meta.get("layout")
    if layout == "json":
        if finalized or not isinstance(meta.get("items"), list):
            raise CorruptDatasetError(f"{where}: malformed json-layout column")
        reader = blob()
        # Most infos are empty dicts: they decode to themselves, without the per-item walk.
        data: Any = [
            {}
            if v.__class__ is dict and not v
            else decode_value(v, blob=reader, where=f"{where}[{i}]")
            for i, v in enumerate(meta["items"])
        ]
    elif layout == "arrays":
        data = _decode_arrays_layout(meta, load, where, size, finalized)
    else:
        raise CorruptDatasetError(f"{where}: unknown column layout {layout!r}")
    if not finalized and len(data) != size:
        raise CorruptDatasetError(f"{where}: holds {len(data)} items, expected {size}")
    if finalized and as_list:
        data, finalized = (unbatch(data) if size else []), False
    state = {"data": data, "lookback": lookback, "finalized": finalized, "space": meta.get("space")}
    if finalized and isinstance(meta.get("typed"), bool):
        state["typed"] = meta["typed"]
    try:
        # Taken over: the data was just decoded (or memory-mapped) for this buffer alone.
        return InfiniteLookbackBuffer.from_state(state, copy=False)
    except ValueError as error:
        raise CorruptDatasetError(f"{where}: {error}") from None


def _decode_arrays_layout(
    meta: dict[str, Any], load: Callable[[str], np.ndarray], where: str, size: int, finalized: bool
) -> Any:
    leaves = meta.get("leaves")
    skeleton, n_leaves = _skeleton(meta.get("structure"), where)
    if not isinstance(leaves, list) or len(leaves) != n_leaves or not leaves:
        raise CorruptDatasetError(f"{where}: leaf list does not match the item structure")
    kinds, arrays = [], []
    for leaf in leaves:
        if not isinstance(leaf, dict) or not isinstance(leaf.get("file"), str):
            raise CorruptDatasetError(f"{where}: malformed leaf entry {leaf!r}")
        kind = leaf.get("kind")
        allowed = ("batched",) if finalized else ("ndarray", "npscalar", *_KIND_NAMES)
        if kind not in allowed:
            raise CorruptDatasetError(f"{where}: unknown leaf kind {kind!r}")
        arr = load(leaf["file"])
        if arr.ndim == 0 or len(arr) != size:
            raise CorruptDatasetError(
                f"{where}: {leaf['file']} holds {len(arr) if arr.ndim else 0} items, "
                f"expected {size}"
            )
        kinds.append(kind)
        arrays.append(arr)
    is_flat = not isinstance(skeleton, (dict, list, tuple))
    if finalized:
        return arrays[0] if is_flat else tree.unflatten_as(skeleton, arrays)
    return _unstack_list(kinds, arrays, None if is_flat else skeleton)


_KIND_NAMES = tuple(name for name, _ in _SCALAR_KINDS.values())


def space_dict(space: Any, where: str) -> Any:
    """``space_to_dict``, a space kind the format cannot describe being unstorable.

    Example:
        >>> import gymnasium as gym
        >>> space_dict(gym.spaces.Discrete(2), "x")["n"]
        2
    """
    try:
        return space_to_dict(space)
    except TypeError as err:
        raise UnstorableValueError(f"{where}: {err}") from None

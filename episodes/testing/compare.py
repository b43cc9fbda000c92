"""Leaf-wise comparison of connector outputs (dicts, lists, tuples, arrays, tensors).

Also the row-by-row comparison behind ``check_lookback_across_cuts``.

Example:
    >>> outputs_equal({"x": [1, 2]}, {"x": (1, 2)})
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from episodes.episode import FIELDS, Field, SingleAgentEpisode
from episodes.structs import arrays_equal, data_equal, numbers_equal

__all__ = ["outputs_equal"]


def _to_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without torch
        tensor = value.detach().cpu()
        try:
            return tensor.numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16): compared as float32, dtype kept
            return _Widened(tensor.float().numpy(), str(tensor.dtype))
    return value


class _Widened:
    """A tensor of a dtype numpy lacks, as float32 values and the tensor's dtype name."""

    def __init__(self, values: np.ndarray, dtype: str):
        self.values, self.dtype = values, dtype


def _diff(a: Any, b: Any, check_dtype: bool, path: str) -> str | None:
    found = _diff_direct(a, b, check_dtype, path)
    if found is None or check_dtype:
        return found
    # Only where they differ as they are, and not where dtypes (and so layouts) count: a list
    # of Dict or Tuple items against the numpy'd batch holding them, at any depth.
    a, b = _to_numpy(a), _to_numpy(b)
    ra, rb = _batched_like(a, b), _batched_like(b, a)
    if ra is not a or rb is not b:
        if type(ra) is tuple and type(rb) is tuple and len(ra) == len(rb):
            # Part by part: a part may be a list of Tuple items itself (a Tuple in a Tuple),
            # which numpy would stack as it stands.
            return found if _diff_items(ra, rb, check_dtype, path) else None
        return found if _diff_direct(ra, rb, check_dtype, path) else None
    if type(a) is list and type(b) is list and len(a) == len(b) and _regrouped(a, b):
        return found if _diff_items(a, b, check_dtype, path) else None
    return found


def _diff_direct(a: Any, b: Any, check_dtype: bool, path: str) -> str | None:
    a, b = _to_numpy(a), _to_numpy(b)
    a, b = _widened_rows(a, b), _widened_rows(b, a)
    if isinstance(a, _Widened) or isinstance(b, _Widened):
        kinds = [x.dtype if isinstance(x, _Widened) else type(x).__name__ for x in (a, b)]
        if check_dtype and kinds[0] != kinds[1]:
            return f"{path}: dtypes differ: {kinds[0]} vs {kinds[1]}"
        a, b = (x.values if isinstance(x, _Widened) else x for x in (a, b))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            return f"{path}: keys differ: {_keys(a)} vs {_keys(b)}"
        for key in a:
            found = _diff(a[key], b[key], check_dtype, f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)) or a is None or b is None:
        # Compared only as the same kind: an array == None is not a bool, and ["a"] is not "a".
        # A numpy'd Text column gives np.str_ where list mode gives str: the same value, told
        # apart only by check_dtype.
        kind = type if check_dtype else _text_kind
        same = kind(a) is kind(b) and a == b
        return None if same else f"{path}: {a!r} != {b!r}"
    if a.__class__ in _PYTHON_NUMBERS and b.__class__ in _PYTHON_NUMBERS:
        return _number_diff(a, b, check_dtype, path)
    if _item_by_item(a, b, check_dtype):
        # An array (a stacked tensor) against a list: its rows against the list's items.
        return _diff_items(_listed(a), _listed(b), check_dtype, path)
    try:
        aa, bb = np.asarray(a), np.asarray(b)
    except (ValueError, TypeError, RuntimeError):  # ragged, or tensors numpy cannot take
        return None if _same(a, b) else f"{path}: {a!r} != {b!r}"
    if aa.dtype == object or bb.dtype == object:
        # Item by item: == would broadcast ([x] equal to [x, x]), call NaN unequal and fail
        # on arrays inside.
        if aa.shape != bb.shape and not (not check_dtype and _empty_alike(aa, bb)):
            return f"{path}: shapes differ: {aa.shape} vs {bb.shape}"
        if aa.ndim == 0:
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):  # 0-d: what it holds
                return _diff(aa.item(), bb.item(), check_dtype, path)
            # two objects numpy knows nothing about
            return None if _same(a, b) else f"{path}: {a!r} != {b!r}"
        return _diff_items(list(aa.flat), list(bb.flat), check_dtype, path)
    if aa.shape != bb.shape:
        if not check_dtype and _empty_alike(aa, bb):
            return None
        return f"{path}: shapes differ: {aa.shape} vs {bb.shape}"
    if check_dtype and aa.dtype != bb.dtype:
        return f"{path}: dtypes differ: {aa.dtype} vs {bb.dtype}"
    if _rounded(a, aa) or _rounded(b, bb):  # Python ints made float64 inexactly: one by one
        return _diff_items(list(a), list(b), check_dtype, path)
    if aa.dtype.names is not None and aa.dtype.names == bb.dtype.names:
        # Field by field, each with the NaN rule of its kind: == on the records calls NaN unequal.
        for name in aa.dtype.names:
            found = _diff(aa[name], bb[name], check_dtype, f"{path}[{name!r}]")
            if found:
                return found
        return None
    if aa.dtype.kind in "fc" and bb.dtype.kind in "fc":
        same = arrays_equal(aa, bb)  # NaNs equal; complex values part by part
    else:
        nat = aa.dtype.kind in "mM" and aa.dtype.kind == bb.dtype.kind  # NaTs equal, as NaNs
        same = bool(np.array_equal(aa, bb, equal_nan=nat))
    if not same:
        return f"{path}: values differ:\n{aa!r}\nvs\n{bb!r}"
    return None


_PYTHON_NUMBERS = frozenset((int, float, bool, complex))


def _number_diff(a: Any, b: Any, check_dtype: bool, path: str) -> str | None:
    """Two Python numbers, compared as Python does: numpy would round an int to a float64."""
    if check_dtype and a.__class__ is not b.__class__:  # named as numpy names them
        return f"{path}: dtypes differ: {np.asarray(a).dtype} vs {np.asarray(b).dtype}"
    if numbers_equal(a, b):  # NaNs equal; complex numbers part by part
        return None
    return f"{path}: values differ:\n{a!r}\nvs\n{b!r}"


def _rounded(value: Any, array: np.ndarray) -> bool:
    """Whether a list's numbers may have been rounded into ``array`` (ints of 2**53 and up).

    numpy makes ints beside floats float64; such lists are compared item by item, each number
    as Python compares it. Floats that large (or NaN, inf) only cost the slower walk.
    """
    return (
        isinstance(value, (list, tuple))
        and array.dtype.kind in "fc"
        and array.size > 0
        and not bool((np.abs(array) < 2.0**53).all())
    )


def _batched_like(value: Any, other: Any) -> Any:
    """A list of Dict (Tuple) items beside the numpy'd dict (tuple) batch of them, regrouped.

    A list-mode getter gives one dict or tuple per step, a numpy'd one a dict or tuple of
    arrays with a row per step: the same values. Only such a pair is regrouped: dict items
    with the batch's keys, or tuple items of its width (a list of lists is rows), beside a
    batch whose array leaves each hold a row per item; a batch without leaves is never one,
    but an empty part of one (``{"a": (), "b": array}``) stands for the items' equal parts.
    An empty list (a column of no steps) is regrouped as empty beside a batch whose array
    leaves all hold no rows.
    """
    if type(value) is not list or not _holds_array(other):  # no batch at all: (), {"a": ()}
        return value
    if not value:
        if isinstance(other, Mapping) and _rows_per_item(other.values(), 0):
            return {key: [] for key in other}
        if isinstance(other, tuple) and _rows_per_item(other, 0):
            return tuple([] for _ in other)
        return value
    if isinstance(other, Mapping):
        keys = set(other)
        if _rows_per_item(other.values(), len(value)) and all(
            isinstance(item, Mapping) and set(item) == keys for item in value
        ):
            return {key: _part([item[key] for item in value], other[key]) for key in other}
    elif isinstance(other, tuple):
        width = len(other)
        if _rows_per_item(other, len(value)) and all(
            type(item) is tuple and len(item) == width for item in value
        ):
            return tuple(_part([item[i] for item in value], other[i]) for i in range(width))
    return value


def _part(parts: list[Any], batched: Any) -> Any:
    """One part of regrouped items: the batch's own empty part where each item holds it.

    An empty Dict or Tuple part (``{"a": (), "b": 0}``) holds no rows: the numpy'd batch keeps
    it as it is (``{"a": (), "b": array}``), so a list of equal empty parts stands for it.
    """
    if isinstance(batched, (Mapping, tuple)) and not _holds_array(batched):
        if all(_diff(part, batched, False, "") is None for part in parts):
            return batched
    return parts


def _holds_array(batch: Any) -> bool:
    """Whether a dict or tuple holds an array (a tensor) somewhere inside."""
    if isinstance(batch, Mapping):
        return any(_holds_array(part) for part in batch.values())
    if isinstance(batch, tuple):
        return any(_holds_array(part) for part in batch)
    return isinstance(_to_numpy(batch), np.ndarray)


def _rows_per_item(leaves: Any, count: int) -> bool:
    """Whether each part is an array (a tensor) of ``count`` rows, or a nested batch."""
    for leaf in leaves:
        leaf = _to_numpy(leaf)
        if isinstance(leaf, (Mapping, tuple)):
            continue
        if not isinstance(leaf, np.ndarray) or leaf.ndim == 0 or len(leaf) != count:
            return False
    return True


def _regrouped(a: list[Any], b: list[Any]) -> bool:
    """Whether some pair of items are a list of items against a batch of them."""
    return any(_batched_like(x, y) is not x or _batched_like(y, x) is not y for x, y in zip(a, b))


def _widened_rows(value: Any, other: Any) -> Any:
    """A bfloat16 tensor against a list or tuple: its rows, each keeping the tensor's dtype."""
    if not (isinstance(value, _Widened) and isinstance(other, (tuple, list)) and len(other)):
        return value
    if value.values.ndim == 0 or not len(value.values):
        return value
    return [_Widened(row, value.dtype) for row in value.values]


def _listed(value: Any) -> Any:
    return list(value) if isinstance(value, np.ndarray) else value


def _item_by_item(a: Any, b: Any, check_dtype: bool) -> bool:
    """Whether a list or tuple is compared with a list, tuple or array one item at a time.

    Lists of plain numbers against lists or arrays of them are compared as arrays, fast.
    Anything else goes item by item, as numpy would change it: it turns ``["a", 1]`` into
    strings, drops trailing NULs (bytes ending in NUL would equal them without) and promotes
    mixed dtypes (which ``check_dtype`` tells apart: every item's dtype counts); tensors inside
    (bfloat16, needing grad, on a GPU) are converted one by one. An empty list against an
    array keeps the shape rules of :func:`outputs_equal`.
    """
    if not isinstance(a, (tuple, list)):
        a, b = b, a
    if not isinstance(a, (tuple, list)):
        return False
    if not isinstance(b, (tuple, list)):
        if not (isinstance(b, np.ndarray) and b.ndim and len(a) and len(b)):
            return False
        if b.dtype == object:  # an array of objects holds items as a list does
            return True
    listed = [*a, *b] if isinstance(b, (tuple, list)) else a
    if check_dtype or any(hasattr(x, "detach") for x in listed):
        return True
    try:
        kinds = {np.asarray(a).dtype.kind, np.asarray(b).dtype.kind}
    except (ValueError, TypeError, RuntimeError):  # ragged: compare element by element
        return True
    return bool({"O", "U", "S"} & kinds)


def _keys(value: Any) -> Any:
    # Sorted by repr: keys of mixed types (0 and "total") do not compare.
    return sorted(value, key=repr) if isinstance(value, Mapping) else type(value).__name__


def _empty_alike(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether one side is empty where the other has no rows (``[]`` and a ``(0, 2)`` array).

    So are ``[[], []]`` and a ``(2, 0, 2)`` array. A list that is empty at some depth has no
    item shape below it, so list mode cannot show the trailing shape a numpy'd column keeps.
    """
    short, long_ = (a, b) if a.ndim <= b.ndim else (b, a)
    return short.ndim >= 1 and short.shape[-1] == 0 and long_.shape[: short.ndim] == short.shape


def _text_kind(value: Any) -> type:
    return str if isinstance(value, str) else bytes if isinstance(value, bytes) else type(value)


def _object_rows(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object and value.ndim > 0


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except (ValueError, TypeError, RuntimeError):  # == gave an array, or refused
        # A dataclass holding an array: its fields compared (see episodes.structs.data_equal).
        return type(a) is type(b) and data_equal(a, b)


def _diff_items(a: Any, b: Any, check_dtype: bool, path: str) -> str | None:
    if len(a) != len(b):
        return f"{path}: lengths differ: {len(a)} vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        found = _diff(x, y, check_dtype, f"{path}[{i}]")
        if found:
            return found
    return None


def _rows(
    full: Any, part: Any, start: int, stop: int, n_full: int, strict: bool, path: str
) -> str | None:
    """Where the rows of ``part`` (output on a chunk) differ from rows ``start:stop`` of ``full``.

    Dicts and tuples are walked; a leaf with ``n_full`` rows (one per step) or ``n_full + 1``
    (one per observation) is compared; ``strict``: every leaf must be such rows.
    """
    full, part = _to_numpy(full), _to_numpy(part)
    if isinstance(full, Mapping):
        keys = (
            f"{path}: keys differ: {_keys(full)} on the whole episode, {_keys(part)} on the chunk"
        )
        if not isinstance(part, Mapping):
            return keys
        missing = set(full) - set(part)
        # A chunk without steps may leave its (empty) columns out, as connectors do.
        if set(part) - set(full) or (missing and start != stop):
            return keys
        for key in full:
            if key in missing:
                continue
            found = _rows(full[key], part[key], start, stop, n_full, strict, f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(full, tuple):  # structure, as in a batch ((mean, std)), not rows
        if not isinstance(part, tuple) or len(part) != len(full):
            what = f"of {len(part)}" if isinstance(part, tuple) else type(part).__name__
            return f"{path}: a tuple of {len(full)} on the whole episode, {what} on the chunk"
        for i, (whole_item, part_item) in enumerate(zip(full, part)):
            found = _rows(whole_item, part_item, start, stop, n_full, strict, f"{path}[{i}]")
            if found:
                return found
        return None
    rows = _row_count(full)
    extra = -1 if rows is None else rows - n_full
    if extra not in (0, 1):
        return f"{path}: not one row per step or per observation" if strict else None
    got, want = _row_count(part), stop - start + extra
    if got == want:
        # A bfloat16 tensor's rows keep its dtype name: compared as the float32 rows are.
        rows_of = full.values if isinstance(full, _Widened) else full
        expected = rows_of[start : stop + extra]
        if isinstance(full, _Widened):
            expected = _Widened(expected, full.dtype)
        return _diff(expected, part, False, f"{path} (rows {start}:{stop + extra} of the whole)")
    if not strict:
        # Not rows after all: a per-episode value as long as the episode, or a layout of its
        # own (rows zero-padded to a multiple of a sequence length line up by chance). Only
        # named row keys tell lookback rows leaking in from such a layout.
        return None
    return (
        f"{path}: not one row per step or per observation on the chunk: {got} rows, "
        f"expected {want} ({rows} on the whole episode)"
    )


def _row_count(value: Any) -> int | None:
    """``len(value)``, or None for what has no rows (a number, text, a 0-d array or tensor)."""
    if isinstance(value, _Widened):  # a bfloat16 tensor: the rows of its float32 values
        value = value.values
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return None
    if getattr(value, "ndim", 1) == 0:  # a 0-d array or tensor has __len__ but no rows
        return None
    return len(value)


def _shown(value: Any) -> str:
    try:
        return repr(value)
    except Exception as err:  # an object left inconsistent may fail even to print itself
        return f"<{type(value).__name__} whose repr raised {type(err).__name__}>"


def _buffer_diff(name: str, old: Any, new: Any) -> str | None:
    for part in ("lookback", "finalized", "space"):
        if getattr(old, part) != getattr(new, part):
            was, now = _shown(getattr(old, part)), _shown(getattr(new, part))
            return f"{name}: {part} {was} before, {now} after"
    found = _diff(old.data, new.data, True, name) or _container_diff(old.data, new.data, name)
    if found and old.lookback:
        return f"{found}\n(indices count the stored items, the {old.lookback} lookback ones first)"
    return found


def _is_container(value: Any) -> bool:
    return isinstance(value, (list, tuple, Mapping, np.ndarray)) or hasattr(value, "detach")


def _container_diff(old: Any, new: Any, path: str) -> str | None:
    """The first place where a container's type changed (an array made a list, a tuple a list).

    ``_diff`` compares values, not containers (as :func:`outputs_equal` documents); episode
    ``==`` tells them apart, so the mutation check locates them here once ``_diff`` found
    nothing. Run on failures only.
    """
    if type(old) is not type(new) and (_is_container(old) or _is_container(new)):
        kinds = f"{type(old).__name__} -> {type(new).__name__}"
        return f"{path}: {kinds} ({_shown(old)} before, {_shown(new)} after)"
    if isinstance(old, Mapping):
        pairs: Any = ((f"{path}[{k!r}]", old[k], new[k]) for k in old if k in new)
    elif isinstance(old, (list, tuple)) or _object_rows(old):
        olds, news = (list(x.flat) if isinstance(x, np.ndarray) else x for x in (old, new))
        pairs = ((f"{path}[{i}]", x, y) for i, (x, y) in enumerate(zip(olds, news)))
    else:
        return None
    for where, x, y in pairs:
        found = _container_diff(x, y, where)
        if found:
            return found
    return None


def _field_diff(field: Field, old: Any, new: Any) -> str | None:
    if field.kind == "column":
        return _buffer_diff(field.name, old, new)
    if field.kind == "columns":
        if old.keys() != new.keys():
            return f"{field.name}: keys {_keys(old)} before, {_keys(new)} after"
        for key in old:
            found = _buffer_diff(f"{field.name}[{key!r}]", old[key], new[key])
            if found:
                return found
        return None
    if field.kind == "custom":
        return _diff(old, new, True, field.name) or _container_diff(old, new, field.name)
    return None if old == new else f"{field.name}: {_shown(old)} before, {_shown(new)} after"


def _episode_diff(before: SingleAgentEpisode, after: SingleAgentEpisode) -> str:
    """The first field where ``after`` differs from ``before``, with both values.

    Fields are walked in the episode's field table order. Never raises: it describes episodes
    a connector may have left broken.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> import copy
        >>> changed = copy.deepcopy(ep)
        >>> changed.custom_data["seen"] = True
        >>> _episode_diff(ep, changed)
        "custom_data: keys differ: [] vs ['seen']"
    """
    old_fields, new_fields = before.field_values(), after.field_values()
    for field in FIELDS:
        if field.kind == "clock":  # wall-clock readings are not part of ==
            continue
        try:
            found = _field_diff(field, old_fields[field.name], new_fields[field.name])
        except Exception as err:  # values a comparison refuses: still a change to report
            found = f"{field.name}: changed (comparing it raised {type(err).__name__}: {err})"
        if found:
            return found
    return "a field changed (the episodes are not ==), but no difference could be located"


def outputs_equal(a: Any, b: Any, *, check_dtype: bool = False) -> bool:
    """Leaf-wise equality of two connector outputs (dicts, lists, tuples, arrays, tensors).

    Lists and arrays with the same values compare equal; dtypes only matter with
    ``check_dtype``, and so does ``str`` vs ``np.str_`` (``bytes`` vs ``np.bytes_``), as a
    numpy'd Text column gives. NaNs compare equal; arrays of objects (arrays inside) compare
    item by item. Without ``check_dtype`` an empty list equals an array without rows (``[]``
    and a ``(0, 2)`` array): list mode cannot show the item shape of what it does not hold.
    A list or tuple holding anything but plain numbers (strings, bytes, tensors, objects) is
    compared with an array or tensor item by item (its rows), so numpy's conversions never
    make values equal (``["a", 1]`` is not ``np.array(["a", "1"])``); with ``check_dtype``
    every list is, so each item's own type counts the same against a list or an array:
    ``[1, 2.5]`` differs from ``np.array([1.0, 2.5])`` as from ``[1.0, 2.5]``, and ``["ab"]``
    from ``np.array(["ab"])`` (``str`` vs ``np.str_``) as from ``[np.str_("ab")]``.

    Example:
        >>> outputs_equal({"x": [1.0, 2.0]}, {"x": np.array([1.0, 2.0], np.float32)})
        True
        >>> outputs_equal({"x": [1.0]}, {"x": np.array([1.0], np.float32)}, check_dtype=True)
        False
        >>> outputs_equal(["ab"], [np.str_("ab")])
        True
        >>> outputs_equal(["ab"], [np.str_("ab")], check_dtype=True)
        False
        >>> outputs_equal({"obs": []}, {"obs": np.zeros((0, 2), np.float32)})
        True
        >>> outputs_equal(["a", 1], np.array(["a", "1"]))
        False
        >>> outputs_equal([1, 2.5], np.array([1.0, 2.5]), check_dtype=True)
        False
    """
    return _diff(a, b, check_dtype, "output") is None

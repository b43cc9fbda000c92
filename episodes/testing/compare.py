"""Leaf-wise comparison of connector outputs (dicts, lists, tuples, arrays, tensors).

Example:
    >>> outputs_equal({"x": [1, 2]}, {"x": (1, 2)})
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

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
    a, b = _to_numpy(a), _to_numpy(b)
    if isinstance(a, _Widened) or isinstance(b, _Widened):
        kinds = [x.dtype if isinstance(x, _Widened) else type(x).__name__ for x in (a, b)]
        if check_dtype and kinds[0] != kinds[1]:
            return f"{path}: dtypes differ: {kinds[0]} vs {kinds[1]}"
        a, b = (x.values if isinstance(x, _Widened) else x for x in (a, b))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            # Sorted by repr: keys of mixed types (0 and "total") do not compare.
            keys_a = sorted(a, key=repr) if isinstance(a, Mapping) else type(a).__name__
            keys_b = sorted(b, key=repr) if isinstance(b, Mapping) else type(b).__name__
            return f"{path}: keys differ: {keys_a} vs {keys_b}"
        for key in a:
            found = _diff(a[key], b[key], check_dtype, f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)) or a is None or b is None:
        # Compared only as the same type: an array == None is not a bool, and ["a"] is not "a".
        same = type(a) is type(b) and a == b
        return None if same else f"{path}: {a!r} != {b!r}"
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        # Tensors inside (bfloat16, needing grad, on a GPU) are converted one by one; with
        # check_dtype every item is, since stacking would promote them to one dtype.
        ragged = check_dtype or any(hasattr(x, "detach") for x in [*a, *b])
        try:
            dtype_kinds = {np.asarray(a).dtype.kind, np.asarray(b).dtype.kind}
            # numpy turns ("a", 3) into strings: mixed items are compared one by one too.
            ragged = (
                ragged
                or "O" in dtype_kinds
                or (
                    bool({"U", "S"} & dtype_kinds)
                    and not all(isinstance(x, (str, bytes)) for x in [*a, *b])
                )
            )
        except (ValueError, TypeError, RuntimeError):  # ragged: compare element by element
            ragged = True
        if ragged:
            return _diff_items(a, b, check_dtype, path)
    try:
        aa, bb = np.asarray(a), np.asarray(b)
    except ValueError:
        return None if a == b else f"{path}: {a!r} != {b!r}"
    if aa.dtype == object or bb.dtype == object:
        # Item by item: == would broadcast ([x] equal to [x, x]), call NaN unequal and fail
        # on arrays inside.
        if aa.shape != bb.shape:
            return f"{path}: shapes differ: {aa.shape} vs {bb.shape}"
        if aa.ndim == 0:  # two objects numpy knows nothing about
            return None if a is b or bool(a == b) else f"{path}: {a!r} != {b!r}"
        return _diff_items(list(aa.flat), list(bb.flat), check_dtype, path)
    if aa.shape != bb.shape:
        return f"{path}: shapes differ: {aa.shape} vs {bb.shape}"
    if check_dtype and aa.dtype != bb.dtype:
        return f"{path}: dtypes differ: {aa.dtype} vs {bb.dtype}"
    equal_nan = aa.dtype.kind in "fc" and bb.dtype.kind in "fc"
    if not np.array_equal(aa, bb, equal_nan=equal_nan):
        return f"{path}: values differ:\n{aa!r}\nvs\n{bb!r}"
    return None


def _diff_items(a: Any, b: Any, check_dtype: bool, path: str) -> str | None:
    if len(a) != len(b):
        return f"{path}: lengths differ: {len(a)} vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        found = _diff(x, y, check_dtype, f"{path}[{i}]")
        if found:
            return found
    return None


def outputs_equal(a: Any, b: Any, *, check_dtype: bool = False) -> bool:
    """Leaf-wise equality of two connector outputs (dicts, lists, tuples, arrays, tensors).

    Lists and arrays with the same values compare equal; dtypes only matter with
    ``check_dtype``. NaNs compare equal.

    Example:
        >>> outputs_equal({"x": [1.0, 2.0]}, {"x": np.array([1.0, 2.0], np.float32)})
        True
        >>> outputs_equal({"x": [1.0]}, {"x": np.array([1.0], np.float32)}, check_dtype=True)
        False
    """
    return _diff(a, b, check_dtype, "output") is None

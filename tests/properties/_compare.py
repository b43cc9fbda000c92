"""Leaf-wise comparison of getter results across list and numpy mode."""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.structs import data_equal


def as_arrays(value: Any) -> Any:
    """Lists of items -> batched arrays (leaf-wise); items -> arrays; dicts/tuples kept."""
    if isinstance(value, dict):
        return {k: as_arrays(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(as_arrays(v) for v in value)
    if isinstance(value, list):
        if value and isinstance(value[0], (dict, tuple)):
            if isinstance(value[0], dict):
                return {k: as_arrays([v[k] for v in value]) for k in value[0]}
            return tuple(as_arrays([v[i] for v in value]) for i in range(len(value[0])))
        return np.asarray(value)
    return np.asarray(value)


def _all_empty(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_all_empty(v) for v in value.values())
    if isinstance(value, tuple):
        return all(_all_empty(v) for v in value)
    return np.asarray(value).size == 0


def values_equal(a: Any, b: Any) -> bool:
    """Equal values leaf-wise, ignoring list/array and dtype differences (shapes must match).

    An empty list (list mode, no items) equals an empty batched struct (numpy mode).
    """
    if (isinstance(a, list) and not a and _all_empty(b)) or (
        isinstance(b, list) and not b and _all_empty(a)
    ):
        return True
    a, b = as_arrays(a), as_arrays(b)
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and set(a) == set(b)
            and all(values_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(values_equal(x, y) for x, y in zip(a, b))
        )
    if a.size == 0 and b.size == 0:
        return True
    return a.shape == b.shape and data_equal(a, b.astype(a.dtype))

"""JSON-safe dicts for gymnasium spaces, and back.

Encoding lives here; :func:`space_from_dict` (re-exported) in ``episodes.spaces.decoding``,
which checks every field of a dict before it builds a space.
"""

from __future__ import annotations

import marshal
import math
from functools import singledispatch
from typing import Any, overload

import numpy as np
from gymnasium import spaces as gs

from episodes.spaces.decoding import MAX_DEPTH, MAX_SCALAR_BOUND, SPACE_TYPES, space_from_dict
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.spaces.space_limits import ScalarBoundsError, check_space_dict

__all__ = ["space_from_dict", "space_to_dict"]


@overload
def space_to_dict(space: gs.Space[Any]) -> dict[str, Any]: ...
@overload
def space_to_dict(space: None) -> None: ...
def space_to_dict(space: gs.Space[Any] | None) -> dict[str, Any] | None:
    """Describe a gymnasium space as a JSON-safe dict.

    The dict has a ``"type"`` key naming the space class and only plain values (ints, floats,
    strings, bools, lists, dicts), so ``json.dumps(d, allow_nan=False)`` works. Infinite bounds
    are written as the strings ``"inf"`` / ``"-inf"``. The space's seed is not kept.

    Args:
        space: The space to describe, or ``None``.

    Returns:
        The dict, or ``None`` when ``space`` is ``None``.

    Raises:
        TypeError: If the space (or a nested one) is of a kind this module does not know.

    Example:
        >>> import gymnasium as gym
        >>> space_to_dict(gym.spaces.Discrete(3, start=1))
        {'type': 'Discrete', 'n': 3, 'start': 1, 'dtype': 'int64'}
    """
    if space is None:
        return None
    # Callers may edit the dict they get, so each gets its own copy of the cached encoding:
    # the encoding is cached marshalled (plain dicts, lists and scalars), and unmarshalling is
    # a C-speed deep copy.
    return marshal.loads(_ENCODED.get(space))


def _dtype_text(dtype: Any) -> str:
    # np.dtype(): a script may have retyped a space with a scalar type (space.dtype =
    # np.float32). The name drops a non-native byte order ('>f4' would come back as float32).
    dtype = np.dtype(dtype)
    return dtype.name if dtype.isnative else dtype.str


def _checked_encoding(space: gs.Space[Any]) -> bytes:
    encoded = _encode(space)
    try:  # what the decoder would refuse (too deep, too costly to build) is not written
        try:
            check_space_dict(encoded, max_depth=MAX_DEPTH)
        except ScalarBoundsError:  # too many boxes written with one value: lists, as before
            encoded = _listed_bounds(encoded)
            check_space_dict(encoded, max_depth=MAX_DEPTH)
    except ValueError as err:
        raise TypeError(f"cannot serialize the space: {err}") from None
    return marshal.dumps(encoded)


def _listed_bounds(encoded: Any) -> Any:
    """``encoded`` with every one-value Box bound written as the list of its entries."""
    if isinstance(encoded, list):
        return [_listed_bounds(part) for part in encoded]
    if not isinstance(encoded, dict):
        return encoded
    out = {key: _listed_bounds(value) for key, value in encoded.items()}
    if out.get("type") == "Box":
        for key in ("low", "high"):
            if not isinstance(out[key], list):
                out[key] = [out[key]] * math.prod(out["shape"])
    return out


@singledispatch
def _encode(space: gs.Space[Any]) -> dict[str, Any]:
    raise TypeError(
        f"Cannot serialize space of type {type(space).__name__!r}; supported: {sorted(SPACE_TYPES)}"
    )


def _bound_list(values: np.ndarray, bounded: np.ndarray, marker: str) -> Any:
    """Flatten a Box bound to JSON-safe scalars, unbounded entries as ``marker``.

    Signed-int boxes store an infinite bound as the dtype's min/max and only remember the
    infinity in ``bounded_below/above``; writing the marker keeps that distinction. A big
    bound the same for every entry (bit for bit: -0.0 is not 0.0) is written once, as its
    one value; small ones stay lists, which builds from before 2026-12-05 read.
    """
    flat, mask = values.ravel(), np.asarray(bounded, dtype=bool).ravel()
    bits = flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize)  # long double: 16 bytes
    if _SCALAR_FROM <= flat.size <= MAX_SCALAR_BOUND and (bits == bits[0]).all():
        if (mask == mask[0]).all():
            return _bound_values(flat[:1], mask[:1], marker)[0]
    return _bound_values(flat, mask, marker)


#: Boxes of fewer entries list their bounds even where all are equal.
_SCALAR_FROM = 64


def _bound_values(flat: np.ndarray, mask: np.ndarray, marker: str) -> list[Any]:
    # float64 first so float16/32 entries become exact Python floats, not numpy scalars.
    out = (flat.astype(np.float64) if flat.dtype.kind == "f" else flat).astype(object)
    if flat.dtype.kind == "f":
        out[np.isnan(flat)] = "nan"
        out[np.isposinf(flat)] = "inf"
        out[np.isneginf(flat)] = "-inf"
    out[~mask] = marker
    return out.tolist()


@_encode.register
def _(space: gs.Box) -> dict[str, Any]:
    return {
        "type": "Box",
        "shape": list(space.shape),
        "dtype": _dtype_text(space.dtype),
        "low": _bound_list(space.low, space.bounded_below, "-inf"),
        "high": _bound_list(space.high, space.bounded_above, "inf"),
    }


@_encode.register
def _(space: gs.Discrete) -> dict[str, Any]:
    return {
        "type": "Discrete",
        "n": int(space.n),
        "start": int(space.start),
        "dtype": _dtype_text(np.dtype(space.dtype)),
    }


@_encode.register
def _(space: gs.MultiDiscrete) -> dict[str, Any]:
    encoded = {
        "type": "MultiDiscrete",
        "nvec": space.nvec.tolist(),
        "start": space.start.tolist(),
        "dtype": _dtype_text(np.dtype(space.dtype)),
    }
    if space.nvec.size == 0:  # nested lists lose the shape of an empty array: (0, 2) is []
        encoded["shape"] = list(space.nvec.shape)
    return encoded


@_encode.register
def _(space: gs.MultiBinary) -> dict[str, Any]:
    n = space.n
    return {
        "type": "MultiBinary",
        "n": int(n) if isinstance(n, (int, np.integer)) else [int(x) for x in n],
        "dtype": _dtype_text(np.dtype(space.dtype)),
    }


@_encode.register
def _(space: gs.Text) -> dict[str, Any]:
    # ``character_list`` keeps the user's order, which fixes the char -> index mapping.
    return {
        "type": "Text",
        "max_length": int(space.max_length),
        "min_length": int(space.min_length),
        "charset": "".join(space.character_list),
    }


@_encode.register
def _(space: gs.Dict) -> dict[str, Any]:
    # Pairs, not a JSON object: JSON objects force string keys and readers may reorder them.
    items = []
    for key, sub in space.spaces.items():
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise TypeError(f"Dict space key {key!r} is not a str or int; cannot serialize it")
        # A plain copy: np.str_ or enum keys are no JSON (or marshal) values themselves.
        plain = str.__str__(key) if isinstance(key, str) else int(key)
        items.append([plain, _encode(sub)])
    return {"type": "Dict", "spaces": items}


@_encode.register
def _(space: gs.Tuple) -> dict[str, Any]:
    return {"type": "Tuple", "spaces": [_encode(s) for s in space.spaces]}


@_encode.register
def _(space: gs.Sequence) -> dict[str, Any]:
    return {
        "type": "Sequence",
        "feature_space": _encode(space.feature_space),
        "stack": bool(space.stack),
    }


@_encode.register
def _(space: gs.Graph) -> dict[str, Any]:
    return {
        "type": "Graph",
        "node_space": _encode(space.node_space),
        "edge_space": None if space.edge_space is None else _encode(space.edge_space),
    }


@_encode.register
def _(space: gs.OneOf) -> dict[str, Any]:
    return {"type": "OneOf", "spaces": [_encode(s) for s in space.spaces]}


# Encoding a Box walks its bounds; episodes encode the same few space objects over and over.
_ENCODED: PerSpaceCache[bytes] = PerSpaceCache(_checked_encoding)

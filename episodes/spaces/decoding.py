"""Gymnasium spaces rebuilt from the JSON-safe dicts of :func:`~episodes.spaces.space_to_dict`.

The dicts come from files written by strangers, so only checked plain values (ints, floats,
strings, lists) ever build a space; nothing is evaluated or unpickled.
"""

from __future__ import annotations

import json
import marshal
import math
from typing import Any, overload

import numpy as np
from gymnasium import spaces as gs

from episodes.spaces.space_limits import MAX_SCALAR_BOUND, check_space_dict

__all__ = ["MAX_DEPTH", "MAX_SCALAR_BOUND", "SPACE_TYPES", "space_from_dict"]

# JSON has no inf/nan (``json.dumps(..., allow_nan=False)`` refuses them): strings carry them.
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


@overload
def space_from_dict(d: dict[str, Any]) -> gs.Space[Any]: ...
@overload
def space_from_dict(d: None) -> None: ...
def space_from_dict(d: dict[str, Any] | None) -> gs.Space[Any] | None:
    """Rebuild a gymnasium space from a dict made by :func:`space_to_dict`.

    Safe on untrusted input: every field is type- and range-checked before a space is built.

    Args:
        d: The dict, or ``None``.

    Returns:
        The space, or ``None`` when ``d`` is ``None``.

    Raises:
        ValueError: If ``d`` is malformed or names an unknown space type; the message says
            which field was wrong and what was expected.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.spaces import space_to_dict
        >>> box = gym.spaces.Box(-1.0, float("inf"), (2,))
        >>> space_from_dict(space_to_dict(box)) == box
        True
    """
    if d is None:
        return None
    # Equal marshal bytes mean an equal dict (a tuple is no list there): a hit costs no JSON text.
    try:
        fast: bytes | None = marshal.dumps(d)
    except ValueError:  # not plain values, or nested too deeply: the checked path says which
        fast = None
    hit = None if fast is None else _BY_BYTES.get(fast)
    if hit is not None:
        return hit
    # Building a gymnasium Box is slow (bounds checks, dtype probing) and the same few spaces
    # come back in every loaded episode: equal dicts share one decoded space. The JSON text is
    # the key: equal plain dicts give equal text (marshal's bytes depend on object identity);
    # a different key order only costs a cache miss. Anything JSON cannot write is no valid
    # encoding and goes to the checked decoder uncached.
    try:
        key: str | None = json.dumps(d, allow_nan=True)
    except (TypeError, ValueError):
        key = None
    except RecursionError:
        raise ValueError("space: nested too deeply") from None
    cached = None if key is None else _DECODED.get(key)
    # JSON writes a tuple as a list, which the checks refuse: a hit counts only where the dict
    # equals the one decoded (== tells a tuple from a list, at C speed).
    if cached is not None and cached[0] == d:
        if fast is not None and len(_BY_BYTES) < _MAX_DECODED:
            _BY_BYTES[fast] = cached[1]
        return cached[1]
    try:
        check_space_dict(d)  # before building: some spaces copy their parts, nested
        space = _decode(d, "space")
    except RecursionError:
        raise ValueError("space: nested too deeply") from None
    if key is not None:
        if len(_DECODED) >= _MAX_DECODED or len(_BY_BYTES) >= _MAX_DECODED:
            _DECODED.clear()
            _BY_BYTES.clear()
        _DECODED[key] = (json.loads(key), space)
        if fast is not None:
            _BY_BYTES[fast] = space
    return space


_DECODED: dict[str, tuple[Any, gs.Space[Any]]] = {}
_BY_BYTES: dict[bytes, gs.Space[Any]] = {}
_MAX_DECODED = 256
#: Deeper nesting is refused on both sides: a space near Python's recursion limit decodes but
#: then fails in ``repr``, ``==`` or ``sample``, depending on the caller's own stack depth.
MAX_DEPTH = 32


def _decode(d: Any, where: str, depth: int = 0) -> gs.Space[Any]:
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: spaces nested more than {MAX_DEPTH} deep")
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected a dict describing a space, got {type(d).__name__}")
    kind = d.get("type")
    decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise ValueError(
            f"{where}: unknown space type {kind!r}; expected one of {sorted(_DECODERS)}"
        )
    try:
        return decoder(d, f"{where}<{kind}>", depth)
    except ValueError:
        raise
    except (TypeError, OverflowError, AssertionError, RecursionError) as e:
        # gymnasium constructors complain with assorted exception types; unify them.
        raise ValueError(f"{where}<{kind}>: invalid space description: {e}") from e


def _field(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    return d[key]


def _int(d: dict[str, Any], key: str, where: str) -> int:
    value = _field(d, key, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: field {key!r} must be an int, got {value!r}")
    return value


def _bool(d: dict[str, Any], key: str, where: str) -> bool:
    value = _field(d, key, where)
    if not isinstance(value, bool):
        raise ValueError(f"{where}: field {key!r} must be a bool, got {value!r}")
    return value


def _list(d: dict[str, Any], key: str, where: str) -> list[Any]:
    value = _field(d, key, where)
    if not isinstance(value, list):
        raise ValueError(f"{where}: field {key!r} must be a list, got {type(value).__name__}")
    return value


def _dtype(d: dict[str, Any], where: str, kinds: str) -> np.dtype[Any]:
    name = _field(d, "dtype", where)
    if not isinstance(name, str):
        raise ValueError(f"{where}: field 'dtype' must be a string, got {name!r}")
    try:
        dtype = np.dtype(name)
    except TypeError as e:
        raise ValueError(f"{where}: unknown dtype {name!r}") from e
    if dtype.kind not in kinds or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"{where}: dtype {name!r} not allowed here (kinds {kinds!r})")
    return dtype


def _int_array(d: dict[str, Any], key: str, where: str) -> np.ndarray:
    """A (possibly nested) list of ints, or one int (a 0-d array), as an object array."""
    value = _field(d, key, where)
    if not isinstance(value, (list, int)) or isinstance(value, bool):
        raise ValueError(f"{where}: field {key!r} must be a list, got {type(value).__name__}")
    try:
        arr = np.asarray(value, dtype=object)
    except ValueError as e:
        raise ValueError(f"{where}: field {key!r} is ragged") from e
    flat = arr.ravel()
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise ValueError(f"{where}: field {key!r} must hold only ints")
    return arr


def _bound_array(
    values: Any, shape: tuple[int, ...], dtype: np.dtype[Any], marker: str, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Parse a flat list of Box bounds; returns the array and a mask of ``marker`` entries.

    One value (not a list) is every entry's bound, read as a list of it would be (for no
    entries, an empty list).
    """
    size = math.prod(shape)
    if isinstance(values, (int, float, str)) and size <= MAX_SCALAR_BOUND:
        one, no_one = _bound_array([values][:size], (min(size, 1),), dtype, marker, what)
        return np.repeat(one, size).reshape(shape), np.repeat(no_one, size).reshape(shape)
    if isinstance(values, (int, float, str)):
        raise ValueError(f"{what}: one value for {size} entries (at most {MAX_SCALAR_BOUND})")
    if not isinstance(values, list):
        raise ValueError(f"{what}: expected a flat list of numbers")
    if len(values) != size:
        raise ValueError(f"{what}: expected {size} values for shape {shape}, got {len(values)}")
    unbounded = np.zeros(size, dtype=bool)
    try:
        raw = np.asarray(values)
    except ValueError as e:
        raise ValueError(f"{what}: expected a flat list of numbers") from e
    # Fast path: plain numbers of a fitting kind (the usual, large, case).
    fits = {"b": "b", "i": "iu", "u": "iu", "f": "iuf"}[dtype.kind]
    # A bool mixed with numbers becomes a number in np.asarray; JSON true is not a number.
    mixed_bools = dtype.kind != "b" and any(isinstance(x, bool) for x in values)
    if raw.ndim != 1 or raw.dtype.kind not in fits or mixed_bools:
        raw, unbounded = _checked_objects(values, dtype, marker, what)
    with np.errstate(over="ignore"):  # a finite float beyond the dtype: refused below
        out = raw.astype(dtype)
    if dtype.kind in "iu" and not np.array_equal(out, raw):
        raise ValueError(f"{what}: values out of range for dtype {dtype.name}")
    if dtype.kind == "f" and np.isinf(out).any() and _overflowed(raw, out):
        raise ValueError(f"{what}: values out of range for dtype {dtype.name}")
    return out.reshape(shape), unbounded.reshape(shape)


def _overflowed(raw: np.ndarray, out: np.ndarray) -> bool:
    """Whether a finite bound in ``raw`` became infinite in ``out`` (its float dtype's cast)."""
    return any(math.isinf(o) and not math.isinf(x) for x, o in zip(raw.tolist(), out.tolist()))


def _checked_objects(
    values: list[Any], dtype: np.dtype[Any], marker: str, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Slow path for lists holding the non-finite markers, checked item by item."""
    converted: list[Any] = []
    unbounded: list[bool] = []
    for x in values:
        is_marker = isinstance(x, str) and x in _NON_FINITE
        if is_marker and dtype.kind == "f":
            converted.append(_NON_FINITE[x])
        elif is_marker and dtype.kind == "i" and x == marker:
            info = np.iinfo(dtype)
            converted.append(int(info.min) if marker == "-inf" else int(info.max))
        elif isinstance(x, bool) and dtype.kind == "b":
            converted.append(x)
        elif isinstance(x, int) and not isinstance(x, bool) and dtype.kind in "iuf":
            converted.append(x)
        elif isinstance(x, float) and dtype.kind == "f":
            converted.append(x)
        else:
            raise ValueError(f"{what}: value {x!r} does not fit dtype {dtype.name}")
        unbounded.append(is_marker and x == marker)
    return np.asarray(converted, dtype=object), np.asarray(unbounded, dtype=bool)


def _shape(d: dict[str, Any], where: str) -> tuple[int, ...]:
    raw = _list(d, "shape", where)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in raw):
        raise ValueError(f"{where}: field 'shape' must be a list of non-negative ints")
    return tuple(raw)


def _decode_box(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    shape = _shape(d, where)
    dtype = _dtype(d, where, "biuf")
    low, no_low = _bound_array(_field(d, "low", where), shape, dtype, "-inf", f"{where}.low")
    high, no_high = _bound_array(_field(d, "high", where), shape, dtype, "inf", f"{where}.high")
    box = gs.Box(low=low, high=high, shape=shape, dtype=dtype)
    if dtype.kind == "i":
        # Box only learns an int bound was infinite from an inf argument; restore that here.
        box.bounded_below &= ~no_low
        box.bounded_above &= ~no_high
    return box


def _decode_discrete(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    n = _int(d, "n", where)
    if n <= 0:
        raise ValueError(f"{where}: field 'n' must be positive, got {n}")
    dtype = _dtype(d, where, "iu") if "dtype" in d else np.dtype(np.int64)
    start = _int(d, "start", where)
    info = np.iinfo(dtype)  # every value start .. start + n - 1 must fit (as MultiDiscrete)
    if start < info.min or start + n - 1 > info.max:
        raise ValueError(f"{where}: 'start' and 'n' give values outside {dtype.name}")
    return gs.Discrete(n, start=start, dtype=dtype)


def _decode_multi_discrete(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    nvec = _int_array(d, "nvec", where)  # Python ints: a uint64 nvec may pass int64
    start = _int_array(d, "start", where) if "start" in d else np.zeros(nvec.shape, object)
    if "shape" in d:  # only an empty nvec's: its lists cannot say it
        shape = _int_array(d, "shape", where)
        sizes = shape.tolist() if shape.ndim == 1 and all(n >= 0 for n in shape) else None
        if sizes is None or math.prod(sizes) != 0 or nvec.size or start.size:
            raise ValueError(f"{where}: 'shape' is given only for an empty 'nvec', got {shape}")
        nvec, start = nvec.reshape(sizes), start.reshape(sizes)
    if start.shape != nvec.shape:
        raise ValueError(f"{where}: 'start' shape {start.shape} != 'nvec' shape {nvec.shape}")
    if np.any(nvec <= 0):
        raise ValueError(f"{where}: every entry of 'nvec' must be positive")
    dtype = _dtype(d, where, "iu") if "dtype" in d else np.dtype(np.int64)
    # Every value start .. start + nvec - 1 must fit the dtype (300 would wrap to 44 in uint8).
    info = np.iinfo(dtype)
    low = [int(x) for x in start.ravel()]
    high = [int(a) + int(n) - 1 for a, n in zip(start.ravel(), nvec.ravel())]
    if any(x < info.min for x in low) or any(x > info.max for x in high):
        raise ValueError(f"{where}: 'start' and 'nvec' give values outside {dtype.name}")
    if any(int(n) > info.max for n in nvec.ravel()):  # a negative start's span beyond it
        raise ValueError(f"{where}: 'nvec' holds sizes outside {dtype.name}")
    # Built in the space's dtype: a uint64 start beyond int64 holds there.
    return gs.MultiDiscrete(nvec.astype(dtype), dtype=dtype, start=start.astype(dtype))


def _decode_multi_binary(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    n = _field(d, "n", where)
    if isinstance(n, list):
        return gs.MultiBinary([int(x) for x in _int_array(d, "n", where).ravel()])
    return gs.MultiBinary(_int(d, "n", where))


def _decode_text(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    charset = _field(d, "charset", where)
    if not isinstance(charset, str) or not charset:
        raise ValueError(f"{where}: field 'charset' must be a non-empty string")
    return gs.Text(
        _int(d, "max_length", where),
        min_length=_int(d, "min_length", where),
        charset=charset,
    )


def _decode_dict(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    pairs: list[tuple[Any, gs.Space[Any]]] = []
    for i, pair in enumerate(_list(d, "spaces", where)):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ValueError(f"{where}: 'spaces'[{i}] must be a [key, space] pair")
        key, sub = pair
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise ValueError(f"{where}: 'spaces'[{i}] key {key!r} must be a str or int")
        pairs.append((key, _decode(sub, f"{where}[{key!r}]", depth + 1)))
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError(f"{where}: duplicate keys in 'spaces'")
    # A sequence of pairs keeps our order (a plain dict would be re-sorted by gymnasium).
    return gs.Dict(pairs)


def _decode_tuple(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    subs = _list(d, "spaces", where)
    return gs.Tuple([_decode(s, f"{where}[{i}]", depth + 1) for i, s in enumerate(subs)])


def _decode_sequence(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    feature = _decode(_field(d, "feature_space", where), f"{where}.feature_space", depth + 1)
    return gs.Sequence(feature, stack=_bool(d, "stack", where))


def _decode_graph(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    node = _decode(_field(d, "node_space", where), f"{where}.node_space", depth + 1)
    edge_raw = _field(d, "edge_space", where)
    edge = None if edge_raw is None else _decode(edge_raw, f"{where}.edge_space", depth + 1)
    return gs.Graph(node_space=node, edge_space=edge)


def _decode_one_of(d: dict[str, Any], where: str, depth: int) -> gs.Space[Any]:
    subs = _list(d, "spaces", where)
    return gs.OneOf([_decode(s, f"{where}[{i}]", depth + 1) for i, s in enumerate(subs)])


_DECODERS = {
    "Box": _decode_box,
    "Discrete": _decode_discrete,
    "MultiDiscrete": _decode_multi_discrete,
    "MultiBinary": _decode_multi_binary,
    "Text": _decode_text,
    "Dict": _decode_dict,
    "Tuple": _decode_tuple,
    "Sequence": _decode_sequence,
    "Graph": _decode_graph,
    "OneOf": _decode_one_of,
}
#: The space types a dict may name (``"type"``).
SPACE_TYPES = frozenset(_DECODERS)

"""Small helpers for nested items (dict / tuple / list nesting, dm-tree semantics).

Flat items (a scalar or an array) take fast paths that never call dm-tree, because most columns
in practice are flat and these helpers sit on hot paths.

Example:
    >>> leaves, structure = flatten({"a": 1, "b": (2, 3)})
    >>> leaves
    [1, 2, 3]
    >>> unflatten(structure, [4, 5, 6])
    {'a': 4, 'b': (5, 6)}
"""

from __future__ import annotations

import copy
import dataclasses
import reprlib
import sys
from typing import Any

import numpy as np
import tree

NESTED_TYPES = (dict, tuple, list)


def is_nested(item: Any) -> bool:
    """True if ``item`` is a dict, tuple or list structure rather than a single leaf.

    Example:
        >>> is_nested(np.zeros(3)), is_nested((1, 2))
        (False, True)
    """
    return isinstance(item, NESTED_TYPES)


def flatten(item: Any) -> tuple[list[Any], Any]:
    """Returns ``(leaves, structure)``; ``structure`` is None for a flat item.

    Example:
        >>> flatten(3.0)
        ([3.0], None)
    """
    if not is_nested(item):
        return [item], None
    return tree.flatten(item), item


def id_key(value: Any) -> Any:
    """A dict key for an episode id: the id, or a stand-in for an unhashable one (list, dict).

    The stand-in of an unhashable id is equal to another exactly when the ids are. Chunks
    are matched by id (the converter's time-order check and stepless ends): an id that
    cannot key a dict must still match its own episode's chunks, not none of them.

    A NaN, or a tuple holding one, gets a stand-in too: as for
    :func:`episodes.episode.state.same_id`, an id holding a NaN matches its copies (a NaN
    key is found only by its own object, and a copy read from disk is another object).

    Example:
        >>> id_key("run-1"), id_key(["run", 1]) == id_key(["run", 1]), id_key([1]) == id_key((1,))
        ('run-1', True, False)
        >>> a, b = {"run": [1]}, {"run": [2]}
        >>> id_key(a) == id_key(dict(a)), id_key(a) == id_key(b)
        (True, False)
        >>> id_key(("a", float("nan"))) == id_key(("a", float("nan"))), id_key(1) == id_key(1.0)
        (True, True)
    """
    kind = type(value)
    if kind is str or kind is int:  # the usual ids
        return value
    if isinstance(value, _NAN_KINDS) and value != value:  # noqa: PLR0124 - NaN
        return _NAN_ID
    if isinstance(value, tuple):
        parts = tuple(id_key(v) for v in value)
        if all(p is v for p, v in zip(parts, value)):
            return value
        return _UnhashableId((tuple, parts))  # a namedtuple is the tuple it reads back as
    try:
        hash(value)
    except TypeError:
        return _UnhashableId.of(value)
    return value


class _UnhashableId(tuple):
    """A frozen copy of an unhashable id, tagged with its type (``[1]`` is not ``(1,)``)."""

    __slots__ = ()

    @classmethod
    def of(cls, value: Any) -> Any:
        if isinstance(value, dict):
            items = frozenset((id_key(k), id_key(v)) for k, v in value.items())
            return cls((dict, items))
        if isinstance(value, (list, tuple)):
            kind = tuple if isinstance(value, tuple) else list
            return cls((kind, tuple(id_key(v) for v in value)))
        if isinstance(value, (set, bytearray)):
            return cls((type(value), frozenset(value) if isinstance(value, set) else bytes(value)))
        if isinstance(value, np.ndarray):
            return cls((np.ndarray, value.dtype.str, value.shape, value.tobytes()))
        return cls((object, id(value)))  # anything else matches only itself

    def __eq__(self, other: object) -> bool:
        return type(other) is _UnhashableId and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


_NAN_ID = _UnhashableId((float, "nan"))  # every NaN id, float or complex, is one key
# As ``same_id`` takes NaNs: one NaN equals another of any of these kinds.
_NAN_KINDS = (float, complex, np.floating, np.complexfloating)


def skeleton(structure: Any) -> Any:
    """``structure`` with every leaf replaced by None: what :func:`unflatten` needs, no data.

    A structure kept for long (a column's) must not hold the batch it was taken from: that
    batch would stay alive, and travel with every pickle of its holder (on the env's device,
    for a torch env).

    Example:
        >>> skeleton({"a": np.zeros(3), "b": (1, [2])}), skeleton(None)
        ({'a': None, 'b': (None, [None])}, None)
    """
    if structure is None:
        return None
    return tree.map_structure(lambda _: None, structure)


def unflatten(structure: Any, leaves: list[Any]) -> Any:
    """Inverse of :func:`flatten`.

    Example:
        >>> unflatten(None, [7])
        7
    """
    if structure is None:
        return leaves[0]
    return tree.unflatten_as(structure, leaves)


def map_leaves(fn: Any, item: Any) -> Any:
    """Applies ``fn`` to every leaf of ``item``.

    Example:
        >>> map_leaves(lambda x: x * 2, {"a": 1, "b": [2]})
        {'a': 2, 'b': [4]}
    """
    if not is_nested(item):
        return fn(item)
    return tree.map_structure(fn, item)


def map_batch(fn: Any, batch: Any) -> Any:
    """Applies ``fn`` to every leaf of a batched struct: dicts and tuples nest, lists do not.

    A batch holds one entry per sub-env along its first axis, so a list is the batch of one
    leaf (``[0, 1]``: two sub-envs' actions), not a structure of scalars as in an item.

    Example:
        >>> map_batch(np.asarray, {"a": [1, 2], "b": ([0.5, 0.7],)})
        {'a': array([1, 2]), 'b': (array([0.5, 0.7]),)}
    """
    if isinstance(batch, dict):
        return {key: map_batch(fn, value) for key, value in batch.items()}
    if isinstance(batch, tuple):
        items = [map_batch(fn, value) for value in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    return fn(batch)


def data_equal(a: Any, b: Any) -> bool:
    """Leaf-wise, dtype-aware equality of two (nested) items; NaNs (and NaTs) compare equal.

    Numpy arrays and scalars must agree in dtype and shape (``np.int32(1)`` is not
    ``np.int64(1)``). A Python scalar and a numpy one compare by value; two Python numbers
    compare as Python compares them (``2**53 + 1`` is not ``2.0**53``, which numpy would
    call equal). Torch tensors must agree in dtype, shape and device (gradients and bfloat16
    included); torch is never imported here.

    Example:
        >>> data_equal({"x": np.zeros(2, np.float32)}, {"x": np.zeros(2, np.float32)})
        True
        >>> data_equal(np.zeros(2, np.float32), np.zeros(2, np.float64))
        False
        >>> data_equal("ab", np.str_("ab")), data_equal("ab", b"ab")
        (True, False)
        >>> data_equal(np.int32(1), np.int64(1)), data_equal(1, np.int64(1))
        (False, True)
        >>> data_equal(2**53 + 1, 2.0**53), data_equal([1, 2.5], [1.0, 2.5])
        (False, True)
        >>> data_equal(np.int64(2**53 + 1), 2.0**53)  # a numpy number by value, exactly too
        False
    """
    kind = type(a)
    if kind is type(b) and (kind is int or kind is float or kind is bool):
        # Python numbers, a list-mode column's usual items: no arrays to build.
        return a == b or (a != a and b != b)  # NaN equals NaN
    if isinstance(a, dict) or isinstance(b, dict):
        # Key order does not matter, as for Python dicts (dm-tree and gymnasium sort keys).
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        if a.keys() != b.keys():  # keys holding NaNs (a copy's are new NaN objects)?
            return _items_paired(a, b)
        return all(data_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            return False
        return all(data_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind in "fc":
            return arrays_equal(a, b)
        if a.dtype == object:
            # Elements may be arrays themselves (a column whose first item was 2**70).
            return all(data_equal(x, y) for x, y in zip(a.flat, b.flat))
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "mM"))  # NaT equals NaT
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        # numpy's str_ and bytes_ are str and bytes (a numpy'd Text column's items): only
        # text against bytes differs by type.
        return isinstance(a, str) == isinstance(b, str) and a == b
    if kind in _PYTHON_NUMBERS and type(b) in _PYTHON_NUMBERS:
        # An int against a float, exactly as Python compares them: numpy would round both to
        # float64 (2**53 + 1 equal to 2.0**53).
        return numbers_equal(a, b)
    if kind in _PYTHON_NUMBERS and _numpy_number(b):  # by value, exactly, as above
        return numbers_equal(a, b.item())
    if type(b) in _PYTHON_NUMBERS and _numpy_number(a):
        return numbers_equal(a.item(), b)
    if not (isinstance(a, np.generic) and isinstance(b, np.generic)):  # two scalars: numpy's
        torch = sys.modules.get("torch")  # never imported here: only tensors that exist
        if torch is not None and (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
            return _tensor_equal(a, b, torch.Tensor)
    try:
        aa, bb = np.asarray(a), np.asarray(b)
    except Exception:  # noqa: BLE001 - objects numpy cannot read fall back to ==
        return _objects_equal(a, b)
    if aa.dtype == object or bb.dtype == object:
        # An array against an object numpy cannot hold (2**70), or == refused: unequal.
        return _objects_equal(a, b)
    if aa.shape != bb.shape:
        return False
    numpy_values = (np.ndarray, np.generic)
    if isinstance(a, numpy_values) and isinstance(b, numpy_values) and aa.dtype != bb.dtype:
        return False  # dtypes included, as for arrays; a Python number compares by value
    if aa.dtype.kind in "fc" or bb.dtype.kind in "fc":
        return arrays_equal(aa, bb)
    nat = aa.dtype.kind in "mM" and bb.dtype.kind in "mM"
    return bool(np.array_equal(aa, bb, equal_nan=nat))


_PYTHON_NUMBERS = frozenset((int, float, bool, complex))


def _items_paired(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """Whether two dicts whose key sets differ pair up item by item, keys by :func:`data_equal`.

    A key holding a NaN (``("score", nan)``) is found by ``in`` only with its own NaN object, so
    a pickled or stored copy's key is not: the keys each dict lacks are paired among themselves,
    a key with the first key and value of the other dict's rest that ``data_equal`` matches.
    """
    if len(a) != len(b):
        return False
    rest = [(key, value) for key, value in b.items() if key not in a]
    for key, value in a.items():
        if key in b:
            if not data_equal(value, b[key]):
                return False
            continue
        match = next(
            (i for i, (k, v) in enumerate(rest) if data_equal(key, k) and data_equal(value, v)),
            None,
        )
        if match is None:
            return False
        del rest[match]
    return True


def _numpy_number(value: Any) -> bool:
    """A numpy number scalar or 0-d array, whose ``item()`` is the Python number it holds."""
    return (
        isinstance(value, (np.generic, np.ndarray))
        and value.ndim == 0
        and (value.dtype.kind in "biufc")
    )


def numbers_equal(a: Any, b: Any) -> bool:
    """Two Python numbers compared as Python does, NaNs equal at the same places.

    A complex number compares part by part (``1+nanj`` equals itself, not ``2+nanj``), so
    a NaN in one part does not hide the other.

    Example:
        >>> nan = float("nan")
        >>> numbers_equal(nan, nan), numbers_equal(complex(1, nan), complex(1, nan))
        (True, True)
        >>> numbers_equal(complex(1, nan), complex(2, nan)), numbers_equal(2**53 + 1, 2.0**53)
        (False, False)
    """
    if a == b:
        return True
    if not (isinstance(a, (float, complex)) and isinstance(b, (float, complex))):
        return False  # an int holds no NaN: == said it all
    x, y = complex(a), complex(b)
    return _part_equal(x.real, y.real) and _part_equal(x.imag, y.imag)


def _part_equal(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)


def arrays_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal`` with NaNs equal at the same places; complex values part by part.

    numpy's ``equal_nan`` takes a complex value holding a NaN in either part for NaN as a
    whole, so ``1+nanj`` would equal ``2+nanj``; here the real and imaginary parts are
    compared each on its own. Dtypes are not compared (``data_equal`` does that).

    Example:
        >>> nan = float("nan")
        >>> arrays_equal(np.array([1.0, nan]), np.array([1.0, nan]))
        True
        >>> arrays_equal(np.array([complex(1, nan)]), np.array([complex(2, nan)]))
        False
    """
    kinds = a.dtype.kind + b.dtype.kind
    if "c" not in kinds or not set(kinds) <= set("biufc"):
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(
        np.array_equal(a.real, b.real, equal_nan=True)
        and np.array_equal(a.imag, b.imag, equal_nan=True)
    )


def _objects_equal(a: Any, b: Any) -> bool:
    """``a == b`` as a bool; where ``==`` raises, a dataclass's fields compared.

    A dataclass's generated ``==`` compares its fields as tuples, whose truth numpy refuses
    when a field holds an array: two instances of one such class are then equal when their
    fields are (:func:`data_equal`), which is what that ``==`` means. Anything else whose
    ``==`` gives no bool is unequal (its state may hide where no walk can see it).
    """
    try:
        return a is b or bool(a == b)
    except Exception:  # noqa: BLE001 - == of objects numpy cannot read may raise anything
        return _fields_equal(a, b)


def _fields_equal(a: Any, b: Any) -> bool:
    kind = type(a)
    params = getattr(kind, "__dataclass_params__", None)
    if kind is not type(b) or params is None or not params.eq:
        return False
    try:
        return all(
            data_equal(getattr(a, field.name), getattr(b, field.name))
            for field in dataclasses.fields(a)
            if field.compare
        )
    except Exception:  # noqa: BLE001 - a field never set, an object holding itself
        return False


def _tensor_equal(a: Any, b: Any, tensor: Any) -> bool:
    """Equality of torch tensors: dtype, shape, device and values (NaNs equal), as arrays.

    Gradients and dtypes numpy lacks (bfloat16) are no obstacle: the values are compared by
    torch, detached. A tensor against anything else compares as its numpy array would (one
    numpy cannot hold, bfloat16 or on a GPU, is unequal to it).
    """
    if not (isinstance(a, tensor) and isinstance(b, tensor)):
        x, other = (a, b) if isinstance(a, tensor) else (b, a)
        try:
            values = x.detach().numpy()
        except (TypeError, RuntimeError):  # bfloat16, or not on the CPU
            return False
        return data_equal(values, other)
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    x, y = a.detach(), b.detach()
    try:
        if x.equal(y):
            return True
        if x.is_complex():  # part by part: isnan is True where either part is NaN
            return _floats_equal(x.real, y.real) and _floats_equal(x.imag, y.imag)
        return x.is_floating_point() and _floats_equal(x, y)
    except (TypeError, RuntimeError):  # a layout torch cannot compare (a meta tensor)
        return a is b


def _floats_equal(x: Any, y: Any) -> bool:
    """Whether two float tensors of one shape are equal, NaNs equal at the same places."""
    return bool(((x == y) | (x.isnan() & y.isnan())).all())


def same_nesting(a: Any, b: Any) -> bool:
    """Whether ``b`` nests like ``a``: the same dict keys, sequences of the same lengths.

    Tuples and lists stand for each other (a Tuple space's item may come as either); leaves
    are not compared.

    Example:
        >>> same_nesting({"a": 1, "b": (2, 3)}, {"b": [0, 0], "a": 5})
        True
        >>> same_nesting({"a": 1, "b": 2}, {"a": 1, "c": 2}), same_nesting({"a": 1}, (1,))
        (False, False)
    """
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same_nesting(a[key], b[key]) for key in a)
        )
    if isinstance(a, (tuple, list)):
        return (
            isinstance(b, (tuple, list))
            and len(a) == len(b)
            and all(same_nesting(x, y) for x, y in zip(a, b))
        )
    return not is_nested(b)


def common_nesting(structures: list[Any]) -> Any:
    """One structure for values that nest alike (see ``same_nesting``): tuples where any has one.

    A Tuple space's items may be recorded as lists (gymnasium's Tuple takes them), while its
    fillers are tuples: a read that pads such items with fillers is nested as tuples wherever it
    is padded, as :func:`~episodes.spaces.batch_in_space` nests a list-mode read of the same
    items, so numpy and list mode agree; only values that are all lists there keep lists.

    Example:
        >>> common_nesting([[1, {"a": [2]}], (1, {"a": [2]})])
        (1, {'a': [2]})
        >>> common_nesting([[1, 2], [3, 4]])
        [1, 2]
    """
    first = structures[0]
    if isinstance(first, dict):
        return {key: common_nesting([s[key] for s in structures]) for key in first}
    if first.__class__ in (list, tuple):
        parts = [common_nesting([s[i] for s in structures]) for i in range(len(first))]
        return parts if all(s.__class__ is list for s in structures) else tuple(parts)
    return first


def map_alike(fn: Any, parts: list[Any]) -> Any:
    """``fn`` over each group of matching leaves of ``parts`` that nest alike, one result.

    Tuples and lists stand for each other (see :func:`same_nesting`) and the result nests as
    :func:`common_nesting` of the parts, so chunks whose Tuple items were recorded as tuples
    join those recorded as lists (or read without a space).

    Raises:
        ValueError: The parts do not nest alike (other dict keys, sequence lengths).

    Example:
        >>> out = map_alike(np.concatenate, [[np.zeros(1), np.ones(1)], (np.ones(2), np.zeros(2))])
        >>> type(out).__name__, [leaf.tolist() for leaf in out]
        ('tuple', [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    """
    first = parts[0]
    if not is_nested(first):
        return fn(parts)
    try:  # parts of one nesting, containers' types included (the usual case): in tree's C++
        return tree.map_structure(lambda *leaves: fn(list(leaves)), *parts)
    except (TypeError, ValueError):
        pass  # lists beside tuples, or other nestings (or fn refused: it refuses again below)
    if not all(same_nesting(first, part) for part in parts[1:]):
        raise ValueError("the parts do not nest alike (other dict keys or sequence lengths)")
    leaves_of = [flatten(part)[0] for part in parts]
    return unflatten(common_nesting(parts), [fn(list(group)) for group in zip(*leaves_of)])


def leaves_up_to(structure: Any, item: Any) -> list[Any] | None:
    """``item``'s values at ``structure``'s leaves (in :func:`flatten`'s order), or None.

    None when ``item`` does not nest like ``structure`` down to its leaves (other dict keys,
    sequences of other lengths; tuples and lists stand for each other). Below a leaf of
    ``structure`` anything goes: a list there is one value (a row given as a list).

    Example:
        >>> leaves_up_to({"b": 0, "a": 0}, {"a": [1, 2], "b": 3})
        [[1, 2], 3]
        >>> leaves_up_to({"a": 0}, {"c": 1}) is None, leaves_up_to((0, 0), [1]) is None
        (True, True)
    """
    out: list[Any] = []
    return out if _collect_up_to(structure, item, out) else None


def _collect_up_to(structure: Any, item: Any, out: list[Any]) -> bool:
    if isinstance(structure, dict):
        if not isinstance(item, dict) or structure.keys() != item.keys():
            return False
        return all(_collect_up_to(structure[key], item[key], out) for key in sorted(structure))
    if isinstance(structure, (tuple, list)):
        if not isinstance(item, (tuple, list)) or len(structure) != len(item):
            return False
        return all(_collect_up_to(sub, value, out) for sub, value in zip(structure, item))
    out.append(item)
    return True


def deep_copied(value: Any, what: str, owner: str = "") -> Any:
    """``copy.deepcopy(value)``, or a ``TypeError`` naming ``what``, the part and ``owner``.

    Example:
        >>> import threading
        >>> deep_copied({"a": [1]}, "infos")
        {'a': [1]}
        >>> deep_copied({"a": [1, threading.Lock()]}, "infos[0]", " of episode 'e'")
        Traceback (most recent call last):
        ...
        TypeError: infos[0]['a'][1] of episode 'e' cannot be deep-copied (TypeError: cannot ...
    """
    try:
        return copy.deepcopy(value)
    except Exception as err:  # noqa: BLE001 - whatever a value's __deepcopy__ or pickling raises
        raise TypeError(
            f"{what}{_failing_part(value)}{owner} cannot be deep-copied "
            f"({type(err).__name__}: {err})"
        ) from err


def _failing_part(value: Any) -> str:
    """Where in ``value`` (``['a'][1]``) the first part that does not deep-copy lies."""
    parts: Any = value.items() if isinstance(value, dict) else ()
    if isinstance(value, (list, tuple)):
        parts = enumerate(value)
    for key, part in parts:
        try:
            copy.deepcopy(part)
        except Exception:  # noqa: BLE001 - as above: this part is the one to name
            return f"[{key!r}]{_failing_part(part)}"
    return ""


def sorted_keys(keys: Any) -> list[Any]:
    """``keys`` sorted as ``sorted`` sorts strings, other keys after them by their text.

    ``sorted`` alone fails where keys mix types (``'<' not supported`` between str and int).

    Example:
        >>> sorted_keys({"b", 2, "a", 1})
        ['a', 'b', 1, 2]
    """
    return sorted(keys, key=lambda key: (not isinstance(key, str), str(key)))


def short_repr(value: Any, limit: int = 300) -> str:
    """``repr(value)`` cut to about ``limit`` chars, never raising: a message's value.

    Example:
        >>> short_repr(list(range(100))), len(short_repr("x" * 10**6)) < 100
        ('[0, 1, 2, 3, 4, 5, 6, 7, ...]', True)
    """
    short = reprlib.Repr()  # a str's start and end; an array as numpy's own short print
    short.maxstring, short.maxother, short.maxlist, short.maxdict = 80, 200, 8, 8
    try:
        text = short.repr(value)
    except Exception:  # noqa: BLE001 - a message never fails on the value it names
        return f"<{type(value).__name__} object (repr failed)>"
    return text if len(text) <= limit else text[: limit - 3] + "..."

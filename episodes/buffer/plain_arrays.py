"""What numpy columns hold: native byte order, and no masked arrays.

A column typed from items (a list column numpy'd, the first item appended to an untyped
column, a runner's blocks, a replay buffer's columns) takes the native equivalent of a
non-native dtype (``>f4`` items make a float32 column, values unchanged): torch and Arrow take
native arrays only, and an episode numpy'd before its steps holds what it would hold numpy'd
after. Readers that hand arrays to torch or Arrow make non-native leaves native too. A numpy
masked array with masked entries is refused: a plain array would drop its mask, and the masked
values would read back as data (one with none masked is the plain array it holds). And a
column of structured (record) items takes records of its dtype only: numpy would write a plain
number into every field.

Example:
    >>> native_dtype(np.dtype(">f4")), native_array(np.arange(2, dtype=">i8")).dtype
    (dtype('float32'), dtype('int64'))
    >>> holds_masked([np.zeros(2), {"x": np.ma.masked_array([1.0, 2.0], mask=[0, 1])}])
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

import numpy as np

from episodes.spaces.item_walks import mapping_words
from episodes.structs import flatten, unflatten

__all__ = [
    "check_items_unmasked",
    "check_unmasked",
    "holds_masked",
    "is_native",
    "masked_words",
    "native_array",
    "native_dtype",
    "native_leaves",
    "plain_leaves",
    "same_record",
]

# Classes an item is walked into (its leaves) or may be a masked array.
_SUSPECT = (np.ma.MaskedArray, dict, list, tuple)
_SEQUENCES, _DICTS = frozenset((list, tuple)), frozenset((dict,))


def is_native(dtype: np.dtype[Any]) -> bool:
    """Whether every value of ``dtype`` is in the native byte order, fields at any depth too.

    numpy's ``isnative`` says True for a subarray (``('>f4', (2,))``), and so for a structured
    dtype whose fields are subarrays of big-endian floats: those are looked into here.

    Example:
        >>> big_rows = np.dtype([("a", ">f4", (2,))])
        >>> big_rows.isnative, is_native(big_rows), is_native(np.dtype([("a", "f4", (2,))]))
        (True, False, True)
    """
    if dtype.names is not None:
        return all(is_native(dtype.fields[name][0]) for name in dtype.names)  # type: ignore[index]
    return dtype.base.isnative if dtype.subdtype is not None else dtype.isnative


def native_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` in the native byte order (the fields of a structured dtype too).

    Example:
        >>> native_dtype(np.dtype([("a", ">f4"), ("b", ">i2")]))
        dtype([('a', '<f4'), ('b', '<i2')])
        >>> native_dtype(np.dtype([("a", ">f4", (2,))]))
        dtype([('a', '<f4', (2,))])
    """
    return dtype if is_native(dtype) else dtype.newbyteorder("=")


def native_array(array: np.ndarray) -> np.ndarray:
    """``array`` itself if its byte order is native, else a native copy (values unchanged).

    Example:
        >>> big = np.array([1.5], ">f8"); native_array(big).tolist(), native_array(big).dtype
        ([1.5], dtype('float64'))
    """
    dtype = array.dtype
    return array if is_native(dtype) else array.astype(dtype.newbyteorder("="))


def native_leaves(batch: Any) -> Any:
    """``batch`` (a struct of arrays) with every non-native leaf a native copy; else itself.

    Example:
        >>> batch = {"a": np.zeros(2, ">f4"), "b": np.ones(2)}
        >>> out = native_leaves(batch); out["a"].dtype, out["b"] is batch["b"]
        (dtype('float32'), True)
    """
    if batch.__class__ is np.ndarray:  # a flat column's batch
        return native_array(batch)
    leaves, structure = flatten(batch)
    if all(not isinstance(leaf, np.ndarray) or is_native(leaf.dtype) for leaf in leaves):
        return batch
    return unflatten(
        structure, [native_array(x) if isinstance(x, np.ndarray) else x for x in leaves]
    )


def masked_words(what: str) -> str:
    """The words of the refusal of a masked array with masked entries, naming ``what``.

    Example:
        >>> masked_words("observations[2]")[:55]
        'observations[2]: a numpy masked array with masked entri'
    """
    return (
        f"{what}: a numpy masked array with masked entries cannot be stored in a numpy column "
        "(its mask would be lost, and the masked values read back as data); store "
        ".filled(...) and the mask (np.ma.getmaskarray) as two arrays"
    )


def check_unmasked(value: Any, what: str = "a value") -> None:
    """Refuses ``value`` if it is a masked array with masked entries (one leaf, not walked).

    Raises:
        ValueError: ``value`` is such a masked array (:func:`masked_words`).

    Example:
        >>> check_unmasked(np.ma.masked_array([1, 2]))  # nothing masked: a plain array
        >>> check_unmasked(np.ma.masked_array([1, 2], mask=[1, 0]), "obs")
        Traceback (most recent call last):
        ValueError: obs: a numpy masked array with masked entries cannot be stored ...
    """
    if isinstance(value, np.ma.MaskedArray) and np.ma.count_masked(value):
        raise ValueError(masked_words(what))


def holds_masked(items: Any) -> bool:
    """Whether a masked array with masked entries is among ``items`` or their leaves.

    ``items`` is a list or tuple of items (dicts, lists and tuples are walked). One type scan
    per nesting level: a level without a container or masked array costs no Python loop, and
    a level of one type (a column of floats, of arrays) builds no set of its types.

    Example:
        >>> holds_masked([1.0, [0.5, 2.0]]), holds_masked([(np.ma.masked_array([1], mask=1),)])
        (False, True)
    """
    values = items
    for _ in range(_FAST_LEVELS):
        if not values:
            return False
        # Counting the first type's share of the types is cheaper than a set of them, and a
        # level usually holds one type (a column of floats, of arrays).
        kinds = list(map(type, values))
        first = kinds[0]
        if kinds.count(first) == len(kinds):
            if not issubclass(first, _SUSPECT):
                return False
            classes = {first}
        else:
            classes = set(kinds)
            if not any(issubclass(cls, _SUSPECT) for cls in classes):
                return False
        if classes <= _SEQUENCES:  # rows given as lists (the usual nesting): at C speed
            values = list(chain.from_iterable(values))
            continue
        if classes == _DICTS:
            values = list(chain.from_iterable(map(dict.values, values)))
            continue
        inner: list[Any] = []
        for value in values:
            if isinstance(value, dict):
                inner.extend(value.values())
            elif isinstance(value, (list, tuple)):
                inner.extend(value)
            elif isinstance(value, np.ma.MaskedArray) and np.ma.count_masked(value):
                return True
        values = inner
    return _holds_masked_deep(values)


#: Levels walked a level at a time; deeper (a container holding itself, whose levels never
#: run out or double each time) the walk goes container by container, each once.
_FAST_LEVELS = 16


def _holds_masked_deep(values: list[Any]) -> bool:
    seen: set[int] = set()
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, (dict, list, tuple)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            stack.extend(value.values() if isinstance(value, dict) else value)
        elif isinstance(value, np.ma.MaskedArray) and np.ma.count_masked(value):
            return True
    return False


def check_items_unmasked(items: list[Any]) -> None:
    """Refuses ``items`` if one holds a masked array with masked entries (:func:`holds_masked`).

    Raises:
        ValueError: Naming the first such item's position (:func:`masked_words`).

    Example:
        >>> check_items_unmasked([np.zeros(2), np.ma.masked_array([1.0, 2.0], mask=[0, 1])])
        Traceback (most recent call last):
        ValueError: item 1 of 2: a numpy masked array with masked entries cannot be stored ...
    """
    if holds_masked(items):
        where = next(i for i, item in enumerate(items) if holds_masked([item]))
        raise ValueError(masked_words(f"item {where} of {len(items)}"))


def plain_leaves(batch: Any, what: str = "the batch") -> tuple[list[np.ndarray], Any]:
    """A struct's leaves as arrays (``np.asarray``) and its structure, masked ones refused.

    Raises:
        ValueError: A leaf is a masked array with masked entries (:func:`check_unmasked`), or
            a ``Mapping`` that is no dict (a ``MappingProxyType``): items nest dicts only.

    Example:
        >>> arrays, structure = plain_leaves({"a": np.arange(2), "b": [0.5, 1.5]})
        >>> [a.tolist() for a in arrays], sorted(structure)
        ([[0, 1], 0.5, 1.5], ['a', 'b'])
    """
    if batch.__class__ is np.ndarray:  # a flat column's batch: no mask, an array already
        return [batch], None
    leaves, structure = flatten(batch)
    for leaf in leaves:
        check_unmasked(leaf, what)  # np.asarray would drop its mask
        if isinstance(leaf, Mapping):  # batched as a mapping, then no array: name it
            raise ValueError(mapping_words(what, leaf))
    return [np.asarray(leaf) for leaf in leaves], structure


def same_record(given: np.dtype[Any], column: np.dtype[Any]) -> bool:
    """Whether ``given`` is the structured dtype ``column`` (byte order aside).

    Example:
        >>> record = np.dtype([("a", "<f4"), ("b", "<i4")])
        >>> same_record(record.newbyteorder(">"), record), same_record(np.dtype(float), record)
        (True, False)
    """
    return given.names is not None and np.can_cast(given, column, casting="equiv")

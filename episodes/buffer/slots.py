"""The state of an object whose attributes live in ``__slots__``, on every supported Python.

Python 3.11 gave ``object`` a ``__getstate__`` returning ``(None, {slot: value})`` for such an
object; Python 3.10, which the package supports, has none, so the stores read their slots here.
The slot names of a class are gathered from its MRO once and kept.

Example:
    >>> class Point:
    ...     __slots__ = ("x", "y")
    >>> p = Point(); p.x = 1
    >>> slot_values(p)
    {'x': 1}
"""

from __future__ import annotations

from typing import Any

__all__ = ["slot_values"]

_MISSING = object()
# Slot names read, by class and names left out: gathered from the MRO once per pair.
_NAMES: dict[tuple[type, frozenset[str]], tuple[str, ...]] = {}


def slot_values(obj: object, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The slots that hold a value in ``obj``, by name, nearest class first, ``skip`` left out.

    Example:
        >>> class Base:
        ...     __slots__ = "a"
        >>> class Child(Base):
        ...     __slots__ = ("b", "c")
        >>> c = Child(); c.a, c.b = 1, 2
        >>> slot_values(c), slot_values(c, frozenset("b"))
        ({'b': 2, 'a': 1}, {'a': 1})
    """
    key = (type(obj), skip)
    names = _NAMES.get(key)
    if names is None:
        names = _NAMES[key] = _slot_names(type(obj), skip)
    values: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name, _MISSING)
        if value is not _MISSING:
            values[name] = value
    return values


def _slot_names(cls: type, skip: frozenset[str]) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for kind in cls.__mro__:
        declared = kind.__dict__.get("__slots__", ())
        for name in (declared,) if isinstance(declared, str) else declared:
            if name not in ("__dict__", "__weakref__") and name not in skip:
                names.setdefault(name)
    return tuple(names)

"""The state of an object whose attributes live in ``__slots__``, on every supported Python.

Python 3.11 gave ``object`` a ``__getstate__`` returning ``(None, {slot: value})`` for such an
object; Python 3.10, which the package supports, has none, so the stores read their slots here.

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


def slot_values(obj: object) -> dict[str, Any]:
    """The slots that hold a value in ``obj``, by name, nearest class first.

    Example:
        >>> class Base:
        ...     __slots__ = "a"
        >>> class Child(Base):
        ...     __slots__ = ("b",)
        >>> c = Child(); c.a, c.b = 1, 2
        >>> slot_values(c)
        {'b': 2, 'a': 1}
    """
    values: dict[str, Any] = {}
    for kind in type(obj).__mro__:
        declared = kind.__dict__.get("__slots__", ())
        for name in (declared,) if isinstance(declared, str) else declared:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                values.setdefault(name, getattr(obj, name))
    return values

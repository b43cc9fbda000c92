"""What a user's subclass adds to a slotted class, so that copies and pickles keep it."""

from __future__ import annotations

from typing import Any

__all__ = ["subclass_attributes"]


def subclass_attributes(obj: object, base: type) -> dict[str, Any]:
    """The attributes a subclass of ``base`` adds: its own slots that are set, and its dict.

    ``base``'s own slots are the caller's to pickle; these travel beside them so that a copy or
    pickle of a user's subclass keeps what the subclass stores.

    Example:
        >>> class Base:
        ...     __slots__ = ("a",)
        >>> class Tagged(Base):
        ...     __slots__ = ("tag", "note")
        >>> obj = Tagged(); obj.a, obj.tag = 1, "mine"
        >>> subclass_attributes(obj, Base)
        {'tag': 'mine'}
    """
    found: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        if cls is base:
            break
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found[name] = getattr(obj, name)
    found.update(getattr(obj, "__dict__", {}))
    return found

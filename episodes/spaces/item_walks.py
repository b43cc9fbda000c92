"""Walks over nested items that dm-tree cannot be handed: loops, and mappings that are no dict.

Items nest dicts, tuples and lists. dm-tree walks any ``Mapping`` too, through its ``len`` and
iteration, which a TensorDict gives other meanings (its length is its batch size; iterating one
of batch size ``[]`` raises): two such items crash the process inside dm-tree (a segfault)
rather than raise. :func:`other_mapping` finds one before dm-tree is called.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["holds_itself", "mapping_words", "other_mapping"]

# Classes whose instances are walked (a Mapping that is no dict is what other_mapping finds).
_NESTS = (Mapping, tuple, list)


def holds_itself(items: Any) -> bool:
    """Whether a dict, list or tuple among ``items`` holds itself, at any depth.

    A walk without recursion that enters each container once and tracks those on the current
    path: only one met again inside itself is a loop (one held twice side by side is none).

    Example:
        >>> loop: list = [1.0]
        >>> loop.append({"a": loop})
        >>> shared = [1.0]
        >>> holds_itself([[loop]]), holds_itself([[shared, shared], {"a": (shared,)}])
        (True, False)
    """
    path: set[int] = set()  # ids of the containers being walked (the current path)
    seen: set[int] = set()  # ids of the containers entered so far
    walks: list[Iterator[Any]] = [iter(items)]
    owners: list[int] = []  # the id of each walk's container but the first (``items``)
    while walks:
        for child in walks[-1]:
            if not isinstance(child, _NESTS):
                continue
            key = id(child)
            if key in path:
                return True
            if key not in seen:
                seen.add(key)
                path.add(key)
                owners.append(key)
                walks.append(iter(child.values() if isinstance(child, Mapping) else child))
                break
        else:
            walks.pop()
            if owners:
                path.discard(owners.pop())
    return False


def other_mapping(item: Any) -> Mapping[Any, Any] | None:
    """The first ``Mapping`` that is no dict in ``item`` (or ``item`` itself), else None.

    Dicts, tuples and lists are walked, each container once (one holding itself ends too), and
    never through a mapping's own ``len`` or iteration. The parts of a container whose classes
    nest nothing (a list of floats, a dict of arrays) are passed over by class, so a list of
    numbers costs no Python call per number.

    Example:
        >>> from types import MappingProxyType
        >>> other_mapping({"a": [1.0, 2.0], "b": ((0.5,), "text")}) is None
        True
        >>> type(other_mapping([{"a": 1}, {"b": MappingProxyType({"c": 2})}])).__name__
        'mappingproxy'
    """
    stack, seen = [item], set()
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            parts: Any = value.values()
        elif isinstance(value, (tuple, list)):
            parts = value
        elif isinstance(value, Mapping):
            return value
        else:
            continue
        if id(value) not in seen:
            seen.add(id(value))
            if any(issubclass(kind, _NESTS) for kind in set(map(type, parts))):
                stack.extend(parts)
    return None


def mapping_words(what: str, mapping: Any) -> str:
    """The words refusing ``mapping``, a ``Mapping`` that is no dict, held by ``what``.

    Example:
        >>> from collections import UserDict
        >>> print(mapping_words("the batch", UserDict()))  # doctest: +ELLIPSIS
        the batch holds a UserDict, a Mapping that is no dict: items nest dicts, ...
    """
    return (
        f"{what} holds a {type(mapping).__name__}, a Mapping that is no dict: items nest "
        "dicts, tuples and lists (as a Dict space's items are dicts); give dict(item)"
    )

"""A cache of values derived from a space object, dropped when the space is garbage-collected.

Gymnasium spaces are unhashable (they define ``__eq__``), so a ``WeakKeyDictionary`` cannot
hold them; this keys on ``id(space)`` and keeps a weak reference to tell a live space from a
new object that reuses a dead one's id. Values must not reference their space strongly, or
the space would never be collected.

Example:
    >>> import gymnasium as gym
    >>> cache = PerSpaceCache(lambda space: int(space.n) * 2)
    >>> space = gym.spaces.Discrete(3)
    >>> cache.get(space), len(cache)
    (6, 1)
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class PerSpaceCache(Generic[V]):
    """Memoises ``derive(space)`` per live space object.

    Example:
        >>> import gymnasium as gym
        >>> cache = PerSpaceCache(lambda space: space.shape)
        >>> space = gym.spaces.Box(0.0, 1.0, (2,))
        >>> cache.get(space), len(cache)
        ((2,), 1)
        >>> del space; len(cache)  # the entry goes with its space
        0
    """

    def __init__(self, derive: Callable[[Any], V]):
        self._derive = derive
        self._entries: dict[int, tuple[weakref.ref[Any], V]] = {}

    def get(self, space: Any) -> V:
        """The derived value for ``space``, computed on first use.

        Example:
            >>> import gymnasium as gym
            >>> def derive(space):
            ...     print("derived")
            ...     return int(space.n) * 2
            >>> cache, space = PerSpaceCache(derive), gym.spaces.Discrete(4)
            >>> cache.get(space), cache.get(space)
            derived
            (8, 8)
            >>> PerSpaceCache(len).get((1, 2))  # not weak-referenceable: computed, not kept
            2
        """
        key = id(space)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is space:
            return entry[1]
        value = self._derive(space)
        try:
            ref = weakref.ref(space, functools.partial(_forget, self._entries, key))
        except TypeError:  # not weak-referenceable: do not cache
            return value
        self._entries[key] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


def _forget(entries: dict[int, Any], key: int, _ref: object) -> None:
    entries.pop(key, None)

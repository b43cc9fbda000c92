"""The buffer's Python protocols beside its reads: ``+``, iteration and numpy's ``__array__``.

:class:`~episodes.buffer.InfiniteLookbackBuffer` takes them from :class:`BufferOperators`, a
mixin over its ``store``, ``lookback`` and ``_space`` slots and its ``get``.

Example:
    >>> from episodes.buffer import InfiniteLookbackBuffer
    >>> buf = InfiniteLookbackBuffer([1, 2, 3], lookback=1)
    >>> (buf + 10).get(), list(buf), np.asarray(buf).tolist()
    ([12, 13], [2, 3], [2, 3])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from episodes.buffer import array_protocol
from episodes.buffer.store import Store
from episodes.buffer.stores import owned_items

if TYPE_CHECKING:
    from episodes.buffer.lookback_buffer import InfiniteLookbackBuffer

__all__ = ["BufferOperators"]

# What ``buf + number`` adds (and adds to): Python and numpy numbers.
_NUMBERS = (int, float, complex, np.number)


class BufferOperators:
    """``+`` (list mode), ``iter()`` and ``np.asarray()`` of a buffer's visible items.

    Example:
        >>> from episodes.buffer import InfiniteLookbackBuffer
        >>> (InfiniteLookbackBuffer([1]) + [2]).get()
        [1, 2]
    """

    __slots__ = ()

    # Provided by the buffer class.
    store: Store
    lookback: int
    _space: gym.Space[Any] | None
    get: Callable[..., Any]
    if TYPE_CHECKING:

        @property
        def finalized(self) -> bool:
            """The buffer's own: True once its store is numpy's."""

    def __add__(self, other: Any) -> InfiniteLookbackBuffer:
        """List-mode convenience: add a number to every item, or append a list/buffer's items."""
        from episodes.buffer.lookback_buffer import InfiniteLookbackBuffer

        if self.finalized:
            raise RuntimeError("cannot use `+` on a finalized InfiniteLookbackBuffer")
        items = self.store.items(0)
        if isinstance(other, _NUMBERS) and not isinstance(other, (bool, np.bool_)):
            # numpy numbers too: a Discrete space's samples are np.int64, and "every item" is
            # what the contract says (RLlib skips them).
            data = [d + other if isinstance(d, _NUMBERS) else d for d in items]
        elif isinstance(other, BufferOperators):
            # The mixin, not the buffer class imported above: a second import of the buffer's
            # module (pytest's importlib mode runs its doctests so) makes a second class.
            data = items + owned_items(other.store, other.lookback)
        elif isinstance(other, list):
            data = items + other
        else:
            raise TypeError(f"cannot add {type(other).__name__} to an InfiniteLookbackBuffer")
        return InfiniteLookbackBuffer(data, lookback=self.lookback, space=self._space)

    def __iter__(self) -> Iterator[Any]:
        store = self.store
        for position in range(self.lookback, len(store)):
            yield store.get(position)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The visible items: ``np.array(buf)`` copies, ``np.asarray(buf)`` may view (§7.4)."""
        data = self.get()
        if self.store.is_numpy and not isinstance(data, np.ndarray):
            # A struct of leaves (Dict or Tuple items): the items, as list mode's array holds
            # them, not numpy's reading of the struct (a Tuple's leaves as rows, a dict 0-d).
            data = list(self)
        return array_protocol.as_array(data, dtype, copy)

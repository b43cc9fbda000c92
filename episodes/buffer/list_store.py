"""The list store: items kept as they were given, in a Python list.

This is where an episode records while sampling: hot paths append straight to its list
(``pylist``), so a step costs what a list append costs. Its batches are plain lists of items,
and ``data`` is the list itself.

Example:
    >>> store = ListStore([1, 2]); store.append(3)
    >>> store.window(1, 3), store.stacked(None).data
    ([2, 3], array([1, 2, 3]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.array_store import ArrayStore
from episodes.spaces import batch, filler_item, one_hot, unbatch
from episodes.structs import is_nested


class ListStore:
    """A list of items with the store operations every buffer calls.

    Args:
        data: The list to hold (taken over, not copied).
    """

    __slots__ = ("data", "pylist")

    #: Stores of this class hold Python items (the buffer is not "finalized").
    is_numpy = False

    def __init__(self, data: list[Any] | None = None):
        self.data: list[Any] = [] if data is None else data
        #: The same list, under the name every store has (None for array stores): hot paths
        #: append straight to it.
        self.pylist: list[Any] | None = self.data

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"ListStore({self.data!r})"

    # ------------------------------------------------------------------------- reading
    def get(self, position: int) -> Any:
        """The item at storage ``position``."""
        return self.data[position]

    def window(self, start: int, stop: int) -> list[Any]:
        """Items ``start:stop`` as a new list."""
        return self.data[start:stop]

    def gather(self, positions: np.ndarray) -> list[Any]:
        """Items at in-range storage ``positions`` (an int array), as a list."""
        data = self.data
        return [data[p] for p in positions.tolist()]

    def items(self, start: int, stop: int | None = None) -> list[Any]:
        """Items ``start:stop`` as a new list."""
        return self.data[start:stop]

    def copy_data(self) -> list[Any]:
        """A shallow copy of the items, as a plain list."""
        return list(self.data)

    # ------------------------------------------------------------------------- writing
    def append(self, item: Any) -> None:
        """Appends one item."""
        self.data.append(item)

    def extend(self, items: Any) -> None:
        """Appends every item of an iterable."""
        self.data.extend(items)

    def extend_batch(self, batch_: Any, count: int | None = None) -> None:
        """Appends the items of a batched struct (leaves with a leading time axis)."""
        self.extend(unbatch(batch_))

    def extend_from(self, other: Any, start: int) -> None:
        """Appends the items of store ``other`` from position ``start`` on."""
        self.extend(other.items(start))

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Writes ``items[k]`` at storage position ``positions[k]``."""
        data = self.data
        for position, item in zip(positions, items):
            data[position] = item

    def truncate(self, size: int) -> None:
        """Drops every item from position ``size`` on."""
        del self.data[size:]

    def pop(self, position: int) -> Any:
        """Removes and returns the item at ``position``."""
        return self.data.pop(position)

    def copy_range(self, start: int, stop: int) -> ListStore:
        """A new store holding items ``start:stop``."""
        # Without __init__: cuts and slices make one per list column.
        store = ListStore.__new__(ListStore)
        store.data = store.pylist = self.data[start:stop]
        return store

    def stacked(self, space: gym.Space[Any] | None) -> ArrayStore:
        """The numpy store holding the same items (what ``to_numpy`` switches to).

        Raises:
            ValueError: The items cannot be stacked (differing structures or shapes).
        """
        if self.data:
            return ArrayStore.from_batch(batch(self.data))
        if space is not None:
            # Shaped for reads, but the first appended item still decides the dtypes, so an
            # episode numpy'd before its first step stores what it would have stored after.
            return ArrayStore.from_batch(batch([], space=space))
        return ArrayStore.untyped()

    # ----------------------------------------------------------------- batch operations
    @staticmethod
    def encode_one_hot(window: list[Any], space: gym.Space[Any] | None) -> list[Any]:
        """One-hot encodes every item of a window."""
        if not window:
            return window
        # Flat discrete items: encode the whole window in one numpy call, then split into rows.
        if not is_nested(window[0]) and isinstance(space, gym.spaces.Discrete):
            return list(one_hot(np.asarray(window), space))
        return [one_hot(item, space) for item in window]

    @staticmethod
    def fillers(
        space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool
    ) -> list[Any]:
        """``count`` references to one filler item."""
        return [filler_item(space, fill, one_hot_discrete=one_hot_discrete)] * count

    @staticmethod
    def join(parts: list[list[Any]]) -> list[Any]:
        """Concatenates windows."""
        joined: list[Any] = []
        for part in parts:
            joined += part
        return joined

    @staticmethod
    def stride(window: list[Any], step: int) -> list[Any]:
        """Every ``step``-th item of a window."""
        return window[::step]

    @staticmethod
    def from_rows(rows: np.ndarray) -> list[Any]:
        """A window from an array of rows: one item per row."""
        return list(rows)

    @staticmethod
    def from_items(items: list[Any]) -> list[Any]:
        """A window from a list of items (the list itself)."""
        return items

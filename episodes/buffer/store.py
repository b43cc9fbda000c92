"""The storage protocol behind every :class:`InfiniteLookbackBuffer`.

A store holds a buffer's items by *storage position* (``0 .. len - 1``, lookback included) and
knows nothing of lookback, negative indices or fill: the buffer resolves those with
:mod:`episodes.indexing` and then calls the few operations below. Three stores implement it:

- :class:`~episodes.buffer.list_store.ListStore`: a Python list of items (list mode);
- :class:`~episodes.buffer.array_store.ArrayStore`: one growable numpy array per leaf of the
  item structure (numpy mode, after ``to_numpy``/``finalize``);
- :class:`~episodes.buffer.view_store.ViewStore`: an ``ArrayStore`` over views into the env
  runner's recording blocks, copied before any change (copy on write).

Each store has a *batch* type, what windows, gathers and fillers come back as: a list of items
for the list store, a struct of arrays with a leading time axis for the numpy store. The batch
operations (``encode_one_hot``, ``fillers``, ``join``, ``stride``, ``from_rows``,
``from_items``) let the buffer assemble a read without knowing which store it has.

Example:
    >>> from episodes.buffer.list_store import ListStore
    >>> store: Store = ListStore([1, 2, 3])
    >>> store.join([store.fillers(None, 0, 2, False), store.window(1, 3)])
    [0, 0, 2, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np


class Store(Protocol):
    """What a buffer needs from the storage of its items (positions are storage positions)."""

    #: True for stores of numpy arrays (the buffer reports itself "finalized").
    is_numpy: bool
    #: The Python list holding the items for a list store, None otherwise (a cheap test for
    #: hot paths that append straight to the list).
    pylist: list[Any] | None

    def __len__(self) -> int: ...

    @property
    def data(self) -> Any:
        """Every stored item: the list itself, or a struct of array views."""

    def get(self, position: int) -> Any:
        """The item at ``position``."""

    def window(self, start: int, stop: int) -> Any:
        """Items ``start:stop`` as a batch."""

    def gather(self, positions: np.ndarray) -> Any:
        """Items at the in-range ``positions`` as a batch."""

    def items(self, start: int, stop: int | None = None) -> list[Any]:
        """Items ``start:stop`` as a list of separate items."""

    def copy_data(self) -> Any:
        """An independent copy of every item (a list, or a struct of arrays)."""

    def append(self, item: Any) -> None:
        """Appends one item (amortised O(1))."""

    def extend(self, items: list[Any]) -> None:
        """Appends a list of items."""

    def extend_batch(self, batch: Any, count: int | None = None) -> None:
        """Appends a batched struct (leaves with a leading time axis)."""

    def extend_from(self, other: Any, start: int) -> None:
        """Appends another store's items from ``start`` on."""

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Overwrites items in place, all or nothing."""

    def pop(self, position: int) -> Any:
        """Removes and returns the item at ``position``."""

    def truncate(self, size: int) -> None:
        """Keeps the first ``size`` items."""

    def copy_range(self, start: int, stop: int) -> Store:
        """A new, independent store of the same kind holding items ``start:stop``."""

    @staticmethod
    def encode_one_hot(window: Any, space: gym.Space[Any] | None) -> Any:
        """One-hot encodes a batch."""

    @staticmethod
    def fillers(space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool) -> Any:
        """``count`` filler items as a batch."""

    @staticmethod
    def join(parts: list[Any]) -> Any:
        """Concatenates batches along time."""

    @staticmethod
    def stride(window: Any, step: int) -> Any:
        """Every ``step``-th item of a batch."""

    @staticmethod
    def from_rows(rows: np.ndarray) -> Any:
        """A batch from an array of rows."""

    @staticmethod
    def from_items(items: list[Any]) -> Any:
        """A batch from a list of items."""

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
    """What a buffer needs from the storage of its items (positions are storage positions).

    A static protocol (not ``runtime_checkable``): the concrete stores satisfy it by their
    methods alone, and a buffer calls them without knowing which one it holds.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> from episodes.buffer.list_store import ListStore
        >>> stores: list[Store] = [ListStore([1, 2, 3]), ArrayStore.from_batch(np.arange(1, 4))]
        >>> [(len(s), s.is_numpy, int(s.get(2)), list(map(int, s.window(0, 2)))) for s in stores]
        [(3, False, 3, [1, 2]), (3, True, 3, [1, 2])]
    """

    #: True for stores of numpy arrays (the buffer reports itself "finalized").
    is_numpy: bool
    #: The Python list holding the items for a list store, None otherwise (a cheap test for
    #: hot paths that append straight to the list).
    pylist: list[Any] | None

    def __len__(self) -> int: ...

    @property
    def data(self) -> Any:
        """Every stored item: the list itself, or a struct of array views.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> items = [1, 2]
            >>> ListStore(items).data is items
            True
        """

    def get(self, position: int) -> Any:
        """The item at ``position``.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> ListStore(["a", "b"]).get(1)
            'b'
        """

    def window(self, start: int, stop: int) -> Any:
        """Items ``start:stop`` as a batch.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> from episodes.buffer.list_store import ListStore
            >>> ListStore([1, 2, 3]).window(1, 3)
            [2, 3]
            >>> ArrayStore.from_batch(np.arange(1, 4)).window(1, 3)
            array([2, 3])
        """

    def gather(self, positions: np.ndarray) -> Any:
        """Items at the in-range ``positions`` as a batch.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> ListStore(["a", "b", "c"]).gather(np.array([2, 0, 2]))
            ['c', 'a', 'c']
        """

    def items(self, start: int, stop: int | None = None) -> list[Any]:
        """Items ``start:stop`` as a list of separate items.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> [item.tolist() for item in ArrayStore.from_batch(np.eye(3, dtype=int)).items(1)]
            [[0, 1, 0], [0, 0, 1]]
        """

    def copy_data(self) -> Any:
        """An independent copy of every item (a list, or a struct of arrays).

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore([1, 2]); copy = store.copy_data(); copy.append(3)
            >>> copy, store.data
            ([1, 2, 3], [1, 2])
        """

    def append(self, item: Any) -> None:
        """Appends one item (amortised O(1)).

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> store = ArrayStore.from_batch(np.zeros(2)); store.append(1.0)
            >>> store.data.tolist()
            [0.0, 0.0, 1.0]
        """

    def extend(self, items: list[Any]) -> None:
        """Appends a list of items.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore([1]); store.extend([2, 3])
            >>> store.data
            [1, 2, 3]
        """

    def extend_batch(self, batch: Any, count: int | None = None) -> None:
        """Appends a batched struct (leaves with a leading time axis).

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore(); store.extend_batch({"x": np.array([4, 5])})
            >>> [int(item["x"]) for item in store.data]
            [4, 5]
        """

    def extend_from(self, other: Any, start: int) -> None:
        """Appends another store's items from ``start`` on.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ArrayStore.from_batch(np.arange(2))
            >>> store.extend_from(ListStore([5, 6, 7]), 1); store.data.tolist()
            [0, 1, 6, 7]
        """

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Overwrites items in place, all or nothing.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore([1, 2, 3]); store.set([0, 2], [7, 9])
            >>> store.data
            [7, 2, 9]
        """

    def pop(self, position: int) -> Any:
        """Removes and returns the item at ``position``.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore([1, 2, 3])
            >>> store.pop(1), store.data
            (2, [1, 3])
        """

    def truncate(self, size: int) -> None:
        """Keeps the first ``size`` items.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> store = ArrayStore.from_batch(np.arange(4)); store.truncate(2)
            >>> len(store), store.data.tolist()
            (2, [0, 1])
        """

    def copy_range(self, start: int, stop: int) -> Store:
        """A new, independent store of the same kind holding items ``start:stop``.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ListStore([1, 2, 3]); part = store.copy_range(1, 3); part.append(4)
            >>> part, store
            (ListStore([2, 3, 4]), ListStore([1, 2, 3]))
        """

    @staticmethod
    def encode_one_hot(window: Any, space: gym.Space[Any] | None) -> Any:
        """One-hot encodes a batch.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> ArrayStore.encode_one_hot(np.array([2, 0]), gym.spaces.Discrete(3)).tolist()
            [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """

    @staticmethod
    def fillers(space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool) -> Any:
        """``count`` filler items as a batch.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> from episodes.buffer.list_store import ListStore
            >>> ListStore.fillers(None, -1, 2, False), ArrayStore.fillers(None, -1, 2, False)
            ([-1, -1], array([-1, -1]))
        """

    @staticmethod
    def join(parts: list[Any]) -> Any:
        """Concatenates batches along time.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> ListStore.join([[0, 0], [1, 2]])
            [0, 0, 1, 2]
        """

    @staticmethod
    def stride(window: Any, step: int) -> Any:
        """Every ``step``-th item of a batch.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> ArrayStore.stride({"x": np.arange(5)}, 2)["x"].tolist()
            [0, 2, 4]
        """

    @staticmethod
    def from_rows(rows: np.ndarray) -> Any:
        """A batch from an array of rows.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> [row.tolist() for row in ListStore.from_rows(np.eye(2, dtype=int))]
            [[1, 0], [0, 1]]
        """

    @staticmethod
    def from_items(items: list[Any]) -> Any:
        """A batch from a list of items.

        Example:
            >>> from episodes.buffer.array_store import ArrayStore
            >>> ArrayStore.from_items([{"x": 1}, {"x": 2}])["x"].tolist()
            [1, 2]
        """

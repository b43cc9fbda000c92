"""The view store: an :class:`ArrayStore` whose leaves are views into someone else's block.

The env runner records a whole ``sample()`` call into time-major blocks ``[rows, num_envs, ...]``
and hands out chunks whose columns are views ``block[first:stop, env]`` of those blocks, so a
chunk costs no copy until it is touched. The write rule that keeps chunks independent:

- every change (``set``, append, extend, concat, pop, truncate) first copies the leaves into
  arrays of the store's own (``detached`` then reads True): a store never writes into the
  block, whose rows other chunks (their lookback) and the recorder share;
- a refused change (a value the column cannot hold, an index out of range) leaves the store as
  it was, a view of the block still, and so does popping the one item whose append copied the
  leaves (a refused ``add_env_step`` takes back the steps other columns took): a chunk reads
  as unchanged (``SampledChunks.unchanged``) whenever it holds what the blocks hold.

Example:
    >>> block = np.arange(12.0).reshape(4, 3)  # 4 rows, 3 envs
    >>> store = ViewStore.from_batch(block[1:3, 0])
    >>> store.set([0], [40.0]); store.detached, float(block[1, 0])
    (True, 3.0)
    >>> store.items(0)
    [np.float64(40.0), np.float64(6.0)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from episodes.buffer.array_copies import shallow_copy
from episodes.buffer.array_store import ArrayStore


class ViewStore(ArrayStore):
    """An :class:`ArrayStore` over borrowed leaves that copies them before any change.

    Example:
        >>> block = np.zeros((3, 2))  # 3 rows, 2 envs
        >>> store = ViewStore.from_batch(block[:, 1]); block[0, 1] = 7.0  # reads see the block
        >>> store.set([1], [9.0]); store.data.tolist(), block[:, 1].tolist()
        ([7.0, 9.0, 0.0], [7.0, 0.0, 0.0])
    """

    __slots__ = ("detached", "written", "_origin")

    detached: bool
    written: bool
    _origin: tuple[list[np.ndarray], int] | None

    def __init__(self, leaves: list[np.ndarray], structure: Any, size: int, typed: bool = True):
        super().__init__(leaves, structure, size, typed)
        #: True once the leaves were copied (a set, append, pop, truncate, ...): the store no
        #: longer views the block.
        self.detached = False
        #: True once ``set`` wrote into the (copied) leaves.
        self.written = False
        # The views and length before the append that copied the leaves, while that item is
        # the only change: popping it views the block again. Kept for that one item only, so
        # a chunk grown further does not hold on to the block.
        self._origin = None

    @classmethod
    def from_batch(cls, batch: Any, *, typed: bool | None = None) -> ViewStore:
        """Wraps a batched struct of views (leaves share their leading length) without copying.

        Example:
            >>> block = np.arange(6).reshape(3, 2)
            >>> store = ViewStore.from_batch({"obs": block[:, 0]})
            >>> np.shares_memory(store.data["obs"], block), store.detached
            (True, False)
        """
        store = ArrayStore.from_batch(batch, typed=typed)
        return cls(store._leaves, store.structure, store.size, store.typed)

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        _, slots = super().__getstate__()
        slots.pop("_origin", None)  # views of the block: a copy owns its arrays
        return None, slots

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        super().__setstate__(state)
        # A copy (deepcopy, pickle) owns its arrays.
        self.detached = True
        self._origin = None

    def __copy__(self) -> ViewStore:
        # A shallow copy shares the leaves, block views included, copy on write: each of the
        # two copies them before a change (episodes.buffer.array_copies), and neither writes
        # where the other reads (pickle and deepcopy give stores owning their arrays).
        clone = shallow_copy(self)
        clone.detached, clone.written, clone._origin = self.detached, self.written, None
        return clone

    def _write(self, change: Callable[..., None], *args: Any) -> None:
        # Runs ``change`` on private copies of the leaves. Refused (it raised, having changed
        # nothing the store shows), it leaves the views in place: a refused call is no change.
        if self.detached:
            change(*args)
            return
        views, shared = self._leaves, self._shared
        self._leaves = [np.array(leaf) for leaf in views]
        self.detached, self._shared = True, False  # the copies are this store's alone
        try:
            change(*args)
        except BaseException:
            self._leaves, self.detached, self._shared = views, False, shared
            raise

    def views_token(self) -> tuple[list[np.ndarray], int, bool] | None:
        """What :meth:`restore_views` needs to view the block again (None once detached).

        For a change made of several steps (a concat pops, then grows the columns): refused
        part-way, the caller undoes its steps, then restores the views.

        Example:
            >>> block = np.arange(4.0).reshape(2, 2); store = ViewStore.from_batch(block[:, 0])
            >>> token = store.views_token(); _ = store.pop(1); store.append(2.0); store.detached
            True
            >>> store.restore_views(token); store.detached, np.shares_memory(store.data, block)
            (False, True)
        """
        return None if self.detached else (self._leaves, self.size, self.written)

    def restore_views(self, token: tuple[list[np.ndarray], int, bool] | None) -> None:
        """Views the block again as when ``token`` was taken (the caller undid its changes).

        Only for a store whose items equal the views' again: the caller's undo restored them.
        """
        if token is None:
            return
        self._leaves, self.size, self.written = token
        self.detached = False
        self._origin = None
        self._pending = []
        self._set_kind()

    def _take_back(self, origin: tuple[list[np.ndarray], int] | None, removed: int) -> None:
        # After a pop or truncate: if it removed exactly the item of the append that copied
        # the leaves, the store holds what the views hold again, and views them.
        self._origin = None
        if origin is not None and removed == origin[1] == self.size:
            self._leaves, self.detached = origin[0], False
            self._pending = []
            self._set_kind()

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Writes into a private copy of the leaves (see the module docstring).

        Example:
            >>> block = np.zeros((2, 2)); store = ViewStore.from_batch(block[:, 0])
            >>> store.set([0], [1.0]); store.data.tolist(), block.tolist(), store.written
            ([1.0, 0.0], [[0.0, 0.0], [0.0, 0.0]], True)
        """
        self._write(super().set, positions, items)
        self._origin = None
        self.written = True

    def set_rows(self, positions: range | np.ndarray, rows: list[np.ndarray]) -> None:
        """Writes rows into a private copy of the leaves.

        Example:
            >>> block = np.zeros((2, 2)); store = ViewStore.from_batch(block[:, 0])
            >>> store.set_rows(range(0, 2), [np.ones(2)]); store.data.tolist(), block.tolist()
            ([1.0, 1.0], [[0.0, 0.0], [0.0, 0.0]])
        """
        self._write(super().set_rows, positions, rows)
        self._origin = None
        self.written = True

    def append(self, item: Any) -> None:
        """Appends one item into a private copy of the leaves.

        Example:
            >>> block = np.arange(4.0).reshape(2, 2); store = ViewStore.from_batch(block[:, 0])
            >>> store.append(9.0); store.data.tolist(), block[:, 0].tolist(), store.detached
            ([0.0, 2.0, 9.0], [0.0, 2.0], True)
            >>> store.pop(2).tolist(), store.detached  # that item taken back: a view again
            (9.0, False)
        """
        origin = None if self.detached else (self._leaves, self.size)
        self._write(super().append, item)
        self._origin = origin

    def extend_batch(self, batch: Any, count: int | None = None) -> None:
        """Appends a batch into a private copy of the leaves.

        Example:
            >>> block = np.arange(4.0).reshape(2, 2); store = ViewStore.from_batch(block[:, 1])
            >>> store.extend_batch(np.array([7.0, 8.0])); store.data.tolist(), block[:, 1].tolist()
            ([1.0, 3.0, 7.0, 8.0], [1.0, 3.0])
        """
        self._write(super().extend_batch, batch, count)
        self._origin = None

    def delete(self, position: int) -> None:
        """Removes an item from a private copy of the leaves.

        Example:
            >>> block = np.arange(6.0).reshape(3, 2); store = ViewStore.from_batch(block[:, 1])
            >>> store.delete(0); store.data.tolist(), block[:, 1].tolist()
            ([3.0, 5.0], [1.0, 3.0, 5.0])
        """
        origin = self._origin
        self._write(super().delete, position)
        self._take_back(origin, position)

    def truncate(self, size: int) -> None:
        """Shortens a private copy of the leaves.

        Example:
            >>> block = np.arange(6.0).reshape(3, 2); store = ViewStore.from_batch(block[:, 1])
            >>> store.truncate(1); store.append(-1.0)  # writes past the cut, into the copy
            >>> store.data.tolist(), block[:, 1].tolist()
            ([1.0, -1.0], [1.0, 3.0, 5.0])
        """
        origin = self._origin
        self._write(super().truncate, size)
        self._take_back(origin, size)

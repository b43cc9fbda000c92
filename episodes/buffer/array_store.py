"""The numpy store: one growable array per leaf of the item structure, time axis first.

Appending writes the next free row, doubling the capacity when full. Plain numbers (rewards,
scalar outputs) and rows of exactly the stored dtype and shape (never object rows: their bytes
are pointers) wait in a short list, written in one bulk assignment at the next read. Its
batches (windows, gathers, fillers) are structs of arrays with a leading time axis; windows are
views.

Example:
    >>> store = ArrayStore.from_batch(np.zeros((2, 3), np.float32))
    >>> store.append(np.ones(3, np.float32))
    >>> store.data.shape
    (3, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.buffer import array_batches, row_drops, store_bounds
from episodes.buffer.array_copies import field_copy, shallow_copy
from episodes.buffer.nesting_errors import nesting_mismatch
from episodes.buffer.plain_arrays import plain_leaves
from episodes.buffer.slots import slot_values
from episodes.buffer.value_fit import (
    MISFIT_ERRORS,
    Layout,
    adopted_layout,
    appended_row,
    batch_leaves,
    batch_misfit,
    first_batch,
    first_leaves,
    fit_of,
    staged_batch,
    staged_leaves,
    staged_rows,
    write_rows,
)
from episodes.structs import map_leaves, same_nesting, unflatten

_MIN_CAPACITY = 8
_NESTED = frozenset((dict, tuple, list))
# Numbers and rows wait in a pending list (see the module docstring) up to this many.
_MAX_PENDING = 4096
# Append paths by layout: a flat column of numbers, a flat column of rows, anything else, and a
# flat column of Python objects (no pending fast path: an object row's bytes are pointers).
_SCALARS, _ROWS, _NESTED_LAYOUT, _OBJECTS = 1, 2, 3, 4
_DERIVED = frozenset("_kind _row_dtype _row_shape _always_fit _ranged _low _high _shared".split())


class ArrayStore(array_batches.ArrayBatchOps):
    """Leaf arrays with spare capacity plus the item structure that joins them.

    Its batch operations (the reads are assembled from them) come from
    :class:`~episodes.buffer.array_batches.ArrayBatchOps`.

    Example:
        >>> store = ArrayStore.from_batch({"obs": np.zeros((2, 3)), "t": np.arange(2)})
        >>> store.append({"obs": np.ones(3), "t": 2})
        >>> len(store), store.data["obs"].shape, store.data["t"].tolist()
        (3, (3, 3), [0, 1, 2])
    """

    #: Stores of this class hold numpy arrays (the buffer is "finalized").
    is_numpy = True
    #: Only list stores hold a Python list of items.
    pylist: list[Any] | None = None

    __slots__ = (
        "_leaves",
        "structure",
        "size",
        "typed",
        "_pending",
        "_kind",
        "_row_dtype",
        "_row_shape",
        "_before_adoption",
        "_always_fit",
        "_ranged",
        "_low",
        "_high",
        "_shared",
    )

    _low: float
    _high: float

    def __init__(self, leaves: list[np.ndarray], structure: Any, size: int, typed: bool = True):
        self._leaves = leaves
        self.structure = structure
        #: Stored items, pending ones included.
        self.size = size
        # An untyped column holds no item yet: its first item decides the leaf shapes and
        # dtypes (an empty batch only shapes reads until then).
        self.typed = typed
        self._pending: list[Any] = []
        # The empty layout an untyped column had before its first item chose one.
        self._before_adoption: tuple[list[np.ndarray], Any] | None = None
        # True while a copy.copy shares the stored rows: copied before a write into them.
        self._shared = False
        self._set_kind()

    def _set_kind(self) -> None:
        # Which append path fits the layout; recomputed whenever the layout is decided.
        leaf = self._leaves[0]
        dtype = leaf.dtype
        if self.structure is not None or not self.typed:
            self._kind = _NESTED_LAYOUT
        elif dtype.hasobject:  # object leaves, structured dtypes with object fields too
            self._kind = _OBJECTS
        else:
            self._kind = _SCALARS if leaf.ndim == 1 else _ROWS
        # The row fast path compares dtypes by identity: prefer numpy's shared instance, which
        # arrays built with ``np.float32`` carry, over an equal copy (unpickled arrays have one).
        canonical = np.dtype(dtype.type)
        self._row_dtype = canonical if canonical == dtype else dtype
        self._row_shape = leaf.shape[1:]
        self._always_fit, self._ranged, self._low, self._high = fit_of(dtype)

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        leaves = self.leaves  # items only: a column cut from 1000 rows to 2 pickled all 1000
        slots = slot_values(self, _DERIVED)  # _set_kind's slots and _shared: set on loading
        return None, {**slots, "_leaves": [leaf[: self.size] for leaf in leaves]}

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        # copy.deepcopy and pickle restore the slots, then the layout facts are derived again:
        # a copied dtype is a new object, and the row fast path compares dtypes by identity.
        for name, value in state[1].items():
            setattr(self, name, value)
        self._shared = False  # the state's arrays are this copy's own
        self._set_kind()

    def __copy__(self) -> ArrayStore:
        # Copy on write, never sharing pending appends (see episodes.buffer.array_copies).
        return shallow_copy(self)

    @property
    def leaves(self) -> list[np.ndarray]:
        """The leaf arrays (with spare capacity), every pending number written in.

        Example:
            >>> store = ArrayStore.from_batch(np.zeros(2)); store.append(1.0)
            >>> [leaf.shape for leaf in store.leaves], store.leaves[0][:3].tolist()
            ([(8,)], [0.0, 0.0, 1.0])
        """
        if self._pending:
            self._flush()
        return self._leaves

    def _flush(self) -> None:
        pending = self._pending
        stop = self.size
        start = stop - len(pending)
        self._reserve(stop)
        leaf = self._leaves[0]
        if leaf.ndim == 1:
            # Same casting as one-by-one item assignment; only real numbers are ever pending.
            leaf[start:stop] = pending
        else:
            # Rows were taken as bytes of exactly the leaf's dtype and row shape.
            rows = np.frombuffer(b"".join(pending), dtype=leaf.dtype)
            leaf[start:stop] = rows.reshape(stop - start, *leaf.shape[1:])
        # Emptied only once written: a write that raised keeps its rows pending (and counted).
        self._pending = []

    @classmethod
    def from_batch(cls, batch: Any, *, typed: bool | None = None) -> ArrayStore:
        """Wraps a batched struct (leaves share their leading length) without copying.

        Example:
            >>> batch = {"x": np.arange(3)}; store = ArrayStore.from_batch(batch)
            >>> len(store), np.shares_memory(store.data["x"], batch["x"])
            (3, True)
        """
        arrays, structure = plain_leaves(batch)  # masked arrays refused
        sizes = {len(a) if a.ndim else -1 for a in arrays}
        if not arrays:  # nothing would carry the column's length; list mode holds such items
            raise ValueError("items with no array leaf (an empty Dict or Tuple) have no numpy mode")
        if len(sizes) != 1 or -1 in sizes:
            raise ValueError(
                "a batched struct needs every leaf to be an array with the same leading length, "
                f"got leading lengths {sorted(sizes)}"
            )
        size = sizes.pop()
        # An empty batch decides no dtypes, unless told (a state of a column that had them).
        return cls(arrays, structure, size, typed=size > 0 or bool(typed))

    @classmethod
    def untyped(cls) -> ArrayStore:
        """An empty column whose layout is set by the first appended item.

        Example:
            >>> store = ArrayStore.untyped(); store.append((1, 2.5))
            >>> store.typed, [leaf.tolist() for leaf in store.leaf_views()]
            (True, [[1], [2.5]])
        """
        return cls([np.zeros((0,), np.float64)], None, 0, typed=False)

    def __len__(self) -> int:
        return self.size

    @property
    def data(self) -> Any:
        """The stored items as a struct of array views (no copy).

        Example:
            >>> store = ArrayStore.from_batch(np.arange(3)); store.data[0] = 9
            >>> store.window(0, 3).tolist()
            [9, 1, 2]
        """
        return self.window(0, self.size)

    def leaf_views(self) -> list[np.ndarray]:
        """Views of every leaf, trimmed to the stored length.

        Example:
            >>> store = ArrayStore.from_batch({"a": np.arange(2), "b": np.ones(2)})
            >>> store.append({"a": 2, "b": 0.0}); [leaf.tolist() for leaf in store.leaf_views()]
            [[0, 1, 2], [1.0, 1.0, 0.0]]
        """
        size = self.size
        return [leaf[:size] for leaf in self.leaves]

    # ------------------------------------------------------------------------- reading
    def get(self, position: int) -> Any:
        """The item at storage ``position`` (0 <= position < len), leaves as array scalars/views.

        Example:
            >>> store = ArrayStore.from_batch({"x": np.arange(3), "y": np.eye(3)})
            >>> item = store.get(2); int(item["x"]), item["y"].tolist()
            (2, [0.0, 0.0, 1.0])
        """
        leaves = self.leaves
        if self.structure is None:
            return leaves[0][position]
        return unflatten(self.structure, [leaf[position] for leaf in leaves])

    def window(self, start: int, stop: int) -> Any:
        """Items ``start:stop`` (0 <= start <= stop <= len) as a struct of views.

        Example:
            >>> store = ArrayStore.from_batch(np.arange(5)); window = store.window(1, 4)
            >>> window.tolist(), np.shares_memory(window, store.data)
            ([1, 2, 3], True)
        """
        leaves = self.leaves
        if self.structure is None:
            return leaves[0][start:stop]
        return unflatten(self.structure, [leaf[start:stop] for leaf in leaves])

    def gather(self, positions: np.ndarray) -> Any:
        """Items at in-range storage ``positions`` (an int array) as a struct of new arrays.

        Example:
            >>> store = ArrayStore.from_batch(np.arange(10, 15))
            >>> store.gather(np.array([4, 0, 4])).tolist()
            [14, 10, 14]
        """
        return unflatten(self.structure, [leaf[positions] for leaf in self.leaf_views()])

    def items(self, start: int, stop: int | None = None) -> list[Any]:
        """Items ``start:stop`` as a list of separate items (one struct of views each).

        Example:
            >>> store = ArrayStore.from_batch({"x": np.arange(3)})
            >>> [int(item["x"]) for item in store.items(1)]
            [1, 2]
        """
        stop = self.size if stop is None else stop
        leaves = [leaf[start:stop] for leaf in self.leaves]
        if self.structure is None:
            return list(leaves[0])
        structure = self.structure
        return [unflatten(structure, [leaf[i] for leaf in leaves]) for i in range(stop - start)]

    def copy_data(self) -> Any:
        """An independent, trimmed copy of every item, as a struct of arrays.

        Example:
            >>> store = ArrayStore.from_batch(np.zeros(2)); store.append(1.0)
            >>> copy = store.copy_data(); copy[0] = 5.0
            >>> copy.tolist(), store.data.tolist()
            ([5.0, 0.0, 1.0], [0.0, 0.0, 1.0])
        """
        return self.copy().data

    # ------------------------------------------------------------------------- writing
    def copy_range(self, start: int, stop: int) -> ArrayStore:
        """An independent copy of stored items ``start:stop`` (0 <= start <= stop <= size).

        Example:
            >>> store = ArrayStore.from_batch(np.arange(5))
            >>> part = store.copy_range(1, 3); part.set([0], [9])
            >>> part.data.tolist(), store.data.tolist()
            ([9, 2], [0, 1, 2, 3, 4])
        """
        leaves = self.leaves if self._pending else self._leaves
        if len(leaves) == 1:
            copied = [leaves[0][start:stop].copy()]
        else:
            copied = [leaf[start:stop].copy() for leaf in leaves]
        return field_copy(self, ArrayStore, copied, stop - start)

    def copy(self) -> ArrayStore:
        """A trimmed, independent copy.

        Example:
            >>> store = ArrayStore.from_batch(np.zeros(2)); store.append(1.0)
            >>> copy = store.copy(); copy.truncate(1)
            >>> len(copy), len(store), copy.leaves[0].shape, store.leaves[0].shape
            (1, 3, (3,), (8,))
        """
        leaves = [v.copy() for v in self.leaf_views()]
        return ArrayStore(leaves, self.structure, self.size, self.typed)

    def _reserve(self, needed: int) -> None:
        if needed > (capacity := len(self._leaves[0])):  # at least doubled: amortised O(1)
            new = max(needed, 2 * capacity, _MIN_CAPACITY)
            self._leaves = array_batches.grown(self._leaves, self.size - len(self._pending), new)

    def _adopt_layout(self, layout: Layout, structure: Any) -> None:
        before = self._before_adoption = (self._leaves, self.structure)
        layout = adopted_layout(*before, layout, structure)
        self._leaves = [np.empty((_MIN_CAPACITY, *shape), dtype) for shape, dtype in layout]
        self.structure = structure
        self.typed = True
        self._set_kind()

    def append(self, item: Any) -> None:
        """Appends one item in amortised O(1).

        Example:
            >>> store = ArrayStore.from_batch(np.zeros((1, 2), np.float32))
            >>> store.append(np.ones(2, np.float32)); store.append(np.full(2, 2))
            >>> store.data.tolist()
            [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
        """
        kind = self._kind
        if kind == _SCALARS and (
            item.__class__ in self._always_fit
            or (item.__class__ in self._ranged and self._low <= item <= self._high)  # type: ignore[operator]
        ):
            pending = self._pending
            pending.append(item)
            self.size += 1
            if len(pending) >= _MAX_PENDING:
                self._flush()
            return
        if (
            kind == _ROWS
            and item.__class__ is np.ndarray
            and item.dtype is self._row_dtype
            and item.shape == self._row_shape
        ):
            # A row of exactly the stored dtype and shape: keep a copy of its bytes; the next
            # read writes all pending rows in one go.
            pending = self._pending
            pending.append(item.tobytes())
            self.size += 1
            if len(pending) >= _MAX_PENDING:
                self._flush()
            return
        if kind != _NESTED_LAYOUT:  # a flat column: a list or tuple item is a row too
            self._append_flat(item)
        else:
            self._append_nested(item)

    def _append_flat(self, item: Any) -> None:
        # One leaf, a value numpy must judge (cast, broadcast or refuse) as it is written.
        if self._pending:
            self._flush()
        leaf = self._leaves[0]
        size = self.size
        if size == leaf.shape[0]:
            self._reserve(size + 1)
            leaf = self._leaves[0]
        leaf[size] = appended_row(leaf, item)
        self.size = size + 1

    def _append_nested(self, item: Any) -> None:
        if self.typed:
            # Values at the column's leaves: a list there is a row (a Box part given as a list).
            rows = staged_rows(self.leaves, item, self.structure)
        else:
            leaves, structure = first_leaves(self.structure, self._leaves[0].ndim, item)
            if not leaves:
                raise ValueError(
                    f"{item!r} holds no values (an empty dict, list or tuple): a numpy column "
                    "cannot store it"
                )
            arrays = [np.asarray(leaf) for leaf in leaves]
            self._adopt_layout([(a.shape, a.dtype) for a in arrays], structure)
            try:
                rows = [appended_row(column, leaf) for column, leaf in zip(self.leaves, leaves)]
                self._reserve(self.size + 1)
            except BaseException:  # an interrupt or MemoryError too: the layout was this item's
                self._forget_adopted_layout()
                raise
        self._reserve(self.size + 1)  # done above for a first item
        size = self.size
        for column, row in zip(self.leaves, rows):
            column[size] = row
        self.size = size + 1

    def extend_batch(self, batch: Any, count: int | None = None) -> None:
        """Appends a batched struct (leaves with a leading axis) in one copy per leaf.

        ``count``, when given, is how many items the batch must hold; a batch of items without
        values (empty dicts or lists) holds none and is refused.

        Example:
            >>> store = ArrayStore.from_batch({"x": np.arange(2)})
            >>> store.extend_batch({"x": np.array([7, 8, 9])}); store.data["x"].tolist()
            [0, 1, 7, 8, 9]
        """
        if batch.__class__ is np.ndarray and batch.dtype is self._row_dtype and count is None:
            n = len(batch) if batch.ndim and self._kind != _NESTED_LAYOUT else 0
            if n and batch.shape[1:] == self._row_shape:  # rows as stored: nothing to check
                return self._extend_rows(batch, n)
        arrays, structure = batch_leaves(batch)
        n = len(arrays[0]) if arrays else 0
        if count is not None and n != count:
            raise ValueError(
                f"{count} items hold no values a numpy column can store (empty dicts, lists "
                "or tuples)"
            )
        if n == 0:
            return
        if not self.typed:  # each leaf's dtype is the array's: a[0] of ["a", "abcd"] is <U1
            self._adopt_layout([(a.shape[1:], a.dtype) for a in arrays], structure)
        elif len(arrays) != len(self.leaves) or not same_nesting(self.structure, batch):
            raise nesting_mismatch(self.structure, self.leaves, structure, arrays)
        self._write_batch(arrays, n)

    def _write_batch(self, arrays: list[np.ndarray], n: int) -> None:  # leaves of n rows
        for column, leaf in zip(self.leaves, arrays):  # a leaf of the column's layout fits
            same = leaf.dtype == column.dtype and leaf.shape[1:] == column.shape[1:]
            if not (same and len(leaf) == n) and (error := batch_misfit(column, leaf, n)):
                self._forget_adopted_layout()
                raise error
        try:  # an interrupt or MemoryError too leaves the column as it was (its first layout)
            self._reserve(self.size + n)
            array_batches.write_leaves(self._leaves, slice(self.size, self.size + n), arrays)
        except BaseException:
            self._forget_adopted_layout()
            raise
        self.size += n

    def _extend_rows(self, rows: np.ndarray, n: int) -> None:  # a typed flat column's rows
        self._reserve(self.size + n)  # (a typed column has no emptied layout to forget)
        leaf, size = self.leaves[0], self.size  # pending items written in first
        try:
            leaf[size : size + n] = rows  # of the column's very dtype and row shape
        except MISFIT_ERRORS:  # a read-only leaf with room left: the checked write words it
            return self._write_batch([rows], n)
        self.size = size + n

    def extend(self, items: list[Any]) -> None:
        """Appends a list of items, stacked into one copy per leaf.

        Example:
            >>> store = ArrayStore.untyped(); store.extend([(1, 0.5), (2, 1.5)])
            >>> [leaf.tolist() for leaf in store.leaf_views()]
            [[1, 2], [0.5, 1.5]]
        """
        n = len(items)  # each item is read as append reads it (a list at a leaf is a row)
        if n and not self.typed:  # in the layout the space left, as the first appended item is
            first = first_batch(self.structure, self._leaves[0].ndim, items, self._leaves)
            self.extend_batch(first, count=n)
        elif n and type(self).extend_batch is ArrayStore.extend_batch:  # its other checks pass
            self._write_batch(staged_leaves(self.leaves, self.structure, items), n)
        elif n:  # a subclass's extend_batch (a view store's copies its leaves first)
            self.extend_batch(staged_batch(self.leaves, self.structure, items), count=n)

    def extend_from(self, other: Any, start: int) -> None:
        """Appends the items of store ``other`` from position ``start`` on.

        Example:
            >>> from episodes.buffer.list_store import ListStore
            >>> store = ArrayStore.from_batch(np.arange(2))
            >>> store.extend_from(ListStore([5, 6, 7]), 1); store.data.tolist()
            [0, 1, 6, 7]
        """
        if other.is_numpy:
            self.extend_batch(other.window(start, len(other)))
        else:
            self.extend(other.items(start))

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Writes ``items[k]`` at stored position ``positions[k]``, all or nothing.

        Every value is first cast into a scratch row (the same casting and broadcasting as the
        real assignment), so one that does not fit raises before anything changes.

        Example:
            >>> store = ArrayStore.from_batch(np.zeros(3, np.int64)); store.set([0, 2], [5, 7])
            >>> store.data
            array([5, 0, 7])
        """
        staged = [staged_rows(self.leaves, item, self.structure) for item in items]
        leaves = row_drops.writeable_leaves(self)  # copied first where shared or read-only
        for position, rows in zip(positions, staged):
            for leaf, row in zip(leaves, rows):
                leaf[position] = row

    def set_rows(self, positions: range | np.ndarray, rows: list[np.ndarray]) -> None:
        """Writes ``rows[j][k]`` at stored position ``positions[k]`` of leaf ``j``, unchecked.

        The caller checked the rows against the leaves (``batch_writes.write_batch`` does).

        Example:
            >>> store = ArrayStore.from_batch(np.zeros(4))
            >>> store.set_rows(range(1, 4, 2), [np.ones(2)]); store.data.tolist()
            [0.0, 1.0, 0.0, 1.0]
        """
        p = positions  # a range is written as the slice it is: no index array
        where = slice(p.start, p.stop, p.step) if isinstance(p, range) else p
        for leaf, values in zip(row_drops.writeable_leaves(self), rows):
            write_rows(leaf, where, values)

    def pop(self, position: int) -> Any:
        """Removes the item at storage ``position`` and returns it as new arrays.

        Example:
            >>> store = ArrayStore.from_batch(np.arange(4))
            >>> store.pop(1).tolist(), store.data.tolist()
            (1, [0, 2, 3])
        """
        item = self.get(store_bounds.checked_position(position, self.size))
        item = np.array(item) if self.structure is None else map_leaves(np.array, item)
        self.delete(position)
        return item

    def delete(self, position: int) -> None:
        """Removes the item at storage ``position`` (0 <= position < size).

        Example:
            >>> store = ArrayStore.from_batch(np.arange(4)); store.delete(0)
            >>> len(store), store.data.tolist()
            (3, [1, 2, 3])
        """
        self._leaves = row_drops.deleted(self.leaves, self.size, position)
        self.size -= 1
        self._forget_adopted_layout()

    def truncate(self, size: int) -> None:
        """Drops every stored item from position ``size`` on (0 <= size <= self.size).

        Arrays handed out before (earlier reads, a wrapped batch) keep what they show, as
        ``delete`` leaves them: see :mod:`~episodes.buffer.row_drops`.

        Example:
            >>> store = ArrayStore.from_batch(np.arange(4)); store.truncate(2)
            >>> len(store), store.data.tolist()
            (2, [0, 1])
        """
        if self._pending:
            self._flush()
        self._leaves = row_drops.truncated(self._leaves, self.size, size)
        self.size = int(size)
        self._forget_adopted_layout()

    def _forget_adopted_layout(self) -> None:
        # Emptied again after the first item chose the layout: the next first item chooses anew,
        # so taking back a step leaves the column exactly as it was.
        if self.size == 0 and self._before_adoption is not None:
            self._leaves, self.structure = self._before_adoption
            self._before_adoption = None
            self.typed = False
            self._set_kind()

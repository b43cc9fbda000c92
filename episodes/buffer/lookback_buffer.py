"""InfiniteLookbackBuffer: a time-indexed column with a lookback into the previous chunk."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes import indexing
from episodes.buffer.columns import Columns
from episodes.buffer.discrete_window import window_one_hot
from episodes.indexing import Index as Indices
from episodes.spaces import (
    batch,
    filler_batch,
    filler_item,
    one_hot,
    space_from_dict,
    space_to_dict,
)
from episodes.spaces.contains import checker_for
from episodes.structs import data_equal, flatten, is_nested, map_leaves, unflatten

_NOT_GIVEN = object()


class InfiniteLookbackBuffer:
    """A column of items indexed by time step, with ``lookback`` items before ``ts=0``.

    The buffer holds a Python list of items until :meth:`finalize` turns it into a nested
    structure of numpy arrays (time axis first). Both modes answer every read identically, and
    both accept appends (amortised O(1) in numpy mode).

    Args:
        data: Initial items (a list), or an already batched struct of arrays (finalized).
        lookback: How many of the first items belong to the previous chunk; clamped to the data.
        space: Optional gymnasium space of one item; needed for ``one_hot_discrete`` and used to
            shape filler items.

    Example:
        >>> buf = InfiniteLookbackBuffer([4, 5, 6, 7, 8, 9], lookback=3)
        >>> buf.get(), buf.get(-1, neg_index_as_lookback=True)
        ([7, 8, 9], 6)
        >>> buf.get(slice(-2, 1), neg_index_as_lookback=True)
        [5, 6, 7]
    """

    __slots__ = ("_items", "_columns", "lookback", "_space")

    def __init__(self, data: Any = None, lookback: int = 0, space: gym.Space[Any] | None = None):
        lookback = indexing.as_int(lookback, what="lookback")
        if lookback < 0:
            raise ValueError(f"lookback must be >= 0, got {lookback}")
        if space is not None and not isinstance(space, gym.Space):
            raise TypeError(f"space must be a gymnasium Space or None, got {type(space).__name__}")
        self._items: list[Any] | None
        self._columns: Columns | None
        if data is None:
            data = []
        if isinstance(data, list):
            self._items, self._columns = data, None
        elif isinstance(data, Columns):
            self._items, self._columns = None, data
        else:
            self._items, self._columns = None, Columns.from_batch(data)
        self._space = space
        self.lookback = min(lookback, self.len_incl_lookback())

    # ----------------------------------------------------------------------------- properties
    @property
    def finalized(self) -> bool:
        """True once the data is a numpy struct rather than a list."""
        return self._columns is not None

    @property
    def space(self) -> gym.Space[Any] | None:
        """The gymnasium space of one item, if known."""
        return self._space

    @space.setter
    def space(self, value: gym.Space[Any] | None) -> None:
        self._space = value

    @property
    def data(self) -> Any:
        """All stored items, lookback included: a list, or a struct of array views."""
        if self._columns is not None:
            return self._columns.view()
        return self._items

    def __len__(self) -> int:
        # Inlined rather than via len_incl_lookback(): episodes take lengths on every check.
        columns = self._columns
        if columns is not None:
            return columns.size - self.lookback
        return len(self._items) - self.lookback  # type: ignore[arg-type]

    def len_incl_lookback(self) -> int:
        """Number of stored items, lookback included."""
        if self._columns is not None:
            return self._columns.size
        assert self._items is not None
        return len(self._items)

    # -------------------------------------------------------------------------------- writing
    def append(self, item: Any) -> None:
        """Appends one item (amortised O(1) in both modes).

        Example:
            >>> buf = InfiniteLookbackBuffer([1]); buf.finalize(); buf.append(2); buf.get()
            array([1, 2])
        """
        if self._columns is None:
            assert self._items is not None
            self._items.append(item)
        else:
            self._columns.append(item)

    def extend(self, items: Any) -> None:
        """Appends several items: a list of items, or (finalized) a batched struct.

        Example:
            >>> buf = InfiniteLookbackBuffer([1]); buf.extend([2, 3]); buf.get()
            [1, 2, 3]
        """
        if self._columns is None:
            assert self._items is not None
            self._items.extend(items)
        elif isinstance(items, list):
            if items:
                self._columns.extend_batch(batch(items), count=len(items))
        else:
            self._columns.extend_batch(items)

    def concat(self, other: InfiniteLookbackBuffer) -> None:
        """Appends ``other``'s items after its lookback.

        Example:
            >>> a = InfiniteLookbackBuffer([1, 2]); a.concat(InfiniteLookbackBuffer([0, 3], 1))
            >>> a.get()
            [1, 2, 3]
        """
        if not isinstance(other, InfiniteLookbackBuffer):
            raise TypeError(f"can only concat another InfiniteLookbackBuffer, got {type(other)}")
        if len(other) == 0:
            return
        if self._columns is None:
            assert self._items is not None
            if other._columns is None:
                assert other._items is not None
                self._items.extend(other._items[other.lookback :])
            else:
                self._items.extend(_unbatch_range(other._columns, other.lookback))
        elif other._columns is None:
            items = other.get()
            self._columns.extend_batch(batch(items), count=len(items))
        else:
            leaves = [leaf[other.lookback :] for leaf in other._columns.leaf_views()]
            self._columns.extend_batch(unflatten(other._columns.structure, leaves))

    def truncate(self, length: int) -> None:
        """Keeps only the first ``length`` stored items (lookback included).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1); buf.truncate(2); buf.get()
            [2]
        """
        length = indexing.as_int(length, what="length")
        total = self.len_incl_lookback()
        if not 0 <= length <= total:
            raise IndexError(f"truncate length {length} out of range for {total} stored items")
        if self._columns is None:
            del self._items[length:]  # type: ignore[union-attr]
        else:
            self._columns.truncate(length)
        self.lookback = min(self.lookback, length)

    def pop(self, index: int = -1) -> Any:
        """Removes and returns the item at storage ``index`` (Python indexing, lookback included).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2, 3]); buf.pop(), buf.get()
            (3, [1, 2])
        """
        items = self._items
        if type(index) is int and index == -1 and items and len(items) > self.lookback:
            # The common case (concat drops the last observation): a plain list pop.
            return items.pop()
        index = indexing.as_int(index)
        total = self.len_incl_lookback()
        position = index + total if index < 0 else index
        if not indexing.in_range(position, total):
            raise IndexError(f"pop index {index} out of range for {total} stored items")
        item = self._stored(position)
        if self._columns is None:
            assert self._items is not None
            self._items.pop(position)
        else:
            if not is_nested(item):
                item = np.array(item)
            else:
                item = map_leaves(np.array, item)
            self._columns.delete(position)
        if position < self.lookback:
            self.lookback -= 1
        return item

    def __add__(self, other: Any) -> InfiniteLookbackBuffer:
        """List-mode convenience: add a number to every item, or append a list/buffer's items."""
        if self.finalized:
            raise RuntimeError("cannot use `+` on a finalized InfiniteLookbackBuffer")
        assert self._items is not None
        if isinstance(other, (int, float, complex)) and not isinstance(other, bool):
            data = [d + other if isinstance(d, (int, float, complex)) else d for d in self._items]
        elif isinstance(other, InfiniteLookbackBuffer):
            data = self._items + list(other._visible_items())
        elif isinstance(other, list):
            data = self._items + other
        else:
            raise TypeError(f"cannot add {type(other).__name__} to an InfiniteLookbackBuffer")
        return InfiniteLookbackBuffer(data, lookback=self.lookback, space=self._space)

    def finalize(self) -> None:
        """Turns the list of items into a struct of numpy arrays (idempotent).

        Example:
            >>> buf = InfiniteLookbackBuffer([0, 1]); buf.finalize(); buf.data
            array([0, 1])
        """
        if self._columns is not None:
            return
        self.adopt_columns(self.stacked())

    def stacked(self) -> Columns:
        """What :meth:`finalize` would store, built without changing this list-mode buffer.

        Raises:
            ValueError: The items cannot be stacked (differing structures or shapes).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2]); buf.stacked().view(), buf.finalized
            (array([1, 2]), False)
        """
        assert self._items is not None
        if self._items:
            return Columns.from_batch(batch(self._items))
        if self._space is not None:
            # Shaped for reads, but the first appended item still decides the dtypes, so an
            # episode numpy'd before its first step stores what it would have stored after.
            return Columns.from_batch(batch([], space=self._space))
        return Columns.untyped()

    def adopt_columns(self, columns: Columns) -> None:
        """Switches a list-mode buffer to ``columns`` (from :meth:`stacked`).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2]); buf.adopt_columns(buf.stacked())
            >>> buf.finalized, buf.get()
            (True, array([1, 2]))
        """
        self._columns = columns
        self._items = None

    # -------------------------------------------------------------------------------- reading
    def get(
        self,
        indices: Indices = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
        one_hot_discrete: bool = False,
    ) -> Any:
        """Reads items by time index.

        Args:
            indices: None (everything after the lookback), an int, a slice or a list of ints.
                Non-negative indices count from ``ts=0``; negative ones from the end, or with
                ``neg_index_as_lookback`` leftwards from ``ts=0`` into the lookback.
            neg_index_as_lookback: Read negative indices as lookback positions.
            fill: If not None, out-of-range positions yield filler items instead of raising
                (int, list) or being clipped (slice).
            one_hot_discrete: One-hot encode Discrete/MultiDiscrete leaves (needs a space).

        Returns:
            One item for an int; for a slice or list, a list of items (not finalized) or a
            batched struct of arrays (finalized).

        Raises:
            IndexError: An int index is out of range and ``fill`` is None.
            ValueError: ``one_hot_discrete`` without a space.

        Example:
            >>> buf = InfiniteLookbackBuffer([10, 11, 12, 13, 14], lookback=2)
            >>> buf.get(slice(-7, -2), fill=0)
            [0, 0, 10, 11, 12]
        """
        if one_hot_discrete and self._space is None:
            raise ValueError("one_hot_discrete=True needs the buffer's space, but none was set")
        total = self.len_incl_lookback()
        if indices is None:
            plan = indexing.SlicePlan(0, self.lookback, total, 0, 1)
            return self._read_plan(plan, fill, one_hot_discrete)
        if isinstance(indices, slice):
            plan = indexing.plan_slice(
                indices,
                lookback=self.lookback,
                total=total,
                neg_index_as_lookback=neg_index_as_lookback,
                fill=fill is not None,
            )
            return self._read_plan(plan, fill, one_hot_discrete)
        if isinstance(indices, (list, tuple, np.ndarray)):
            positions = indexing.resolve_list(
                list(indices),
                lookback=self.lookback,
                total=total,
                neg_index_as_lookback=neg_index_as_lookback,
            )
            return self._read_positions(positions, fill, one_hot_discrete, indices)
        index = indexing.as_int(indices)
        position = indexing.resolve_int(
            index, lookback=self.lookback, total=total, neg_index_as_lookback=neg_index_as_lookback
        )
        if indexing.in_range(position, total):
            item = self._stored(position)
            return one_hot(item, self._space) if one_hot_discrete else item
        if fill is not None:
            return filler_item(self._space, fill, one_hot_discrete=one_hot_discrete)
        raise IndexError(
            f"index {index} is out of range for a buffer with {total - self.lookback} items and a "
            f"lookback of {self.lookback} (neg_index_as_lookback={neg_index_as_lookback})"
        )

    def __getitem__(self, indices: Indices) -> Any:
        return self.get(indices)

    def __iter__(self) -> Iterator[Any]:
        for position in range(self.lookback, self.len_incl_lookback()):
            yield self._stored(position)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        visible = self.get()
        return np.asarray(visible, dtype=dtype)

    def copy_range(self, start: int, stop: int, lookback: int) -> InfiniteLookbackBuffer:
        """A new buffer owning a copy of storage positions ``start:stop`` (lookback included).

        The copy keeps this buffer's mode and space; ``lookback`` of its items are lookback.

        Example:
            >>> InfiniteLookbackBuffer([1, 2, 3, 4], lookback=2).copy_range(1, 4, 1).get()
            [3, 4]
        """
        # Built field by field: this runs for every column of every cut and slice.
        columns = self._columns
        items = self._items
        total = columns.size if columns is not None else len(items)  # type: ignore[arg-type]
        start = 0 if start < 0 else (total if start > total else start)
        stop = start if stop < start else (total if stop > total else stop)
        size = stop - start
        copy = InfiniteLookbackBuffer.__new__(InfiniteLookbackBuffer)
        copy._space = self._space
        if columns is None:
            copy._items = items[start:stop]  # type: ignore[index]
            copy._columns = None
        else:
            copy._items = None
            copy._columns = columns.slice_copy(start, stop)
        copy.lookback = 0 if lookback < 0 else (size if lookback > size else lookback)
        return copy

    def copy_tail(self, count: int, visible: int) -> InfiniteLookbackBuffer:
        """A new buffer owning copies of the last ``count`` stored items (all, if fewer).

        All but the last ``visible`` of them are its lookback; it keeps this buffer's mode and
        space. This is what ``cut`` takes from every column.

        Example:
            >>> tail = InfiniteLookbackBuffer([1, 2, 3, 4]).copy_tail(3, 1)
            >>> tail.get(), tail.lookback
            ([4], 2)
        """
        # Built field by field: this runs for every column of every cut.
        copy = InfiniteLookbackBuffer.__new__(InfiniteLookbackBuffer)
        copy._space = self._space
        columns = self._columns
        if columns is None:
            items = self._items
            start = len(items) - count  # type: ignore[arg-type]
            copy._items = part = items[start if start > 0 else 0 :]  # type: ignore[index]
            copy._columns = None
            size = len(part)
        else:
            total = columns.size
            start = total - count if total > count else 0
            copy._items = None
            copy._columns = columns.slice_copy(start, total)
            size = total - start
        lookback = size - visible
        copy.lookback = lookback if lookback > 0 else 0
        return copy

    def _stored(self, position: int) -> Any:
        if self._columns is None:
            assert self._items is not None
            return self._items[position]
        columns = self._columns
        if columns.structure is None:
            return columns.leaves[0][position]
        return unflatten(columns.structure, [leaf[position] for leaf in columns.leaves])

    def _visible_items(self) -> list[Any]:
        if self._columns is None:
            assert self._items is not None
            return self._items[self.lookback :]
        return _unbatch_range(self._columns, self.lookback)

    def _read_plan(self, plan: indexing.SlicePlan, fill: Any, one_hot_discrete: bool) -> Any:
        space = self._space
        if one_hot_discrete and type(space) is gym.spaces.Discrete:
            return self._read_plan_discrete(plan, space)
        if self._columns is None:
            assert self._items is not None
            window = self._items[plan.start : plan.stop]
            if one_hot_discrete and window:
                window = _one_hot_items(window, self._space)
            if plan.fill_left or plan.fill_right:
                filler = filler_item(self._space, fill, one_hot_discrete=one_hot_discrete)
                window = [filler] * plan.fill_left + window + [filler] * plan.fill_right
            return window if plan.step == 1 else window[:: plan.step]
        columns = self._columns
        if columns.structure is None:
            stored = columns.leaves[0][plan.start : plan.stop]
        else:
            stored = unflatten(
                columns.structure, [leaf[plan.start : plan.stop] for leaf in columns.leaves]
            )
        if one_hot_discrete:
            stored = one_hot(stored, self._space)
        if plan.fill_left or plan.fill_right:
            stored = self._pad(stored, plan, fill, one_hot_discrete)
        if plan.step != 1:
            stored = map_leaves(lambda leaf: leaf[:: plan.step], stored)
        return stored

    def _read_plan_discrete(self, plan: indexing.SlicePlan, space: gym.spaces.Discrete) -> Any:
        if self._columns is None:
            assert self._items is not None
            values: Any = self._items[plan.start : plan.stop]
        else:
            values = self._columns.leaves[0][plan.start : plan.stop]
        out = window_one_hot(
            values,
            n=int(space.n),
            start=int(space.start),
            fill_left=plan.fill_left,
            fill_right=plan.fill_right,
        )
        if plan.step != 1:
            out = out[:: plan.step]
        return out if self._columns is not None else list(out)

    def _pad(self, stored: Any, plan: indexing.SlicePlan, fill: Any, one_hot_discrete: bool) -> Any:
        parts = []
        if plan.fill_left:
            parts.append(
                filler_batch(self._space, fill, plan.fill_left, one_hot_discrete=one_hot_discrete)
            )
        if plan.stored:
            parts.append(stored)
        if plan.fill_right:
            parts.append(
                filler_batch(self._space, fill, plan.fill_right, one_hot_discrete=one_hot_discrete)
            )
        if len(parts) == 1:
            return parts[0]
        _, structure = flatten(parts[0])
        all_leaves = [flatten(p)[0] for p in parts]
        try:
            joined = [np.concatenate(group) for group in zip(*all_leaves)]
        except ValueError as error:
            raise self._filler_mismatch(fill) from error
        return unflatten(structure, joined) if structure is not None else joined[0]

    def _filler_mismatch(self, fill: Any) -> ValueError:
        return ValueError(
            f"fill={fill!r} cannot pad this buffer's items: without a space the filler is "
            "fill itself, which does not stack with them; give the buffer a space (fillers "
            "then take the items' shape and dtype) or a fill shaped like one item"
        )

    def _read_positions(
        self, positions: np.ndarray, fill: Any, one_hot_discrete: bool, indices: Any
    ) -> Any:
        total = self.len_incl_lookback()
        valid = (positions >= 0) & (positions < total)
        if not valid.all() and fill is None:
            bad = [i for i, ok in zip(list(indices), valid.tolist()) if not ok]
            raise IndexError(
                f"indices {bad} are out of range for a buffer with {total - self.lookback} items "
                f"and a lookback of {self.lookback}"
            )
        filler = None
        if not valid.all():
            filler = filler_item(self._space, fill, one_hot_discrete=one_hot_discrete)
        if self._columns is None:
            assert self._items is not None
            items = [self._items[p] if ok else None for p, ok in zip(positions.tolist(), valid)]
            if one_hot_discrete:
                items = [one_hot(x, self._space) if ok else None for x, ok in zip(items, valid)]
            return [x if ok else filler for x, ok in zip(items, valid)]
        columns = self._columns
        if valid.all() and len(positions):
            leaves = [leaf[positions] for leaf in columns.leaf_views()]
            gathered = unflatten(columns.structure, leaves)
            return one_hot(gathered, self._space) if one_hot_discrete else gathered
        items = [
            (one_hot(self._stored(p), self._space) if one_hot_discrete else self._stored(p))
            if ok
            else filler
            for p, ok in zip(positions.tolist(), valid)
        ]
        if not items:
            return self._read_plan(indexing.SlicePlan(0, 0, 0, 0, 1), fill, one_hot_discrete)
        try:
            return batch(items)
        except ValueError as error:
            raise self._filler_mismatch(fill) from error

    # -------------------------------------------------------------------------------- setting
    def set(
        self,
        new_data: Any,
        *,
        at_indices: Indices = None,
        neg_index_as_lookback: bool = False,
    ) -> None:
        """Overwrites items in place, with the index rules of :meth:`get` (no fill).

        Args:
            new_data: One item for an int index; for a slice, a list or ``None``, a list of
                items (or, finalized, a batched struct) of exactly the addressed length.
            at_indices: Where to write; None overwrites everything after the lookback.
            neg_index_as_lookback: Read negative indices as lookback positions.

        Raises:
            IndexError: An index is out of range, or the sizes differ. Nothing is changed.
            ValueError: A value lies outside the space of a finalized buffer. Nothing is changed.

        Example:
            >>> buf = InfiniteLookbackBuffer([0, 1, 2], lookback=1)
            >>> buf.set([7, 8]); buf.get()
            [7, 8]
        """
        total = self.len_incl_lookback()
        targets = indexing.set_positions(
            at_indices,
            lookback=self.lookback,
            total=total,
            neg_index_as_lookback=neg_index_as_lookback,
        )
        if isinstance(targets, int):
            self._check_in_space([new_data])
            self._write([targets], [new_data])
            return
        items = self._as_item_list(new_data)
        if len(items) != len(targets):
            raise IndexError(
                f"cannot set {len(items)} items at indices {at_indices!r}: they address "
                f"{len(targets)} items (neg_index_as_lookback={neg_index_as_lookback})"
            )
        self._check_in_space(items)
        self._write(targets, items)

    def __setitem__(self, indices: Indices, value: Any) -> None:
        self.set(value, at_indices=indices)

    def _as_item_list(self, new_data: Any) -> list[Any]:
        if isinstance(new_data, list):
            return new_data
        if isinstance(new_data, InfiniteLookbackBuffer):
            return new_data._visible_items()
        try:
            columns = Columns.from_batch(new_data)
        except (ValueError, TypeError) as err:
            raise TypeError(
                "new_data for a slice or list of indices must be a list of items or a batched "
                f"struct of arrays, got {type(new_data).__name__}"
            ) from err
        return _unbatch_range(columns, 0)

    def _check_in_space(self, items: list[Any]) -> None:
        if self._columns is None or self._space is None:
            return
        check = checker_for(self._space)
        for item in items:
            if not check(item):
                raise ValueError(f"value {item!r} is not in the buffer's space {self._space}")

    def _write(self, positions: Sequence[int], items: list[Any]) -> None:
        if self._columns is None:
            assert self._items is not None
            for position, item in zip(positions, items):
                self._items[position] = item
            return
        self._columns.overwrite(positions, items)

    # ------------------------------------------------------------------------- state, equality
    def get_state(self) -> dict[str, Any]:
        """A plain-dict snapshot: ``data``, ``lookback``, ``finalized`` and ``space`` (a dict).

        Example:
            >>> InfiniteLookbackBuffer([1, 2], lookback=1).get_state()["lookback"]
            1
        """
        if self._columns is not None:
            data = self._columns.copy().view()
        else:
            assert self._items is not None
            data = list(self._items)
        return {
            "data": data,
            "lookback": self.lookback,
            "finalized": self.finalized,
            "space": space_to_dict(self._space),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> InfiniteLookbackBuffer:
        """Rebuilds a buffer from :meth:`get_state`'s dict.

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2], lookback=1)
            >>> InfiniteLookbackBuffer.from_state(buf.get_state()) == buf
            True
        """
        if not isinstance(state, dict):
            raise TypeError(f"a buffer state must be a dict, got {type(state).__name__}")
        try:
            data, finalized = state["data"], bool(state["finalized"])
            lookback, space_dict = state["lookback"], state["space"]
        except KeyError:
            missing = {"data", "lookback", "finalized", "space"} - set(state)
            raise KeyError(f"buffer state is missing keys {sorted(missing)}") from None
        # A finalized buffer's data may be a list too: the batch of list-structured items.
        if not finalized and not isinstance(data, list):
            raise ValueError(
                f"buffer state says finalized={finalized} but its data is a {type(data).__name__}"
            )
        lookback = indexing.as_int(lookback, what="lookback")
        if lookback < 0:
            raise ValueError(f"lookback must be >= 0, got {lookback}")
        space = space_from_dict(space_dict)
        # Built field by field: every loaded or unpickled episode rebuilds several buffers.
        buffer = cls.__new__(cls)
        buffer._space = space
        if finalized:
            # The buffer takes over the state's arrays (as after unpickling, where nobody else
            # holds them); appends reallocate, so they never write past the given arrays.
            buffer._items, buffer._columns = None, Columns.from_batch(data)
        else:
            buffer._items, buffer._columns = list(data), None
        if lookback > buffer.len_incl_lookback():
            raise ValueError(
                f"buffer state has lookback {lookback} but only {buffer.len_incl_lookback()} items"
            )
        buffer.lookback = lookback
        return buffer

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InfiniteLookbackBuffer):
            return NotImplemented
        return (
            self.lookback == other.lookback
            and self.finalized == other.finalized
            and self._space == other._space
            and self.len_incl_lookback() == other.len_incl_lookback()
            and data_equal(self.data, other.data)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        mode = "numpy" if self.finalized else "list"
        return (
            f"InfiniteLookbackBuffer(len={len(self)}, lookback={self.lookback}, {mode}, "
            f"space={self._space})"
        )


def _unbatch_range(columns: Columns, start: int) -> list[Any]:
    if columns.structure is None:
        return list(columns.leaves[0][start : columns.size])
    leaves = [leaf[start : columns.size] for leaf in columns.leaves]
    return [
        unflatten(columns.structure, [leaf[i] for leaf in leaves]) for i in range(len(leaves[0]))
    ]


def _one_hot_items(items: list[Any], space: gym.Space[Any] | None) -> list[Any]:
    # Flat discrete items: encode the whole window in one numpy call, then split into rows.
    if not is_nested(items[0]) and isinstance(space, gym.spaces.Discrete):
        return list(one_hot(np.asarray(items), space))
    return [one_hot(item, space) for item in items]

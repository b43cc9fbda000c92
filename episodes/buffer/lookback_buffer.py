"""InfiniteLookbackBuffer: a time-indexed column with a lookback into the previous chunk."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes import indexing
from episodes.buffer import reading
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.batch_writes import list_batch, write_batch
from episodes.buffer.buffer_operators import BufferOperators
from episodes.buffer.list_store import ListStore, respaced
from episodes.buffer.set_items import extend_items, item_list
from episodes.buffer.space_checks import check_in_space
from episodes.buffer.store import Store
from episodes.buffer.stores import (
    check_replacement,
    layout_state,
    owned_items,
    shallow_store,
    store_from_state,
)
from episodes.buffer.subclasses import subclass_attributes
from episodes.indexing import Index as Indices
from episodes.spaces import one_hot, space_from_dict, space_to_dict
from episodes.spaces.contains import checker_for
from episodes.structs import data_equal, short_repr


class InfiniteLookbackBuffer(BufferOperators):
    """A column of items indexed by time step, with ``lookback`` items before ``ts=0``.

    The items live in a store (see :mod:`episodes.buffer.store`): a Python list until
    :meth:`finalize` switches to numpy arrays (time axis first). Both answer every read
    identically, and both accept appends (amortised O(1) in numpy mode). The lookback, negative
    indices and fill are resolved here, with :mod:`episodes.indexing`, above the store.

    Args:
        data: Initial items (a list), an already batched struct of arrays (finalized), or a
            store.
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

    __slots__ = ("store", "lookback", "_space")

    store: Store

    def __init__(self, data: Any = None, lookback: int = 0, space: gym.Space[Any] | None = None):
        if lookback.__class__ is not int:
            lookback = indexing.as_int(lookback, what="lookback")
        if lookback < 0:
            raise ValueError(f"lookback must be >= 0, got {lookback}")
        if space is not None and not isinstance(space, gym.Space):
            raise TypeError(f"space must be a gymnasium Space or None, got {type(space).__name__}")
        if data.__class__ is list:  # the usual case first (no store is a list)
            self.store = ListStore(data)
            self._space = space
            self.lookback = lookback if lookback < len(data) else len(data)
            return
        if data is None:
            self.store = ListStore()
        elif isinstance(data, (ListStore, ArrayStore)):
            self.store = data
        elif isinstance(data, list):
            self.store = ListStore(data)
        else:
            self.store = ArrayStore.from_batch(data)
        self._space = space
        size = len(self.store)
        self.lookback = lookback if lookback < size else size

    # ----------------------------------------------------------------------------- properties
    @property
    def finalized(self) -> bool:
        """True once the data is a numpy struct rather than a list.

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2])
            >>> before = buf.finalized
            >>> buf.finalize()
            >>> before, buf.finalized
            (False, True)
        """
        return self.store.is_numpy

    @property
    def space(self) -> gym.Space[Any] | None:
        """The gymnasium space of one item, if known (used by ``one_hot_discrete`` and fills).

        Example:
            >>> InfiniteLookbackBuffer([1], space=gym.spaces.Discrete(4)).space
            Discrete(4)
        """
        return self._space

    @space.setter
    def space(self, value: gym.Space[Any] | None) -> None:
        if value is not None and not isinstance(value, gym.Space):
            raise TypeError(f"space must be a gymnasium Space or None, got {type(value).__name__}")
        store = self.store  # respaced keeps every list store
        self._space, self.store = value, respaced(store, value) if store.is_numpy else store

    @property
    def data(self) -> Any:
        """All stored items, lookback included: a list, or a struct of array views.

        Example:
            >>> InfiniteLookbackBuffer([1, 2, 3], lookback=1).data
            [1, 2, 3]
        """
        return self.store.data

    def __len__(self) -> int:
        # Lengths are taken on every check: a list store's list answers without a Python call.
        items = self.store.pylist
        return (len(items) if items is not None else len(self.store)) - self.lookback

    def len_incl_lookback(self) -> int:
        """Number of stored items, lookback included.

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2, 3], lookback=1)
            >>> len(buf), buf.len_incl_lookback()
            (2, 3)
        """
        items = self.store.pylist
        return len(items) if items is not None else len(self.store)

    # -------------------------------------------------------------------------------- writing
    def append(self, item: Any) -> None:
        """Appends one item (amortised O(1) in both modes).

        Example:
            >>> buf = InfiniteLookbackBuffer([1]); buf.finalize(); buf.append(2); buf.get()
            array([1, 2])
        """
        self.store.append(item)

    def extend(self, items: Any) -> None:
        """Appends several items: a list of items, or a batched struct (``extend_items``).

        Example:
            >>> buf = InfiniteLookbackBuffer([1]); buf.extend([2, 3]); buf.get()
            [1, 2, 3]
        """
        if items.__class__ is np.ndarray and items.ndim and self.store.is_numpy:
            self.store.extend_batch(items)  # what extend_items leaves an array's rows as
            return
        items = extend_items(self.store, self._space, items)  # read whole before any change
        if isinstance(items, list) or not self.store.is_numpy:
            self.store.extend(items)
        else:
            self.store.extend_batch(items)

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
        self.store.extend_from(other.store, other.lookback)

    def truncate(self, length: int) -> None:
        """Keeps only the first ``length`` stored items (lookback included).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1); buf.truncate(2); buf.get()
            [2]
        """
        length = indexing.as_int(length, what="length")
        total = len(self.store)
        if not 0 <= length <= total:
            raise IndexError(f"truncate length {length} out of range for {total} stored items")
        self.store.truncate(length)
        self.lookback = min(self.lookback, length)

    def pop(self, index: int = -1) -> Any:
        """Removes and returns the item at storage ``index`` (Python indexing, lookback included).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2, 3]); buf.pop(), buf.get()
            (3, [1, 2])
        """
        index = indexing.as_int(index)
        total = len(self.store)
        position = index + total if index < 0 else index
        if not indexing.in_range(position, total):
            raise IndexError(f"pop index {index} out of range for {total} stored items")
        item = self.store.pop(position)
        if position < self.lookback:
            self.lookback -= 1
        return item

    def finalize(self) -> None:
        """Switches to the numpy store (idempotent).

        Example:
            >>> buf = InfiniteLookbackBuffer([0, 1]); buf.finalize(); buf.data
            array([0, 1])
        """
        if not self.store.is_numpy:
            self.adopt_store(self.stacked())

    def stacked(self) -> ArrayStore:
        """The numpy store :meth:`finalize` would switch to, built without changing the buffer.

        Raises:
            ValueError: The items cannot be stacked (differing structures or shapes).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2]); buf.stacked().data, buf.finalized
            (array([1, 2]), False)
        """
        store = self.store
        if isinstance(store, ListStore):
            return store.stacked(self._space)
        raise ValueError("the buffer is finalized already")

    def adopt_store(self, store: Store) -> None:
        """Switches the buffer to ``store`` (from :meth:`stacked`), holding the same items.

        Raises:
            TypeError: ``store`` is not a list or array store.
            ValueError: ``store`` holds another number of items (the buffer is left as it was).

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2]); buf.adopt_store(buf.stacked())
            >>> buf.finalized, buf.get()
            (True, array([1, 2]))
        """
        check_replacement(self.store, store)
        self.store = store

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
            indices: None (everything after the lookback), an int, a slice (any non-zero step)
                or a list of ints. Non-negative indices count from ``ts=0``; negative ones from
                the end, or with ``neg_index_as_lookback`` leftwards from ``ts=0`` into the
                lookback.
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
            TypeError: A flag is not a bool (or a numpy bool).

        Example:
            >>> buf = InfiniteLookbackBuffer([10, 11, 12, 13, 14], lookback=2)
            >>> buf.get(slice(-7, -2), fill=0), buf.get(slice(None, None, -1))
            ([0, 0, 10, 11, 12], [14, 13, 12])
        """
        if neg_index_as_lookback.__class__ is not bool:  # a numpy bool, or a TypeError
            neg_index_as_lookback = indexing.as_flag(neg_index_as_lookback, "neg_index_as_lookback")
        if one_hot_discrete.__class__ is not bool:
            one_hot_discrete = indexing.as_flag(one_hot_discrete, "one_hot_discrete")
        if indices.__class__ is int and fill is None and not one_hot_discrete:
            store = self.store  # one item, the hot path: resolve_int and in_range inlined
            items = store.pylist
            total = len(items) if items is not None else len(store)
            position = indices + (self.lookback if indices >= 0 or neg_index_as_lookback else total)
            if 0 <= position < total:
                return items[position] if items is not None else store.get(position)
        if one_hot_discrete and self._space is None:
            raise ValueError("one_hot_discrete=True needs the buffer's space, but none was set")
        if indices is None:  # read_plan's window, no fillers to add (read_plan words an OOM)
            if not one_hot_discrete:
                try:
                    return self.store.window(self.lookback, len(self.store))
                except MemoryError:
                    pass
            plan = indexing.SlicePlan(0, self.lookback, len(self.store), 0, 1)
            return reading.read_plan(self.store, self._space, plan, fill, one_hot_discrete)
        total = len(self.store)
        if isinstance(indices, slice):
            if indices.step is not None and indexing.as_int(indices.step, what="slice step") < 0:
                positions = indexing.slice_positions(
                    indices,
                    lookback=self.lookback,
                    total=total,
                    neg_index_as_lookback=neg_index_as_lookback,
                    fill=fill is not None,
                )
                return reading.read_backwards(
                    self.store, self._space, positions, fill, one_hot_discrete, self.lookback
                )
            plan = indexing.plan_slice(
                indices,
                lookback=self.lookback,
                total=total,
                neg_index_as_lookback=neg_index_as_lookback,
                fill=fill is not None,
            )
            return reading.read_plan(self.store, self._space, plan, fill, one_hot_discrete)
        if isinstance(indices, (list, tuple, np.ndarray)):
            positions = indexing.resolve_list(
                indexing.index_sequence(indices),
                lookback=self.lookback,
                total=total,
                neg_index_as_lookback=neg_index_as_lookback,
            )
            return reading.read_positions(
                self.store, self._space, positions, fill, one_hot_discrete, self.lookback, indices
            )
        index = indexing.as_int(indices)
        position = indexing.resolve_int(
            index, lookback=self.lookback, total=total, neg_index_as_lookback=neg_index_as_lookback
        )
        if indexing.in_range(position, total):
            item = self.store.get(position)
            return one_hot(item, self._space) if one_hot_discrete else item
        if fill is not None:
            # Without a space, an int read returns ``fill`` as given (refused where list and
            # slice reads refuse it); with one, the filler list and slice reads pad with.
            filler = reading.filler_at(self.store, self._space, fill, one_hot_discrete)
            return fill if self._space is None else filler
        raise IndexError(
            f"index {index} is out of range for a buffer with {total - self.lookback} items and a "
            f"lookback of {self.lookback} (neg_index_as_lookback={neg_index_as_lookback})"
        )

    def __getitem__(self, indices: Indices) -> Any:
        return self.get(indices)

    def copy_range(self, start: int, stop: int, lookback: int) -> InfiniteLookbackBuffer:
        """A new buffer owning a copy of storage positions ``start:stop`` (lookback included).

        The copy keeps this buffer's mode and space; ``lookback`` of its items are lookback.

        Example:
            >>> InfiniteLookbackBuffer([1, 2, 3, 4], lookback=2).copy_range(1, 4, 1).get()
            [3, 4]
        """
        if not (type(start) is type(stop) is type(lookback) is int):  # numpy ints, bools
            start, stop, lookback = _ints(start=start, stop=stop, lookback=lookback)
        items = self.store.pylist
        total = len(items) if items is not None else len(self.store)
        start = 0 if start < 0 else (total if start > total else start)
        stop = start if stop < start else (total if stop > total else stop)
        copy = InfiniteLookbackBuffer.__new__(InfiniteLookbackBuffer)  # unchecked: every slice
        copy.store, copy._space = self.store.copy_range(start, stop), self._space
        span = stop - start
        copy.lookback = 0 if lookback < 0 else (lookback if lookback < span else span)
        return copy

    def copy_tail(self, count: int, visible: int) -> InfiniteLookbackBuffer:
        """A new buffer owning copies of the last ``count`` stored items (all, if fewer).

        All but the last ``visible`` of them are its lookback; it keeps this buffer's mode and
        space. This is what ``cut`` takes from every column. A negative ``count`` or
        ``visible`` is a ``ValueError``.

        Example:
            >>> tail = InfiniteLookbackBuffer([1, 2, 3, 4]).copy_tail(3, 1)
            >>> tail.get(), tail.lookback
            ([4], 2)
        """
        if not (type(count) is type(visible) is int):  # numpy ints: Python ints; bools refused
            count, visible = _ints(count=count, visible=visible)
        if count < 0 or visible < 0:  # cut checks its lookback first; a direct call may not
            raise ValueError(f"copy_tail: count and visible must be >= 0, got {count}, {visible}")
        items = self.store.pylist
        total = len(items) if items is not None else len(self.store)
        start = total - count if total > count else 0
        lookback = total - start - visible
        copy = InfiniteLookbackBuffer.__new__(InfiniteLookbackBuffer)  # unchecked: every cut
        copy.store, copy._space = self.store.copy_range(start, total), self._space
        copy.lookback = lookback if lookback > 0 else 0
        return copy

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
                items (or a batched struct nested like one item: a tuple is never a list of
                items) of exactly the addressed length.
            at_indices: Where to write; None overwrites everything after the lookback. Slices
                may have any non-zero step (``slice(3, 1, -1)`` writes ts 3, then ts 2).
            neg_index_as_lookback: Read negative indices as lookback positions.

        Raises:
            IndexError: An index is out of range, or the sizes differ. Nothing is changed.
            ValueError: A value lies outside the space of a finalized buffer. Nothing is changed.
            TypeError: A batch holds a tuple where the items hold one value. Nothing is changed.

        Example:
            >>> buf = InfiniteLookbackBuffer([0, 1, 2, 3], lookback=1)
            >>> buf.set([7, 8, 9]); buf.set([-1, -2], at_indices=slice(2, 0, -1)); buf.get()
            [7, -2, -1]
        """
        if neg_index_as_lookback.__class__ is not bool:
            neg_index_as_lookback = indexing.as_flag(neg_index_as_lookback, "neg_index_as_lookback")
        items = self.store.pylist
        if items is not None and at_indices.__class__ is int:  # one list item: no space check
            total = len(items)  # set_positions and ListStore.set inlined; else their refusal
            shift = self.lookback if at_indices >= 0 or neg_index_as_lookback else total
            if 0 <= (position := at_indices + shift) < total:
                items[position] = new_data
                return
        targets = indexing.set_positions(
            at_indices,
            lookback=self.lookback,
            total=len(self.store),
            neg_index_as_lookback=neg_index_as_lookback,
        )
        if isinstance(targets, int):
            self._check_in_space([new_data])
            self.store.set([targets], [new_data])
            return
        new_data = list_batch(self.store, new_data, self.space)  # list-recorded Tuple reads
        if write_batch(self.store, self._space, targets, new_data):
            return  # a numpy column's batch, checked whole and written leaf by leaf
        if isinstance(new_data, InfiniteLookbackBuffer):
            items = owned_items(new_data.store, new_data.lookback)
        else:  # a list of items, or a batch nested like one item (contract 3.7)
            items = item_list(self.store, self._space, new_data)
        if len(items) != len(targets):
            raise IndexError(
                f"cannot set {len(items)} items at indices {short_repr(at_indices)}: they address "
                f"{len(targets)} items (neg_index_as_lookback={neg_index_as_lookback})"
            )
        self._check_in_space(items)
        self.store.set(targets, items)

    def __setitem__(self, indices: Indices, value: Any) -> None:
        self.set(value, at_indices=indices)

    def _check_in_space(self, items: list[Any]) -> None:
        if self.store.is_numpy and self._space is not None:  # see episodes.buffer.space_checks
            check_in_space(self._space, items, checker_for(self._space))

    # ------------------------------------------------------------------------- state, equality
    def get_state(self) -> dict[str, Any]:
        """A plain-dict snapshot: ``data``, ``lookback``, ``finalized``, ``space``, ``typed``.

        ``space`` is a JSON-safe dict; ``typed`` says whether a numpy column's dtypes are
        decided (an empty one cannot show it); a numpy column whose first item chose its dtypes
        adds ``untyped_data``, the empty layout it goes back to once emptied again.

        Example:
            >>> InfiniteLookbackBuffer([1, 2], lookback=1).get_state()["lookback"]
            1
        """
        return {
            "data": self.store.copy_data(),
            "lookback": self.lookback,
            "finalized": self.finalized,
            "space": space_to_dict(self._space),
            **layout_state(self.store),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], *, copy: bool = True) -> InfiniteLookbackBuffer:
        """Rebuilds a buffer from :meth:`get_state`'s dict.

        The buffer holds copies of the state's list or arrays (not of a list's items), so the
        caller's snapshot stays as it is; ``copy=False`` takes them over, for a state nobody
        else holds (one just decoded from disk). Unpickling takes arrays over too.

        Example:
            >>> buf = InfiniteLookbackBuffer([1, 2], lookback=1)
            >>> InfiniteLookbackBuffer.from_state(buf.get_state()) == buf
            True
            >>> buf.finalize(); state = buf.get_state()
            >>> InfiniteLookbackBuffer.from_state(state).set(9, at_indices=0)
            >>> state["data"].tolist()  # the snapshot is not the restored buffer's
            [1, 2]
        """
        store, lookback = store_from_state(state, copy=copy)
        buffer = cls.__new__(cls)
        buffer.store = store
        buffer._space = space_from_dict(state["space"])
        buffer.lookback = lookback
        return buffer

    def __copy__(self) -> InfiniteLookbackBuffer:
        # A store of its own: writing into either buffer never changes the other (a numpy
        # store is copied on write, so this copies no rows).
        clone = InfiniteLookbackBuffer.__new__(type(self))
        clone.store, clone.lookback = shallow_store(self.store), self.lookback
        clone._space = self._space
        for name, value in subclass_attributes(self, InfiniteLookbackBuffer).items():
            object.__setattr__(clone, name, value)  # a subclass's own, shallow like the rest
        return clone

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InfiniteLookbackBuffer):
            return NotImplemented
        return (
            self.lookback == other.lookback
            and self.finalized == other.finalized
            and self._space == other._space
            and len(self.store) == len(other.store)
            and data_equal(self.data, other.data)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        mode = "numpy" if self.finalized else "list"
        return (
            f"InfiniteLookbackBuffer(len={len(self)}, lookback={self.lookback}, {mode}, "
            f"space={self._space})"
        )


def _ints(**values: Any) -> list[int]:  # numpy ints as ints; a TypeError naming a bool
    return [indexing.as_int(value, what=name) for name, value in values.items()]

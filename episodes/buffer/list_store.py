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
from episodes.buffer.plain_arrays import check_items_unmasked, native_array, native_leaves
from episodes.buffer.stack_errors import unstackable
from episodes.buffer.store_bounds import checked_position, checked_size
from episodes.spaces import batch as batch_items  # `batch` is extend_batch's argument
from episodes.spaces import (
    batch_in_space,
    filler_item,
    one_hot,
    unbatch,
    unstackable_space,
)
from episodes.spaces.batching import batch_one_class, rounded_ints
from episodes.structs import is_nested, leaves_up_to

# Flat spaces without discrete leaves: a one-hot read returns their items unchanged.
_NOTHING_TO_ENCODE = (gym.spaces.Box, gym.spaces.MultiBinary, gym.spaces.Text)


class ListStore:
    """A list of items with the store operations every buffer calls.

    Args:
        data: The list to hold (taken over, not copied).

    Example:
        >>> items = [1, 2]; store = ListStore(items); store.append(3)
        >>> items, len(store), store.pylist is store.data
        ([1, 2, 3], 3, True)
    """

    __slots__ = ("data", "pylist")

    #: Stores of this class hold Python items (the buffer is not "finalized").
    is_numpy = False

    def __init__(self, data: list[Any] | None = None):
        self.data: list[Any] = [] if data is None else data
        #: The same list, under the name every store has (None for array stores): hot paths
        #: append straight to it.
        self.pylist: list[Any] | None = self.data

    def __copy__(self) -> ListStore:
        # Its own list (the items themselves shared, as a list's copy shares them): an append
        # or pop on either side never shows in the other.
        return ListStore(list(self.data))

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        if len(self.data) <= 8:
            return f"ListStore({self.data!r})"
        return f"ListStore({len(self.data)} items)"  # a long column printed whole is no use

    # ------------------------------------------------------------------------- reading
    def get(self, position: int) -> Any:
        """The item at storage ``position``.

        Example:
            >>> ListStore(["a", "b"]).get(1)
            'b'
        """
        return self.data[position]

    def window(self, start: int, stop: int) -> list[Any]:
        """Items ``start:stop`` as a new list.

        Example:
            >>> store = ListStore([1, 2, 3]); window = store.window(0, 2); window.append(9)
            >>> window, store.data
            ([1, 2, 9], [1, 2, 3])
        """
        return self.data[start:stop]

    def gather(self, positions: np.ndarray) -> list[Any]:
        """Items at in-range storage ``positions`` (an int array), as a list.

        Example:
            >>> ListStore(["a", "b", "c"]).gather(np.array([2, 0, 2]))
            ['c', 'a', 'c']
        """
        data = self.data
        return [data[p] for p in positions.tolist()]

    def items(self, start: int, stop: int | None = None) -> list[Any]:
        """Items ``start:stop`` as a new list.

        Example:
            >>> ListStore([1, 2, 3]).items(1)
            [2, 3]
        """
        return self.data[start:stop]

    def copy_data(self) -> list[Any]:
        """A shallow copy of the items, as a plain list.

        Example:
            >>> store = ListStore([[0], [1]]); copy = store.copy_data(); copy.append([2])
            >>> len(copy), len(store), copy[0] is store.data[0]
            (3, 2, True)
        """
        return list(self.data)

    # ------------------------------------------------------------------------- writing
    def append(self, item: Any) -> None:
        """Appends one item.

        Example:
            >>> store = ListStore(); store.append({"obs": 1})
            >>> store.data
            [{'obs': 1}]
        """
        self.data.append(item)

    def extend(self, items: Any) -> None:
        """Appends every item of an iterable.

        Example:
            >>> store = ListStore([1]); store.extend(range(2, 4))
            >>> store.data
            [1, 2, 3]
        """
        try:
            self.data.extend(items)
        except TypeError as error:  # not iterable (list.extend refuses before adding any)
            if hasattr(items, "__iter__") or hasattr(items, "__getitem__"):
                raise
            raise TypeError(
                f"extend: items must be a list (or iterable) of items, got {type(items).__name__}"
            ) from error

    def extend_batch(self, batch: Any, count: int | None = None) -> None:
        """Appends the items of a batched struct (leaves with a leading time axis).

        Example:
            >>> store = ListStore(); store.extend_batch({"x": np.array([4, 5])})
            >>> [int(item["x"]) for item in store.data]
            [4, 5]
        """
        self.extend(unbatch(batch))

    def extend_from(self, other: Any, start: int) -> None:
        """Appends the items of store ``other`` from position ``start`` on.

        Example:
            >>> store = ListStore([0]); store.extend_from(ArrayStore.from_batch(np.arange(3)), 1)
            >>> [int(item) for item in store.data]
            [0, 1, 2]
        """
        if other.is_numpy:  # its items are views: a list buffer must not share its arrays
            other = other.copy_range(start, len(other))
            start = 0
        self.extend(other.items(start))

    def set(self, positions: Sequence[int], items: list[Any]) -> None:
        """Writes ``items[k]`` at storage position ``positions[k]``.

        Example:
            >>> store = ListStore([1, 2, 3]); store.set([0, 2], ["a", "c"])
            >>> store.data
            ['a', 2, 'c']
        """
        data = self.data
        if isinstance(positions, range) and items.__class__ is list:
            start, stop, step = positions.start, positions.stop, positions.step
            fits = start >= 0 and step > 0 and 0 <= stop <= len(data)
            if fits and len(positions) == len(items):  # every position in range: one write
                data[start:stop:step] = items  # as many items as it replaces
                return
        for position, item in zip(positions, items):
            data[position] = item

    def truncate(self, size: int) -> None:
        """Drops every item from position ``size`` on.

        Example:
            >>> store = ListStore([1, 2, 3]); store.truncate(1)
            >>> store.data
            [1]
        """
        del self.data[checked_size(size, len(self.data)) :]

    def pop(self, position: int) -> Any:
        """Removes and returns the item at ``position``.

        Example:
            >>> store = ListStore([1, 2, 3])
            >>> store.pop(1), store.data
            (2, [1, 3])
        """
        return self.data.pop(checked_position(position, len(self.data)))

    def copy_range(self, start: int, stop: int) -> ListStore:
        """A new store holding items ``start:stop``.

        Example:
            >>> store = ListStore([1, 2, 3]); part = store.copy_range(1, 3); part.append(4)
            >>> part, store
            (ListStore([2, 3, 4]), ListStore([1, 2, 3]))
        """
        # Without __init__: cuts and slices make one per list column.
        store = ListStore.__new__(ListStore)
        store.data = store.pylist = self.data[start:stop]
        return store

    def stacked(self, space: gym.Space[Any] | None) -> ArrayStore:
        """The numpy store holding the same items (what ``to_numpy`` switches to).

        Raises:
            ValueError: The items cannot be stacked (differing structures or shapes).

        Example:
            >>> stacked = ListStore([{"x": 1}, {"x": 2}]).stacked(None)
            >>> type(stacked).__name__, stacked.data["x"].tolist()
            ('ArrayStore', [1, 2])
            >>> ListStore().stacked(gym.spaces.Box(0, 1, (2,))).data.shape
            (0, 2)
        """
        if self.data:
            fast = _one_class_stack(self.data, space)
            if fast is not None:
                return fast
            check_items_unmasked(self.data)  # stacking would drop their masks
            try:  # in native byte order, as a column typed by its first item (plain_arrays)
                stacked = ArrayStore.from_batch(native_leaves(batch_in_space(self.data, space)))
            except TypeError as error:  # dm-tree sorting dict keys of mixed types, say
                raise ValueError(f"the items cannot be stacked: {error}") from error
            except ValueError as error:  # numpy's words: name the items that differ instead
                layout = space is None or unstackable_space(space) is None
                named = unstackable(self.data) if layout else None  # else "no fixed layout"
                if named is None:
                    raise
                raise named from error
            return _no_numbers_as_text(stacked, self.data)
        if space is not None:
            # Shaped for reads, but the first appended item still decides the dtypes, so an
            # episode numpy'd before its first step stores what it would have stored after;
            # a Text column is as wide as its space either way (the first string is not).
            text = isinstance(space, gym.spaces.Text)
            return ArrayStore.from_batch(batch_items([], space=space), typed=text)
        return ArrayStore.untyped()

    # ----------------------------------------------------------------- batch operations
    @staticmethod
    def encode_one_hot(window: list[Any], space: gym.Space[Any] | None) -> list[Any]:
        """One-hot encodes every item of a window.

        Example:
            >>> window = ListStore.encode_one_hot([2, 0], gym.spaces.Discrete(3))
            >>> [row.tolist() for row in window]
            [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """
        if not window:
            return window
        if isinstance(space, _NOTHING_TO_ENCODE):
            return list(window)  # one_hot gives such items back as they are
        # Flat discrete items: encode the whole window in one numpy call, then split into rows.
        if not is_nested(window[0]) and isinstance(
            space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)
        ):
            try:
                stacked = np.asarray(window)
                if stacked.shape[1:] != space.shape:  # items off the space: each refused alone
                    raise ValueError(stacked.shape)
                if stacked.dtype.kind == "f" and rounded_ints(window):
                    raise ValueError("rounded")  # ints stacked as floats: each encoded exactly
                return list(one_hot(stacked, space))
            except ValueError:
                # Ragged items (an int beside a shaped array) do not stack; encode each alone,
                # as an index read of each would.
                pass
        return [one_hot(item, space) for item in window]

    @staticmethod
    def fillers(
        space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool
    ) -> list[Any]:
        """``count`` references to one filler item.

        Example:
            >>> fillers = ListStore.fillers(gym.spaces.Box(0, 1, (2,)), -1.0, 2, False)
            >>> len(fillers), fillers[0].tolist(), fillers[0] is fillers[1]
            (2, [-1.0, -1.0], True)
        """
        return [filler_item(space, fill, one_hot_discrete=one_hot_discrete)] * count

    @staticmethod
    def join(parts: list[list[Any]]) -> list[Any]:
        """Concatenates windows.

        Example:
            >>> ListStore.join([[0, 0], [1, 2], []])
            [0, 0, 1, 2]
        """
        joined: list[Any] = []
        for part in parts:
            joined += part
        return joined

    @staticmethod
    def stride(window: list[Any], step: int) -> list[Any]:
        """Every ``step``-th item of a window.

        Example:
            >>> ListStore.stride([0, 1, 2, 3, 4], 2)
            [0, 2, 4]
        """
        return window[::step]

    @staticmethod
    def from_rows(rows: np.ndarray) -> list[Any]:
        """A window from an array of rows: one item per row.

        Example:
            >>> [row.tolist() for row in ListStore.from_rows(np.eye(2, dtype=int))]
            [[1, 0], [0, 1]]
        """
        return list(rows)

    @staticmethod
    def from_items(items: list[Any]) -> list[Any]:
        """A window from a list of items (the list itself).

        Example:
            >>> items = [1, 2]
            >>> ListStore.from_items(items) is items
            True
        """
        return items


# Item classes stacked by one scan of their types: no masked array, no nesting.
_ONE_CLASS = frozenset((np.ndarray, float, int))
# Spaces whose batch_in_space is batch() for items that are no lists or tuples.
_PLAIN_SPACES = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiDiscrete,
    gym.spaces.MultiBinary,
)


def _one_class_stack(items: list[Any], space: gym.Space[Any] | None) -> ArrayStore | None:
    """What ``stacked`` gives items all of exactly one class of ``_ONE_CLASS``, else None.

    Such items (exact arrays, floats or ints) are no masked arrays and hold none, so the one
    type scan here is the masked-array check too, and it tells the stacking their class.
    """
    kinds = list(map(type, items))
    item_class = kinds[0]
    if item_class not in _ONE_CLASS or kinds.count(item_class) != len(kinds):
        return None
    if space is not None and space.__class__ not in _PLAIN_SPACES:
        return None
    try:
        stacked = native_array(batch_one_class(items, item_class))
    except (TypeError, ValueError):  # the usual path words the refusal
        return None
    store = ArrayStore([stacked], None, len(items))
    return _no_numbers_as_text(store, items) if stacked.dtype.kind in "US" else store


_TEXT_TYPES = frozenset((str, bytes, np.str_, np.bytes_))


def _text(leaf: Any) -> bool:
    """Whether a text leaf holds ``leaf`` as it is (np.str_ is a str; arrays of text too)."""
    if isinstance(leaf, (str, bytes)):
        return True
    return isinstance(leaf, np.ndarray) and leaf.dtype.kind in ("U", "S")


def _no_numbers_as_text(store: ArrayStore, items: list[Any]) -> ArrayStore:
    """``store``, unless numpy wrote numbers of ``items`` into a text leaf (1.5 as "1.5")."""
    text = [i for i, leaf in enumerate(store.leaves) if leaf.dtype.kind in "US"]
    if not text:
        return store
    if store.structure is None:  # flat items: their types at C speed, the usual all-str
        if set(map(type, items)) <= _TEXT_TYPES:
            return store
        found = [[item] for item in items]
    else:  # the leaves as the column lays them out (a Box row given as a list is one leaf)
        found = [leaves_up_to(store.structure, item) or [] for item in items]
    for k, leaves in enumerate(found):
        odd = next((leaves[i] for i in text if i < len(leaves) and not _text(leaves[i])), None)
        if odd is not None:
            raise ValueError(
                f"the items mix text and other values (item {k} is {odd!r}), which numpy "
                "would turn into text"
            )
    return store


def respaced(store: Any, space: gym.Space[Any] | None) -> Any:
    """The store a column keeps when its space is set.

    An empty numpy column whose layout no item chose yet takes the new space's, as one
    numpy'd with that space would, and so does an empty numpy column given a Text space (a
    Text column is as wide as its space, whatever chose its width before); any other store is
    kept.

    Example:
        >>> empty = ListStore().stacked(None)
        >>> respaced(empty, gym.spaces.Box(0, 1, (2,))).data.shape
        (0, 2)
    """
    empty = store.is_numpy and len(store) == 0
    if empty and (not getattr(store, "typed", True) or isinstance(space, gym.spaces.Text)):
        return ListStore().stacked(space)
    return store

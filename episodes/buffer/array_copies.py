"""Copies of a numpy store that share nothing either side writes, and what a state keeps.

``copy.copy`` of an :class:`~episodes.buffer.array_store.ArrayStore` (a
:class:`~episodes.buffer.view_store.ViewStore` too) copies on write: the copy's leaves are
views of the stored rows, cut there, so its appends grow into new arrays while the original's
land past the rows the copy sees; each has its own pending appends; and both are marked
shared, so that the next write into stored rows (``set``) copies them first. Pops and
truncates never change a leaf another array sees (:mod:`~episodes.buffer.row_drops`). So
neither ever writes into the other's rows, nor into a block both view.

A numpy column whose first item chose its dtypes goes back to its empty layout when emptied
again; :func:`untyped_data` is that layout as an empty batch, which a buffer's state carries
(``untyped_data``) and :func:`remember_untyped` gives back to a restored column.

Example:
    >>> import copy
    >>> from episodes.buffer.array_store import ArrayStore
    >>> store = ArrayStore.from_batch(np.zeros(3)); clone = copy.copy(store)
    >>> clone.set([0], [5.0]); store.append(1.0)
    >>> clone.data.tolist(), store.data.tolist()
    ([5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from episodes.structs import flatten, skeleton, unflatten

if TYPE_CHECKING:
    from episodes.buffer.array_store import ArrayStore

S = TypeVar("S", bound="ArrayStore")


def field_copy(store: ArrayStore, cls: type[S], leaves: list[np.ndarray], size: int) -> S:
    """A ``cls`` store over ``leaves`` (``size`` items) with ``store``'s layout, unshared.

    Built field by field: range copies run for every column of every cut and slice.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch(np.arange(3))
        >>> field_copy(store, ArrayStore, [np.arange(5)], 5).data.tolist()
        [0, 1, 2, 3, 4]
    """
    copy = cls.__new__(cls)
    copy._leaves, copy.structure, copy.size = leaves, store.structure, size
    copy.typed, copy._pending = store.typed, []
    # The empty layout an emptied column returns to: empty arrays, so nothing writes into them.
    copy._before_adoption = store._before_adoption
    copy._kind, copy._row_dtype, copy._row_shape = store._kind, store._row_dtype, store._row_shape
    copy._always_fit, copy._ranged = store._always_fit, store._ranged
    copy._low, copy._high, copy._shared = store._low, store._high, False
    if not size and copy._before_adoption is not None:  # an empty copy is the column emptied
        copy._forget_adopted_layout()
    return copy


def shallow_copy(store: S) -> S:
    """``copy.copy(store)``: views of its stored rows, the two marked shared (see above).

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch(np.zeros(2)); clone = shallow_copy(store)
        >>> store.set([1], [4.0]); clone.data.tolist(), store.data.tolist()
        ([0.0, 0.0], [0.0, 4.0])
    """
    size = store.size
    clone = field_copy(store, type(store), [leaf[:size] for leaf in store.leaves], size)
    store._shared = clone._shared = True
    return clone


def own_leaves(store: ArrayStore) -> list[np.ndarray]:
    """Copies of ``store``'s stored rows, made its leaves: what it writes into once shared.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> array = np.zeros(2); store = ArrayStore.from_batch(array)
        >>> np.shares_memory(own_leaves(store)[0], array)
        False
    """
    size = store.size
    store._leaves = [leaf[:size].copy() for leaf in store.leaves]
    store._shared = False
    return store._leaves


def untyped_data(store: Any) -> Any:
    """The empty batch a numpy column goes back to once emptied (None where it has none).

    Only a column whose first item chose its dtypes has one; a list store has none.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.untyped(); store.append(1)
        >>> untyped_data(store), untyped_data(ArrayStore.from_batch(np.arange(2)))
        (array([], dtype=float64), None)
    """
    before = getattr(store, "_before_adoption", None)
    if before is None:
        return None
    leaves, structure = before
    return unflatten(structure, [leaf[:0].copy() for leaf in leaves])


def remember_untyped(store: ArrayStore, data: Any) -> None:
    """Gives ``store``, a numpy column holding items, the empty layout ``data`` it goes back to.

    ``data`` is :func:`untyped_data`'s batch, as a buffer state carries it.

    Raises:
        ValueError: ``data`` is no batch of empty arrays, or ``store`` holds no items (its
            dtypes are then not yet chosen). ``store`` is left as it was.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch(np.arange(1)); remember_untyped(store, np.zeros(0))
        >>> store.truncate(0); store.append(2.5); store.data.tolist()
        [2.5]
    """
    try:
        leaves, structure = flatten(data)
    except (TypeError, ValueError) as err:  # dm-tree refusing a dict of mixed key types
        raise ValueError(f"buffer state's untyped_data is no batch: {err}") from None
    if not leaves or not all(
        isinstance(leaf, np.ndarray) and leaf.ndim >= 1 and len(leaf) == 0 for leaf in leaves
    ):
        raise ValueError(
            "buffer state's untyped_data must be a batch of empty arrays (a column's layout "
            f"before its first item), got {type(data).__name__} {_short(data)}"
        )
    if len(store) == 0:
        raise ValueError(
            "buffer state's untyped_data needs a column holding items (the first of which "
            "chose its dtypes)"
        )
    store._before_adoption = ([np.array(leaf) for leaf in leaves], skeleton(structure))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

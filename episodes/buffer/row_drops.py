"""Dropping rows of a numpy store without changing arrays handed out before.

Reads of a numpy'd column are views of its leaves (contract §3.1), and a buffer built from an
array wraps it. ``pop`` and ``truncate`` must not change what those show, as RLlib's (which
build new arrays) do not: a leaf something else may see is never shifted in place, and is cut
to its new length, so the next append grows into a new array instead of writing into the
dropped rows. A leaf that owns its memory and that nothing else references (numpy views hold a
reference to the array they view; ``ndarray.resize``'s reference check relies on that too) is
changed in place, so joining chunks (a pop, then appends) stays amortised O(1).

A read-only leaf (``flags.writeable`` False: a frozen array, ``np.broadcast_to`` or
``np.frombuffer`` views, arrays unpickled from read-only out-of-band buffers) counts as shared
whatever its references: it is never written into, and the first write into stored rows
(``set``) copies it first (:func:`writeable_leaves`), as a store ``copy.copy`` shares is.

Example:
    >>> leaves = [np.arange(8)]; view = leaves[0][:4]
    >>> deleted(leaves, 4, 0)[0].tolist(), view.tolist()  # a view: new arrays
    ([1, 2, 3], [0, 1, 2, 3])
    >>> del view
    >>> deleted(leaves, 4, 0)[0] is leaves[0]  # nothing else sees it: shifted in place
    True
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import numpy as np

from episodes.buffer.array_copies import own_leaves
from episodes.buffer.store_bounds import checked_position, checked_size

if TYPE_CHECKING:
    from episodes.buffer.array_store import ArrayStore

_getrefcount = getattr(sys, "getrefcount", None)


def _most_refs(leaves: list[np.ndarray]) -> int:
    # The references each leaf has, counted the same way for the leaves and for the probe.
    return max(_getrefcount(leaf) for leaf in leaves)  # type: ignore[misc]


def unshared(leaves: list[np.ndarray]) -> bool:
    """True if nothing but ``leaves`` references a leaf or the memory it views, all writeable.

    The count is compared with a fresh array's in a fresh list, measured the same way (once):
    interpreters count the references of locals differently. Without reference counts
    (not CPython), every leaf is taken as shared.

    Example:
        >>> leaves = [np.zeros(3)]; unshared(leaves)
        True
        >>> view = leaves[0][1:]; unshared(leaves)  # a read views it
        False
        >>> unshared([np.zeros(3)[1:]])  # a view of an array nothing else holds
        True
        >>> unshared([np.broadcast_to(np.zeros(1), (3,))])  # read-only
        False
    """
    if _getrefcount is None or not writeable(leaves):
        return False
    if _most_refs(leaves) > _probe_refs()[0]:
        return False
    # A leaf may view an array made for it alone (a stacked column reshaped): it is unshared
    # when that array owns its memory and nothing but the leaf references it.
    viewing = [leaf.base for leaf in leaves if leaf.base is not None]
    if not viewing:
        return True
    if not all(isinstance(base, np.ndarray) and base.base is None for base in viewing):
        return False
    return _most_refs(viewing) <= _probe_refs()[1]


def writeable(leaves: list[np.ndarray]) -> bool:
    """True if every leaf may be written in place (numpy's ``flags.writeable``).

    Example:
        >>> frozen = np.zeros(2); frozen.flags.writeable = False
        >>> writeable([np.zeros(2)]), writeable([np.zeros(2), frozen])
        (True, False)
    """
    for leaf in leaves:
        if not leaf.flags.writeable:
            return False
    return True


def writeable_leaves(store: ArrayStore) -> list[np.ndarray]:
    """``store``'s leaves to write stored rows into, made its own first where they must be.

    A shared store copies every leaf (:func:`~episodes.buffer.array_copies.own_leaves`);
    otherwise only the read-only leaves are copied (whole, so that all keep one capacity), and
    a writeable leaf, a given array too, is written in place as ever.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> frozen = np.zeros(2); frozen.flags.writeable = False; given = np.zeros(2)
        >>> store = ArrayStore.from_batch({"a": frozen, "b": given})
        >>> [(np.shares_memory(a, frozen), np.shares_memory(a, given))
        ...  for a in writeable_leaves(store)]
        [(False, False), (False, True)]
    """
    leaves = store.leaves
    if store._shared:
        return own_leaves(store)
    for leaf in leaves:  # writeable() inlined: set and set_rows run it every call
        if not leaf.flags.writeable:
            store._leaves = leaves = [a if a.flags.writeable else a.copy() for a in leaves]
            break
    return leaves


def _probe_refs() -> tuple[int, int]:
    """The counts of an array only a list holds, and of one only a view and a list hold.

    Measured once, the same way as the leaves' (:func:`_most_refs`).
    """
    global _PROBED
    if _PROBED is None:
        probe = np.empty(2).reshape(1, 2)  # alive while its base is counted, as a leaf is
        _PROBED = _most_refs([np.empty(0)]), _most_refs([cast(np.ndarray, probe.base)])
    return _PROBED


_PROBED: tuple[int, int] | None = None


def deleted(leaves: list[np.ndarray], size: int, position: int) -> list[np.ndarray]:
    """``leaves`` (``size`` rows stored) without row ``position``, by the rules above.

    Example:
        >>> leaves = [np.arange(4)]; view = leaves[0][:]
        >>> deleted(leaves, 4, 1)[0].tolist(), deleted(leaves, 4, 3)[0].tolist()
        ([0, 2, 3], [0, 1, 2])
    """
    position = checked_position(position, size)
    if unshared(leaves):
        for leaf in leaves:
            leaf[position : size - 1] = leaf[position + 1 : size]
        return leaves
    if position == size - 1:  # O(1): no spare room, so appends grow into new arrays
        return [leaf[:position] for leaf in leaves]
    return [np.delete(leaf[:size], position, axis=0) for leaf in leaves]


def truncated(leaves: list[np.ndarray], stored: int, size: int) -> list[np.ndarray]:
    """``leaves`` (``stored`` rows) keeping their first ``size``; shared ones cut there.

    A shared leaf is cut to no spare room; ``size == stored`` leaves every leaf as it is.

    Example:
        >>> leaves = [np.arange(4)]; view = leaves[0][:]
        >>> len(truncated(leaves, 4, 2)[0]), len(truncated([np.arange(4)], 4, 2)[0])
        (2, 4)
    """
    if checked_size(size, stored) == stored or unshared(leaves):
        return leaves
    return [leaf[:size] for leaf in leaves]

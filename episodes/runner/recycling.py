"""Block memory a later call records into again, once nothing reads it any more.

When a call's blocks run out of room, the rows still needed move to new blocks of several
calls' rows: tens of MB at thousands of sub-envs. Fresh arrays of that size are fresh pages
from the kernel, which the copy and every later vector step fault in and zero. The recorder
keeps the last few block sets it made in a :class:`BlockPool` and takes one back when nothing
but the pool refers to any of its arrays: a numpy view (a chunk's column, a recording's rows)
and ``torch.from_numpy`` (a storage adopting a block) each hold a reference to the array whose
memory they use, so an array the pool alone holds is read by nobody, and writing into it
changes no chunk handed out earlier. Where reference counts do not say that (another Python
than CPython, or CPython without its global lock) the pool never hands anything back.

Example:
    >>> from episodes.runner.blocks import Blocks
    >>> pool = BlockPool()
    >>> first = Blocks.allocate(np.zeros((2, 3)), rows=4)
    >>> pool.add(first)
    >>> pool.take(first, rows=4) is None  # ``first`` is still referred to here
    True
    >>> del first
    >>> again = pool.take(Blocks.allocate(np.zeros((2, 3)), rows=1), rows=4)
    >>> again.step_rows
    4
"""

from __future__ import annotations

import sys
import sysconfig
from typing import Any

import numpy as np

from episodes.runner.blocks import Blocks, Column

KEPT = 3  # the blocks recorded into, those of the chunks still held, and one free set


def _held_once_count() -> int:
    # What ``sys.getrefcount`` says of an array that one list holds, read the way
    # ``BlockPool`` reads it (the count includes the call's own reference on some versions).
    holder = [np.empty(1)]
    return sys.getrefcount(holder[0])


def _counts_are_exact() -> bool:
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return sys.implementation.name == "cpython" and not free_threaded


HELD_ONCE = _held_once_count()
COUNTS_ARE_EXACT = _counts_are_exact()


def step_arrays(blocks: Blocks) -> list[Any]:
    """The ``[rows, N]`` step-row arrays of ``blocks``, one per flag or reward block.

    Example:
        >>> blocks = Blocks.allocate(np.zeros(2), rows=3)
        >>> [a.dtype.name for a in step_arrays(blocks)]
        ['float64', 'bool', 'bool', 'bool']
    """
    return [blocks.rewards, blocks.terminated, blocks.truncated, blocks.dead]


def columns_of(blocks: Blocks) -> list[Column]:
    """The observation, action and extra-output columns of ``blocks``, in a fixed order.

    Example:
        >>> len(columns_of(Blocks.allocate(np.zeros(2), rows=3)))  # no action block yet
        1
    """
    columns = [blocks.obs]
    if blocks.actions is not None:
        columns.append(blocks.actions)
    return columns + [blocks.extras[key] for key in sorted(blocks.extras)]


def layout(blocks: Blocks) -> tuple[Any, ...]:
    """What two block sets must share for one to take the other's rows.

    Every leaf's ``[N, ...]`` shape and dtype, the item structures, the extra-output keys.

    Example:
        >>> a = Blocks.allocate(np.zeros((2, 3)), rows=3)
        >>> b = Blocks.allocate(np.zeros((2, 3)), rows=9)
        >>> layout(a) == layout(b), layout(a) == layout(Blocks.allocate(np.zeros(2), rows=3))
        (True, False)
    """
    leaves = tuple(
        (leaf.shape[1:], leaf.dtype) for column in columns_of(blocks) for leaf in column.leaves
    )
    structures = tuple(repr(column.structure) for column in columns_of(blocks))
    return leaves, structures, tuple(sorted(blocks.extras)), blocks.times is None


def _held_by_pool_only(blocks: Blocks) -> bool:
    for column in columns_of(blocks):
        leaves = column.leaves
        for j in range(len(leaves)):
            if sys.getrefcount(leaves[j]) != HELD_ONCE:
                return False
    arrays = step_arrays(blocks)
    # ``arrays`` is a second holder of each step array, besides the blocks' own attribute.
    return all(sys.getrefcount(arrays[j]) == HELD_ONCE + 1 for j in range(len(arrays)))


class BlockPool:
    """The last ``KEPT`` block sets a recorder made, handed back once only it holds them.

    Example:
        >>> pool = BlockPool()
        >>> pool.add(Blocks.allocate(np.zeros(2), rows=6))
        >>> pool.take(Blocks.allocate(np.zeros(2), rows=1), rows=5).step_rows  # held by none
        6
        >>> pool.take(Blocks.allocate(np.zeros(2), rows=1), rows=5) is None  # taken: gone
        True
    """

    def __init__(self) -> None:
        self._sets: list[Blocks] = []

    def add(self, blocks: Blocks) -> None:
        """Keeps ``blocks`` (the newest) for a later :meth:`take`.

        The oldest beyond ``KEPT`` are let go (freed once nothing else holds them).

        Example:
            >>> pool = BlockPool()
            >>> for rows in range(1, KEPT + 2):
            ...     pool.add(Blocks.allocate(np.zeros(2), rows=rows))
            >>> len(pool) == KEPT
            True
        """
        if not COUNTS_ARE_EXACT:
            return
        # Columns of the pool's own: the recorder's blocks hold each array a second time
        # while it records into them, so the count tells the two apart.
        self._sets.append(blocks.sharing())
        del self._sets[:-KEPT]

    def take(self, like: Blocks, rows: int) -> Blocks | None:
        """A kept block set that only the pool refers to, removed from the pool.

        It has ``like``'s layout and at least ``rows`` step rows; None if none is free.

        Example:
            >>> pool = BlockPool()
            >>> pool.add(Blocks.allocate(np.zeros(2), rows=3))
            >>> pool.take(Blocks.allocate(np.zeros(2), rows=1), rows=4) is None  # too short
            True
        """
        wanted = layout(like)
        for k, blocks in enumerate(self._sets):
            if blocks.step_rows >= rows and layout(blocks) == wanted:
                if _held_by_pool_only(blocks):
                    return self._sets.pop(k)
        return None

    def __len__(self) -> int:
        return len(self._sets)

"""A numpy sum-tree (with a min-tree beside it): vectorized updates and prefix-sum searches."""

from __future__ import annotations

from typing import SupportsIndex

import numpy as np

from episodes.indexing import whole_number

__all__ = ["SumTree"]

# Eight children per node: their inclusive-comparison mask is 8 bytes, one uint64, so counting
# the children left of a mass is a multiply and a shift (see ``find``). Each level stands for
# three binary levels at about the numpy-call cost of one.
_FANOUT = 8
_SHIFT = 3
# The top level is searched with ``np.searchsorted`` over its prefix sums, which are
# recomputed on every update: a few microseconds for this many nodes, less than a level.
_TOP = 2048
# Byte sum of a uint64 holding 0/1 bytes: the product's top byte adds them all up.
_BYTE_SUM = np.uint64(0x0101010101010101)
_STRICT = np.triu(np.ones((_FANOUT, _FANOUT)), 1)  # row @ _STRICT: sums before each child
# Masses searched at once: the ``[n, 8] @ _STRICT`` product goes to the BLAS, whose threads
# start above some 16,000 rows and made one search of 31,747 masses take 139 ms instead of 5
# on two busy cores; in pieces the cost stays linear in the masses.
_FIND_AT_ONCE = 8192
_ONES = np.ones(_FANOUT)
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce
_INF_BITS = np.float64(np.inf).view(np.uint64)  # float64 bits read as uint64: see _checked
# The largest total a tree takes: the levels' sums, added in another order, round within far
# less than this margin of the exact sum, so none of them reaches inf.
_SAFE_TOTAL = float(np.finfo(np.float64).max) * (1 - 2.0**-20)


class SumTree:
    """Sums and minima over ``capacity`` non-negative leaf values.

    Levels have fanout 8 (level 0 holds the leaves; node ``i``'s children are ``8i..8i+7``
    one level down), and the top level, at most 2048 nodes, keeps its prefix sums, so a
    search is one ``np.searchsorted`` plus one step per level below the top (two for 100k
    leaves, three for 1M). Updating ``k`` leaves recomputes the ``k`` touched parents of
    each level from their children (one gather and one product per level), then the top's
    prefix sums; parents are recomputed rather than adjusted, so no rounding drift builds up.
    Zero leaves count as absent for the minimum and are never returned by :meth:`find`.

    Args:
        capacity: Number of leaves, an int >= 1 (numpy ints taken).

    Raises:
        ValueError: ``capacity`` is not an int >= 1 (a float is refused, not truncated).

    Example:
        >>> tree = SumTree(4)
        >>> tree.update(np.array([0, 1, 3]), np.array([1.0, 2.0, 1.0]))
        >>> tree.total, tree.min
        (4.0, 1.0)
        >>> tree.find(np.array([0.5, 1.5, 3.5])).tolist()
        [0, 1, 3]
    """

    def __init__(self, capacity: SupportsIndex):
        self.capacity = whole_number(capacity, "capacity", 1)
        depth = 0
        while -(-self.capacity // _FANOUT**depth) > _TOP:
            depth += 1
        width = max(1, -(-self.capacity // _FANOUT**depth))
        sizes = [width * _FANOUT ** (depth - level) for level in range(depth + 1)]
        self._sums = [np.zeros(size) for size in sizes]
        self._mins = [np.full(size, np.inf) for size in sizes]
        self._starts = np.zeros(width + 1)  # prefix sums of the top level, from 0 to total
        self._min = np.inf

    @property
    def depth(self) -> int:
        """Levels below the top (0 when the leaves are the top).

        Example:
            >>> SumTree(2048).depth, SumTree(2049).depth, SumTree(1_000_000).depth
            (0, 1, 3)
        """
        return len(self._sums) - 1

    def __repr__(self) -> str:
        return f"SumTree(capacity={self.capacity}, total={self.total})"

    @property
    def total(self) -> float:
        """Sum of all leaves.

        Example:
            >>> tree = SumTree(3); tree.update(np.array([0, 2]), np.array([0.5, 2.0]))
            >>> tree.total
            2.5
        """
        return float(self._starts[-1])

    @property
    def min(self) -> float:
        """Smallest non-zero leaf (``inf`` when all are zero).

        Example:
            >>> tree = SumTree(3); empty = tree.min; tree.rebuild(np.array([0.0, 2.0, 0.5]))
            >>> empty, tree.min
            (inf, 0.5)
        """
        return self._min

    def leaves(self, indices: np.ndarray | None = None) -> np.ndarray:
        """Leaf values (all ``capacity`` of them when ``indices`` is None).

        Example:
            >>> tree = SumTree(3)
            >>> tree.update(np.array([1]), np.array([2.0]))
            >>> tree.leaves().tolist(), tree.leaves(np.array([1, 1])).tolist()
            ([0.0, 2.0, 0.0], [2.0, 2.0])
        """
        if indices is None:
            return self._sums[0][: self.capacity].copy()
        return self._sums[0][indices]

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets leaves (the last value wins for repeated indices) and refreshes their parents.

        Raises:
            TypeError: ``indices`` that are not integers (floats and bools are not truncated).
            ValueError: ``indices`` and ``values`` that are not 1-D and equally long, an index
                outside ``[0, capacity)``, a value that is negative, NaN or infinite, or values
                whose sum with the other leaves would be infinite. The tree is unchanged then.

        Example:
            >>> tree = SumTree(10_000)
            >>> tree.update(np.array([7, 9_000, 7]), np.array([1.0, 3.0, 0.5]))
            >>> tree.total, tree.min, tree.depth
            (3.5, 0.5, 1)
        """
        nodes, values = self._checked(indices, values)
        if not self._sum_stays_finite(nodes, values):
            raise ValueError("update: these values would make the sum of all leaves infinite")
        self._write(nodes, values)

    def _sum_stays_finite(self, nodes: np.ndarray, values: np.ndarray) -> bool:
        """Whether the total stays finite once ``values`` (finite, >= 0) replace their leaves.

        Judged against :data:`_SAFE_TOTAL`, a hair below float64's maximum: the levels add the
        leaves in another order than this estimate does, so their rounding must not reach inf.
        """
        with np.errstate(over="ignore"):
            added = float(values.sum())
            if self.total + added <= _SAFE_TOTAL:  # a bound: replaced leaves count twice
                return True
            last = len(nodes) - 1 - np.unique(nodes[::-1], return_index=True)[1]  # last wins
            replaced = float(self.leaves(nodes[last]).sum())
            return self.total - replaced + float(values[last].sum()) <= _SAFE_TOTAL

    def _write(self, nodes: np.ndarray, values: np.ndarray) -> None:
        """``update`` without its checks, for callers that checked (the prioritized buffer)."""
        nodes = np.asarray(nodes, np.int64)
        values = np.asarray(values, np.float64)
        sums, mins = self._sums, self._mins
        sums[0][nodes] = values
        mins[0][nodes] = np.where(values > 0, values, np.inf)
        if len(nodes) * _FANOUT > len(sums[0]) // 4:  # many leaves: recompute every level
            self._refresh()
            return
        for level in range(1, len(sums)):
            # Repeated parents are recomputed twice to the same value: cheaper than unique().
            nodes = nodes >> _SHIFT
            children = np.take(sums[level - 1].reshape(-1, _FANOUT), nodes, axis=0)
            sums[level][nodes] = children @ _ONES
            children = np.take(mins[level - 1].reshape(-1, _FANOUT), nodes, axis=0)
            # Fast axis: one pass per child; the ufunc itself, not ndarray.min's Python wrapper.
            mins[level][nodes] = _MIN(children.T.copy(), axis=0)
        self._refresh_top()

    def _checked(self, indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``update``'s arguments as int64 and float64 arrays, checked: one reduction each."""
        given = np.asarray(indices)
        if given.dtype.kind not in "iu" and given.size:
            raise TypeError(f"update: indices must be integers, got dtype {given.dtype}")
        nodes = given.astype(np.int64, copy=False)  # uint64 past int64 turn negative: refused
        values = np.asarray(values, np.float64)
        if nodes.ndim != 1 or values.shape != nodes.shape:
            raise ValueError(
                f"update: indices (shape {nodes.shape}) and values (shape {values.shape}) "
                "must be 1-D and equally long"
            )
        if not len(nodes):
            return nodes, values
        # Read as uint64, a negative index lies above every capacity, and a negative value
        # (sign bit set), inf or NaN at or above inf's bits; -0.0 too, looked at again.
        if _MAX(nodes.view(np.uint64)) >= self.capacity:
            bad = given[(nodes < 0) | (nodes >= self.capacity)][:5]
            raise ValueError(f"update: indices must be in [0, {self.capacity}), got {bad.tolist()}")
        if _MAX(values.view(np.uint64)) >= _INF_BITS:
            bad = values[~(np.isfinite(values) & (values >= 0))][:5]
            if len(bad):
                raise ValueError(f"update: values must be finite and >= 0, got {bad.tolist()}")
        return nodes, values

    def rebuild(self, values: np.ndarray) -> None:
        """Replaces every leaf at once (``len(values) <= capacity``; the rest become 0).

        Raises:
            ValueError: ``values`` is not 1-D or longer than ``capacity``, or holds a value
                that is negative, NaN or infinite, or values whose sum is infinite (the tree
                unchanged).

        Example:
            >>> tree = SumTree(3)
            >>> tree.rebuild(np.array([1.0, 0.0, 2.0]))
            >>> tree.total, tree.min, tree.find(np.array([1.0])).tolist()
            (3.0, 1.0, [2])
        """
        values = np.asarray(values, np.float64)
        if values.ndim != 1 or len(values) > self.capacity:
            raise ValueError(
                f"rebuild: values must be 1-D with at most capacity={self.capacity} entries, "
                f"got shape {values.shape}"
            )
        bad = values[~(np.isfinite(values) & (values >= 0))][:5]
        if len(bad):
            raise ValueError(f"rebuild: values must be finite and >= 0, got {bad.tolist()}")
        with np.errstate(over="ignore"):
            # A little above the bound updates keep: live leaves of a tree rebuild, whatever
            # order sums them.
            if not float(values.sum()) <= _SAFE_TOTAL * (1 + 2.0**-22):
                raise ValueError("rebuild: these values would make the sum of all leaves infinite")
        leaves = self._sums[0]
        leaves[:] = 0.0
        leaves[: len(values)] = values
        self._mins[0][:] = np.where(leaves > 0, leaves, np.inf)
        self._refresh()

    def _refresh(self) -> None:
        for level in range(1, len(self._sums)):
            self._sums[level][:] = self._sums[level - 1].reshape(-1, _FANOUT) @ _ONES
            children = self._mins[level - 1].reshape(-1, _FANOUT)
            out = self._mins[level]
            out[:] = children[:, 0]
            for j in range(1, _FANOUT):  # column by column: numpy reduces short rows slowly
                np.minimum(out, children[:, j], out=out)
        self._refresh_top()

    def _refresh_top(self) -> None:
        # np.cumsum is this ufunc call behind a Python wrapper (about 1.5 us an update).
        np.add.accumulate(self._sums[-1], out=self._starts[1:])
        self._min = float(_MIN(self._mins[-1]))

    def find(self, masses: np.ndarray) -> np.ndarray:
        """For each mass in ``[0, total)``, the leaf whose prefix-sum interval holds it.

        That is ``np.searchsorted(np.cumsum(leaves), masses, side="right")``: a mass on an
        interval's edge belongs to the next non-zero leaf. Rounding can leave a mass past the
        last child of a node (and masses outside ``[0, total)`` are past every leaf); those few
        are searched again over all leaves and land on the nearest non-zero leaf, so every
        returned leaf is non-zero (when any is). Masses are searched ``_FIND_AT_ONCE`` at a
        time (the same leaves as one search).

        Example:
            >>> tree = SumTree(5)
            >>> tree.update(np.arange(5), np.array([1.0, 0.0, 2.0, 0.0, 0.0]))
            >>> tree.find(np.array([0.0, 1.0, 2.9, 3.0, -1.0])).tolist()
            [0, 2, 2, 2, 0]
        """
        given = np.asarray(masses, np.float64)
        if len(given) <= _FIND_AT_ONCE:
            return self._find_some(given)
        pieces = range(0, len(given), _FIND_AT_ONCE)
        return np.concatenate([self._find_some(given[i : i + _FIND_AT_ONCE]) for i in pieces])

    def _find_some(self, given: np.ndarray) -> np.ndarray:
        starts = self._starts
        nodes = np.searchsorted(starts, given, "right")
        nodes -= 1  # the last top node starting at or before the mass
        np.minimum(np.maximum(nodes, 0, out=nodes), len(starts) - 2, out=nodes)
        rest = given - starts[nodes]
        np.fmax(rest, 0.0, out=rest)  # masses below 0 (or NaN) go to the first child
        rows = np.arange(0, len(given) * _FANOUT, _FANOUT)
        for level in range(self.depth - 1, -1, -1):
            children = np.take(self._sums[level].reshape(-1, _FANOUT), nodes, axis=0)
            before = children @ _STRICT
            at_or_left = (before <= rest[:, None]).view(np.uint64)[:, 0]
            child = (at_or_left * _BYTE_SUM >> np.uint64(56)).astype(np.int64)  # >= 1
            child -= 1
            nodes <<= _SHIFT
            nodes += child
            if level:
                rest -= before.ravel()[rows + child]
        leaves = self._sums[0]
        bad = leaves[nodes] <= 0
        if bad.any():
            nodes[bad] = self._find_exact(given[bad])
        return nodes

    def _find_exact(self, masses: np.ndarray) -> np.ndarray:
        leaves = self._sums[0]
        found = np.searchsorted(np.cumsum(leaves), masses, "right")
        nonzero = np.flatnonzero(leaves > 0)
        if not len(nonzero):  # an all-zero tree: a stored leaf, not the padding past them
            return np.minimum(found, self.capacity - 1)
        return np.clip(found, nonzero[0], nonzero[-1])

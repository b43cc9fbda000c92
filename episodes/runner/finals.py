"""The final observations of ended episodes that the blocks do not hold.

In same-step and disabled autoreset modes the row after an episode's last step already holds
the next episode's first observation; the ending's own final observation is kept here, one
batch per vector step, looked up by the chunk table (``table.final``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.structs import unflatten

__all__ = ["Finals"]


class Finals:
    """The final observations of the episodes that ended, kept apart from the blocks.

    Appended per vector step as whole batches (the ended envs' rows), looked up by index: one
    entry per ending, ``rows[k]``/``envs[k]`` its done row and env, ``leaves`` its observation
    leaves (``[K, ...]`` each, same structure as the observation block).

    Example:
        >>> finals = Finals(None)
        >>> finals.add(np.array([3]), np.array([1]), [np.array([[0.5, 0.5]])])
        >>> finals.freeze(); finals.rows.tolist(), finals.item(0).tolist()
        ([3], [0.5, 0.5])
    """

    def __init__(self, structure: Any):
        self.structure = structure
        self.rows = np.zeros(0, np.int64)
        self.envs = np.zeros(0, np.int64)
        self.leaves: list[np.ndarray] = []
        self._parts: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []

    def add(self, rows: np.ndarray, envs: np.ndarray, leaves: list[np.ndarray]) -> None:
        """Appends the endings of one step (``leaves``: ``[k, ...]`` arrays).

        Example:
            >>> finals = Finals(None)
            >>> finals.add(np.array([2, 2]), np.array([0, 1]), [np.array([[1.0], [2.0]])])
            >>> finals.rows.tolist()  # joined by freeze()
            []
        """
        self._parts.append((rows, envs, leaves))

    def freeze(self) -> None:
        """Joins the appended batches into ``rows``, ``envs`` and ``leaves``.

        Example:
            >>> finals = Finals(None)
            >>> finals.add(np.array([1]), np.array([0]), [np.array([[1.0]])])
            >>> finals.add(np.array([4]), np.array([1]), [np.array([[2.0]])])
            >>> finals.freeze()
            >>> finals.rows.tolist(), finals.envs.tolist(), finals.leaves[0].tolist()
            ([1, 4], [0, 1], [[1.0], [2.0]])
        """
        if not self._parts:
            return
        parts = self._parts
        if self.leaves:
            parts = [(self.rows, self.envs, self.leaves), *parts]
        self.rows = np.concatenate([p[0] for p in parts])
        self.envs = np.concatenate([p[1] for p in parts])
        self.leaves = [np.concatenate(group) for group in zip(*(p[2] for p in parts))]
        self._parts = []

    def item(self, k: int) -> Any:
        """Ending ``k``'s final observation (views).

        Example:
            >>> from episodes.structs import flatten
            >>> leaves, structure = flatten({"x": np.array([[1.0, 2.0]])})
            >>> finals = Finals(structure)
            >>> finals.add(np.array([0]), np.array([0]), leaves); finals.freeze()
            >>> finals.item(0)["x"].tolist()
            [1.0, 2.0]
        """
        return unflatten(self.structure, [leaf[k] for leaf in self.leaves])

    def index_of(self, rows: np.ndarray, envs: np.ndarray, width: int) -> np.ndarray:
        """The entry of each (row, env) ending (``width`` > every row), vectorised.

        Example:
            >>> finals = Finals(None)
            >>> finals.add(np.array([3, 1]), np.array([0, 1]), [np.zeros((2, 1))]); finals.freeze()
            >>> finals.index_of(np.array([1, 3]), np.array([1, 0]), width=10).tolist()
            [1, 0]
        """
        keys = self.envs * width + self.rows
        order = np.argsort(keys, kind="stable")
        found = np.searchsorted(keys[order], envs * width + rows)
        return order[np.minimum(found, max(len(order) - 1, 0))]

    def kept(self, mask: np.ndarray, row_shift: int) -> Finals:
        """A new store of the entries in ``mask``, their rows moved by ``row_shift``.

        Example:
            >>> finals = Finals(None)
            >>> finals.add(np.array([3, 5]), np.array([0, 1]), [np.array([[1.0], [2.0]])])
            >>> finals.freeze()
            >>> kept = finals.kept(np.array([False, True]), row_shift=-4)
            >>> kept.rows.tolist(), kept.envs.tolist(), kept.leaves[0].tolist()
            ([1], [1], [[2.0]])
        """
        out = Finals(self.structure)
        if mask.any():
            out.add(self.rows[mask] + row_shift, self.envs[mask], [x[mask] for x in self.leaves])
            out.freeze()
        return out

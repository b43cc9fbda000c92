"""Rows of a list-mode column, where its space says a nested list is one array.

A list-mode column stores its items leaf by leaf along their structure, so a Box item given
as a Python list ``[x, y]`` is two leaves. ``to_numpy`` reads the same items with their space
(``batch_in_space``): there such a list is one row. :func:`row_plan` works out once, per
column, which stored leaves make one row, so the step readers (``Dataset.steps``, the torch
datasets) give a list-mode piece's items as a numpy'd piece holds them, at one ``np.stack``
per row part of each read.

Example:
    >>> import gymnasium as gym
    >>> box = gym.spaces.Box(-5, 5, (2,), np.float32)
    >>> plan = row_plan([0, 0], box, [np.zeros((3,))] * 2)
    >>> plan.rows([np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])], batched=True).tolist()
    [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium.spaces as gs
import numpy as np
import tree

from episodes.spaces import unstackable_space
from episodes.spaces.batching import check_sortable_keys

__all__ = ["RowPlan", "row_plan"]

_ARRAY_SPACES = (gs.Box, gs.Discrete, gs.MultiDiscrete, gs.MultiBinary)


@dataclass(frozen=True)
class RowPlan:
    """How a column's stored leaves become its items' parts.

    Attributes:
        skeleton: The item structure once rows are one leaf (None: the item is one row).
        parts: Per output leaf, a stored leaf's index, or ``(first, stop, shape)``: stored
            leaves ``[first, stop)`` stacked into one row of ``shape`` (before the leaf's own
            shape).

    Example:
        >>> plan = RowPlan(None, ((0, 2, (2,)),))
        >>> plan.rows([np.float64(1.0), np.float64(2.0)], batched=False).tolist()
        [1.0, 2.0]
    """

    skeleton: Any
    parts: tuple[Any, ...]

    def rows(self, leaves: list[Any], *, batched: bool, copy: bool = False) -> Any:
        """The items from their stored leaves (``batched``: each leaf with a time axis first).

        Stacked rows are new read-only arrays (``copy``: writable); other leaves are given as
        they are (``copy``: copied).

        Example:
            >>> plan = RowPlan({"a": 0, "b": 0}, (0, (1, 3, (2,))))
            >>> out = plan.rows([np.arange(2), np.zeros(2), np.ones(2)], batched=True)
            >>> out["a"].tolist(), out["b"].tolist()
            ([0, 1], [[0.0, 1.0], [0.0, 1.0]])
        """
        out = []
        for part in self.parts:
            if part.__class__ is int:
                leaf = leaves[part]
                out.append(np.array(leaf) if copy else leaf)
                continue
            first, stop, shape = part
            group = leaves[first:stop]
            stacked = np.stack(group, axis=1 if batched else 0)
            lead = stacked.shape[:1] if batched else ()
            stacked = stacked.reshape(lead + shape + group[0].shape[len(lead) :])
            if not copy:
                stacked.flags.writeable = False  # as the views beside it: copy one to change it
            out.append(stacked)
        return out[0] if self.skeleton is None else tree.unflatten_as(self.skeleton, out)


def row_plan(skeleton: Any, space: Any, views: list[np.ndarray]) -> RowPlan | None:
    """The plan for a list-mode column, or None where no stored leaves make one row.

    ``skeleton`` is the items' stored structure (leaves 0), ``views`` the stored leaves (time
    axis first), in the order ``tree.flatten`` gives them. Leaves join into a row where the
    space has a Box, Discrete, MultiDiscrete or MultiBinary part (through Dict and Tuple parts,
    as ``batch_in_space`` walks them) and the item there is a nested list or tuple that numpy
    stacks: as many leaves at each level, leaves of one shape, dtypes with a common one. Items
    nested otherwise, and spaces ``to_numpy`` would not stack (a Sequence, Graph or OneOf part),
    keep their stored structure, as ``to_numpy`` keeps such a column in list mode.

    Example:
        >>> import gymnasium as gym
        >>> pair = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiBinary(3)))
        >>> row_plan((0, [0, 0, 0]), pair, [np.zeros(4, int)] * 4)
        RowPlan(skeleton=(0, 0), parts=(0, (1, 4, (3,))))
        >>> row_plan([0, 0], None, [np.zeros(4)] * 2) is None  # no space: the items' structure
        True
    """
    if space is None or not isinstance(skeleton, (dict, list, tuple)):
        return None
    if unstackable_space(space) is not None:
        return None
    try:
        check_sortable_keys(space)
    except ValueError:  # to_numpy refuses such a space: its items stay as stored
        return None
    parts: list[Any] = []
    new = _walk(skeleton, space, views, [0], parts)
    if all(part.__class__ is int for part in parts):
        return None
    return RowPlan(new if isinstance(new, (dict, list, tuple)) else None, tuple(parts))


def _walk(node: Any, space: Any, views: list[np.ndarray], at: list[int], parts: list[Any]) -> Any:
    """``node`` with its rows made leaves; adds each output leaf's source to ``parts``."""
    if not isinstance(node, (dict, list, tuple)):
        parts.append(at[0])
        at[0] += 1
        return 0
    if isinstance(space, _ARRAY_SPACES) and isinstance(node, (list, tuple)):
        count = len(tree.flatten(node))
        shape = _nest_shape(node)
        if shape is not None and _stackable(views[at[0] : at[0] + count]):
            parts.append((at[0], at[0] + count, shape))
            at[0] += count
            return 0
    elif isinstance(space, gs.Dict) and isinstance(node, dict) and set(node) <= set(space.spaces):
        # The stored leaves follow dm-tree's order: sorted keys.
        walked = {
            key: _walk(node[key], space.spaces[key], views, at, parts) for key in sorted(node)
        }
        return {key: walked[key] for key in node}
    elif (
        isinstance(space, gs.Tuple)
        and isinstance(node, (list, tuple))
        and len(node) == len(space.spaces)
    ):
        walked_parts = [_walk(n, s, views, at, parts) for n, s in zip(node, space.spaces)]
        return tuple(walked_parts) if isinstance(node, tuple) else walked_parts
    return _kept(node, at, parts)


def _kept(node: Any, at: list[int], parts: list[Any]) -> Any:
    """``node`` as stored: each of its leaves is an output leaf."""
    for _ in tree.flatten(node):
        parts.append(at[0])
        at[0] += 1
    return node


def _nest_shape(node: Any) -> tuple[int, ...] | None:
    """The shape numpy gives a nested list (leaves as scalars), or None if it is ragged."""
    if not isinstance(node, (list, tuple)):
        return None if isinstance(node, dict) else ()
    if not node:
        return None  # holds no leaf: such items are stored as JSON, never as leaves
    shapes = {_nest_shape(child) for child in node}
    if len(shapes) != 1 or None in shapes:
        return None
    (inner,) = shapes
    assert inner is not None
    return (len(node), *inner)


def _stackable(views: list[np.ndarray]) -> bool:
    """Whether the leaves stack into one array as numpy stacks the items themselves."""
    if len({v.shape for v in views}) != 1:
        return False
    try:
        joined = np.result_type(*{v.dtype for v in views})
    except TypeError:  # no common dtype (text beside numbers): numpy'ing refuses such items
        return False
    return joined != np.dtype(object)

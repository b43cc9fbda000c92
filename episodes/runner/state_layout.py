"""The layout of a recurrent policy's state, which every later state must repeat.

Example:
    >>> import numpy as np
    >>> layout = StateLayout.of(np.zeros((4, 8)), num_envs=4, axis=0)
    >>> layout.shapes
    [(4, 8)]
    >>> layout.check(np.zeros((4, 8)))  # the same leaves: nothing to say
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tree

from episodes.runner.policy import check_holds_data
from episodes.structs import flatten

__all__ = ["StateLayout", "check_state_axis", "leaf_shape"]


class StateLayout:
    """The leaf shapes of a recurrent policy's first state, which every later state repeats.

    A reset pairs the state's leaves with a fresh ``initial_state``'s, leaf by leaf: a state
    whose leaves differ in number or shape is refused before the env steps (a containers'
    type may differ: a namedtuple and a tuple hold the same leaves).
    """

    __slots__ = ("shapes", "structure")

    def __init__(self, shapes: list[tuple[int, ...]], structure: Any):
        self.shapes = shapes
        self.structure = structure

    @classmethod
    def of(cls, state: Any, num_envs: int, axis: int) -> StateLayout:
        """Checks a first state (leaves with ``num_envs`` entries along ``axis``); its layout."""
        if state is None:
            raise ValueError(
                "initial_state returned None: a recurrent policy's state is an array/tensor or "
                "a tuple/dict of them, with one entry per sub-env (the runner resets a "
                "sub-env's entries when it starts an episode); a policy without a state is "
                "a feed-forward policy(obs) -> (actions, extras)"
            )
        leaves, structure = flatten(state)
        check_state_axis(leaves, num_envs, axis)
        for leaf in leaves:  # reset steps copy its entries into the policy's state
            check_holds_data(leaf, "initial_state's state")
        return cls([leaf_shape(leaf) for leaf in leaves], structure)

    def check(self, state: Any, source: str = "the policy returned") -> None:
        """Raises a ``ValueError`` when ``state``'s leaves differ from the first state's."""
        if self.structure is None and getattr(state, "shape", None) == self.shapes[0]:
            return  # the usual single array or tensor: one comparison per step
        leaves, structure = flatten(state)
        shapes = [leaf_shape(leaf) for leaf in leaves]
        same = shapes == self.shapes
        if same and structure is not None and self.structure is not None:
            try:  # dict keys must match too; container types may differ
                tree.assert_same_structure(structure, self.structure, check_types=False)
            except (TypeError, ValueError):
                same = False
        if not same:
            raise ValueError(
                f"{source} a state of leaf shapes {shapes}, the first initial_state's are "
                f"{self.shapes}: every step's state holds the same leaves (a sub-env's reset "
                "takes its entries from initial_state, leaf by leaf)"
            )


def leaf_shape(leaf: Any) -> tuple[int, ...]:
    """The shape of an array, tensor or scalar leaf.

    Example:
        >>> leaf_shape(np.zeros((2, 3))), leaf_shape(1.0)
        ((2, 3), ())
    """
    return tuple(getattr(leaf, "shape", None) or np.shape(leaf))


def check_state_axis(leaves: list[Any], num_envs: int, axis: int) -> None:
    """Every state leaf must hold one entry per sub-env along ``axis`` (reset picks by it).

    Example:
        >>> check_state_axis([np.zeros((1, 4, 8))], num_envs=4, axis=1)
        >>> check_state_axis([np.zeros((4, 8))], num_envs=4, axis=1)
        Traceback (most recent call last):
        ...
        ValueError: a recurrent state leaf of shape (4, 8) has no axis 1 of 4 entries, ...
    """
    for leaf in leaves:
        shape = leaf_shape(leaf)
        if not -len(shape) <= axis < len(shape) or shape[axis] != num_envs:
            raise ValueError(
                f"a recurrent state leaf of shape {shape} has no axis {axis} of {num_envs} "
                "entries, one per sub-env: set state_batch_axis to the state's env axis"
            )

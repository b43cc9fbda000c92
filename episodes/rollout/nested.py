"""Mapping over nested observation dicts of tensors (the torch side of the tree helpers).

Only mappings are structure here: a rollout's observations are a tensor or a (nested) dict of
tensors, and tuples are shapes or hidden states, never branches. ``None`` passes through, so an
absent optional field (``privileged_observations``) needs no special case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["map_tree"]


def map_tree(fn: Callable[[Any], Any], tree: Any) -> Any:
    """Apply ``fn`` to every leaf of a (nested) mapping, keeping its keys and their order.

    Args:
        fn: Called once per leaf.
        tree: A leaf, ``None`` or a (nested) mapping of leaves.

    Returns:
        ``None`` for ``None``, ``fn(tree)`` for a leaf, else plain dicts of the mapped leaves.

    Example:
        >>> map_tree(lambda x: x * 2, {"b": 1, "a": {"c": 2}})
        {'b': 2, 'a': {'c': 4}}
        >>> map_tree(abs, None) is None
        True
    """
    if isinstance(tree, Mapping):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    return None if tree is None else fn(tree)

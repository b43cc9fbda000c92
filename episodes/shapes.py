"""The one shape rule that torch and numpy code share: trailing unit dimensions may differ.

A ``[T, N]`` value may stand for a ``[T, N, 1]`` field (rewards, dones, values) and the other
way round; any other difference is a different shape. Reshaping whatever has the right count
of elements instead would take a ``[N, T]`` value as ``[T, N]`` and mix envs and steps.

The rule lives here, beside the other pure helpers, because both the torch storage
(``episodes.rollout``) and the converter's torch-free arithmetic use it, and the converter's
torch-free path may not import anything under ``episodes.rollout``.

Example:
    >>> same_but_trailing_ones((4, 2), (4, 2, 1))
    True
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["same_but_trailing_ones"]


def same_but_trailing_ones(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether two shapes differ at most in trailing 1s (``[T, N]`` serves ``[T, N, 1]``).

    Args:
        a: A shape: a tuple of ints, a ``torch.Size`` or a numpy array's ``shape``.
        b: Another shape, of any of those kinds.

    Returns:
        True when the shapes are equal once the 1s at the end of each are dropped.

    Example:
        >>> same_but_trailing_ones((3, 2), (3, 2, 1)), same_but_trailing_ones((3, 2), (2, 3))
        (True, False)
        >>> same_but_trailing_ones((1,), ()), same_but_trailing_ones((3, 1, 2), (3, 2))
        (True, False)
    """
    return _trimmed(a) == _trimmed(b)


def _trimmed(shape: Sequence[int]) -> tuple[int, ...]:
    dims = tuple(shape)
    end = len(dims)
    while end and dims[end - 1] == 1:
        end -= 1
    return dims[:end]

"""A space as one short line of text, for ``episodes info``.

Gymnasium prints a Box with per-element bounds as the whole arrays (a 772-dim observation
space is a line of 10 KB with embedded newlines); a terminal summary prints a small bound's
array and names a larger one's range.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["space_text"]

#: Spaces without their own summary are cut to this many characters (on one line).
MAX_CHARS = 200

#: A Box bound of at most this many values is printed whole, a larger one as its range.
MAX_BOUND_VALUES = 8


@functools.singledispatch
def space_text(space: Any) -> str:
    """``space`` as one line: a Box's per-element bounds by their range, nested spaces walked.

    A Box bound that is the same everywhere is one value; one of at most
    :data:`MAX_BOUND_VALUES` values is its array, in order; a larger one is named by its range
    (``high in [1.0, 100.0]``: the smallest and largest of its values).

    Example:
        >>> space_text(gym.spaces.Box(0.0, np.arange(1.0, 101.0, dtype=np.float32)))
        'Box(0.0, high in [1.0, 100.0], (100,), float32)'
        >>> space_text(gym.spaces.Box(np.float32([-1, -0.5]), np.float32([2, 0.5])))
        'Box([-1.0, -0.5], [2.0, 0.5], (2,), float32)'
        >>> space_text(gym.spaces.Dict({"a": gym.spaces.Discrete(3)}))
        "Dict('a': Discrete(3))"
    """
    text = " ".join(str(space).split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


@space_text.register
def _box(space: gym.spaces.Box) -> str:
    low, high = _bound(space.low, "low"), _bound(space.high, "high")
    return f"Box({low}, {high}, {space.shape}, {space.dtype})"


@space_text.register
def _dict(space: gym.spaces.Dict) -> str:
    return f"Dict({', '.join(f'{key!r}: {space_text(inner)}' for key, inner in space.items())})"


@space_text.register
def _tuple(space: gym.spaces.Tuple) -> str:
    return f"Tuple({', '.join(space_text(inner) for inner in space)})"


def _bound(values: np.ndarray, name: str) -> str:
    """One value where every element's bound is the same, a small bound's array, else its range.

    The range says which bound it is and reads as an interval (``low in [-1.0, -0.5]``), so it
    cannot be taken for the bound's elements.
    """
    flat = values.reshape(-1)
    if not flat.size or (flat == flat[0]).all():
        return str(flat[0]) if flat.size else "[]"
    if flat.size <= MAX_BOUND_VALUES:
        return _array(values)
    return f"{name} in [{flat.min()}, {flat.max()}]"


def _array(values: np.ndarray) -> str:
    """``values`` as nested lists of numpy's scalar text (``0.1`` for a float32, not tolist's)."""
    if values.ndim == 0:
        return str(values[()])
    return f"[{', '.join(_array(row) for row in values)}]"

"""A space as one short line of text, for ``episodes info``.

Gymnasium prints a Box with per-element bounds as the whole arrays (a 772-dim observation
space is a line of 10 KB with embedded newlines); a terminal summary names each bound's range.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["space_text"]

#: Spaces without their own summary are cut to this many characters (on one line).
MAX_CHARS = 200


@functools.singledispatch
def space_text(space: Any) -> str:
    """``space`` as one line: a Box's per-element bounds by their range, nested spaces walked.

    Example:
        >>> space_text(gym.spaces.Box(0.0, np.arange(1.0, 101.0, dtype=np.float32)))
        'Box(0.0, [1.0 .. 100.0], (100,), float32)'
        >>> space_text(gym.spaces.Dict({"a": gym.spaces.Discrete(3)}))
        "Dict('a': Discrete(3))"
    """
    text = " ".join(str(space).split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


@space_text.register
def _box(space: gym.spaces.Box) -> str:
    return f"Box({_bound(space.low)}, {_bound(space.high)}, {space.shape}, {space.dtype})"


@space_text.register
def _dict(space: gym.spaces.Dict) -> str:
    return f"Dict({', '.join(f'{key!r}: {space_text(inner)}' for key, inner in space.items())})"


@space_text.register
def _tuple(space: gym.spaces.Tuple) -> str:
    return f"Tuple({', '.join(space_text(inner) for inner in space)})"


def _bound(values: np.ndarray) -> str:
    """One value where every element's bound is the same, else their range."""
    flat = values.reshape(-1)
    if not flat.size or (flat == flat[0]).all():
        return str(flat[0]) if flat.size else "[]"
    return f"[{flat.min()} .. {flat.max()}]"

"""The seed check every seeded object shares: the runner, the replay buffers, a runner group.

One rule everywhere: a seed is None or an int >= 0 (numpy ints taken). A float, a bool or a
string is refused, not truncated: ``seed=1.5`` or ``seed=True`` would otherwise run quietly as
seed 1, and a negative seed would fail later inside gymnasium or numpy.

Example:
    >>> check_seed(7), check_seed(None)
    (7, None)
"""

from __future__ import annotations

from typing import Any

from episodes.indexing import whole_number

__all__ = ["check_seed"]


def check_seed(seed: Any) -> int | None:
    """``seed`` as a seed: None, or an int >= 0 (numpy ints taken, returned as ``int``).

    Raises:
        ValueError: Anything else (a float, a bool, a string, a negative int).

    Example:
        >>> import numpy as np
        >>> check_seed(None), check_seed(np.int64(3))
        (None, 3)
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, got -1
        >>> check_seed(True)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, got True
    """
    if seed is None:
        return None
    try:
        return whole_number(seed, "seed", 0)
    except ValueError:
        raise ValueError(f"seed must be None or an int >= 0, got {seed!r}") from None

"""The ``num_steps`` a runner's ``sample`` takes, with the reason where its window raises it."""

from __future__ import annotations

import numbers
from typing import Any

from episodes.arguments import whole_number

__all__ = ["checked_num_steps"]


def checked_num_steps(num_steps: Any, least: int) -> int:
    """``num_steps`` as an int >= ``least``, or the error (naming the window where it is why).

    A next-step env's vector-steps window needs 2 (``EnvRunner.least_num_steps``): one vector
    step could be every sub-env's reset step. A bare "int >= 2" left users guessing why.

    Example:
        >>> checked_num_steps(3, 2)
        3
        >>> try:
        ...     checked_num_steps(1, 2)
        ... except ValueError as err:
        ...     print(str(err)[:64])
        num_steps must be an int >= 2, got 1: with window='vector_steps'
    """
    try:
        return whole_number(num_steps, "num_steps", least)
    except ValueError as err:
        if least == 1 or isinstance(num_steps, bool) or not isinstance(num_steps, numbers.Integral):
            raise  # a value of another type: its type is the reason, not the window
        raise ValueError(
            f"{err}: with window='vector_steps' a next-step autoreset env takes 2 or more "
            "(one vector step could be every sub-env's reset step, a window without a "
            "transition); the default window takes 1"
        ) from None

"""Checks of the argument kinds every package takes: flags, counts and discount factors.

Each refusal names the argument. A wrong type of count (a float, a bool, None) is an
:class:`~episodes.errors.IntegerTypeError`, a ``TypeError`` and a ``ValueError`` both.

Example:
    >>> as_flag(True, "copy"), whole_number(3, "num_steps", 1), discount_factor(0.99)
    (True, 3, 0.99)
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from episodes.errors import IntegerTypeError
from episodes.structs import short_repr

__all__ = ["as_flag", "discount_factor", "whole_number"]


def as_flag(value: Any, name: str) -> bool:
    """``value`` as a ``bool``; only ``bool`` and numpy booleans are flags.

    Raises:
        TypeError: ``value`` is anything else (``1``, ``"yes"``, ``None``).

    Example:
        >>> as_flag(np.True_, "terminated")
        True
    """
    if value.__class__ is bool:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    kind = type(value).__name__
    raise TypeError(f"{name} must be a bool, got {kind} ({short_repr(value)})")


def whole_number(value: Any, what: str, least: int) -> int:
    """``value`` as an int >= ``least`` (numpy ints taken), else a ``ValueError`` naming it.

    Floats and bools are refused, even whole ones: a count given as ``2.0`` is a caller's bug.
    So are arrays and tensors that are not 0-d ints (``operator.index`` takes a torch tensor
    of one element whatever its shape, and a torch bool as 1).

    Example:
        >>> whole_number(np.int64(3), "num_steps", 1)
        3
        >>> whole_number(1.0, "num_steps", 1)
        Traceback (most recent call last):
        ...
        episodes.errors.IntegerTypeError: num_steps must be an int >= 1, got 1.0
    """
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    array_like = getattr(value, "shape", ()) != () or "bool" in str(getattr(value, "dtype", ""))
    wrong = number is None or isinstance(value, (bool, np.bool_)) or array_like
    if number is None or wrong or number < least:  # IntegerTypeError is a ValueError too
        kind = IntegerTypeError if wrong else ValueError
        raise kind(f"{what} must be an int >= {least}, got {short_repr(value)}")
    return number


def discount_factor(gamma: Any) -> float:
    """``gamma`` as a float, else a ``ValueError`` unless it is a real number in ``[0, 1]``.

    Every n-step computation checks its discount with this (the buffer, the torch datasets,
    the Ray Data rows), so they refuse the same values. A 0-d array or tensor holding such a
    number is taken as the number (a learner may hold ``gamma`` as one); a bool is refused.

    Example:
        >>> discount_factor(0.99)
        0.99
        >>> discount_factor(2.0)
        Traceback (most recent call last):
        ...
        ValueError: gamma must be a float in [0, 1], got 2.0
        >>> discount_factor(np.array(0.5))
        0.5
    """
    if getattr(gamma, "ndim", None) == 0 and not isinstance(gamma, np.generic):
        gamma = gamma.item()  # a 0-d array or tensor: its number (a bool stays refused)
    real = isinstance(gamma, (int, float, np.integer, np.floating))
    if isinstance(gamma, (bool, np.bool_)) or not real or not 0.0 <= gamma <= 1.0:  # NaN too
        raise ValueError(f"gamma must be a float in [0, 1], got {short_repr(gamma)}")
    return float(gamma)

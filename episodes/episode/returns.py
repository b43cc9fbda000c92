"""The sum of an episode's rewards where a float sum would overflow."""

from __future__ import annotations

import builtins
import math
import numbers
from fractions import Fraction
from typing import Any

__all__ = ["exact_sum"]


def exact_sum(rewards: Any) -> float:
    """The sum of ``rewards`` as a float, for rewards holding ints no float holds.

    The ints and finite floats are added exactly (as fractions), so ints that cancel leave an
    ordinary float; a sum beyond float range is ``inf`` or ``-inf``; an infinite or NaN reward
    decides as it would in a float sum.

    Example:
        >>> exact_sum([2**1100, 1.5]), exact_sum([2**1100, -(2**1100), 1.5])
        (inf, 1.5)
    """
    floats = [float(r) for r in rewards if not isinstance(r, numbers.Integral)]
    special = [x for x in floats if not math.isfinite(x)]
    if special:
        return float(builtins.sum(special))
    ints = (Fraction(int(r)) for r in rewards if isinstance(r, numbers.Integral))
    exact = builtins.sum(ints, Fraction(0)) + builtins.sum(
        (Fraction(x) for x in floats), Fraction(0)
    )
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf

"""The sum of an episode's rewards, exact where a float or int64 sum would overflow."""

from __future__ import annotations

import builtins
import math
import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from episodes.episode.reward_values import first_unreal

__all__ = ["exact_sum", "reward_sum"]

# Below this sum of magnitudes an int64 sum cannot wrap, even with a float's rounding of it.
_INT64_SAFE = 2.0**62
_FLOAT64 = np.dtype(np.float64)
# From here on a float64 no longer holds every int.
_FLOAT_EXACT = 2.0**53
# Up to this many floats are added in Python (in numpy's order), where numpy's fixed costs
# would outweigh its speed.
_FEW = 48
_INTS = (int, bool)


def _rounded(exact: int) -> float:
    """An int as the nearest float; beyond float range ``inf`` or ``-inf``, as ``exact_sum``."""
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def reward_sum(rewards: Any) -> float:
    """The sum of ``rewards`` (a list or an array of numbers) as a float.

    Int rewards whose int64 sum could wrap around (numpy's sum would give the wrong sign) and
    ints no float holds are summed exactly; float16/float32 rewards are summed in float64 (in
    their own dtype the sum would overflow to inf or round: 3001 float16 ones give 3000);
    anything else is numpy's sum.

    Raises:
        TypeError: A complex reward (a float would drop its imaginary part).
        ValueError: Rewards that are not one number per step (vectors of a multi-objective
            env: one float would add up their components); the message gives their shape.
            One number per step held in an array of one item (``(n, 1)``) is summed.

    Example:
        >>> reward_sum([1.0, 2.0]), reward_sum([2**62, 2**62]), reward_sum([])
        (3.0, 9.223372036854776e+18, 0.0)
        >>> reward_sum(np.array([60000, 60000], np.float16))
        120000.0
    """
    if not len(rewards):
        return 0.0
    few = _few_floats(rewards)
    if few is not None:  # numpy's sum of them without numpy's fixed costs: the same float
        total = _pairwise_sum(few)
        if total == total:  # a NaN's sign goes by operand order, which compilers may swap
            return total
    # A float sum past float max is inf (inf beside -inf NaN), as the dataset writers give it:
    # quietly, so no RuntimeWarning escapes where warnings are errors (numpy scalars among
    # int rewards included, which _int_sum adds as they come).
    with np.errstate(over="ignore", invalid="ignore"):
        # Past _FEW items: shorter int lists cost little on the paths below either way.
        if len(rewards) > _FEW and type(rewards) is list and type(rewards[0]) in _INTS:
            exact = _int_sum(rewards)
            if exact is not None:
                return _rounded(exact)
        return _sum(rewards)


def _int_sum(rewards: list[Any]) -> int | None:
    """The exact sum of a list of Python ints (and bools), else None.

    What every path of ``_sum`` gives int rewards is their exact sum rounded once (int64 sums
    where they cannot wrap, ``exact_sum`` beyond), and Python's sum of them is exact, in one
    C pass. It stays an int only while every item is one: a float, a Fraction or a numpy
    scalar among them makes it another type, and None, a string or a list fails it; those
    take ``_sum``'s paths.
    """
    try:
        exact = builtins.sum(rewards)
    except Exception:  # noqa: BLE001 - whatever an odd item's __radd__ raises: _sum names it
        return None
    return exact if type(exact) is int else None


def _sum(rewards: Any) -> float:
    try:
        try:
            values = np.asarray(rewards)
        except ValueError as error:  # ragged: arrays of different shapes among the rewards
            raise _not_scalar_rewards(f"ragged rewards ({error})") from error
        if values.dtype is _FLOAT64 and values.ndim == 1:  # the usual rewards: what sum() does
            # A float first (as a rule) rules the ints' check out without a pass over them.
            if (
                values is not rewards
                and type(rewards[0]) is not float
                and _rounded_ints(values, rewards)
            ):
                return exact_sum(list(rewards))
            return float(np.add.reduce(values))
        if values.ndim != 1:
            if values.size != len(values):
                raise _not_scalar_rewards(f"rewards of shape {values.shape}")
            values = values.reshape(-1)  # one number per step, each in an array: (n, 1)
        kind = values.dtype.kind
        if kind == "c":
            raise _complex_rewards(values)
        if kind == "O":  # ints beyond int64 among the rewards: each must be one value
            odd = next((v for v in values if np.ndim(v) != 0), None)
            if odd is not None:
                raise _not_scalar_rewards(f"a reward {odd!r} of type {type(odd).__name__}")
        if kind not in "biufc":  # text, None, Fractions beside numpy ints: checked one by one
            # The rewards as given: numpy turned a number beside a string into text.
            misfit = first_unreal(rewards if isinstance(rewards, list) else values.tolist())
            if misfit:
                raise TypeError(
                    f"get_return needs real numbers as rewards, got {misfit[0]!r} of type "
                    f"{type(misfit[0]).__name__}"
                )
            return exact_sum(values.tolist())  # numpy ints among objects add with wrap-around
        if kind == "f" and values.dtype.itemsize < 8:
            return float(values.sum(dtype=np.float64))
        if kind in "iu" and np.abs(values.astype(np.float64)).sum() >= _INT64_SAFE:
            return exact_sum(values.tolist())
        return float(values.sum())  # bools, ints and floats: objects returned above
    except OverflowError:  # Python ints beyond float range (an object array's sum)
        return exact_sum(rewards)


def _rounded_ints(values: np.ndarray, rewards: Any) -> bool:
    # Python ints spanning int64 and uint64 (2**63 beside a negative one) become float64, which
    # rounds them; to_numpy keeps them as objects, so the list's sum must be exact too.
    # Ints first: a float among the rewards (the first, as a rule) ends it without the max.
    if not all(isinstance(v, numbers.Integral) for v in rewards):
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.abs(values).max() >= _FLOAT_EXACT)


def _few_floats(rewards: Any) -> list[float] | None:
    """Up to ``_FEW`` rewards as Python floats, where numpy's sum of them is a float64 sum.

    That is a list of floats (exactly: no numpy float64, whose sums would go by numpy's error
    state) or a 1-d float64 array; anything else is None, for ``_sum``.
    """
    if len(rewards) > _FEW or not _SAME_ORDER:
        return None
    kind = type(rewards)
    if kind is list:
        return rewards if list(map(type, rewards)).count(float) == len(rewards) else None
    if kind is np.ndarray and rewards.dtype is _FLOAT64 and rewards.ndim == 1:
        return rewards.tolist()
    return None


def _pairwise_sum(values: list[float]) -> float:
    """``float(np.add.reduce(np.array(values)))`` for up to 128 floats, added in numpy's order.

    Its pairwise summation adds fewer than 8 values one by one, more into eight running sums
    that it joins pairwise before adding the rest, then all that to the reduction's start
    (0.0, which turns a -0.0 into 0.0). Python's float additions round as numpy's do and
    give inf and NaN silently, as numpy's under ``reward_sum``'s error state.
    """
    n = len(values)
    if n < 8:
        total = -0.0
        for value in values:
            total += value
        return 0.0 + total
    r0, r1, r2, r3, r4, r5, r6, r7 = values[:8]
    stop = n - n % 8
    for i in range(8, stop, 8):
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(stop, n):
        total += values[i]
    return 0.0 + total


def _sums_in_numpy_order() -> bool:
    """Whether ``_pairwise_sum`` gives numpy's sums here, tried on floats whose order shows."""
    probe = [(1e16, 1.0, -3e15, 0.1, 7e-3)[i % 5] * (1 + i / 3) for i in range(_FEW)]
    return all(
        _pairwise_sum(probe[:n]) == float(np.add.reduce(np.array(probe[:n])))
        for n in (*range(1, 21), _FEW)  # one by one, each branch, and eight sums run on
    )


_SAME_ORDER = _sums_in_numpy_order()


def _not_scalar_rewards(got: str) -> ValueError:
    return ValueError(
        f"get_return needs one number per step as rewards, got {got}: vector rewards are "
        "not summed into one float; sum them per component yourself, e.g. "
        "np.sum(episode.get_rewards(), axis=0)"
    )


def _complex_rewards(values: np.ndarray) -> TypeError:
    return TypeError(
        "get_return needs real numbers as rewards, got complex ones (dtype "
        f"{values.dtype}); a float return would drop their imaginary parts"
    )


def exact_sum(rewards: Any) -> float:
    """The sum of ``rewards`` as a float, for rewards holding ints no float holds.

    The ints and finite floats are added exactly (as fractions), so ints that cancel leave an
    ordinary float; a sum beyond float range is ``inf`` or ``-inf``; an infinite or NaN reward
    decides as it would in a float sum.

    Example:
        >>> exact_sum([2**1100, 1.5]), exact_sum([2**1100, -(2**1100), 1.5])
        (inf, 1.5)
    """
    # Ints, Fractions and Decimals exactly (a Decimal 0.1 is not the float 0.1); others as
    # floats, themselves exact fractions.
    exact_types = (numbers.Rational, Decimal)
    floats = [float(r) for r in rewards if not isinstance(r, exact_types)]
    special = [float(r) for r in rewards if isinstance(r, Decimal) and not r.is_finite()]
    special += [x for x in floats if not math.isfinite(x)]
    if special:
        return float(builtins.sum(special))
    exact = builtins.sum(
        (_fraction(r) for r in rewards if isinstance(r, exact_types)), Fraction(0)
    ) + builtins.sum((Fraction(x) for x in floats), Fraction(0))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _fraction(value: Any) -> Fraction:
    """An int, Fraction or finite Decimal as the exact fraction it is."""
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))  # a numpy int too
    return Fraction(value)

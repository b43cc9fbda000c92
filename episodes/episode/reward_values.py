"""Rewards are numbers: the checks that keep strings, None and dicts out of a rewards column.

A numpy'd column of numbers or bools refuses anything else when numpy itself would not (its
dtype still open, or an object column of ints beyond int64): ``add_env_step`` tests one value
with :func:`is_real`, ``concat_episode`` a successor's rewards at once with
:func:`first_unreal`, and ``to_numpy`` the stacked rewards with :func:`check_stacked_rewards`
(contract §4.4, §7.1, §8; deviation numpy-step-misfit).
"""

from __future__ import annotations

import decimal
import numbers
from typing import Any

import numpy as np

# numbers.Real covers int, float, bool, Fraction and numpy's reals; a Decimal is one too.
REAL_TYPES = (numbers.Real, decimal.Decimal, np.bool_)


def is_real(value: Any) -> bool:
    """True for a bool, an int, a float, a numpy number or a 0-d array (tensor) of one.

    Example:
        >>> [is_real(v) for v in (1, 2**70, 0.5, True, np.float32(1), "2.5", None, 1j)]
        [True, True, True, True, True, False, False, False]
        >>> from fractions import Fraction
        >>> is_real(Fraction(1, 2)), is_real(decimal.Decimal("0.5"))
        (True, True)
    """
    if isinstance(value, REAL_TYPES):
        return True
    try:  # 0-d arrays and tensors
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot read is no real number
        return False
    return array.ndim == 0 and array.dtype.kind in "biuf"


def first_unreal(values: Any) -> tuple[Any, ...]:
    """``()`` if every one of ``values`` is a real number (:func:`is_real`), else ``(first,)``.

    A list or 1-d array of numbers is judged at once by its numpy dtype; only a list numpy
    cannot read as numbers (ints beyond int64, strings, None) is walked item by item.

    Example:
        >>> first_unreal([1.0, 2**70, True]), first_unreal(np.arange(3)), first_unreal([1, "x"])
        ((), (), ('x',))
    """
    if not isinstance(values, (list, tuple, np.ndarray)):
        return (values,)  # a numpy'd column of dicts reads as a dict of arrays
    try:
        array = np.asarray(values)
    except Exception:  # noqa: BLE001 - ragged items: walked below
        pass
    else:
        if array.ndim == 1 and array.dtype.kind in "biuf":
            return ()
    for value in values:
        if not is_real(value):
            return (value,)
    return ()


def needs_real_check(store: Any) -> bool:
    """True for a numpy'd rewards column that numpy lets non-numbers into.

    That is a column whose dtype is still open (numpy'd before its first step: a string would
    make it ``<U1``) or a column of Python objects (ints beyond int64), which would store a
    string, None or an array as a value. Reading the leaves writes pending numbers in.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); _ = ep.to_numpy()
        >>> needs_real_check(ep.rewards.store)
        True
    """
    if store.pylist is not None:
        return False
    if not getattr(store, "typed", True):
        return True
    leaves: list[np.ndarray] = getattr(store, "leaves", None) or []
    return len(leaves) == 1 and leaves[0].dtype.kind == "O"


def check_stacked_rewards(store: Any, items: list[Any]) -> None:
    """Refuses ``store``, the stack of the rewards ``items``, unless every reward is a number.

    Numbers, bools and arrays of them (vector rewards) stack into a numeric dtype and are
    judged by it alone; strings, None, dicts and tuples stack into strings, objects or a nested
    layout. An object column (ints beyond int64) is walked item by item.

    Raises:
        ValueError: A reward is no number (``to_numpy`` then leaves the episode in list mode).

    Example:
        >>> from episodes.buffer import InfiniteLookbackBuffer
        >>> ok, bad = InfiniteLookbackBuffer([1.0, 2**70]), InfiniteLookbackBuffer([1.0, None])
        >>> check_stacked_rewards(ok.stacked(), ok.get())
        >>> try:
        ...     check_stacked_rewards(bad.stacked(), bad.get())
        ... except ValueError as error:
        ...     print(str(error)[:34])
        to_numpy: rewards hold None, which
    """
    if store.size == 0:
        return
    leaves = store.leaves
    kind = leaves[0].dtype.kind if store.structure is None and len(leaves) == 1 else "nested"
    if kind in ("b", "i", "u", "f", "c"):  # complex as before (see deviation return-complex)
        return
    if kind == "O":
        misfit = first_unreal(leaves[0][: store.size])
    else:
        misfit = first_unreal(items) or (items[0],)
    check_reward_items(items, misfit)


def check_reward_items(items: list[Any], misfit: tuple[Any, ...] | None = None) -> None:
    """Refuses list-mode ``items`` for a numpy column of rewards unless every one is a number.

    ``misfit`` is :func:`first_unreal`'s answer where already known. What ``to_numpy`` says
    where the rewards do not stack at all (a number beside a string).

    Raises:
        ValueError: A reward is no number, naming the first.

    Example:
        >>> try:
        ...     check_reward_items([1.0, "x"])
        ... except ValueError as error:
        ...     print(str(error)[:33])
        to_numpy: rewards hold 'x', which
    """
    misfit = first_unreal(items) if misfit is None else misfit
    if misfit:
        raise ValueError(
            f"to_numpy: rewards hold {misfit[0]!r}, which is no number: a numpy column of "
            "rewards takes numbers and bools only; the episode stays in list mode"
        )

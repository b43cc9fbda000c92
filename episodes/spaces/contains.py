"""Cheap per-step membership checks: a checker built once per space, called on every step.

``space.contains`` in gymnasium re-derives dtypes and runs several numpy reductions per call,
which dominates a numpy'd episode's ``add_env_step``. A checker precomputes what it can and
compares small boxes in plain Python, where a handful of floats is faster than a ufunc call.
Checkers accept exactly what ``space.contains`` accepts: a Box item that is no array (a list, a
Python or numpy scalar) is first cast to the Box's dtype, as gymnasium casts it (so 2.5 is in a
uint8 Box and 1 + 1e-9 in a float32 one), without its warnings; arrays of another dtype compare
after numpy's promotion; exotic spaces defer to ``space.contains``.

Example:
    >>> import gymnasium as gym
    >>> check = make_checker(gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    >>> check(np.zeros(3, np.float32)), check(np.full(3, 2.0, np.float32))
    (True, False)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import singledispatch
from typing import Any

import numpy as np
from gymnasium import spaces as gs

from episodes.spaces.per_space_cache import PerSpaceCache

Checker = Callable[[Any], bool]
# Below this many elements, Python comparisons of a ``tolist()`` beat numpy's ufunc overhead.
_SMALL = 16


def checker_for(space: gs.Space[Any]) -> Checker:
    """The cached checker of ``space`` (built on first use, dropped when the space dies).

    Example:
        >>> import gymnasium as gym
        >>> box = gym.spaces.Box(0.0, 1.0, (2,))
        >>> checker_for(box) is checker_for(box)
        True
    """
    return _CHECKERS.get(space)


def _fallback(space: gs.Space[Any]) -> Checker:
    contains, ref = type(space).contains, weakref.ref(space)

    def check(item: Any) -> bool:
        owner = ref()
        return owner is not None and bool(contains(owner, item))

    return check


def make_checker(space: gs.Space[Any]) -> Checker:
    """Builds a fast ``item -> bool`` membership test equivalent to ``space.contains``.

    A subclass that overrides ``contains`` (a stricter Box) is asked itself: the fast test
    is its gymnasium base's.

    Example:
        >>> import gymnasium as gym
        >>> make_checker(gym.spaces.Discrete(3, start=1))(3)
        True
    """
    cls: Any = type(space)
    base = next((c for c in cls.__mro__ if c.__module__.startswith("gymnasium.")), None)
    if base is not None and cls is not base and cls.contains is not base.contains:
        return _fallback(space)
    return _checker(space)


@singledispatch
def _checker(space: gs.Space[Any]) -> Checker:
    return _fallback(space)


@_checker.register
def _(space: gs.Box) -> Checker:
    # np.dtype(): scripts that retype a space (CleanRL's ``space.dtype = np.float32``) leave
    # a scalar type there, which has no ``kind``.
    shape, dtype = space.shape, np.dtype(space.dtype)
    low, high = space.low, space.high
    small = low.size <= _SMALL
    # A small box compares Python numbers, a big one arrays: each keeps only what it uses (an
    # image's bounds as lists would be 2 x 21k floats, built on every unpickling, and kept).
    low_list = low.ravel().tolist() if small else []
    high_list = high.ravel().tolist() if small else []
    check_low = not small and bool(np.any(space.bounded_below))
    check_high = not small and bool(np.any(space.bounded_above))
    if dtype.kind in "iu" and not small:
        # Bounds at the dtype's own limits (uint8 images in [0, 255]) can never be violated.
        info = np.iinfo(dtype)  # type: ignore[type-var]
        # Not empty (a big box): ``max > min`` is ``any(low > min)`` without a bool temporary.
        check_low = check_low and bool(low.max() > info.min)
        check_high = check_high and bool(high.min() < info.max)
    fallback = _fallback(space)

    ndarray, can_cast = np.ndarray, np.can_cast

    if shape == ():
        lowest, highest = low_list[0], high_list[0]
        kind, scalar_type = dtype.kind, dtype.type
        integral, floating = kind in "iu", kind == "f"
        value_of = float if floating else int if integral else bool  # of a dtype scalar
        # Numbers that the cast to the dtype keeps (or rounds without overflow) skip numpy.
        finfo = np.finfo(dtype) if floating else None  # type: ignore[type-var]
        exact_int = 2 ** (finfo.nmant + 1) if finfo is not None else 0
        largest = float(finfo.max) if finfo is not None else 0.0

        def check_scalar(item: Any) -> bool:
            cls = item.__class__
            if cls is int:
                if integral or -exact_int <= item <= exact_int:
                    # Exact; beyond the dtype's range the cast fails, beyond its bounds too.
                    return lowest <= item <= highest
            elif cls is float or cls is np.float64:
                if floating:
                    if lowest <= item <= highest:
                        return True  # the bounds are the dtype's values: rounding keeps it in
                    if -largest <= item <= largest:  # rounded as the cast rounds (1 + 1e-9)
                        return bool(lowest <= float(scalar_type(item)) <= highest)
            elif cls is scalar_type:
                return bool(lowest <= value_of(item) <= highest)
            elif cls is ndarray:
                return _check_array(item)
            cast = _cast(item)
            return cast is not None and _check_array(cast)

    def _check_array(item: Any) -> bool:
        if not isinstance(item, ndarray):
            item = _cast(item)
            if item is None:
                return False
        if item.__class__ is not ndarray or item.shape != shape:
            return bool(fallback(item))
        item_dtype = item.dtype
        if item_dtype is not dtype and item_dtype != dtype:
            if not can_cast(item_dtype, dtype):
                return False
            if small:  # numpy compares int64 with float64 bounds as float64: 2**53 + 1 fits
                item = item.astype(dtype)
        if small:
            values = item.tolist() if one_dim else item.ravel().tolist()
            # A plain loop over a few Python numbers beats building map objects; a chained
            # ``<=`` is False for NaN, as in gymnasium.
            if uniform:
                for value in values:
                    if not uniform_low <= value <= uniform_high:
                        return False
                return True
            for value, lowest_i, highest_i in zip(values, low_list, high_list):
                if not lowest_i <= value <= highest_i:
                    return False
            return True
        if check_low and not (item >= low).all():
            return False
        if check_high and not (item <= high).all():
            return False
        return not (item_dtype.kind == "f" and np.isnan(item).any())

    def _cast(item: Any) -> Any:
        # What gymnasium does with a list or any non-array (cast to the space's dtype), without
        # its "Casting input x to numpy array" warning, nor numpy's overflow one (1e300 into a
        # float32 Box is inf); None where the cast fails (10**400, NaN into ints).
        try:
            with np.errstate(all="ignore"):
                return np.asarray(item, dtype=dtype)
        except (ValueError, TypeError, OverflowError):
            return None

    one_dim = len(shape) == 1
    # Most boxes share one bound across elements (Box(-1, 1, (4,))): compare against scalars.
    uniform = small and len(set(low_list)) <= 1 and len(set(high_list)) <= 1
    uniform_low = low_list[0] if low_list else 0.0
    uniform_high = high_list[0] if high_list else 0.0
    if shape == ():
        return check_scalar
    return _check_array


@_checker.register
def _(space: gs.Discrete) -> Checker:
    # Python ints: start + n may not fit the space's dtype (Discrete(2, start=254) in uint8).
    start, stop = int(space.start), int(space.start) + int(space.n)
    fallback = _fallback(space)

    dtype = space.dtype

    def check(item: Any) -> bool:
        if type(item) is int:
            return start <= item < stop
        if isinstance(item, np.integer) and np.can_cast(item.dtype, dtype):
            return bool(start <= item < stop)  # as space.contains: the dtype must cast safely
        return bool(fallback(item))

    return check


@_checker.register
def _(space: gs.Dict) -> Checker:
    checkers = {key: make_checker(sub) for key, sub in space.spaces.items()}

    def check(item: Any) -> bool:
        if not isinstance(item, dict) or item.keys() != checkers.keys():
            return False
        return all(checkers[key](value) for key, value in item.items())

    return check


@_checker.register
def _(space: gs.Tuple) -> Checker:
    checkers = [make_checker(sub) for sub in space.spaces]

    def check(item: Any) -> bool:
        if isinstance(item, (list, np.ndarray)):
            if getattr(item, "ndim", 1) == 0:
                return False  # a 0-d array has no parts (gymnasium's tuple() of it raises)
            item = tuple(item)  # gymnasium promotes lists and arrays the same way
        if not isinstance(item, tuple) or len(item) != len(checkers):
            return False
        return all(c(v) for c, v in zip(checkers, item))

    return check


# Checkers hold no strong reference to their space, so this cache cannot keep spaces alive.
_CHECKERS: PerSpaceCache[Checker] = PerSpaceCache(lambda space: make_checker(space))

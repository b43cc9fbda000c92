"""The rewards a runner records: real numbers, one per sub-env, into float64 blocks.

Both recorders read a step's rewards dtype once (no value is looked at): a complex dtype would
lose its imaginary part on the way in (or fail in numpy's words after the row was written),
strings and objects hold no number a float64 block takes.

Example:
    >>> check_reward_dtype(np.dtype(np.float32))
    >>> check_reward_dtype(np.dtype(np.complex64))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: the env's rewards: got complex64 values, ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["REAL_KINDS", "check_reward_dtype", "refused_rewards"]

#: numpy dtype kinds a float64 reward block takes: bools, signed and unsigned ints, floats.
REAL_KINDS = "biuf"


def check_reward_dtype(dtype: np.dtype[Any]) -> None:
    """Raises :func:`refused_rewards`'s ``ValueError`` unless ``dtype`` is a real kind.

    Example:
        >>> check_reward_dtype(np.dtype(bool)), check_reward_dtype(np.dtype(np.int64))
        (None, None)
    """
    if dtype.kind not in REAL_KINDS:
        raise refused_rewards(dtype)


def refused_rewards(dtype: Any) -> ValueError:
    """The ``ValueError`` for rewards of ``dtype`` (a numpy or torch dtype), naming the field.

    Example:
        >>> str(refused_rewards(np.dtype("<U1")))  # doctest: +ELLIPSIS
        "the env's rewards: got <U1 values, which a runner does not record: ..."
    """
    return ValueError(
        f"the env's rewards: got {dtype} values, which a runner does not record: rewards are "
        "real numbers (bools, ints or floats), one per sub-env, recorded as float64 (complex "
        "numbers would lose their imaginary part; strings and objects hold no number)"
    )

"""n-step discounted reward sums, shared by the torch datasets and the Ray step rows.

Both readers sum the same terms in the same order (``gamma**0 * r_t``, then ``+ gamma**1 *
r_{t+1}``, ...), in float64, per component for vector rewards (a reward of shape ``(m,)``
sums to shape ``(m,)``), so a transition reads the same through either.

Example:
    >>> rewards = summable_rewards(np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]))
    >>> discounted_sum(rewards[:2], discount_weights(0.5, 2)).tolist()
    [2.0, 20.0]
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["discount_weights", "discounted_sum", "summable_rewards"]


def summable_rewards(rewards: Any) -> np.ndarray[Any, Any]:
    """``rewards`` (one item per step, a number or an array each) as float64, for n-step sums.

    Bools, ints and floats are taken (ints beyond int64, held as Python ints, too); their
    sums are float64, as ``get_return``'s is a float.

    Raises:
        ValueError: An int reward beyond float range.
        TypeError: Complex rewards (a float64 sum would drop their imaginary parts, as
            ``get_return`` refuses them), or rewards that are no numbers (strings, None);
            the message gives their dtype.

    Example:
        >>> summable_rewards(np.array([1, 2], np.int8))
        array([1., 2.])
        >>> try:
        ...     summable_rewards(np.array([1 + 1j]))
        ... except TypeError as err:
        ...     print(str(err).split(";")[0])
        n-step rewards need real numbers as rewards, got complex ones (dtype complex128)
    """
    values = np.asarray(rewards)
    kind = values.dtype.kind
    if kind in "biuf":
        return values.astype(np.float64)
    if kind == "O" and all(isinstance(v, numbers.Real) for v in values.flat):
        # Python ints beyond int64 make an object column (rare, and slow anyway)
        try:
            return values.astype(np.float64)
        except OverflowError:  # an int beyond float range
            raise ValueError(
                "n-step rewards are summed in float64, and a reward is an int beyond float range"
            ) from None
    complex_ = kind == "c" or (
        # Every real number is a Complex too: only one that is not Real has imaginary parts.
        kind == "O"
        and any(
            isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real) for v in values.flat
        )
    )
    if complex_:
        raise TypeError(
            "n-step rewards need real numbers as rewards, got complex ones (dtype "
            f"{values.dtype}); a float64 sum would drop their imaginary parts "
            "(TransitionDataset(n_step=1) gives the stored rewards)"
        )
    raise TypeError(
        f"n-step rewards need real numbers (bool, int or float) as rewards, got dtype "
        f"{values.dtype}"
    )


def discount_weights(gamma: float, count: int) -> np.ndarray[Any, Any]:
    """``gamma**j`` for ``j < count``, cut before the first weight of 0.

    A term of weight 0 (``gamma = 0``, or a power too small for a float) is left out of the
    sum, not added as ``0 * reward`` (NaN for an infinite reward).

    Example:
        >>> discount_weights(0.5, 3).tolist(), discount_weights(0.0, 3).tolist()
        ([1.0, 0.5, 0.25], [1.0])
    """
    weights = np.float64(gamma) ** np.arange(count, dtype=np.float64)
    return weights[: int(np.count_nonzero(weights > 0))]  # non-increasing: a prefix


def discounted_sum(rewards: np.ndarray[Any, Any], weights: np.ndarray[Any, Any]) -> Any:
    """``sum_j weights[j] * rewards[j]`` over the steps (axis 0), added in step order.

    ``rewards`` are float64 (:func:`summable_rewards`), one item per step; the sum has the
    shape of one item (per component for vector rewards). Terms past ``len(weights)`` are
    left out.

    Example:
        >>> discounted_sum(np.array([1.0, 2.0, 4.0]), discount_weights(0.5, 3))
        np.float64(3.0)
    """
    count = min(len(weights), len(rewards))
    shape = (count,) + (1,) * (rewards.ndim - 1)
    # A sum past float max is inf, inf and -inf NaN: valid results, no RuntimeWarning.
    with np.errstate(over="ignore", invalid="ignore"):
        terms = rewards[:count] * weights[:count].reshape(shape)
        return np.cumsum(terms, axis=0)[-1]  # sequential, as nstep_columns adds its terms

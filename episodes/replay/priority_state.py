"""Checks of priority values: a state's priorities, ``priority ** alpha``, real numbers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["is_real", "leaf_of", "parsed_priorities", "priority_values"]


def leaf_of(priority: float, alpha: float) -> float:
    """``priority ** alpha`` as the tree holds it; a ``ValueError`` when that is 0 or inf.

    Example:
        >>> leaf_of(4.0, 0.5)
        2.0
        >>> leaf_of(1e-12, 30.0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: priority 1e-12 to the power alpha=30.0 is 0.0: new steps would never ...
    """
    with np.errstate(over="ignore", under="ignore"):
        leaf = float(np.float64(priority) ** alpha)
    if not 0 < leaf < math.inf:
        raise ValueError(
            f"priority {priority!r} to the power alpha={alpha} is {leaf}: new steps would "
            "never be drawn (0) or swamp every other step (inf)"
        )
    return leaf


def parsed_priorities(extra: Any, rows: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """``alpha``, ``max_priority``, the tree's leaves and the priorities of a state's rows.

    Raises:
        ValueError: Values the constructor, the ``max_priority`` setter or
            ``update_priorities`` would refuse, or leaves that are not the priorities to the
            power ``alpha`` (up to rounding): the leaves decide the draws, the priorities
            what ``get_priorities`` reads.

    Example:
        >>> state = {"alpha": 1.0, "max_priority": 2.0, "leaves": [2.0, 1.0]}
        >>> alpha, top, leaves, priorities = parsed_priorities(state, 2)
        >>> alpha, top, priorities.tolist()
        (1.0, 2.0, [2.0, 1.0])
    """
    if not isinstance(extra, dict):
        raise ValueError(f"'prioritized' must be a dict, got {type(extra).__name__}")
    missing = [key for key in ("alpha", "max_priority", "leaves") if key not in extra]
    if missing:
        raise ValueError(f"'prioritized' lacks the keys {missing}")
    alpha, top = extra["alpha"], extra["max_priority"]
    if not is_real(alpha) or not 0 <= float(alpha) < math.inf:
        raise ValueError(f"alpha must be a finite float >= 0, got {alpha!r}")
    if not is_real(top) or not 0 < float(top) < math.inf:
        raise ValueError(f"max_priority must be finite and > 0, got {top!r}")
    alpha, top = float(alpha), float(top)
    leaf_of(top, alpha)
    given = priority_values(extra["leaves"], "leaves", rows, summed=True)
    if "priorities" not in extra:  # a state from before the priorities were kept as set
        return alpha, top, given, given ** (1.0 / alpha if alpha else 1.0)
    kept = priority_values(extra["priorities"], "priorities", rows, summed=False)
    with np.errstate(over="ignore", under="ignore"):
        implied = kept**alpha if alpha != 1.0 else kept
    # The stored leaves are kept, not recomputed: numpy's scalar and array powers may differ
    # in the last bit, and the restored buffer draws exactly what the original would have.
    if not np.allclose(given, implied, rtol=1e-9, atol=0.0):
        i = int(np.flatnonzero(~np.isclose(given, implied, rtol=1e-9, atol=0.0))[0])
        raise ValueError(
            f"leaves[{i}] = {float(given[i])!r} is not priorities[{i}] = {float(kept[i])!r} to "
            f"the power alpha={alpha}: the draws would not follow the priorities"
        )
    return alpha, top, given, kept


def priority_values(values: Any, name: str, rows: int, *, summed: bool) -> np.ndarray:
    """``values`` as float64, refused unless ``rows`` real numbers > 0 (of a finite sum).

    Example:
        >>> priority_values([1, 2.5], "leaves", 2, summed=True).tolist()
        [1.0, 2.5]
    """
    array = np.asarray(values)
    if array.size and array.dtype.kind not in "iuf":  # no strings, bools or complex numbers
        raise ValueError(f"its {name} must be real numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.shape != (rows,) or not np.all(np.isfinite(array) & (array > 0)):
        raise ValueError(f"its {name} must be {rows} finite values > 0, one per stored step")
    with np.errstate(over="ignore"):  # the tree sums leaves; priorities are never summed
        if summed and not math.isfinite(float(array.sum())):  # the draws would go astray
            raise ValueError(f"its {name} would make the sum of all priorities infinite")
    return array


def is_real(value: Any) -> bool:
    """A real number that is not a bool: Python, numpy (0-d arrays too) or a 0-d tensor.

    Example:
        >>> is_real(0.5), is_real(np.array(2)), is_real(True), is_real("1")
        (True, True, False, False)
    """
    dtype = str(getattr(value, "dtype", ""))
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)) or (
        dtype in ("bool", "torch.bool") or "complex" in dtype or dtype[:2] in ("<U", "|S")
    ):
        return False
    if getattr(value, "ndim", 0) != 0:  # one number, not an array of them
        return False
    try:
        float(value)
    except (TypeError, ValueError, OverflowError):  # complex, strings, containers, 10**400
        return False
    return True

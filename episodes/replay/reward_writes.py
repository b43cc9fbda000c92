"""Reading and rewriting stored rewards by item index (relabelling with a learned reward model).

Rewards live in a plain float32 column beside the extras' :class:`Column` s, so only the
conversion differs from an extra output's: values are taken as ``add`` takes a chunk's rewards
(real scalars: ints, bools and floats, cast to float32 unless one would overflow; NaN and
infinities as given), then :func:`~episodes.replay.extra_writes.write_rows` checks the count and
writes them, skipping evicted items, exactly as ``set_extra_model_outputs`` writes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.replay.columns import as_rows
from episodes.replay.extra_writes import host_values, issued_indices, read_rows, write_rows
from episodes.replay.ingest import _scalar_rewards
from episodes.replay.quick_rows import rewards_as_float32
from episodes.replay.store import StepStore

__all__ = ["read_rewards", "write_rewards"]

_LAYOUT = "scalar float32 rewards"


def _reward_rows(values: Any) -> np.ndarray:
    """``values`` as one reward a row, as ``add`` reads a chunk's (ints beyond int64 too)."""
    values = host_values(values)
    if isinstance(values, (int, float, np.number, np.bool_)) or (
        isinstance(values, np.ndarray) and values.ndim == 0
    ):
        raise TypeError(
            f"rewards: one value per index, got one number {values!r:.40} (one item: "
            "values [r], indices [i])"
        )
    try:
        return as_rows(values, "rewards")
    except TypeError:
        count = len(values) if isinstance(values, (list, np.ndarray)) else -1
        scalars = _scalar_rewards(values, count)  # Python ints numpy keeps as objects
        if scalars is None:
            raise
        return scalars


def read_rewards(store: StepStore, indices: Any) -> np.ndarray:
    """The stored rewards of the items ``indices`` (a float32 copy).

    Raises:
        KeyError: Indices not stored (evicted or never issued), as ``get_transitions``.
        ValueError: Indices that are not integers, or not one index or a 1-d sequence.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.arange(3.0)}
        >>> store.reserve(3)
        >>> _ = store.append(rows, {}, [{}] * 3, ep_row=0, t0=0, prev_slot=-1)
        >>> read_rewards(store, [2, 0]).tolist()
        [2.0, 0.0]
    """
    result: np.ndarray = read_rows(store, store.rewards, indices)
    return result


def write_rewards(store: StepStore, values: Any, indices: Any) -> int:
    """Writes ``values``, one reward per index, as the rewards of the items ``indices``.

    Returns:
        The number of items written (evicted ones are skipped; a repeated index keeps its
        last value).

    Raises:
        ValueError: Indices that are not integers, not 1-d or never issued; values not one
            per index, not scalars, or beyond float32. Nothing is written then.
        TypeError: Values that are not real numbers (strings, complex numbers, nested ones).

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> store.reserve(3)
        >>> _ = store.append(rows, {}, [{}] * 3, ep_row=0, t0=0, prev_slot=-1)
        >>> write_rewards(store, [5, 7.5], [2, 0])
        2
        >>> store.rewards[:3].tolist()
        [7.5, 1.0, 5.0]
    """
    idx = issued_indices(store, indices)
    rows = _reward_rows(values)
    return write_rows(store, store.rewards, rows, idx, "rewards", _LAYOUT, rewards_as_float32)

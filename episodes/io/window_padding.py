"""Padding a ``SequenceDataset`` window that runs past its episode's end (``pad=True``).

A recurrent or transformer policy trained on fixed-length windows needs the steps of short
episodes and of an episode's last steps too; the replay buffers' ``pad=True`` gives them as
windows filled up with zeros and a ``mask``. The torch dataset's padded windows follow the
same rule, so one loss reads both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["padded_window"]


def padded_window(item: dict[str, Any], length: int, steps: int) -> dict[str, Any]:
    """``item``, a window of ``steps`` real steps, filled up with zeros to ``length`` steps.

    Every leaf of ``obs`` (``steps + 1`` rows) becomes ``length + 1`` rows, every other
    column's leaves (``steps`` rows: actions, rewards, flags, extra model outputs) ``length``
    rows, padding rows zero (``False`` for the flags) in the leaf's own dtype; ``mask`` is added,
    ``length`` bools, True at the real steps. Nested dicts and tuples are padded leaf by leaf.

    Example:
        >>> import numpy as np
        >>> item = {"obs": np.array([0.0, 1.0]), "actions": np.array([3]),
        ...         "terminated": np.array([True])}
        >>> out = padded_window(item, 3, 1)
        >>> out["obs"].tolist(), out["actions"].tolist(), out["mask"].tolist()
        ([0.0, 1.0, 0.0, 0.0], [3, 0, 0], [True, False, False])
        >>> out["terminated"].tolist()
        [True, False, False]
    """
    out = {key: _padded(value, length + (key == "obs")) for key, value in item.items()}
    out["mask"] = np.arange(length) < steps
    return out


def _padded(value: Any, rows: int) -> Any:
    if isinstance(value, dict):
        return {key: _padded(leaf, rows) for key, leaf in value.items()}
    if isinstance(value, tuple):
        return tuple(_padded(leaf, rows) for leaf in value)
    have = len(value)
    if have == rows:
        return value
    zeros = np.zeros((rows - have, *value.shape[1:]), dtype=value.dtype)
    return np.concatenate([value, zeros])

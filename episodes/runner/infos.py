"""Splitting gymnasium's batched vector-env info dicts into one plain dict per sub-env."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["env_info", "FINAL_KEYS"]

#: Keys that same-step autoreset adds to the infos of a finished sub-env.
FINAL_KEYS = ("final_obs", "final_info", "_final_obs", "_final_info")


def env_info(infos: dict[str, Any], index: int, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The info dict of sub-env ``index`` out of a vector env's batched infos.

    Gymnasium batches infos key by key: ``infos[key][i]`` is sub-env ``i``'s value and the
    boolean ``infos["_" + key][i]`` says whether sub-env ``i`` reported the key at all. Nested
    dicts are batched the same way, recursively.

    Args:
        infos: The batched infos from ``VectorEnv.reset`` or ``VectorEnv.step``.
        index: The sub-env.
        drop: Top-level keys to leave out (e.g. :data:`FINAL_KEYS`).

    Returns:
        A plain dict of the keys sub-env ``index`` reported (a key without its ``_key``
        mask counts as reported by every sub-env; a nested dict key is kept, as ``{}``, even
        when the sub-env reported none of its inner keys).

    Example:
        >>> infos = {"x": np.array([1, 2]), "_x": np.array([False, True])}
        >>> env_info(infos, 0), env_info(infos, 1)
        ({}, {'x': np.int64(2)})
    """
    if not infos:
        return {}
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key in drop or (isinstance(key, str) and key.startswith("_")):
            continue
        mask = infos.get("_" + key) if isinstance(key, str) else None
        if mask is not None and not bool(np.asarray(mask)[index]):
            continue
        if isinstance(value, dict):
            out[key] = env_info(value, index)
            continue
        item = value[index]
        # A row of a batched array is a view: an env may write its next infos into the same
        # array, which would change the recorded ones.
        out[key] = item.copy() if isinstance(item, np.ndarray) and item.ndim else item
    return out

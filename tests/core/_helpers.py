"""Shared helpers for the core tests: build buffers/episodes in list or numpy mode."""

from __future__ import annotations

import numpy as np

from episodes import InfiniteLookbackBuffer

MODES = ["list", "numpy"]


def make_buffer(data, lookback=0, space=None, mode="list"):
    buf = InfiniteLookbackBuffer(list(data), lookback=lookback, space=space)
    if mode == "numpy":
        buf.finalize()
    return buf


def as_plain(value):
    """Lists of items and batched arrays compare equal after this (arrays, dtype-free)."""
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(as_plain(v) for v in value)
    if isinstance(value, list):
        if value and isinstance(value[0], (dict, tuple)):
            # A list of nested items: compare as a list of plain items.
            return [as_plain(v) for v in value]
        return np.asarray(value).tolist()
    return np.asarray(value).tolist()


def assert_same(actual, expected):
    assert as_plain(actual) == as_plain(expected), (actual, expected)


def outcome(call):
    """What ``call()`` gives: ("ok", value) or ("error", type, message); two paths compare by it."""
    try:
        return ("ok", call())
    except Exception as error:  # noqa: BLE001 - compared by the caller
        return ("error", type(error), str(error))

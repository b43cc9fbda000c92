"""Inference fast paths: each episode's latest row, read and encoded for all episodes at once.

The general paths of :class:`~episodes.connectors.observations.FlattenObservations` and
:class:`~episodes.connectors.prev.PrevActionsPrevRewards` read, batch, one-hot and flatten each
episode alone, checking the (shared) space each time. Where the episodes share one space and
their items are plain (arrays and ints of one dtype per leaf), the helpers here do that once
for all; anything else gives None, and the general path reads the same rows and raises its
errors. Each helper gives exactly what the general path gives, or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.connectors.float32 import as_float32
from episodes.episode import SingleAgentEpisode
from episodes.spaces import filler_item

__all__ = ["FLAT_LEAVES", "last_flat_rows", "last_prev_actions", "last_prev_rewards"]

# The leaf spaces whose items flatten to rows of one size (Discrete and MultiDiscrete one-hot).
FLAT_LEAVES = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiBinary,
    gym.spaces.MultiDiscrete,
)


def _layout(space: Any) -> Any:
    """``space`` as nested ``("dict", keys, parts)``/``("tuple", parts)``/leaf spaces.

    Dict keys in dm-tree's (sorted) order; None where a part is of another kind (Text,
    Sequence, Graph, OneOf, a subclass), or a Dict's keys do not sort, or there is no leaf.
    """
    kind = type(space)
    if kind is gym.spaces.Dict:
        try:
            keys = sorted(space.spaces)
        except TypeError:
            return None
        parts = [_layout(space.spaces[key]) for key in keys]
        return None if not parts or None in parts else ("dict", keys, parts)
    if kind is gym.spaces.Tuple:
        parts = [_layout(part) for part in space.spaces]
        return None if not parts or None in parts else ("tuple", parts)
    if kind in FLAT_LEAVES:
        return space
    return None


def _leaves(item: Any, layout: Any, out: list[Any]) -> None:
    # The item's leaves in layout order; a TypeError where its structure is not the layout's.
    if layout.__class__ is not tuple:
        out.append(item)
    elif layout[0] == "dict":
        if item.__class__ is not dict or len(item) != len(layout[1]):
            raise TypeError("not the space's keys")
        for key, part in zip(layout[1], layout[2]):
            _leaves(item[key], part, out)  # a missing key: KeyError
    else:
        if item.__class__ not in (tuple, list) or len(item) != len(layout[1]):
            raise TypeError("not the space's parts")
        for sub, part in zip(item, layout[1]):
            _leaves(sub, part, out)


def _leaf_spaces(layout: Any, out: list[Any]) -> list[Any]:
    if layout.__class__ is not tuple:
        out.append(layout)
    else:
        for part in layout[-1]:
            _leaf_spaces(part, out)
    return out


def _leaf_rows(values: list[Any], space: Any, encode: bool, name: str) -> np.ndarray:
    """One leaf of every item as float32 ``[items, D]`` (a TypeError where not plain)."""
    if type(space) is gym.spaces.Discrete:
        if not all(value.__class__ is int or isinstance(value, np.integer) for value in values):
            raise TypeError("not ints")
        if encode:  # Python ints: exact whatever the items' dtypes
            start, n = int(space.start), int(space.n)
            cols = [int(value) - start for value in values]
            return _ones(np.array(cols).reshape(-1, 1), n)
        ints = np.array(values)
        if ints.dtype.kind not in "iu":  # int64 beside uint64 (float64), or huge Python ints
            raise TypeError("ints of no one dtype")
        return as_float32(ints.reshape(len(values), 1), name)
    first = values[0]
    if not isinstance(first, (np.ndarray, np.generic)) or first.dtype.kind not in "biuf":
        raise TypeError("not numeric arrays")
    dtype, shape = first.dtype, first.shape
    for value in values:  # plain arrays of one dtype: no masks, nothing rounded twice
        if value.__class__ is not np.ndarray and not isinstance(value, np.generic):
            raise TypeError("not plain arrays")
        if value.dtype != dtype or value.shape != shape:
            raise TypeError("other dtypes or shapes")
    stacked = np.stack(values)
    if encode and type(space) is gym.spaces.MultiDiscrete:
        if dtype.kind not in "iu" or shape != space.shape:
            raise TypeError("not the space's ints")
        # uint64 is refused (a TypeError): past 2**63 it would wrap into the range.
        ints = stacked.reshape(len(values), -1).astype(np.int64, casting="safe")
        sizes = space.nvec.reshape(-1).astype(np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        parts = ints - space.start.reshape(-1).astype(np.int64)
        if parts.size and (parts.min() < 0 or not np.all(parts < sizes)):
            raise ValueError("out of range")
        return _ones(parts + offsets, int(sizes.sum()))
    return as_float32(stacked.reshape(len(values), -1), name)


def _ones(cols: np.ndarray, width: int) -> np.ndarray:
    """Float32 ``[rows, width]`` zeros with a 1 at each row's ``cols`` (each in range)."""
    if cols.size and (cols.min() < 0 or cols.max() >= width):
        raise ValueError("out of range")  # one_hot refuses it
    out = np.zeros((len(cols), width), np.float32)
    out[np.arange(len(cols))[:, None], cols] = 1.0
    return out


def last_flat_rows(
    episodes: Sequence[SingleAgentEpisode], one_hot_discrete: bool, name: str
) -> np.ndarray | None:
    """Each episode's last observation flattened (one-hot), as ``FlattenObservations`` gives.

    For episodes sharing one observation space of Box, Discrete, MultiDiscrete and
    MultiBinary parts in Dict and Tuple nests, whose items are of the space's structure with
    ints at Discrete parts and arrays of one dtype and shape per part. None for anything else
    (and where encoding or flattening fails): the general path reads and refuses it.

    Example:
        >>> space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(0, 1, (1,))})
        >>> eps = [SingleAgentEpisode(observations=[{"a": i, "b": np.full(1, 0.5, np.float32)}],
        ...                           observation_space=space, len_lookback_buffer=0)
        ...        for i in (0, 2)]
        >>> last_flat_rows(eps, True, "obs").tolist()
        [[1.0, 0.0, 0.0, 0.5], [0.0, 0.0, 1.0, 0.5]]
        >>> last_flat_rows(eps[:1] + [SingleAgentEpisode()], True, "obs") is None
        True
    """
    space = episodes[0].observation_space if episodes else None
    if space is None or any(
        ep.observation_space is not space or not ep.is_reset for ep in episodes
    ):
        return None
    layout = _layout(space)
    if layout is None:
        return None
    leaf_spaces = _leaf_spaces(layout, [])
    try:
        columns: list[list[Any]] = [[] for _ in leaf_spaces]
        for ep in episodes:
            leaves: list[Any] = []
            _leaves(ep.get_observations(-1), layout, leaves)
            for column, leaf in zip(columns, leaves):
                column.append(leaf)
        mats = [
            _leaf_rows(column, leaf_space, one_hot_discrete, name)
            for column, leaf_space in zip(columns, leaf_spaces)
        ]
    except Exception:  # noqa: BLE001 - the general path raises its own error for it
        return None
    return mats[0] if len(mats) == 1 else np.concatenate(mats, axis=1)


def _last_items(buffer: Any, length: int, n: int) -> Any:
    """The last ``min(n, available)`` items before ``ts = length`` (lookback included)."""
    data = buffer.data
    if len(data) - buffer.lookback != length:
        raise TypeError("not one step per time step")
    return data[len(data) - min(n, len(data)) :]


def last_prev_rewards(
    episodes: Sequence[SingleAgentEpisode], n: int, fill: Any
) -> np.ndarray | None:
    """Each episode's last ``n`` rewards (fill-ed before), float32 ``[episodes, n]``.

    As ``PrevActionsPrevRewards(inference=True)`` reads them, for rewards of Python or numpy
    floats, and ints float64 holds exactly (so no value is rounded twice), and a number
    ``fill`` alike; None for anything else, which the general path reads and refuses.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[0.5, 2.0],
        ...                         len_lookback_buffer=0)
        >>> last_prev_rewards([ep], 3, 0.0).tolist()
        [[0.0, 0.5, 2.0]]
        >>> last_prev_rewards([ep], 3, "x") is None  # the general path refuses such a fill
        True
    """
    if not (fill.__class__ is float or (fill.__class__ is int and abs(fill) < 2**53)):
        return None
    rows = np.full((len(episodes), n), fill, np.float64)
    try:
        for row, ep in zip(rows, episodes):
            values = _last_items(ep.rewards, len(ep), n)
            if values.__class__ is np.ndarray:
                if values.ndim != 1 or values.dtype.kind not in "fiu" or values.itemsize > 8:
                    raise TypeError("not one number per step")
                if values.dtype.kind in "iu" and values.size and np.abs(values).max() >= 2**53:
                    return None  # numpy'd ints float64 would round, then float32 again
            elif not all(map(_plain_number, values)):
                raise TypeError("not plain numbers")
            if len(values):
                row[n - len(values) :] = values
        return as_float32(rows, "")
    except Exception:  # noqa: BLE001 - the general path raises its own error for it
        return None


# Floats float64 holds exactly: through it, float32 rounds them as it rounds them directly.
_FLOATS = (float, np.float64, np.float32, np.float16)


def _plain_number(value: Any) -> bool:
    if value.__class__ in _FLOATS:
        return True
    return (value.__class__ is int or isinstance(value, np.integer)) and abs(value) < 2**53


def last_prev_actions(
    episodes: Sequence[SingleAgentEpisode], n: int, fill: Any, one_hot_discrete: bool
) -> np.ndarray | None:
    """Each episode's last ``n`` actions (fill-ed before), ``[episodes, n, *A]``.

    As ``PrevActionsPrevRewards(inference=True)`` reads them, for episodes sharing one
    ``Discrete`` action space (one-hot: fill-ed positions all zero) or ``Box`` one (items
    arrays of one dtype and shape); None for anything else.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[2], rewards=[0.0],
        ...                         action_space=gym.spaces.Discrete(3), len_lookback_buffer=0)
        >>> last_prev_actions([ep], 2, 0, True).tolist()
        [[[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]]
    """
    space = episodes[0].action_space if episodes else None
    kind = type(space)
    if any(ep.action_space is not space for ep in episodes) or not (
        kind is gym.spaces.Box or (kind is gym.spaces.Discrete and one_hot_discrete)
    ):
        return None
    try:
        windows = [_last_items(ep.actions, len(ep), n) for ep in episodes]
        if kind is gym.spaces.Discrete:
            return _one_hot_windows(windows, space, n)
        return _box_windows(windows, space, n, fill)
    except Exception:  # noqa: BLE001 - the general path raises its own error for it
        return None


def _one_hot_windows(windows: list[Any], space: Any, n: int) -> np.ndarray:
    start, size = int(space.start), int(space.n)
    slots, cols = [], []
    for i, window in enumerate(windows):
        first = i * n + n - len(window)
        for j, value in enumerate(window):
            if value.__class__ is not int and not isinstance(value, np.integer):
                raise TypeError("not ints")
            slots.append(first + j)
            cols.append(int(value) - start)
    out = np.zeros((len(windows) * n, size), np.float32)
    if cols:
        out[slots] = _ones(np.array(cols).reshape(-1, 1), size)
    return out.reshape(len(windows), n, size)


def _box_windows(windows: list[Any], space: Any, n: int, fill: Any) -> np.ndarray:
    items = [item for window in windows for item in window]
    filler = filler_item(space, fill)  # the getter's padding (its errors: the general path's)
    dtype = filler.dtype
    if items:
        first = items[0]
        if first.__class__ is not np.ndarray or first.dtype.kind not in "biuf":
            raise TypeError("not numeric arrays")
        for item in items:  # plain arrays of one dtype and shape
            if item.__class__ is not np.ndarray:
                raise TypeError("not plain arrays")
            if item.dtype != first.dtype or item.shape != first.shape:
                raise TypeError("other dtypes or shapes")
        if first.shape != filler.shape:
            raise TypeError("not the space's shape")
        dtype = np.result_type(first.dtype, dtype)
    out = np.empty((len(windows), n, *filler.shape), dtype)
    out[...] = filler
    for row, window in zip(out, windows):
        if len(window):
            row[n - len(window) :] = window
    return out

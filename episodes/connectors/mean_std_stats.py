"""The statistics of :class:`~episodes.connectors.mean_std.MeanStdFilter`: Chan merges, states.

Kept per filter as a count, a flat float64 mean and a flat ``m2`` (sums of squared deviations)
over every element of an observation; :class:`_Layout` maps the flat vector to the
observation's leaves and back.

Example:
    >>> count, mean, m2 = _chan(*_moments(np.array([[0.0], [2.0]])), *_moments(np.array([[4.0]])))
    >>> count, mean.tolist(), (m2 / (count - 1)).tolist()
    (3, [2.0], [4.0])
"""

from __future__ import annotations

import math
import reprlib
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import tree


class _Stats:
    """A filter's statistics and counted episodes, which :meth:`MeanStdFilter.shared` shares."""

    def __init__(self) -> None:
        self.count = 0
        self.layout: _Layout | None = None  # known from the first observations or a state
        self.mean = np.zeros(0)
        self.m2 = np.zeros(0)
        self.counted: OrderedDict[Hashable, int] = OrderedDict()  # id -> next t to count


class _Layout:
    """Where each leaf of an observation sits in the flat vector of all its elements."""

    def __init__(self, skeleton: Any, shapes: list[tuple[int, ...]]):
        self.skeleton = skeleton  # the observation's structure, leaves None
        self.shapes = shapes
        self.sizes = [math.prod(shape) for shape in shapes]
        self.size = sum(self.sizes)
        self.from_lists = False  # read from a JSON state's lists, with no layout known before

    def unflat(self, flat: np.ndarray, rows: int | None = None) -> Any:
        """A flat ``[D]`` (or ``[rows, D]``) array split into leaves shaped as observations."""
        lead = () if rows is None else (rows,)
        if self.skeleton is None:  # a Box: one leaf (the call path of every step, kept short)
            return flat.reshape(lead + self.shapes[0])
        ends = np.cumsum(self.sizes)[:-1]
        pieces = np.split(flat, ends, axis=-1) if len(self.shapes) > 1 else [flat]
        leaves = [piece.reshape(lead + shape) for piece, shape in zip(pieces, self.shapes)]
        return tree.unflatten_as(self.skeleton, leaves)


def _fitted(layout: _Layout | None, skeleton: Any, shapes: list[tuple[int, ...]]) -> Any:
    """``layout``, a new one where none is known yet, or None where these leaves do not fit it."""
    if layout is None:
        return _Layout(skeleton, shapes)
    if shapes != layout.shapes or not _same_structure(skeleton, layout.skeleton):
        return None
    return layout


def _same_structure(a: Any, b: Any) -> bool:
    try:
        tree.assert_same_structure(a, b)
    except (TypeError, ValueError):
        return False
    return True


def _moments(rows: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    if len(rows) == 1:  # an env runner's step: the same figures without numpy's mean wrapper
        return 1, rows[0].copy(), np.zeros(rows.shape[1])
    mean = rows.mean(axis=0)
    return len(rows), mean, ((rows - mean) ** 2).sum(axis=0)


def _chan(
    n_a: int, mean_a: np.ndarray, m2_a: np.ndarray, n_b: int, mean_b: np.ndarray, m2_b: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray]:
    """Chan et al.'s merge of two streams' (count, mean, sum of squared deviations)."""
    total = n_a + n_b
    delta = mean_b - mean_a
    mean = mean_a + delta * (n_b / total)
    m2 = m2_a + m2_b + delta**2 * (n_a * n_b / total)
    return total, mean, m2


def _sample_var(count: int, m2: np.ndarray) -> np.ndarray:
    return m2 / (count - 1) if count > 1 else np.zeros_like(m2)


def _checked_state(
    state: Any, layout: _Layout | None, who: str
) -> tuple[int, _Layout | None, np.ndarray, np.ndarray]:
    """``state``'s count, layout and flat mean and m2, checked against ``layout``."""
    given_layout = layout
    if not isinstance(state, Mapping) or not {"count", "mean", "m2"} <= set(state):
        raise TypeError(
            f"{who} takes a dict with 'count', 'mean' and 'm2' (what get_state gives), got "
            f"{reprlib.repr(state)}"
        )
    count = state["count"]
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"{who}: 'count' must be an int >= 0, got {count!r}")
    if state["mean"] is None or state["m2"] is None:
        if count or state["mean"] is not state["m2"]:
            raise ValueError(f"{who}: 'mean' and 'm2' are None only together, with count 0")
        size = 0 if layout is None else layout.size
        return 0, layout, np.zeros(size), np.zeros(size)
    parts = {}
    for key in ("mean", "m2"):
        # Lists (a state read back from JSON) as arrays, or as the tuples JSON made lists of.
        given = _arrays(state[key]) if layout is None else _laid_out(state[key], layout.skeleton)
        leaves = [np.asarray(leaf, np.float64) for leaf in tree.flatten(given)]
        shapes = [leaf.shape for leaf in leaves]
        fitted = _fitted(layout, tree.map_structure(lambda _: None, given), shapes)
        if fitted is None:
            assert layout is not None
            raise ValueError(
                f"{who}: {key!r} is shaped {shapes}, the filter's observations {layout.shapes}"
            )
        layout = fitted
        flat = np.concatenate([leaf.ravel() for leaf in leaves]) if leaves else np.zeros(0)
        if not np.isfinite(flat).all():
            raise ValueError(f"{who}: {key!r} holds a NaN or inf")
        parts[key] = flat
    if (parts["m2"] < 0).any():
        raise ValueError(f"{who}: 'm2' (sums of squared deviations) holds a negative value")
    if count <= 1 and parts["m2"].any():  # no stream gives it; a merge would add it in
        raise ValueError(f"{who}: 'm2' must be 0 where 'count' is {count} (no deviations yet)")
    assert layout is not None
    if given_layout is None and _holds_list(state["mean"]):
        layout.from_lists = True  # a Tuple's leaves may have been read as one array
    return int(count), layout, parts["mean"], parts["m2"]


def _holds_list(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_holds_list(item) for item in value.values())
    if isinstance(value, tuple):
        return any(_holds_list(item) for item in value)
    return isinstance(value, list)


def _arrays(value: Any) -> Any:
    """``value`` with its lists as arrays: a list is one leaf, as an observation's array is.

    Observations nest in dicts and tuples only; a list comes from a state saved as JSON (where
    a tuple becomes a list too: a list whose items are not one array is taken as a tuple).
    """
    if isinstance(value, Mapping):
        return {key: _arrays(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_arrays(item) for item in value)
    if isinstance(value, list):
        try:
            array = np.asarray(value, np.float64)
        except (TypeError, ValueError):  # ragged or nested dicts: a Tuple space's leaves
            return tuple(_arrays(item) for item in value)
        return array
    return value


def _laid_out(value: Any, skeleton: Any) -> Any:
    """``value`` read as :func:`_arrays` does, but a list where ``skeleton`` has a tuple is one.

    JSON turns a Tuple space's leaves into a list, which :func:`_arrays` takes for one array
    where the leaves are equally shaped; a known layout says which it was.

    Example:
        >>> _laid_out({"a": [[0.0], [1.0]]}, {"a": (None, None)})
        {'a': (array([0.]), array([1.]))}
    """
    fits = isinstance(value, (list, tuple)) and len(value) == len(skeleton or ())
    if isinstance(skeleton, tuple) and fits:
        return tuple(_laid_out(item, part) for item, part in zip(value, skeleton))
    if isinstance(skeleton, dict) and isinstance(value, Mapping):
        return {key: _laid_out(item, skeleton.get(key)) for key, item in value.items()}
    return _arrays(value)  # anything else: as without a layout (and refused by its shapes)


def _sized(layout: _Layout | None, mean: np.ndarray, m2: np.ndarray) -> tuple[Any, Any]:
    """``mean`` and ``m2``, or zeros of the layout's size where nothing was counted yet."""
    if layout is not None and len(mean) != layout.size:
        return np.zeros(layout.size), np.zeros(layout.size)
    return mean, m2

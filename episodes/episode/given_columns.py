"""The columns a :class:`SingleAgentEpisode` constructor is given, as buffers.

A column may be given as a list of items, any other sequence of items (a tuple, an array's
rows), a dict that is a batched struct (a numpy'd column's form: leaves sharing their leading
axis), or a ready :class:`~episodes.buffer.InfiniteLookbackBuffer`. Everything but a buffer
becomes a list of items first, so the lookback and the default infos count items, never a
dict's keys, nor a DataFrame's column labels (its rows are the items, as a buffer reads it).

Example:
    >>> column_items({"x": np.arange(2)})
    [{'x': np.int64(0)}, {'x': np.int64(1)}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.errors import IntegerTypeError

__all__ = [
    "column_items",
    "default_infos",
    "extra_columns",
    "given_column",
    "given_extras",
    "infos_or_default",
    "lookback_of",
]


def column_items(data: Any, name: str = "a column") -> Any:
    """A given column as a list of items; None and ready buffers as they are.

    A list is taken as it is (not copied), any other sequence as the list of its items (an
    array's rows), and a dict as a batched struct: its items are one dict per index along the
    leaves' shared leading axis (``{"x": array of shape (3, 2)}`` holds three items), as a
    setter takes such a dict for ``new_data``. An empty dict is no column given (None). An
    array-like (``__array__``) whose iteration gives no rows of it (a pandas DataFrame's gives
    its column labels) holds the rows numpy reads from it, as a buffer given it holds.

    Raises:
        TypeError: A dict that is no batched struct (a leaf without a leading axis, leaves of
            different lengths), data that is no sequence (``1.5``), or an array-like iterating
            no rows that numpy reads no rows from; the message names the column (``name``, the
            constructor's argument).

    Example:
        >>> column_items((1, 2)), [row.tolist() for row in column_items(np.eye(2))]
        ([1, 2], [[1.0, 0.0], [0.0, 1.0]])
        >>> column_items({"x": 1})
        Traceback (most recent call last):
        ...
        TypeError: a column given as a dict must be a batched struct (every leaf an array ...
    """
    if data is None or isinstance(data, (list, InfiniteLookbackBuffer)):
        return data
    if isinstance(data, Mapping) and not data:
        return None  # nothing given, as RLlib reads it (``infos or [...]``): the default
    if isinstance(data, Mapping):
        try:
            return ArrayStore.from_batch(dict(data)).items(0)
        except ValueError as error:
            raise TypeError(
                f"{name} given as a dict must be a batched struct (every leaf an array with "
                f"the same leading length, one entry per item): {error}"
            ) from error
    try:
        items = list(data)
    except TypeError as error:  # a number, say: no items to take
        raise TypeError(
            f"{name} must be a list or another sequence of items, a batched dict or an "
            f"InfiniteLookbackBuffer, got {type(data).__name__} ({data!r})"
        ) from error
    if isinstance(data, (np.ndarray, tuple)) or not hasattr(data, "__array__"):
        return items
    if isinstance(data, Sequence) or _iterates_rows(data, items):
        return items
    return _rows(data, name, items)


def _iterates_rows(data: Any, items: list[Any]) -> bool:
    """Whether iterating an array-like gave its rows: one per row, as a tensor's are.

    Rows are of its type, or it is of theirs (a torch ``Parameter``'s rows are tensors). Any
    other iteration is read through numpy instead: a DataFrame iterates its column labels (a
    2 x 2 frame's MultiIndex labels even have a row's shape), a polars frame its columns, and
    numpy's rows of an h5py-like table are the rows it iterates (:func:`_rows` keeps those
    where numpy cannot read the table, as a device array's ``__array__`` may refuse).

    Example:
        >>> table = np.zeros((2, 3))
        >>> _iterates_rows(table, list(table)), _iterates_rows(table, ["x", "y"])
        (True, False)
    """
    shape = getattr(data, "shape", None)
    try:
        shape = tuple(shape) if isinstance(shape, tuple) else np.shape(data)
    except Exception:  # noqa: BLE001 - no shape numpy can read: iterating is all there is
        return True
    return len(shape) < 2 or (
        len(items) == shape[0]
        and all(isinstance(item, type(data)) or isinstance(data, type(item)) for item in items)
    )


def _rows(data: Any, name: str, items: list[Any]) -> list[Any]:
    """An array-like's rows, as a buffer holding it reads them (``np.asarray``'s rows).

    Where numpy reads none, the ``items`` its iteration gave are its rows if each has a row's
    shape (a table whose ``__array__`` refuses host copies, iterating numpy rows).

    Raises:
        TypeError: numpy reads no rows from it and its items are no rows; the message names
            the column ``name``.

    Example:
        >>> class Table:  # iterates its column labels, as a DataFrame does
        ...     def __array__(self, dtype=None, copy=None):
        ...         return np.array([[0.0, 1.0], [2.0, 3.0]])
        ...     def __iter__(self):
        ...         return iter(["x", "y"])
        >>> [row.tolist() for row in _rows(Table(), "observations", ["x", "y"])]
        [[0.0, 1.0], [2.0, 3.0]]
    """
    try:
        return ArrayStore.from_batch(data).items(0)
    except Exception as error:  # whatever its __array__ raised, named with the column
        if _shaped_rows(items, tuple(getattr(data, "shape", ()))):
            return items
        raise TypeError(
            f"{name} given as a {type(data).__name__} iterates no rows (its column labels, "
            f"say) and numpy reads no rows from it either: {error}"
        ) from error


def _shaped_rows(items: list[Any], shape: tuple[int, ...]) -> bool:
    """Whether ``items`` are rows of an array of ``shape``: one per row, each of a row's shape."""
    try:
        return (
            len(shape) > 1
            and len(items) == shape[0]
            and all(np.shape(item) == shape[1:] for item in items)
        )
    except Exception:  # noqa: BLE001 - an item numpy reads no shape from is no row
        return False


def extra_columns(extra_model_outputs: Any) -> dict[Any, Any]:
    """The constructor's ``extra_model_outputs`` as key -> :func:`column_items` (or a buffer).

    Raises:
        TypeError: ``extra_model_outputs`` is neither None nor a dict (a list of pairs, a
            string; an empty list, tuple or string is no extra outputs, as in RLlib), or a
            key's column is no sequence; the message names the key.

    Example:
        >>> extra_columns({"vf": (0.5, 0.25)}), extra_columns(None)
        ({'vf': [0.5, 0.25]}, {})
        >>> extra_columns({"vf": 0.5})
        Traceback (most recent call last):
        ...
        TypeError: extra_model_outputs['vf'] must be a list or another sequence of items, ...
    """
    if extra_model_outputs is None or (
        isinstance(extra_model_outputs, list | tuple | str) and not extra_model_outputs
    ):
        return {}  # an empty list, tuple or string reads as no extra outputs, as in RLlib
    if not isinstance(extra_model_outputs, Mapping):
        raise TypeError(
            "extra_model_outputs must be a dict of key -> column (a list or a buffer), got "
            f"{type(extra_model_outputs).__name__}"
        )
    return {
        key: column_items(value, f"extra_model_outputs[{key!r}]")
        for key, value in extra_model_outputs.items()
    }


def given_column(
    data: Any, lookback: int, space: gym.Space[Any] | None = None, name: str = "a column"
) -> InfiniteLookbackBuffer:
    """The buffer for a column given as :func:`column_items` (or None); a buffer gets ``space``.

    A ready buffer is used as it is, with its own lookback; it takes ``space`` unless it has one.

    Raises:
        AssertionError: Items fewer than ``lookback`` (the constructor's lookback is at most
            the rewards given, so every step column holds that many), naming the column
            ``name``, as :meth:`~episodes.SingleAgentEpisode.validate` names inconsistent ones.

    Example:
        >>> buffer = given_column([0, 1, 2], 1, gym.spaces.Discrete(3))
        >>> buffer.get(), buffer.lookback, buffer.space
        ([1, 2], 1, Discrete(3))
    """
    if isinstance(data, InfiniteLookbackBuffer):
        if space is not None and data.space is None:
            data.space = space
        return data
    if data is not None and len(data) < lookback:  # a buffer would take it all as lookback
        raise AssertionError(
            f"column lengths disagree: {name} holds {len(data)} items, fewer than the "
            f"lookback of {lookback} steps (len_lookback_buffer, at most the rewards given)"
        )
    return InfiniteLookbackBuffer(data, lookback, space)


def given_extras(extras: dict[Any, Any], lookback: int) -> dict[Any, InfiniteLookbackBuffer]:
    """:func:`given_column` of every extra-model-output column.

    Example:
        >>> given_extras({"vf": [0.5, 1.5]}, 1)["vf"].get()
        [1.5]
    """
    return {
        key: given_column(value, lookback, name=f"extra_model_outputs[{key!r}]")
        for key, value in extras.items()
    }


def infos_or_default(infos: Any, observations: Any) -> Any:
    """The infos column as given, or :func:`default_infos` where none is given.

    None, an empty list and an empty buffer (no items, lookback included) are no infos given,
    as RLlib reads them (``infos or [...]``): one ``{}`` per observation.

    Example:
        >>> infos_or_default(InfiniteLookbackBuffer(), [0, 1]), infos_or_default([{"a": 1}], [0])
        ([{}, {}], [{'a': 1}])
    """
    if infos is None or (isinstance(infos, list) and not infos):
        return default_infos(observations)
    if isinstance(infos, InfiniteLookbackBuffer) and not infos.len_incl_lookback():
        return default_infos(observations)
    return infos


def default_infos(observations: Any) -> Any:
    """One ``{}`` per observation; for a ready buffer, a buffer with the same lookback.

    Example:
        >>> default_infos([0, 1]), default_infos(None)
        ([{}, {}], [])
    """
    if isinstance(observations, InfiniteLookbackBuffer):
        count = observations.len_incl_lookback()
        return InfiniteLookbackBuffer([{} for _ in range(count)], lookback=observations.lookback)
    return [{} for _ in range(len(observations) if observations is not None else 0)]


def lookback_of(len_lookback_buffer: Any, len_rewards: int) -> int:
    """The constructor's lookback: ``"auto"`` takes every reward given, an int at most that.

    Raises:
        ValueError: A negative int.
        TypeError: Anything but ``"auto"`` or an int (a float, a bool), as ``cut`` says.

    Example:
        >>> lookback_of("auto", 3), lookback_of(5, 3), lookback_of(np.int64(1), 3)
        (3, 3, 1)
    """
    if len_lookback_buffer == "auto":
        return len_rewards
    if isinstance(len_lookback_buffer, (int, np.integer)) and not isinstance(
        len_lookback_buffer, bool
    ):
        if len_lookback_buffer < 0:
            raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}")
        return min(int(len_lookback_buffer), len_rewards)
    # A TypeError (and a ValueError), as cut() and slice() give for the same value.
    raise IntegerTypeError(
        f"len_lookback_buffer must be 'auto' or an int >= 0, got {len_lookback_buffer!r}"
    )

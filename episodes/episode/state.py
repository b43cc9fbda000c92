"""Episode state: a plain dict snapshot, its inverse, and field-by-field equality.

All three walk the field table (:mod:`episodes.episode.fields`), so a new field needs no edit
here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode.fields import FIELDS, Field
from episodes.indexing import as_flag
from episodes.spaces import space_from_dict, space_to_dict
from episodes.structs import data_equal

if TYPE_CHECKING:
    from episodes.episode.single_agent_episode import SingleAgentEpisode

STATE_KEYS = tuple(field.name for field in FIELDS)


def _state_of(field: Field, value: Any) -> Any:
    kind = field.kind
    if kind == "column":
        return value.get_state()
    if kind == "columns":
        return {key: column.get_state() for key, column in value.items()}
    if kind == "space":
        return space_to_dict(value)
    if kind == "custom":
        return copy.deepcopy(value)
    return value


def get_state(episode: SingleAgentEpisode) -> dict[str, Any]:
    """A snapshot of every field as plain Python/numpy values (spaces as JSON-safe dicts).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> sorted(get_state(SingleAgentEpisode()))[:3]
        ['action_space', 'actions', 'agent_id']
    """
    values = episode.field_values()
    return {f.name: _state_of(f, values[f.name]) for f in FIELDS}


def _column_from_state(name: str, value: Any) -> Any:
    try:
        return InfiniteLookbackBuffer.from_state(value)
    except (KeyError, TypeError) as err:
        raise ValueError(f"episode state holds a malformed column {name}: {err}") from err


def _value_from_state(field: Field, value: Any) -> Any:
    kind = field.kind
    if kind == "column":
        return _column_from_state(field.name, value)
    if kind == "columns":
        if not isinstance(value, dict):
            raise ValueError(f"episode state's {field.name} must be a dict of buffer states")
        return {key: _column_from_state(f"{field.name}[{key!r}]", v) for key, v in value.items()}
    if kind == "space":
        return space_from_dict(value)
    if kind == "custom":
        if not isinstance(value, dict):
            raise ValueError(f"{field.name} must be a dict, got {type(value).__name__}")
        return copy.deepcopy(value)
    if kind in ("time", "clock"):
        try:
            return scalar_value(field, value)
        except TypeError as err:
            raise ValueError(f"episode state's {err}") from err
    if kind == "flag":  # "no" or 1 would read as a flag of another meaning
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"episode state's {field.name} must be a bool, got {value!r}")
        return bool(value)
    return value


def scalar_value(field: Field, value: Any) -> Any:
    """A time field's value as an ``int``, a clock field's as a ``float`` or None.

    Other fields' values are returned as they are. ``from_state`` and ``from_fields`` (so the
    constructor too) both check these fields here.

    Raises:
        TypeError: A time that is no integer (``1.5``, ``True``, ``"2"``, None) or a clock
            reading that is no number (``"x"``, ``True``); the message names the field.

    Example:
        >>> from episodes.episode.fields import FIELDS_BY_NAME
        >>> scalar_value(FIELDS_BY_NAME["t"], np.int64(3))
        3
        >>> scalar_value(FIELDS_BY_NAME["t"], 1.5)
        Traceback (most recent call last):
        ...
        TypeError: t must be an integer, got 1.5
    """
    kind = field.kind
    if kind == "time":  # 0.5 is no time step, and None no integer
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{field.name} must be an integer, got {value!r}")
        return int(value)
    if kind == "clock":  # a wall-clock reading, or None before the first step
        if value is None:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"{field.name} must be a number or None, got {value!r}")
        return float(value)
    return value


def field_value(field: Field, value: Any) -> Any:
    """The value ``from_fields`` (and the constructor) stores for ``field``, checked.

    None takes a column's, the extra outputs' and ``custom_data``'s empty default; flags must
    be bools, times integers and clocks numbers (:func:`scalar_value`).

    Raises:
        TypeError: A value of the wrong type for its field (the message names the field): a
            column that is no ``InfiniteLookbackBuffer`` (extra model outputs: no dict of
            them), a flag that is no bool, a time that is no integer, a clock that is no
            number, ``custom_data`` that is no dict.

    Example:
        >>> from episodes.episode.fields import FIELDS_BY_NAME
        >>> field_value(FIELDS_BY_NAME["rewards"], None).get(), field_value(FIELDS_BY_NAME["t"], 2)
        ([], 2)
    """
    kind = field.kind
    if kind == "flag":
        return as_flag(value, field.name)
    if kind in ("time", "clock"):
        return scalar_value(field, value)
    if kind == "column":
        if value is None:
            return InfiniteLookbackBuffer()
        if not isinstance(value, InfiniteLookbackBuffer):
            raise TypeError(
                f"{field.name} must be an InfiniteLookbackBuffer, got {type(value).__name__}"
            )
    elif kind == "columns":
        if value is None:
            return {}
        if not (
            isinstance(value, dict)
            and all(isinstance(column, InfiniteLookbackBuffer) for column in value.values())
        ):
            raise TypeError(f"{field.name} must be a dict of InfiniteLookbackBuffers")
    elif kind == "custom":
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise TypeError(f"{field.name} must be a dict, got {type(value).__name__}")
    return value


def from_state(cls: type[SingleAgentEpisode], state: dict[str, Any]) -> SingleAgentEpisode:
    """Rebuilds an episode from :func:`get_state`'s dict.

    Raises:
        KeyError: The state misses keys (all are named).
        ValueError: The state is inconsistent (column lengths, ``t``), or malformed.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> from_state(SingleAgentEpisode, get_state(ep)) == ep
        True
    """
    if not isinstance(state, dict):
        raise TypeError(f"an episode state must be a dict, got {type(state).__name__}")
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise KeyError(f"episode state is missing keys {missing}")
    values = {f.name: _value_from_state(f, state[f.name]) for f in FIELDS}
    return cls.from_fields(values)


def episodes_equal(a: SingleAgentEpisode, b: SingleAgentEpisode) -> bool:
    """Field-by-field equality (clock fields excluded).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> episodes_equal(SingleAgentEpisode("x"), SingleAgentEpisode("x"))
        True
    """
    for field in FIELDS:
        mine, theirs = getattr(a, field.slot), getattr(b, field.slot)
        if field.kind == "clock":
            continue
        if field.kind == "columns":
            if mine.keys() != theirs.keys() or any(mine[k] != theirs[k] for k in mine):
                return False
        elif field.kind == "custom":
            if not data_equal(mine, theirs):
                return False
        elif mine != theirs:
            return False
    return True

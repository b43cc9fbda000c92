"""Episode state: a plain dict snapshot, its inverse, and field-by-field equality.

All three walk the field table (:mod:`episodes.episode.fields`), so a new field needs no edit
here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode.custom_copy import copied_custom
from episodes.episode.fields import FIELDS, Field
from episodes.errors import IntegerTypeError
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
    if kind == "custom":  # a value no deep copy can make (a lock) is shared, as by cut
        return copied_custom(value)
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
        return copied_custom(value)
    if kind in ("time", "clock"):
        try:
            return scalar_value(field, value)
        except (TypeError, ValueError) as err:
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
        ValueError: A clock reading that is no finite float (NaN, inf, ``10**400``): no
            ``time.perf_counter`` reading, and no dataset could store it; the message names
            the field.

    Example:
        >>> from episodes.episode.fields import FIELDS_BY_NAME
        >>> scalar_value(FIELDS_BY_NAME["t"], np.int64(3))
        3
        >>> scalar_value(FIELDS_BY_NAME["t"], 1.5)
        Traceback (most recent call last):
        ...
        episodes.errors.IntegerTypeError: t must be an integer, got 1.5
    """
    kind = field.kind
    if kind == "time":  # 0.5 is no time step, and None no integer
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise IntegerTypeError(f"{field.name} must be an integer, got {value!r}")
        return int(value)
    if kind == "clock":  # a wall-clock reading, or None before the first step
        if value is None:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"{field.name} must be a number or None, got {value!r}")
        try:
            reading = float(value)
        except OverflowError:  # an int no float holds (10**400)
            reading = math.nan
        if not math.isfinite(reading):
            raise ValueError(f"{field.name} must be a finite number or None, got {value!r}")
        return reading
    return value


def field_value(field: Field, value: Any) -> Any:
    """The value ``from_fields`` (and the constructor) stores for ``field``, checked.

    None takes a column's, the extra outputs' and ``custom_data``'s empty default; flags must
    be bools, times integers and clocks finite numbers (:func:`scalar_value`).

    Raises:
        TypeError: A value of the wrong type for its field (the message names the field): a
            column that is no ``InfiniteLookbackBuffer`` (extra model outputs: no dict of
            them), a flag that is no bool, a time that is no integer, a clock that is no
            number, ``custom_data`` that is no dict.
        ValueError: A clock that is a number but not finite (NaN, inf); the message names
            the field. A numpy'd infos column (infos stay a list of dicts).

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
        if field.name == "infos" and value.finalized:  # to_numpy never numpys them
            raise ValueError(
                "infos must be a list-mode InfiniteLookbackBuffer of dicts, got a numpy'd one"
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


def same_id(a: Any, b: Any) -> bool:
    """Whether two ids are equal, as ``==`` says, NaNs at the same places equal.

    As :func:`episodes.structs.data_equal` takes NaNs in data: an id that is or holds a NaN
    (in a tuple, a list, a dict's keys or values) equals its copies, which ``==`` denies (a
    NaN equals nothing, and a tuple only shares a NaN object with itself).

    Example:
        >>> nan = float("nan")
        >>> same_id(nan, float("nan")), same_id(("a", nan), ("a", float("nan")))
        (True, True)
        >>> same_id(("a", nan), ("b", nan)), same_id("a", np.str_("a")), same_id(1, 1.0)
        (False, True, True)
    """
    if a is b:
        return True
    try:
        equal: Any = a == b
    except Exception:  # noqa: BLE001 - a tuple holding arrays: part by part, below
        equal = None
    if equal is not None and not isinstance(equal, (bool, np.bool_)):
        return data_equal(a, b)  # an array or tensor id: element by element
    if equal:
        return True
    complex_ = (complex, np.complexfloating)
    if isinstance(a, complex_) or isinstance(b, complex_):  # 1+nanj is not 2+nanj
        if not (isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS)):
            return False
        x, y = complex(a), complex(b)
        return same_id(x.real, y.real) and same_id(x.imag, y.imag)
    if isinstance(a, _FLOATS) and isinstance(b, _FLOATS):
        return bool(a != a and b != b)  # noqa: PLR0124 - NaN is the one value unequal to itself
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return (
            isinstance(a, tuple) == isinstance(b, tuple)
            and len(a) == len(b)
            and all(same_id(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and _same_items(a, b)
    return False


def _same_items(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """Whether two dicts of one length pair up key by key, value by value (:func:`same_id`).

    A NaN key is found only by its own object: keys the other dict lacks are paired up among
    themselves (``same_id`` is an equivalence, so taking the first match never misses one).
    """
    if not all(same_id(value, b[key]) for key, value in a.items() if key in b):
        return False
    rest = [(key, value) for key, value in b.items() if key not in a]
    for key, value in a.items():
        if key in b:
            continue
        match = next(
            (i for i, (k, v) in enumerate(rest) if same_id(key, k) and same_id(value, v)), None
        )
        if match is None:
            return False
        del rest[match]
    return True


_FLOATS = (float, complex, np.floating, np.complexfloating)
_NUMBERS = (int, float, complex, np.number)


def episodes_equal(a: SingleAgentEpisode, b: SingleAgentEpisode) -> bool:
    """Field-by-field equality (clock fields excluded); ids compare by :func:`same_id`.

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
        elif field.kind == "id":
            if not same_id(mine, theirs):
                return False
        elif mine != theirs:
            return False
    return True


def _fields_assigner(plain: bool) -> Any:
    """Generates ``assign(episode, values)``: :func:`field_value` of each field, set in order.

    Generated once from the field table (as ``cut``'s successor builder is): every constructor
    runs it, and a loop calling ``field_value`` and ``setattr`` per field costs several times
    the straight-line code. Ids and spaces are taken as they are (``field_value`` returns
    them unchecked); a value of exactly the class its check returns unchanged (a bool flag, an
    int time, a None clock, a list-mode buffer, a dict) skips the call, any other goes to it.
    ``plain`` assigns with ``episode.slot = value``, for classes that keep ``object``'s
    ``__setattr__`` (the same assignment, a tenth of the cost); else ``object.__setattr__``.
    """
    lines = ["def assign(episode, values):", "    get = values.get"]
    namespace: dict[str, Any] = {
        "set_": object.__setattr__,
        "as_flag": as_flag,
        "scalar_value": scalar_value,
        "field_value": field_value,
        "Buffer": InfiniteLookbackBuffer,
    }
    unchanged = {
        "flag": "v.__class__ is bool",
        "time": "v.__class__ is int",
        "clock": "v is None",
        "column": "v.__class__ is Buffer",
        "columns": "v.__class__ is dict and not v",
        "custom": "v.__class__ is dict",
    }
    for number, field in enumerate(FIELDS):
        namespace[f"field_{number}"] = field
        kind, name = field.kind, field.name
        lines.append(f"    v = get({name!r}, field_{number}.default)")
        if kind in unchanged:
            test = unchanged[kind]
            if name == "infos":  # field_value refuses a numpy'd infos column
                test += " and not v.store.is_numpy"
            call = f"as_flag(v, {name!r})" if kind == "flag" else f"field_value(field_{number}, v)"
            lines.append(f"    if not ({test}):\n        v = {call}")
        elif kind not in ("id", "space"):
            lines.append(f"    v = field_value(field_{number}, v)")
        slot = field.slot
        lines.append(f"    episode.{slot} = v" if plain else f"    set_(episode, {slot!r}, v)")
    exec("\n".join(lines), namespace)  # noqa: S102 - our own field names, not input
    return namespace["assign"]


_assign_fields = _fields_assigner(plain=False)
_assign_plain = _fields_assigner(plain=True)


def assign_fields(episode: SingleAgentEpisode, values: dict[str, Any]) -> None:
    """Sets every field of ``episode`` to :func:`field_value` of its value (default if absent).

    In table order, so the first refused field raises, as a loop over the table would.

    Raises:
        TypeError, ValueError: A value :func:`field_value` refuses (the message names it).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode.__new__(SingleAgentEpisode)
        >>> assign_fields(ep, {"id_": "a", "t": 3}); ep.id_, ep.t, ep.get_rewards()
        ('a', 3, [])
    """
    if type(episode).__setattr__ is object.__setattr__:
        _assign_plain(episode, values)
    else:  # a subclass's own __setattr__ is bypassed, as it always was here
        _assign_fields(episode, values)

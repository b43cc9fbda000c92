"""The own index entry fields of the episodes a buffer's save and load batch (*plain* ones).

``DatasetWriter`` puts an episode's id, other ids, flags, times, clocks and ``custom_data`` in
its index entry's ``meta``; ``custom_data`` as ``encode_value`` encodes it without a blob (JSON
values, tagged where JSON cannot say them; a numpy value is refused) and read back with
``decode_value``. :func:`_meta_fields` gives a stored episode's entry fields as the writer
encodes them (:mod:`episodes.replay.saved_shards` puts them into a model entry), or None where
its ``custom_data`` is not *simple*: a dict whose keys are str and whose values are str, int,
float, bool or None, or lists, tuples and such dicts of them (exactly these types: the writer
encodes a copy of the stored value, which for these is equal, item for item); the writer's own
encoding then judges the episode. :func:`_entry_fields` reads a saved entry's fields back as
the reader would (:mod:`episodes.replay.loaded_shards`), ``custom_data`` decoded by
:func:`_loaded_custom` as the reader decodes it, so loads of saves written episode by episode
(``custom_data`` of any kind the writer stores) take the same path.

Example:
    >>> from episodes.replay.metadata import EpisodeMeta
    >>> meta = EpisodeMeta({"env_index": 3}, None, None, None, None, None)
    >>> fields = _meta_fields(meta)
    >>> fields["custom_data"]
    {'env_index': 3}
    >>> _loaded_custom(fields["custom_data"])
    {'env_index': 3}
"""

from __future__ import annotations

import math
from typing import Any

from episodes.io import DatasetError, UnstorableValueError
from episodes.io.values import decode_value, encode_value

__all__: list[str] = []

_IDS = ("agent_id", "module_id", "multi_agent_episode_id")
_FLAGS = ("is_terminated", "is_truncated")
_CLOCKS = ("start_time", "last_step_time")
_OWN = ("id", *_IDS, *_FLAGS, "t_started", "t", *_CLOCKS, "custom_data")
_MAX_T = 2**63 - 1
_ENTRY_KEYS = {"rows", "meta", "leaves", "wall_start", "wall_end"}
_SCALARS = (str, int, float, bool, type(None))
_DEPTH = 16  # simple values nest no deeper (the writer refuses beyond 64)


def _meta_fields(meta: Any) -> dict[str, Any] | None:
    """The ids, clocks and ``custom_data`` of an episode's index entry, as the writer's (or None).

    Example:
        >>> from episodes.replay.metadata import EpisodeMeta
        >>> _meta_fields(None)["custom_data"], _meta_fields(None)["agent_id"]
        ({}, None)
        >>> import numpy as np
        >>> _meta_fields(EpisodeMeta({"k": np.int64(1)}, None, None, None, None, None)) is None
        True
    """
    if meta is None:
        return {**dict.fromkeys((*_IDS, *_CLOCKS)), "custom_data": {}}
    fields: dict[str, Any] = {}
    for name in _IDS:
        value = getattr(meta, name)
        if value is not None and type(value) is not str:
            return None
        try:
            fields[name] = encode_value(value, blob=None, where=name)
        except UnstorableValueError:
            return None  # the writer's own refusal, from its encoding
    for name, clock in (("start_time", meta.start_time), ("last_step_time", meta.last_step_time)):
        try:
            fields[name] = None if clock is None else float(clock)
        except (TypeError, ValueError, OverflowError):
            return None
        if clock is not None and not math.isfinite(fields[name]):
            return None  # the writer's refusal (check_clocks), naming the stored episode
    custom = _saved_custom(meta.custom)
    if custom is None:
        return None
    fields["custom_data"] = custom
    return fields


def _saved_custom(custom: dict[Any, Any] | None) -> dict[str, Any] | None:
    """A stored ``custom_data`` (None: empty) as the writer encodes it; None where not simple.

    Example:
        >>> _saved_custom({"env_index": 0, "pair": (1, 2.5), "tag": None})
        {'env_index': 0, 'pair': {'__ep_tuple__': [1, 2.5]}, 'tag': None}
        >>> _saved_custom({1: "a"}) is None, _saved_custom({"k": object()}) is None
        (True, True)
    """
    if custom is None:
        return {}
    if type(custom) is not dict or not _simple(custom, 0):
        return None
    try:
        encoded = encode_value(custom, blob=None, where="custom_data")
    except UnstorableValueError:
        return None  # e.g. an int too long for JSON: the writer names it
    return encoded if type(encoded) is dict else None


def _simple(value: Any, depth: int) -> bool:
    """Whether ``value`` holds only str-keyed dicts, lists, tuples and JSON scalars."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth >= _DEPTH:
        return False
    if kind is dict:
        return all(type(k) is str and _simple(v, depth + 1) for k, v in value.items())
    if kind is list or kind is tuple:
        return all(_simple(v, depth + 1) for v in value)
    return False


def _loaded_custom(saved: Any) -> dict[Any, Any] | None:
    """A saved entry's ``custom_data`` as the reader decodes it (None: empty).

    Raises:
        ValueError: The reader would not read it as a dict (it judges the piece itself).

    Example:
        >>> _loaded_custom({"pair": {"__ep_tuple__": [1, 2]}}), _loaded_custom({})
        ({'pair': (1, 2)}, None)
    """
    if type(saved) is not dict:
        raise ValueError("custom_data is no JSON object")
    try:
        custom = decode_value(saved, blob=None, where="custom_data")
    except DatasetError as err:
        raise ValueError(str(err)) from None
    if type(custom) is not dict:
        raise ValueError("custom_data is no dict")
    return custom or None


def _entry_fields(entry: Any) -> dict[str, Any] | None:
    """A plain entry's own fields (checked as the episode decoder checks them), else None.

    Example:
        >>> meta = {"id": "a", "t_started": 0, "t": 2, "is_terminated": True,
        ...         "is_truncated": False, "custom_data": {"env_index": 1}}
        >>> entry = {"rows": [0, 3], "meta": meta, "leaves": {}, "wall_start": None,
        ...          "wall_end": None}
        >>> _entry_fields(entry)["custom_data"]
        {'env_index': 1}
        >>> _entry_fields({**entry, "meta": {**meta, "custom_data": [1]}}) is None
        True
    """
    if type(entry) is not dict or len(entry) != len(_ENTRY_KEYS) or entry.keys() != _ENTRY_KEYS:
        return None
    meta, rows = entry["meta"], entry["rows"]
    if type(meta) is not dict or type(rows) is not list or len(rows) != 2:
        return None
    fields = {key: meta.get(key) for key in _OWN}
    t0, t = fields["t_started"], fields["t"]
    if type(t0) is not int or type(t) is not int or not 0 <= t0 < t <= _MAX_T:
        return None
    if not (type(rows[0]) is type(rows[1]) is int and 0 <= rows[0] < _MAX_T - t):
        return None  # [first row, rows]: within the table is checked with it
    if rows[1] != t - t0 + 1 or {type(fields[k]) for k in _FLAGS} != {bool}:
        return None
    if any(fields[k] is not None and type(fields[k]) is not str for k in _IDS):
        return None  # ids other than None or str take the decoder's own checks
    if any(fields[k] is not None and type(fields[k]) is not float for k in _CLOCKS):
        return None
    try:
        _loaded_custom(fields["custom_data"])
    except ValueError:
        return None  # read as an episode: the reader's own checks
    return fields

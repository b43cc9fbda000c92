"""The episode's fields, declared once.

Every field of :class:`~episodes.episode.SingleAgentEpisode` is one row of :data:`FIELDS`: its
name (the attribute and the state key), its kind, its default and, for columns, whether it holds
one item per observation or one per step. The kind decides how each field behaves everywhere:

| kind | on ``cut``/``slice`` | in ``get_state`` | in ``==`` |
|---|---|---|---|
| ``"id"`` | copied | as is | compared |
| ``"column"`` | the cut column | the buffer's state | compared |
| ``"columns"`` | the cut columns | a dict of buffer states | compared |
| ``"flag"`` | False after ``cut``; kept by a slice reaching the end | ``bool`` | compared |
| ``"time"`` | set by the cut | ``int`` | compared |
| ``"space"`` | copied | a JSON-safe dict | compared |
| ``"clock"`` | reset to None | as is | ignored |
| ``"custom"`` | deep-copied | deep-copied | compared |

Flags, spaces, clocks and custom data sit behind properties (a flag takes only bools), their
slots private; custom data is deep-copied by :mod:`episodes.episode.custom_copy` (a value no deep
copy can make is shared). ``__slots__``, the successor built by ``cut`` and ``slice``,
``get_state``/``from_state``, equality and the disk encoding all walk this table, so a new field
is one new row here.

Example:
    >>> [f.name for f in FIELDS if f.kind == "column"]
    ['observations', 'infos', 'actions', 'rewards']
    >>> FIELDS_BY_NAME["infos"].per
    'observation'
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

Kind = Literal["id", "column", "columns", "flag", "time", "space", "clock", "custom"]


class Field(NamedTuple):
    """One field of the episode (build it with :func:`field`, which derives ``slot``).

    Example:
        >>> FIELDS_BY_NAME["actions"]
        Field(name='actions', kind='column', default=None, per='step', slot='actions')
        >>> FIELDS_BY_NAME["custom_data"].slot
        '_custom_data'
    """

    #: Attribute name and state key.
    name: str
    #: How the field is copied, stored and compared (see the module docstring).
    kind: Kind
    #: The value of a new episode (columns: None, an empty buffer is made).
    default: Any = None
    #: For columns: ``"observation"`` (one item per observation) or ``"step"`` (one per step).
    per: Literal["observation", "step"] | None = None
    #: The instance slot holding the value: flags, spaces, clocks and custom data sit behind
    #: properties (a flag's setter takes only bools), so their slots are private.
    slot: str = ""


def field(
    name: str,
    kind: Kind,
    default: Any = None,
    per: Literal["observation", "step"] | None = None,
) -> Field:
    """A row of the field table.

    Example:
        >>> field("start_time", "clock").slot
        '_start_time'
    """
    slot = f"_{name}" if kind in ("flag", "space", "clock", "custom") else name
    return Field(name, kind, default, per, slot)


FIELDS: tuple[Field, ...] = (
    field("id_", "id"),
    field("agent_id", "id"),
    field("module_id", "id"),
    field("multi_agent_episode_id", "id"),
    field("observations", "column", per="observation"),
    field("infos", "column", per="observation"),
    field("actions", "column", per="step"),
    field("rewards", "column", per="step"),
    field("extra_model_outputs", "columns", per="step"),
    field("is_terminated", "flag", False),
    field("is_truncated", "flag", False),
    field("t_started", "time", 0),
    field("t", "time", 0),
    field("observation_space", "space"),
    field("action_space", "space"),
    field("start_time", "clock"),
    field("last_step_time", "clock"),
    field("custom_data", "custom"),
)


FIELDS_BY_NAME: dict[str, Field] = {field.name: field for field in FIELDS}

#: The single-buffer columns, in the order ``add_env_step`` writes them.
COLUMNS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.kind == "column")


def fields_of(*kinds: Kind) -> tuple[Field, ...]:
    """The fields of the given kinds, in table order.

    Example:
        >>> [f.name for f in fields_of("flag")]
        ['is_terminated', 'is_truncated']
    """
    return tuple(field for field in FIELDS if field.kind in kinds)

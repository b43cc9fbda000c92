"""What the replay buffers keep of each stored episode besides its steps: ``EpisodeMeta``.

One entry per stored episode (never per step), in the episode table's ``meta`` column: its
``custom_data``, ``agent_id``, ``module_id``, ``multi_agent_episode_id`` and clocks
(``start_time``, ``last_step_time``). Chunks that continue an episode join its entry as
``concat_episode`` joins them, so adding ``[head, end]`` keeps what adding the joined episode
keeps: the ids are the first chunk's, ``custom_data`` is merged with a later chunk's keys
winning (a shallow merge), and a chunk that recorded a step brings its ``last_step_time`` (and
its ``start_time`` where none was recorded before). The entry also remembers the first agent any
chunk of the episode named (``first_agent``: the first chunk's ``agent_id``, or a later chunk's
where the first chunk named none), which ``add`` compares a continuing chunk's agent with, so
that its refusal does not depend on how the chunks were split into adds. Episodes built from
the buffer carry the entry: whole stored episodes their clocks, chunks of them none (as
``SingleAgentEpisode.slice`` resets them), each a copy of ``custom_data`` (as ``cut`` and
``slice`` copy it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from episodes.episode import SingleAgentEpisode
from episodes.episode.custom_copy import copied_custom
from episodes.episode.fields import FIELDS_BY_NAME
from episodes.episode.state import same_id, scalar_value
from episodes.structs import short_repr

__all__ = [
    "EpisodeMeta",
    "chunk_meta",
    "later_agent",
    "meta_from_state",
    "meta_state",
    "with_clocks",
    "with_meta",
]

_START = FIELDS_BY_NAME["start_time"]
_LAST = FIELDS_BY_NAME["last_step_time"]
#: The keys of a buffer state's ``episodes`` that hold the entries, one list item per episode.
STATE_KEYS = (
    "custom_data",
    "agent_id",
    "module_id",
    "multi_agent_episode_id",
    "start_time",
    "last_step_time",
    "first_agent",
)


@dataclass(slots=True)
class EpisodeMeta:
    """A stored episode's ``custom_data`` (None: empty), ids and clocks (None: none recorded).

    ``later_agent`` is the first agent a later chunk named where the first chunk named none
    (its ``agent_id`` None), else None; :attr:`first_agent` reads the two together.

    Example:
        >>> meta = EpisodeMeta({"seed": 1}, "agent", None, None, 2.0, 3.0)
        >>> meta.join(EpisodeMeta({"seed": 2, "k": 0}, None, None, None, 5.0, 7.0))
        >>> meta.custom, meta.agent_id, meta.start_time, meta.last_step_time
        ({'seed': 2, 'k': 0}, 'agent', 2.0, 7.0)
    """

    custom: dict[Any, Any] | None
    agent_id: Any
    module_id: Any
    multi_agent_episode_id: Any
    start_time: float | None
    last_step_time: float | None
    later_agent: Any = None

    @property
    def first_agent(self) -> Any:
        """The first agent any chunk of the episode named (None: none did).

        Example:
            >>> meta = EpisodeMeta(None, None, None, None, None, None)
            >>> meta.join(EpisodeMeta(None, "red", None, None, None, None))
            >>> meta.agent_id, meta.first_agent
            (None, 'red')
        """
        return self.agent_id if self.agent_id is not None else self.later_agent

    def join(self, later: EpisodeMeta) -> None:
        """Takes in the entry of a chunk continuing the episode, as ``concat_episode`` does.

        Example:
            >>> meta = EpisodeMeta(None, None, None, None, None, None)
            >>> meta.join(EpisodeMeta({"k": 1}, "other", None, None, 4.0, 6.0))
            >>> meta.custom, meta.agent_id, meta.first_agent, meta.start_time, meta.last_step_time
            ({'k': 1}, None, 'other', 4.0, 6.0)
        """
        if self.agent_id is None and self.later_agent is None:
            # The episode keeps its first chunk's agent_id (None, as concat_episode keeps
            # it); which agent it belongs to is still told by the first chunk that names one.
            self.later_agent = later.first_agent
        if later.custom:
            if self.custom is None:
                self.custom = later.custom  # the chunk's own copy (chunk_meta made it)
            else:
                self.custom.update(later.custom)
        if later.last_step_time is not None:
            self.last_step_time = later.last_step_time
            if self.start_time is None:
                self.start_time = later.start_time


def chunk_meta(episode: SingleAgentEpisode) -> EpisodeMeta:
    """The entry of an added chunk; its ``custom_data`` copied as ``cut`` copies it.

    The copy is the buffer's own: the caller changing the chunk's ``custom_data`` later cannot
    reach into the buffer (a value no deep copy can make, a lock, is shared).

    Example:
        >>> ep = SingleAgentEpisode("a", agent_id="ag", module_id="m")
        >>> ep.custom_data["rows"] = [1]
        >>> meta = chunk_meta(ep)
        >>> meta.custom, meta.custom["rows"] is ep.custom_data["rows"], meta.start_time
        ({'rows': [1]}, False, None)
    """
    custom = episode.custom_data
    return EpisodeMeta(
        copied_custom(custom) if custom else None,
        episode.agent_id,
        episode.module_id,
        episode.multi_agent_episode_id,
        getattr(episode, _START.slot),
        getattr(episode, _LAST.slot),
    )


def with_meta(
    episode: SingleAgentEpisode, id_: Any, meta: EpisodeMeta | None
) -> SingleAgentEpisode:
    """``episode`` (just built with ``meta``'s ids) given the stored id and ``custom_data``.

    The id is the stored one exactly (a None id too, which the constructor replaces with a
    fresh one); ``custom_data`` is a copy of the stored one, as ``cut`` and ``slice`` copy it.
    No clocks: a chunk of a stored episode has none, as a slice has none (whole episodes get
    theirs from :func:`with_clocks`). Returns ``episode``, changed in place.

    Example:
        >>> meta = EpisodeMeta({"k": 1}, None, None, None, 2.0, 5.0)
        >>> ep = with_meta(SingleAgentEpisode("x"), None, meta)
        >>> ep.id_, ep.custom_data, ep.get_duration_s()
        (None, {'k': 1}, 0.0)
    """
    if id_ is None:
        episode.id_ = None
    if meta is not None and meta.custom:
        episode.custom_data.update(copied_custom(meta.custom))
    return episode


def with_clocks(episode: SingleAgentEpisode, meta: EpisodeMeta | None) -> SingleAgentEpisode:
    """``episode``, a whole stored episode, given its stored clocks (in place; returned).

    The clocks were checked as numbers or None when their chunk was added or their state
    restored, so they are set into the fields' slots (``FIELDS_BY_NAME``) as they are.

    Example:
        >>> meta = EpisodeMeta(None, None, None, None, 2.0, 5.0)
        >>> with_clocks(SingleAgentEpisode("x"), meta).get_duration_s()
        3.0
    """
    if meta is not None and (meta.start_time is not None or meta.last_step_time is not None):
        setattr(episode, _START.slot, meta.start_time)
        setattr(episode, _LAST.slot, meta.last_step_time)
    return episode


def meta_state(metas: list[EpisodeMeta | None]) -> dict[str, list[Any]]:
    """The entries as a buffer state holds them: one list per key of :data:`STATE_KEYS`.

    ``custom_data`` is copied (a state shares nothing with the buffer); None: an empty one.
    ``first_agent`` holds :attr:`EpisodeMeta.first_agent`.

    Example:
        >>> meta_state([EpisodeMeta({"k": 1}, "ag", None, None, 2.0, 3.0), None])
        {'custom_data': [{'k': 1}, {}], 'agent_id': ['ag', None], 'module_id': [None, None], \
'multi_agent_episode_id': [None, None], 'start_time': [2.0, None], 'last_step_time': [3.0, None], \
'first_agent': ['ag', None]}
    """
    empty = EpisodeMeta(None, None, None, None, None, None)
    rows = [empty if meta is None else meta for meta in metas]
    return {
        "custom_data": [copied_custom(m.custom) if m.custom else {} for m in rows],
        "agent_id": [m.agent_id for m in rows],
        "module_id": [m.module_id for m in rows],
        "multi_agent_episode_id": [m.multi_agent_episode_id for m in rows],
        "start_time": [m.start_time for m in rows],
        "last_step_time": [m.last_step_time for m in rows],
        "first_agent": [m.first_agent for m in rows],
    }


def meta_from_state(episodes: dict[str, Any], n: int) -> list[EpisodeMeta]:
    """The ``n`` entries a state's ``episodes`` holds, checked and copied.

    A key a state lacks (one made before the entries were kept) gives every episode the
    default: no ``custom_data``, ids or clocks; a state without ``first_agent`` (made before
    it was kept), or a None in it, gives each episode its ``agent_id`` as its first agent.

    Raises:
        ValueError: A list of another length than ``n``, a clock that is a number but not
            finite (the message names the key), or a ``first_agent`` other than the
            episode's ``agent_id`` where that is not None (the first chunk named it).
        TypeError: A ``custom_data`` that is no dict (None is an empty one), a clock that is
            no number and no None.

    Example:
        >>> state = meta_state([EpisodeMeta({"k": 1}, "ag", None, None, 2.0, 3.0)])
        >>> meta_from_state(state, 1)[0].custom, meta_from_state({}, 1)[0].agent_id
        ({'k': 1}, None)
        >>> meta_from_state({"start_time": ["x"]}, 1)
        Traceback (most recent call last):
        ...
        TypeError: start_time must be a number or None, got 'x'
    """
    columns: dict[str, list[Any]] = {}
    for key in STATE_KEYS:
        values = episodes.get(key)
        values = [None] * n if values is None else list(values)
        if len(values) != n:
            raise ValueError(f"episodes[{key!r}] holds {len(values)} rows for {n} ids")
        columns[key] = values
    customs = [_custom(c) for c in columns["custom_data"]]
    agents, firsts = columns["agent_id"], columns["first_agent"]
    return [
        EpisodeMeta(
            customs[i],
            agents[i],
            columns["module_id"][i],
            columns["multi_agent_episode_id"][i],
            scalar_value(_START, columns["start_time"][i]),
            scalar_value(_LAST, columns["last_step_time"][i]),
            later_agent(agents[i], firsts[i], f"episodes['first_agent'][{i}]"),
        )
        for i in range(n)
    ]


def later_agent(agent_id: Any, first: Any, where: str) -> Any:
    """An entry's ``later_agent`` for its ``agent_id`` and a restored ``first`` agent.

    None for ``first`` is "not recorded": the entry's ``agent_id``.

    Raises:
        ValueError: ``first`` names another agent than a ``agent_id`` that is not None.

    Example:
        >>> later_agent(None, "red", "first"), later_agent("red", "red", "first")
        ('red', None)
        >>> later_agent("red", "blue", "first")
        Traceback (most recent call last):
        ...
        ValueError: first is 'blue' for an episode of agent_id 'red': an episode's first agent \
is its agent_id where that is not None (its first chunk named it)
    """
    if agent_id is None:
        return first
    if first is not None and not same_id(first, agent_id):
        raise ValueError(
            f"{where} is {short_repr(first)} for an episode of agent_id {short_repr(agent_id)}: "
            "an episode's first agent is its agent_id where that is not None (its first chunk "
            "named it)"
        )
    return None


def _custom(value: Any) -> dict[Any, Any] | None:
    """A state's ``custom_data`` entry as the buffer keeps it: a copy, None for an empty one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"custom_data must be a dict or None, got {type(value).__name__}")
    return copied_custom(value) if value else None

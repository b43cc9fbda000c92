"""The first agents a buffer's save records beside its episodes: ``replay.json``'s ``first_agents``.

A saved episode's index entry holds its ``agent_id``, the first chunk's. Where that is None and
a later chunk named an agent (``EpisodeMeta.later_agent``), which ``add`` compares the chunks
continuing the episode with, the save lists the episode's id and that agent, ids and agents
encoded as the datasets encode ids, so that the loaded buffer refuses what the saved one
refuses. A save without the field (written before it, or holding no such episode) gives each
episode its ``agent_id`` as its first agent.

Example:
    >>> import numpy as np
    >>> from episodes.replay.metadata import EpisodeMeta
    >>> from episodes.replay.table import EpisodeTable
    >>> table = EpisodeTable()
    >>> row = table.open(("game", 1), t_begin=0, final_obs=np.zeros((1, 1)), final_info={},
    ...                  meta=EpisodeMeta(None, None, None, None, None, None, "red"))
    >>> record = saved_first_agents(table)[FIRST_AGENTS]
    >>> record
    [[{'__ep_tuple__': ['game', 1]}, 'red']]
    >>> table.meta[row].later_agent = None
    >>> load_first_agents(table, record)
    >>> table.meta[row].first_agent
    'red'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from episodes.io import DatasetError, UnstorableValueError
from episodes.io.encoding import plain_id
from episodes.io.values import decode_value, encode_value
from episodes.replay.metadata import EpisodeMeta

if TYPE_CHECKING:
    from episodes.replay.table import EpisodeTable

__all__ = ["load_first_agents", "saved_first_agents"]

#: The ``replay.json`` field: ``[[id, agent], ...]``, oldest episode first; absent if empty.
FIRST_AGENTS = "first_agents"


def saved_first_agents(table: EpisodeTable) -> dict[str, list[list[Any]]]:
    """``replay.json``'s field: ``[id, agent]`` for each episode whose first agent is a later one's.

    An empty dict where there is none (the field is left out).

    Raises:
        episodes.io.UnstorableValueError: Such an agent the dataset could not store as an id
            (the message names it and its episode; nothing is written).

    Example:
        >>> import numpy as np
        >>> from episodes.replay.table import EpisodeTable
        >>> table = EpisodeTable()
        >>> _ = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={},
        ...                meta=EpisodeMeta(None, "red", None, None, None, None))
        >>> saved_first_agents(table)  # the entry's own agent_id: nothing to record
        {}
    """
    record = []
    for id_, row in table.order.items():
        meta = table.meta[row]
        if meta is None or meta.later_agent is None:
            continue
        try:
            # As the index entry stores an agent_id: one taken from an array as its value.
            agent = encode_value(plain_id(meta.later_agent), blob=None, where="agent_id")
        except UnstorableValueError as err:
            raise UnstorableValueError(
                f"agent {meta.later_agent!r}, the first any chunk of stored episode {id_!r} "
                f"named, cannot be saved ({err})"
            ) from None
        record.append([encode_value(id_, blob=None, where="id"), agent])  # ids checked before
    return {FIRST_AGENTS: record} if record else {}


def load_first_agents(table: EpisodeTable, record: Any) -> None:
    """Gives the loaded episodes ``record``'s first agents (the table unchanged if it raises).

    Raises:
        ValueError: ``record`` is no list of ``[id, agent]`` pairs of stored episodes whose
            ``agent_id`` is None, each agent not None (the message names the place).

    Example:
        >>> import numpy as np
        >>> from episodes.replay.table import EpisodeTable
        >>> load_first_agents(EpisodeTable(), [["a", "red"]])
        Traceback (most recent call last):
        ...
        ValueError: first_agents[0] names episode 'a', which is not stored
    """
    if type(record) is not list:
        raise ValueError(f"{FIRST_AGENTS} is no list: {record!r}")
    found: list[tuple[int, Any]] = []
    for i, item in enumerate(record):
        where = f"{FIRST_AGENTS}[{i}]"
        if type(item) is not list or len(item) != 2:
            raise ValueError(f"{where} is no [id, agent] pair: {item!r}")
        try:
            id_ = decode_value(item[0], blob=None, where=f"{where} id")
            agent = decode_value(item[1], blob=None, where=f"{where} agent")
            row = table.order.get(id_)
        except (DatasetError, TypeError) as err:  # TypeError: an unhashable id
            raise ValueError(f"{where}: {err}") from None
        if row is None:
            raise ValueError(f"{where} names episode {id_!r}, which is not stored")
        meta = table.meta[row]
        if agent is None or (meta is not None and meta.agent_id is not None):
            raise ValueError(
                f"{where} gives episode {id_!r} the first agent {agent!r}, but its agent_id is "
                f"{None if meta is None else meta.agent_id!r} (recorded: an agent, for "
                "episodes whose agent_id is None)"
            )
        found.append((row, agent))
    for row, agent in found:
        if table.meta[row] is None:
            table.meta[row] = EpisodeMeta(None, None, None, None, None, None)
        table.meta[row].later_agent = agent

"""One agent per stored episode: ``add`` refuses a chunk of another agent under an episode's id.

A chunk whose id is stored continues that episode; so does a later chunk of the same add. When
two agents of one game are recorded under the game's id (rather than one id per agent's
episode, the game's kept in ``multi_agent_episode_id``), the second agent's steps would be
joined onto the first's episode: its observations may even match at the border, so no other
check sees it. A chunk is compared with the first agent any chunk of its episode named: the
stored episode's ``first_agent`` (its table ``meta`` entry's; the first chunk's ``agent_id``,
or a later chunk's where the first named none, while the episode's own ``agent_id`` stays the
first chunk's, as ``concat_episode`` keeps it), else the first chunk of the same add under its
id that names one. So a refusal depends on the sequence of chunks only, not on how they were
split into adds. A chunk without an ``agent_id`` (None), or one of an episode no chunk named an
agent for yet, is not judged: nothing tells its agent apart, so it joins as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from episodes.episode.state import same_id
from episodes.replay.adding import chunk_label
from episodes.structs import short_repr

if TYPE_CHECKING:
    from episodes.replay.ingest import Chunk
    from episodes.replay.table import EpisodeTable

__all__ = ["agents_checked"]

_OWN_ID = (
    "so one agent's steps would be joined onto the other's episode; give each agent's episode "
    "its own id_ (a game's agents share multi_agent_episode_id, not id_)"
)


def agents_checked(chunks: list[Chunk], table: EpisodeTable) -> list[Chunk]:
    """``chunks``, checked: none continues an episode of another agent; returned as given.

    Costs a dict lookup per chunk that names an agent (and the stored entry on an id's first
    chunk); chunks without an ``agent_id`` are passed over.

    Raises:
        ValueError: A chunk names another agent than the first any chunk of the stored
            episode of its id named, or than an earlier chunk of the same add under its id;
            the message names the id and both agents, and the chunks by their place in the
            list given to ``add``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay.ingest import prepare_all
        >>> from episodes.replay.table import EpisodeTable
        >>> def chunk(agent, t0=0):
        ...     return SingleAgentEpisode("game", observations=[0.0, 1.0], actions=[0],
        ...         rewards=[1.0], agent_id=agent, t_started=t0, len_lookback_buffer=0)
        >>> chunks = prepare_all([chunk("red"), chunk(None, 1), chunk("red", 2)], {}, {})
        >>> len(agents_checked(chunks, EpisodeTable()))
        3
        >>> agents_checked(prepare_all([chunk("red"), chunk("blue")], {}, {}), EpisodeTable())
        Traceback (most recent call last):
        ...
        ValueError: chunk 0 and chunk 1 share the episode id 'game' but belong to \
agents 'red' and 'blue', so one agent's steps would be joined onto the other's episode; \
give each agent's episode its own id_ (a game's agents share multi_agent_episode_id, not id_)
    """
    first: dict[Any, tuple[Any, Any]] = {}  # id -> (position or None if stored, agent)
    for chunk in chunks:
        meta = chunk.meta
        agent = None if meta is None else meta.agent_id
        if agent is None:
            continue
        seen = first.get(chunk.id_)
        if seen is None:
            row = table.order.get(chunk.id_)
            stored = None if row is None else table.meta[row]
            if stored is not None and stored.first_agent is not None:
                seen = (None, stored.first_agent)
            else:
                seen = (chunk.position, agent)
            first[chunk.id_] = seen
        position, owner = seen
        if same_id(owner, agent):
            continue
        if position is None:
            raise ValueError(
                f"{chunk_label(chunk.position, chunk.id_)} belongs to agent "
                f"{short_repr(agent)}, but the buffer holds that episode for agent "
                f"{short_repr(owner)}, {_OWN_ID}"
            )
        raise ValueError(
            f"chunk {position} and chunk {chunk.position} share the episode id "
            f"{short_repr(chunk.id_)} but belong to agents {short_repr(owner)} and "
            f"{short_repr(agent)}, {_OWN_ID}"
        )
    return chunks

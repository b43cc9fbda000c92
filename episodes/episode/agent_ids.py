"""One episode id per agent: chunks of two agents that share an episode id are refused.

Readers of many chunks find an episode's chunks by id: a chunk without steps that ended its
episode ends the chunk of its id whose steps stop where it starts (the converter and
``AddLearnerColumns``), and the converter checks each id's chunks for time order. Agents of
one game recorded under the game's id (rather than one id per agent's episode, the game's kept
in ``multi_agent_episode_id``) would have their chunks taken for one episode's: one agent's end
could close another agent's chunk, a wrong ``done`` with no error. So chunks whose
``agent_id`` differ under one id are refused before anything is read. Chunks without an
``agent_id`` (None) are not judged: nothing tells their agents apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from episodes.episode.state import same_id
from episodes.structs import id_key

if TYPE_CHECKING:
    from episodes.episode.single_agent_episode import SingleAgentEpisode

__all__ = ["check_agent_ids"]


def check_agent_ids(chunks: Iterable[Any], who: str) -> None:
    """Refuses chunks of different agents (``agent_id``) that share an episode id.

    Args:
        chunks: The chunks as given: flat (named by index) or per-env lists of them (named
            by env and index).
        who: The function or connector refusing them, for the message.

    Raises:
        ValueError: Two chunks share an id but name different agents; the message names the
            id, both chunks and both agents, and says to give each agent's episode its own id.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> a = SingleAgentEpisode("game-1", agent_id="red")
        >>> b = SingleAgentEpisode("game-1", agent_id="blue")
        >>> check_agent_ids([a, SingleAgentEpisode("game-1-blue", agent_id="blue")], "f")
        >>> try:
        ...     check_agent_ids([a, b], "f")
        ... except ValueError as err:
        ...     print(str(err)[:79])
        f: chunk 0 and chunk 1 share the episode id 'game-1' but belong to agents 'red'
    """
    first: dict[Any, tuple[str, Any]] = {}  # id -> (name, agent) of its first chunk
    for name, chunk in _named(chunks):
        agent = chunk.agent_id
        if agent is None:
            continue
        other, seen = first.setdefault(id_key(chunk.id_), (name, agent))
        if not same_id(seen, agent):
            raise ValueError(
                f"{who}: {other} and {name} share the episode id {chunk.id_!r} but belong to "
                f"agents {seen!r} and {agent!r}, so one agent's end or steps would be taken for "
                "the other's; give each agent's episode its own id_ (a game's agents share "
                "multi_agent_episode_id, not id_)"
            )


def _named(chunks: Iterable[Any]) -> Iterator[tuple[str, SingleAgentEpisode]]:
    """Each chunk with how the caller finds it: ``chunk i``, or ``env g's chunk i`` in lists."""
    for g, item in enumerate(chunks):
        if isinstance(item, (list, tuple)):
            for i, chunk in enumerate(item):
                yield f"env {g}'s chunk {i}", chunk
        else:
            yield f"chunk {g}", item

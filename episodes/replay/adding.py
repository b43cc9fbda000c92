"""What ``add`` takes besides its chunks: its ``on_evicted`` argument, and the spaces it adopts.

Helpers of :mod:`episodes.replay.buffer` (``ingest`` plans the chunks themselves).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from episodes.structs import short_repr

__all__ = [
    "ON_EVICTED",
    "adopted_spaces",
    "check_on_evicted",
    "chunk_label",
    "copied_space",
    "done_refusal",
    "gap_refusal",
    "named_refusal",
]

#: What ``add(on_evicted=...)`` does with a chunk continuing an episode an earlier add evicted:
#: refuse the add, drop the chunk, or store it as the start of a new episode under its id.
ON_EVICTED = ("raise", "drop", "restart")


def check_on_evicted(value: Any) -> str:
    """``add``'s ``on_evicted``, checked: one of :data:`ON_EVICTED`, else a ``ValueError``.

    Example:
        >>> check_on_evicted("drop")
        'drop'
        >>> check_on_evicted("skip")
        Traceback (most recent call last):
        ...
        ValueError: on_evicted must be 'raise', 'drop' or 'restart', got 'skip'
    """
    if isinstance(value, str) and value in ON_EVICTED:
        return str(value)
    raise ValueError(f"on_evicted must be 'raise', 'drop' or 'restart', got {short_repr(value)}")


def chunk_label(position: int, id_: Any = ...) -> str:
    """How ``add``'s refusals name a chunk: its place in the list given, and its episode's id.

    As the converter names chunks; ``id_`` left out for an item that is no episode.

    Example:
        >>> chunk_label(2, "b"), chunk_label(1)
        ("chunk 2 (episode 'b')", 'chunk 1')
    """
    return f"chunk {position}" if id_ is ... else f"chunk {position} (episode {short_repr(id_)})"


def done_refusal(id_: Any) -> str:
    """The refusal of a chunk continuing a finished episode: it says an id names one episode.

    The buffer joins chunks by id, so a new episode under a finished one's id (an env's index
    used as the id, reused at every reset) is taken for more steps of the finished one.

    Example:
        >>> print(done_refusal(0))  # doctest: +ELLIPSIS
        episode 0 is already done; cannot append a chunk (the buffer joins chunks by episode id: ...
    """
    return (
        f"episode {short_repr(id_)} is already done; cannot append a chunk (the buffer joins "
        "chunks by episode id: if this chunk starts a new episode, give it an id of its own, "
        "a new one per episode such as SingleAgentEpisode's default uuid4 hex, not an env "
        "index reused after each reset)"
    )


def gap_refusal(id_: Any, t0: int, held: str, t_end: int) -> str:
    """The refusal of a chunk that does not start where its stored episode ends.

    ``held`` says who holds the episode up to ``t_end`` (the buffer, or an earlier chunk of the
    add). A chunk starting before that time repeats stored steps: most often it is a new
    episode under a running one's id (a dataset's ``0, 1, ...`` met again by online episodes
    numbered the same way), so the words say what an id names, as :func:`done_refusal` does.

    Example:
        >>> print(gap_refusal("b", 7, "the buffer holds it", 5))
        chunk of episode 'b' starts at t=7, but the buffer holds it up to t=5
        >>> print(gap_refusal(3, 0, "the buffer holds it", 4))  # doctest: +ELLIPSIS
        chunk of episode 3 starts at t=0, but the buffer holds it up to t=4 (an overlap: if ...
    """
    words = f"chunk of episode {short_repr(id_)} starts at t={t0}, but {held} up to t={t_end}"
    if t0 >= t_end:
        return words
    return (
        f"{words} (an overlap: if this chunk starts a new episode, give it an id "
        "of its own, a new one per episode such as SingleAgentEpisode's default uuid4 hex; "
        "episodes read from a dataset keep their ids, so number new ones apart from them)"
    )


def named_refusal(error: BaseException, position: int, id_: Any = ...) -> BaseException:
    """``error``, a refusal of one chunk of an ``add``, with words naming it (:func:`chunk_label`).

    A plain ``TypeError`` or ``ValueError`` comes back as a new one of its class (its episode
    left out where its words name it already); any other error (a subclass, with its own words
    and attributes) as it is.

    Example:
        >>> named_refusal(ValueError("rewards must be scalars"), 3, "b")
        ValueError("chunk 3 (episode 'b'): rewards must be scalars")
        >>> named_refusal(ValueError("chunk of episode 'b': a gap"), 3, "b")
        ValueError("chunk 3: chunk of episode 'b': a gap")
        >>> error = KeyError("k")
        >>> named_refusal(error, 3, "b") is error
        True
    """
    if type(error) is not TypeError and type(error) is not ValueError:
        return error
    named = id_ is not ... and f"episode {short_repr(id_)}" in str(error)  # said once
    return type(error)(f"{chunk_label(position, ... if named else id_)}: {error}")


def copied_space(space: Any) -> Any:
    """A deep copy of ``space``, or the space itself where it cannot be copied.

    A user's space class may hold what ``deepcopy`` refuses (a lock): such a space is kept as
    given, as before copies were made, rather than refusing the chunk.

    Example:
        >>> import threading, gymnasium as gym
        >>> box = gym.spaces.Box(0, 1)
        >>> copied_space(box) is box, copied_space(box) == box
        (False, True)
        >>> lock = threading.Lock()
        >>> copied_space(lock) is lock
        True
    """
    try:
        return copy.deepcopy(space)
    except Exception:  # noqa: BLE001 - whatever a user's __deepcopy__ or pickling raises
        return space


def adopted_spaces(kept: tuple[Any, Any], stored: Iterable[Any]) -> tuple[Any, Any]:
    """The observation and action spaces a buffer holding ``kept`` has after storing ``stored``.

    Sampled episodes carry the first observation space and the first action space of the
    chunks stored (each on its own); an ignored chunk stores nothing, its spaces neither. A
    chunk dropped with its episode counts: it is stored as if it came first. Adopted spaces
    are copies (:func:`copied_space`): a Box's bounds may view a sample's transport memory (a
    RunnerGroup's shared-memory segment), which the buffer must not keep alive.

    Example:
        >>> import gymnasium as gym
        >>> from types import SimpleNamespace as Chunk
        >>> box, two = gym.spaces.Box(0, 1), gym.spaces.Discrete(2)
        >>> spaces = adopted_spaces((None, two), [Chunk(spaces=(box, gym.spaces.Discrete(3)))])
        >>> spaces[0] == box, spaces[0] is box, spaces[1] is two
        (True, False, True)
    """
    obs_space, action_space = kept
    for chunk in stored:
        if obs_space is not None and action_space is not None:
            break
        obs_space = chunk.spaces[0] if obs_space is None else obs_space
        action_space = chunk.spaces[1] if action_space is None else action_space
    kept_obs, kept_action = kept
    return (
        obs_space if obs_space is kept_obs else copied_space(obs_space),
        action_space if action_space is kept_action else copied_space(action_space),
    )

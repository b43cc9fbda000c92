"""Chunks without steps that end an episode whose steps another env's list holds.

Such a chunk (a runner's or a shard's way to store an end) belongs to its episode by id and
``t``, whichever env it is filed under: it ends the chunk of that episode whose steps stop
where it starts, as ``episodes_to_batch`` and ``AddLearnerColumns`` find it
(``stepless_ends``). Filed under its episode's env, after that episode's chunk, the columns
apply it there (``columns._pieces``); filed under another env it would be left out, and the
ended episode bootstrapped as still running. So it is moved right after the chunk it ends.
"""

from __future__ import annotations

from typing import Any

from episodes.episode import SingleAgentEpisode
from episodes.structs import id_key

__all__ = ["place_stray_ends"]


def place_stray_ends(groups: list[list[SingleAgentEpisode]]) -> list[list[SingleAgentEpisode]]:
    """``groups`` with each stepless end filed under another env moved after the chunk it ends.

    A chunk without steps that ended its episode, and that follows no chunk of its episode in
    its own env's list, ends the chunk (in any env's list) of its episode whose steps stop at
    its ``t_started``; it then sits right after that chunk, so the episode's last step is done.
    One whose episode has no chunk with steps here ended steps before the window: left as it
    is (it holds nothing). Ends in their episode's env are left to the time-order check. New
    lists are returned (the given ones are not changed); work grows with the chunks, not the
    steps.

    Raises:
        ValueError: such an end whose episode has chunks with steps here, but whose latest
            chunk does not stop where the end starts (the end would come before some of its
            steps, or leave a gap), or two envs hold a chunk of it stopping there; naming the
            episode and the times.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> steps = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> other = SingleAgentEpisode("b", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> end = SingleAgentEpisode("a", observations=[1], t_started=1, terminated=True,
        ...                          len_lookback_buffer=0)
        >>> [[(c.id_, len(c)) for c in g] for g in place_stray_ends([[steps], [end, other]])]
        [[('a', 1), ('a', 0)], [('b', 1)]]
    """
    ends = [
        (g, i)
        for g, group in enumerate(groups)
        for i, chunk in enumerate(group)
        if chunk.is_done and not len(chunk)
    ]
    if not ends:
        return groups
    held: dict[Any, list[tuple[int, int, SingleAgentEpisode]]] = {}  # id -> its chunks
    for g, group in enumerate(groups):
        for i, chunk in enumerate(group):
            if len(chunk):
                held.setdefault(id_key(chunk.id_), []).append((g, i, chunk))
    moved: dict[tuple[int, int], list[SingleAgentEpisode]] = {}  # chunk -> the ends after it
    taken: set[tuple[int, int]] = set()
    for g, i in ends:
        end = groups[g][i]
        chunks = held.get(id_key(end.id_), [])
        if not chunks or any(h == g and j < i for h, j, _ in chunks):
            continue  # steps before the window, or an end in its episode's env's list
        latest = max(chunk.t for _, _, chunk in chunks)
        at = [(h, j) for h, j, chunk in chunks if chunk.t == end.t_started]
        if latest != end.t_started or len(at) != 1:
            twice = f", and envs {sorted(h for h, _ in at)} each hold one" if at[1:] else ""
            raise ValueError(
                f"env {g}'s chunk without steps that ended episode {end.id_!r} at "
                f"t={end.t_started} ends none of its chunks: its latest stops at t={latest}"
                f"{twice}; an episode's chunks come in time order, none after its end"
            )
        if at[0][0] != g:  # in its own env's list before its chunk: the time-order check's
            moved.setdefault(at[0], []).append(end)
            taken.add((g, i))
    if not moved:
        return groups
    placed: list[list[SingleAgentEpisode]] = []
    for g, group in enumerate(groups):
        placed.append([])
        for i, chunk in enumerate(group):
            if (g, i) not in taken:
                placed[-1].append(chunk)
                placed[-1].extend(moved.get((g, i), ()))
    return placed

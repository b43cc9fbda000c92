"""Which chunks make up each env (``per_env``) or storage column (``per_chunk``).

Example:
    >>> from episodes import SingleAgentEpisode
    >>> chunks = [SingleAgentEpisode(id_) for id_ in "abc"]
    >>> for chunk, env in zip(chunks, (1, 0, 1)):
    ...     chunk.custom_data["env_index"] = env
    >>> [[c.id_ for c in env] for env in group_by_env(chunks)]
    [['b'], ['a', 'c']]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.converter.columns import check_time_order
from episodes.converter.inputs import chunk_sequence
from episodes.converter.stray_ends import place_stray_ends
from episodes.episode import SingleAgentEpisode
from episodes.episode.agent_ids import check_agent_ids
from episodes.structs import id_key

__all__ = ["column_groups", "group_by_env"]


def group_by_env(episodes: Sequence[Any]) -> list[list[SingleAgentEpisode]]:
    """Per-env lists of chunks, each in the given order (not sorted by time).

    The converter refuses an episode's chunks out of time order
    (:func:`~episodes.converter.columns.check_time_order`).

    Accepts a list of per-env lists, or a flat list whose chunks name their env in
    ``custom_data["env_index"]`` (as the env runner returns them; envs sorted by index), or a
    flat list of chunks from different envs without that key (one env each; a chunk without
    steps that ended its episode joins the env of that episode's latest chunk, whose last step
    it ends).

    Raises:
        TypeError: ``episodes`` holds something other than chunks or per-env lists of chunks,
            naming the item (and its env) and its type.
        ValueError: an ``env_index`` that is not an integer (a float or a bool would be cast
            and could merge two envs), naming the chunk; in a flat list without
            ``env_index``, a chunk without steps that ended its episode listed before a chunk
            of that episode (its end would be lost).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> a, b = SingleAgentEpisode("a"), SingleAgentEpisode("b")
        >>> [len(g) for g in group_by_env([a, b])]
        [1, 1]
    """
    episodes = chunk_sequence(episodes, "group_by_env")  # read more than once
    message = "episodes must be SingleAgentEpisode chunks or per-env lists of them"
    if all(isinstance(group, (list, tuple)) for group in episodes):
        lists = [list(group) for group in episodes]
        for g, group in enumerate(lists):
            for i, ep in enumerate(group):
                if not isinstance(ep, SingleAgentEpisode):
                    raise TypeError(f"{message}: env {g}'s item {i} has type {type(ep).__name__}")
        return lists
    for i, ep in enumerate(episodes):
        if not isinstance(ep, SingleAgentEpisode):
            raise TypeError(f"{message}: item {i} has type {type(ep).__name__}")
    if episodes and all("env_index" in ep.custom_data for ep in episodes):
        groups: dict[int, list[SingleAgentEpisode]] = {}
        for ep in episodes:
            index = ep.custom_data["env_index"]
            # A float or a bool would be cast, and could merge two envs (1.2 and 1.7).
            if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
                raise ValueError(
                    f"the chunk of episode {ep.id_!r} starting at t={ep.t_started} has "
                    f"custom_data['env_index'] = {index!r} ({type(index).__name__}): an env "
                    "index is an integer"
                )
            groups.setdefault(int(index), []).append(ep)
        return [groups[k] for k in sorted(groups)]
    if not any(ep.is_done and not len(ep) for ep in episodes):
        return [[ep] for ep in episodes]
    envs: list[list[SingleAgentEpisode]] = []
    latest: dict[Any, list[SingleAgentEpisode]] = {}  # id -> the env of its latest chunk
    early: dict[Any, SingleAgentEpisode] = {}  # id -> an end listed before any of its chunks
    for ep in episodes:
        key = id_key(ep.id_)  # a list id matches its equal lists
        if ep.is_done and not len(ep):
            if key in latest:
                latest[key].append(ep)
                continue
            early.setdefault(key, ep)
        elif key in early:  # the end would hold nothing in an env of its own: refused
            end = early[key]
            raise ValueError(
                f"the chunk without steps that ended episode {ep.id_!r} at t={end.t_started} is "
                f"listed before that episode's chunk starting at t={ep.t_started}: list the "
                "chunks of an episode in time order"
            )
        envs.append([ep])
        latest[key] = envs[-1]
    return envs


def column_groups(episodes: Sequence[Any], layout: str) -> list[list[SingleAgentEpisode]]:
    """The chunks of each storage column: :func:`group_by_env`'s, or one chunk with steps each.

    With ``layout="per_chunk"``, a chunk without steps that ended its episode joins the column
    of that episode's latest chunk, whose last step it ends; other stepless chunks hold nothing
    and are left out. So are they with ``"per_env"`` in a flat list without ``env_index``
    (where :func:`group_by_env` gives each its own env); envs the caller names (per-env lists,
    ``env_index``) are kept, and one without steps is refused where it is laid out. A stepless
    end filed under another env than its episode's steps is first moved right after the chunk
    it ends (:func:`~episodes.converter.stray_ends.place_stray_ends`). Each env's chunks are
    checked for time order (:func:`~episodes.converter.columns.check_time_order`) before
    ``"per_chunk"`` splits them: a chunk given twice, or after its episode ended, is refused
    with either layout.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> steps = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> end = SingleAgentEpisode("a", observations=[1], actions=[], rewards=[], t_started=1,
        ...                          terminated=True, len_lookback_buffer=0)
        >>> [[len(c) for c in column] for column in column_groups([steps, end], "per_chunk")]
        [[1, 0]]
        >>> [[len(c) for c in env] for env in column_groups([steps, steps.cut()], "per_env")]
        [[1]]
    """
    groups = group_by_env(episodes)  # chunks checked for type first
    # Before the stray ends are placed: two agents' chunks under one id fail there otherwise,
    # in words of time order that hide the cause.
    check_agent_ids(episodes, "episodes_to_rollout")  # ids join chunks: one agent an id
    groups = place_stray_ends(groups)
    if layout == "per_env":
        if any(isinstance(group, (list, tuple)) for group in episodes) or (
            episodes and all("env_index" in ep.custom_data for ep in episodes)
        ):
            return groups  # envs the caller named: one without steps is refused
        # One env per chunk: a stepless chunk that ends no listed chunk holds nothing.
        return [group for group in groups if any(len(chunk) for chunk in group)]
    columns: list[list[SingleAgentEpisode]] = []
    for n, group in enumerate(groups):
        # As per_env's columns check it (one dict entry per episode): one-chunk columns cannot.
        check_time_order(n, [chunk for chunk in group if len(chunk) or chunk.is_done])
        latest: dict[Any, list[SingleAgentEpisode]] = {}  # id -> its latest chunk's column
        for chunk in group:
            key = id_key(chunk.id_)
            if len(chunk):
                columns.append([chunk])
                latest[key] = columns[-1]
            elif chunk.is_done and key in latest:
                latest[key].append(chunk)
    return columns

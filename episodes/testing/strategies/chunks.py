"""Strategies for an episode together with the chunks an env runner would have produced.

Chunks are made the way an env runner makes them: replay the episode step by step with
``add_env_step`` and ``cut(len_lookback_buffer=k)`` at the drawn cut points. Concatenating the
chunks back (``concat_episode``) must give the original episode.

Example:
    >>> from hypothesis import find
    >>> ce = find(chunked_episodes(), lambda ce: True)
    >>> len(ce.chunks), ce.cuts
    (1, ())
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from episodes.episode import SingleAgentEpisode
from episodes.structs import map_leaves
from episodes.testing.strategies.episodes import episodes, whole

__all__ = ["ChunkedEpisode", "chunked_episodes", "replay_in_chunks"]


@dataclass(frozen=True)
class ChunkedEpisode:
    """An episode and its chunks.

    Attributes:
        episode: The whole episode.
        chunks: Chunks covering it, in order; ``chunks[i + 1].t_started == chunks[i].t``.
        cuts: Steps (relative to ``episode.t_started``) where a new chunk starts.
        lookbacks: The ``len_lookback_buffer`` used for each cut.

    Example:
        >>> from hypothesis import given, settings
        >>> @settings(max_examples=5)
        ... @given(chunked_episodes(min_len=3))
        ... def test(ce):
        ...     assert [c.t_started for c in ce.chunks[1:]] == [c.t for c in ce.chunks[:-1]]
        ...     assert len(ce.cuts) == len(ce.lookbacks) == len(ce.chunks) - 1
        >>> test()
    """

    episode: SingleAgentEpisode
    chunks: tuple[SingleAgentEpisode, ...]
    cuts: tuple[int, ...]
    lookbacks: tuple[int, ...]


def _as_array(leaf: Any) -> Any:
    # numpy'd columns return numpy scalars for 0-d items; gymnasium's Box.contains warns on
    # those, so hand 0-d arrays back (same dtype, same stored value). Text.contains refuses a
    # 0-d string array: a numpy'd Text column's np.str_ goes back as the str it recorded.
    if isinstance(leaf, (np.str_, np.bytes_)):
        return leaf.item()
    return np.asarray(leaf) if isinstance(leaf, np.generic) else leaf


def _recorded(episode: SingleAgentEpisode, item: Any) -> Any:
    # A list-mode episode's items go back as it holds them (an np.int64 stays one, as in
    # ``slice``); only a numpy'd column's scalars are not what was recorded.
    return map_leaves(_as_array, item) if episode.is_numpy else item


def _step(episode: SingleAgentEpisode, i: int) -> dict[str, Any]:
    return {
        "observation": _recorded(episode, episode.get_observations(i + 1)),
        "action": _recorded(episode, episode.get_actions(i)),
        "reward": episode.get_rewards(i),
        "infos": episode.get_infos(i + 1),
        "extra_model_outputs": {
            key: episode.get_extra_model_outputs(key, i) for key in episode.extra_model_outputs
        }
        or None,
    }


def replay_in_chunks(
    episode: SingleAgentEpisode, cuts: tuple[int, ...], lookbacks: tuple[int, ...]
) -> tuple[SingleAgentEpisode, ...]:
    """Re-records ``episode`` step by step, cutting at ``cuts`` with the given lookbacks.

    The first chunk keeps ``episode``'s own lookback. Chunks are numpy'd iff ``episode`` is.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[0.0, 1.0],
        ...                         len_lookback_buffer=0)
        >>> [c.get_observations() for c in replay_in_chunks(ep, (1,), (1,))]
        [[0, 1], [1, 2]]
    """
    if not all(whole(x) for x in (*cuts, *lookbacks)):
        # A float cut would still match step i (1.0 == 1) and slip through as a cut point.
        raise ValueError(f"cuts and lookbacks must be ints, got {cuts!r}, {lookbacks!r}")
    if len(cuts) != len(lookbacks) or list(cuts) != sorted(set(cuts)):
        raise ValueError(f"cuts must be sorted and unique, one lookback each: {cuts}, {lookbacks}")
    if cuts and not (0 < cuts[0] and cuts[-1] < len(episode)):
        raise ValueError(f"cuts must lie strictly inside 0..{len(episode)}, got {cuts}")
    current = episode.slice(slice(0, 0))
    if len(episode):  # the last step sets them; an episode without steps keeps its own
        current.is_terminated = current.is_truncated = False
    chunks = []
    pending = dict(zip(cuts, lookbacks))
    last = len(episode) - 1
    for i in range(len(episode)):
        if i in pending:
            chunks.append(current)
            current = current.cut(len_lookback_buffer=pending[i])
        done = i == last
        current.add_env_step(
            **_step(episode, i),
            terminated=done and episode.is_terminated,
            truncated=done and episode.is_truncated,
        )
    chunks.append(current)
    for chunk in chunks:
        # A copy each, as cut() and slice() give: a change to one chunk's stays in it.
        chunk.custom_data.update(copy.deepcopy(episode.custom_data))
        if episode.is_numpy:
            chunk.to_numpy()
    return tuple(chunks)


def chunked_episodes(
    *,
    max_chunks: int = 3,
    max_cut_lookback: int = 3,
    **episode_kwargs: Any,
) -> st.SearchStrategy[ChunkedEpisode]:
    """Draws an episode (``episode_kwargs`` go to :func:`episodes`) and its chunks.

    Every argument is checked here, when the strategy is built (``episode_kwargs`` by
    :func:`episodes`), not when it first draws.

    Args:
        max_chunks: At most this many chunks.
        max_cut_lookback: Each cut keeps between 0 and this many steps of lookback.
        **episode_kwargs: Passed to :func:`episodes` (spaces, lengths, ``numpy`` ...).

    Raises:
        ValueError: ``max_chunks`` is not an int >= 1 or ``max_cut_lookback`` not an int >= 0,
            or :func:`episodes` refuses ``episode_kwargs``.
        TypeError: :func:`episodes` refuses ``episode_kwargs`` (an unknown name, say).

    Example:
        >>> from hypothesis import given
        >>> @given(chunked_episodes(min_len=2))
        ... def test(ce):
        ...     assert sum(len(c) for c in ce.chunks) == len(ce.episode)
        >>> test()
    """
    if not (whole(max_chunks) and max_chunks >= 1 and whole(max_cut_lookback)) or (
        max_cut_lookback < 0
    ):
        raise ValueError(
            "need ints max_chunks >= 1 and max_cut_lookback >= 0, got "
            f"{max_chunks!r}, {max_cut_lookback!r}"
        )
    # Plain ints for hypothesis, which refuses numpy ones.
    return _chunked_episodes(episodes(**episode_kwargs), int(max_chunks), int(max_cut_lookback))


@st.composite
def _chunked_episodes(
    draw: st.DrawFn,
    episode_strategy: st.SearchStrategy[SingleAgentEpisode],
    max_chunks: int,
    max_cut_lookback: int,
) -> ChunkedEpisode:
    """What :func:`chunked_episodes` returns, its arguments checked."""
    episode = draw(episode_strategy)
    inner = list(range(1, len(episode)))
    n_cuts = draw(st.integers(0, min(max_chunks - 1, len(inner))))
    cuts = (
        tuple(
            sorted(
                draw(
                    st.lists(st.sampled_from(inner), min_size=n_cuts, max_size=n_cuts, unique=True)
                )
            )
        )
        if n_cuts
        else ()
    )
    lookbacks = tuple(draw(st.integers(0, max_cut_lookback)) for _ in cuts)
    return ChunkedEpisode(episode, replay_in_chunks(episode, cuts, lookbacks), cuts, lookbacks)

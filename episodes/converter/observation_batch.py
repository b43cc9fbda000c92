"""The observations that bootstrap, batched as ``[B, ...]`` and handed to ``obs_fn``.

The row count ``B`` comes from the caller (the chunks, or the cells that need a value), not
from the observations: those of an empty ``Dict`` or ``Tuple`` space hold no leaf to read it
from, yet ``obs_fn`` may still turn them into arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.converter.alike import SpaceMatch, agreed_space
from episodes.converter.columns import ObsFn, layout_batch
from episodes.converter.refusals import checked_obs_fn_output, obs_fn_input
from episodes.episode import SingleAgentEpisode
from episodes.spaces import nest_as_space
from episodes.structs import map_leaves

__all__ = ["last_observations", "transform_batch"]


def last_observations(chunks: Sequence[SingleAgentEpisode], obs_fn: ObsFn | None) -> Any:
    """The last observation of every chunk, batched (and transformed by ``obs_fn``).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 7], actions=[1], rewards=[1.0])
        >>> last_observations([ep], None).tolist()
        [7]
    """
    empty = next((c for c in chunks if not len(c.observations)), None)
    if empty is not None:  # get_observations(-1) would be an IndexError about a buffer
        raise ValueError(
            f"the chunk of episode {empty.id_!r} starting at t={empty.t_started} holds no "
            "observation to take a value of"
        )
    items = [chunk.get_observations(-1) for chunk in chunks]
    spaces = [chunk.observations.space for chunk in chunks]
    # One space for all, or none: chunks of other spaces are batched as they come. Each
    # distinct space object is compared once (chunks unpickled apart carry equal copies).
    match = SpaceMatch()
    space = spaces[0] if all(match(s, spaces[0]) for s in spaces) else None
    batched = layout_batch(items, space, "observations")
    # Nested as the columns are (agreed_space).
    nested = nest_as_space(batched, agreed_space(spaces, match))
    return transform_batch(nested, obs_fn, rows=len(chunks))


def transform_batch(observations: Any, obs_fn: ObsFn | None, *, rows: int) -> Any:
    """``obs_fn`` applied to a ``[B, ...]`` batch of ``rows`` observations (None: unchanged).

    ``obs_fn`` gets them as ``[1, B, ...]`` columns, and must give leaves of that lead.

    Raises:
        ValueError: ``obs_fn`` returned a leaf without the ``(1, rows)`` lead.

    Example:
        >>> transform_batch(np.array([1, 2]), lambda cols: cols * 10, rows=2).tolist()
        [10, 20]
        >>> transform_batch({}, lambda cols: np.ones((1, 2, 3)), rows=2).shape  # no leaves
        (2, 3)
    """
    if obs_fn is None:
        return observations
    # obs_fn works on [T, N, ...] columns: present the batch as T=1.
    transformed = obs_fn(obs_fn_input(map_leaves(lambda leaf: leaf[np.newaxis], observations)))
    checked_obs_fn_output(transformed, (1, rows))
    return map_leaves(lambda leaf: leaf[0], transformed)

"""``buffer.add_dataset(path)``: a dataset on disk added to a buffer that already holds data.

The pieces are added as ``from_dataset`` adds them (:mod:`episodes.replay.dataset_fill`: the
order ``dataset_info`` lists the episodes in, each one's pieces in time order, in batches), so
what is stored is what ``add`` of those chunks stores: a piece whose id the buffer holds
continues that episode, the oldest episodes give way to the capacity, and a later piece of an
episode evicted while the dataset is added goes with it. Unlike ``from_dataset`` the buffer
already holds data that a refusal must not lose, so the buffer's state (``get_state``, a copy
of what it holds) is kept while the pieces are added and restored if one is refused (or the
add is interrupted): a refused dataset leaves the buffer as it was, its last sample included,
only its next item ids numbered on after the ones the refused pieces got (ids are never
issued twice).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from episodes.io.joins import manifest_pieces
from episodes.io.values import id_key
from episodes.replay.dataset_fill import fill_from_dataset
from episodes.replay.dataset_pieces import joined_columns
from episodes.replay.errors import EvictedEpisodeError
from episodes.replay.persistence import _refuse_save
from episodes.replay.table import StoredEpisodes

__all__ = ["add_dataset"]

# What a prioritized buffer remembers of its last sample (kept through the restore).
_SAMPLE_MEMORY = ("_last_indices", "_no_last", "_sequences", "_batch_token")


def add_dataset(buffer: Any, path: str | os.PathLike[str]) -> int:
    """Adds every piece of the dataset at ``path`` to ``buffer``; the steps read.

    Raises:
        EvictedEpisodeError: A dataset episode that an earlier add of the buffer evicted
            (checked first, from the manifest: nothing is read or changed then).
        ValueError, TypeError: What ``from_dataset`` refuses, and what ``add`` refuses of a
            piece against the buffer's contents; the buffer is restored first.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as writer:
        ...     _ = writer.write(SingleAgentEpisode("d", observations=[0.0, 1.0, 2.0],
        ...                      actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[5.0, 6.0], actions=[0], rewards=[0.0],
        ...                            len_lookback_buffer=0))
        >>> add_dataset(buf, path), buf.get_episode_ids(), buf.get_added_timesteps()
        (2, ['a', 'd'], 3)
    """
    _refuse_save(Path(path))
    stored = _stored_ends(buffer, path)
    state = buffer.get_state()  # what a refusal restores: the buffer holds data of its own
    memory = {name: vars(buffer)[name] for name in _SAMPLE_MEMORY if name in vars(buffer)}
    if buffer._store.obs is None:  # no columns yet: the dtypes the pieces join in, as loading
        buffer._joined = joined_columns(path)
    try:
        return fill_from_dataset(buffer, path, False, stored)
    except BaseException:
        buffer.set_state(state)
        vars(buffer).update(memory)  # set_state forgets the last sample; a refusal must not
        raise
    finally:
        buffer._joined = None  # later adds: the first chunk's dtypes, as documented


def _stored_ends(buffer: Any, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where the dataset's episodes that the buffer holds stop (by ``id_key``).

    A piece of such an episode that the dataset's own pieces evict before it comes is checked
    against it, as one ``add`` of every piece checks it. An episode an earlier add evicted is
    refused here, as ``add`` refuses it, before anything is read or changed.
    """
    evicted, held = buffer._evicted, StoredEpisodes(buffer._table)
    ends: dict[str, Any] = {}
    for id_, *_ in manifest_pieces(path):
        try:
            gone, begun = id_ in evicted, id_ in held
        except TypeError:  # unhashable: the fill refuses it, naming it
            continue
        if gone:
            raise EvictedEpisodeError(
                f"dataset {os.fspath(path)!r}: episode {id_!r} continues an episode this buffer "
                "has evicted (its earlier steps are gone): give the dataset's episodes ids of "
                "their own, or add them to a buffer of their own",
                id_,
            )
        if begun:
            t_end, done, _, obs = held[id_]
            ends[id_key(id_)] = (t_end, done, 0, np.array(obs))  # a copy: the row changes
    return ends

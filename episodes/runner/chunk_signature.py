"""What a built runner chunk is made of, to tell later whether it changed.

``SampledChunks`` keeps each built chunk with its signature: the column objects, stores,
lookbacks, spaces, flags, ids and infos buffer it was built with. A chunk whose signature
still matches and whose columns still view the blocks is read straight from the blocks by the
converter, and rebuilt from them by a copy or pickle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.list_store import ListStore
from episodes.buffer.view_store import ViewStore
from episodes.episode import SingleAgentEpisode
from episodes.structs import map_leaves

__all__ = ["chunk_signature", "owned_item", "to_list_mode", "views_intact"]


def chunk_signature(episode: SingleAgentEpisode) -> tuple[Any, ...]:
    """What a built chunk is made of: compared later, it tells whether the chunk changed.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> before = chunk_signature(ep)
        >>> ep.custom_data["env_index"] = 3
        >>> chunk_signature(ep) == before
        False
    """
    extras = list(episode.extra_model_outputs.values())
    if not all(isinstance(c, InfiniteLookbackBuffer) for c in extras):
        # A column assigned as a plain array (``extra_model_outputs["rnd"] = values``): the
        # chunk changed, and the general path's validate() names the key, where reading
        # ``.store`` here would fail naming none. Equal to no signature, itself included.
        return (object(),)
    columns = [episode.observations, episode.actions, episode.rewards, *extras]
    infos = episode.infos
    return (
        tuple(columns),
        tuple(c.store for c in columns),
        tuple(c.lookback for c in columns),
        # Settable on a built chunk; a copy rebuilding it from the blocks would lose them.
        (*(c.space for c in columns), infos.space, infos.lookback),
        tuple(episode.extra_model_outputs),
        (episode.is_terminated, episode.is_truncated, episode.t_started, episode.t),
        (episode.id_, episode.agent_id, episode.module_id, episode.multi_agent_episode_id),
        infos,
        (episode.observation_space, episode.action_space),
        episode.custom_data.get("env_index"),  # last (see renumber): the converter groups by it
    )


def views_intact(signature: tuple[Any, ...], copied: bool) -> bool:
    """Whether the columns of a chunk of that signature still view (and write) the blocks.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> views_intact(chunk_signature(ep), copied=False)  # list stores view no blocks
        False
    """
    stores = signature[1]
    if not all(isinstance(s, ViewStore) and not s.detached for s in stores):
        return False
    # An obs column holding a final observation kept apart is a copy: its writes miss the blocks.
    return not (copied and stores[0].written)


def to_list_mode(episode: SingleAgentEpisode) -> None:
    """Switches every numpy column of a freshly built chunk to list mode.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> _ = ep.to_numpy(); to_list_mode(ep)
        >>> ep.is_numpy, type(ep.rewards.store).__name__
        (False, 'ListStore')
    """
    for name, column in episode.named_columns().items():
        if not column.finalized:
            continue
        store = column.store
        if name == "rewards":
            items = np.asarray(store.data, np.float64).tolist()
        else:
            items = [owned_item(item) for item in store.items(0)]
        column.adopt_store(ListStore(items))


def owned_item(item: Any) -> Any:
    """``item`` with every array leaf copied.

    Example:
        >>> leaf = np.zeros(2)
        >>> owned_item({"a": leaf})["a"] is leaf
        False
    """
    return map_leaves(lambda leaf: leaf.copy() if isinstance(leaf, np.ndarray) else leaf, item)

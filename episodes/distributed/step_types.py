"""The dtype of every step column across a whole dataset, found before any read task runs.

Ray Data gathers the blocks of different read tasks into one batch (``iter_batches``, a sort,
a shuffle) and refuses blocks whose column types differ: int8 observations in one shard and
int64 in another (as a runner that widened a column between samples writes them), float32
beside float64 tensors. :func:`dataset_step_types` reads each chunk's column types, joins them
by the rules of :func:`~episodes.distributed.step_blocks.check_same_columns` and so refuses,
before anything is read, what no block could hold; each read task then casts its columns to
the joined types, so that every block of the dataset has one schema.

A chunk's types come from its shard's index (format v2: the documented ``leaves`` of its
entry, no data read) where its observations, actions and extra model outputs are stored as
numpy'd arrays; otherwise (a list-mode chunk, a format v1 dataset) from its first step, read.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     for dtype in (np.int8, np.int64):
    ...         w.write(SingleAgentEpisode(str(dtype), observations=np.zeros((2, 3), dtype),
    ...                                    actions=[0], rewards=[1.0],
    ...                                    len_lookback_buffer=0).to_numpy())
    >>> types = dataset_step_types(path, "chunks 0-2")
    >>> types["obs"], types["next_obs"], types["reward"], types["action"]
    (dtype('int64'), dtype('int64'), dtype('float64'), dtype('int64'))
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from episodes.distributed.rows import step_columns
from episodes.distributed.step_blocks import JoinedTypes, join_types
from episodes.episode import SingleAgentEpisode

__all__ = ["dataset_step_types"]

Part = dict[str, np.ndarray]


def dataset_step_types(path: str, where: str) -> dict[str, np.dtype[Any]]:
    """The dtype each step column of the dataset at ``path`` joins in, over all its chunks.

    Chunks without steps give no rows and are left out. Chunks of one type are joined once.

    Raises:
        ValueError: Two chunks' types of one column do not join (``where`` names the chunks).
        episodes.io.DatasetError: The dataset cannot be read.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     for actions in ([True], [2]):
        ...         w.write(SingleAgentEpisode(str(actions), observations=[0, 1],
        ...                                    actions=actions, rewards=[1.0],
        ...                                    len_lookback_buffer=0).to_numpy())
        >>> dataset_step_types(path, "chunks 0-2")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: chunks 0-2 do not share the type of the step column 'action': bool rows ...
    """
    joined: JoinedTypes = {}
    seen: set[tuple[Any, ...]] = set()
    for part in _type_parts(path):
        types = [(n, a.dtype.str, a.shape[1:]) for n, a in part.items() if n != "episode_id"]
        signature = tuple(types)
        if signature not in seen:
            seen.add(signature)
            join_types(joined, part, where)
    return {name: column.dtype for name, (column, _) in joined.items() if name != "episode_id"}


def _type_parts(path: str) -> Iterator[Part]:
    """Per chunk with steps: its step columns without rows (``episode_id`` keeps one)."""
    from episodes import io
    from episodes.io.shards import is_v2

    if not is_v2(Path(path)):
        for episode in io.read_episodes(path):
            if len(episode):
                yield _episode_part(episode)
        return
    dataset = io.Dataset(path, max_open_shards=1)
    for i, row in enumerate(dataset.summaries):
        if not row.length:
            continue
        shard, j = dataset.locate(i)
        part = _index_part(shard.entry_of(j), row.id_)
        yield _episode_part(dataset.episode(i)) if part is None else part


def _episode_part(episode: SingleAgentEpisode) -> Part:
    """The types of a read chunk: those of its first step, numpy'd as a read task numpys it."""
    if not episode.is_numpy:
        episode = episode.to_numpy()
    columns = step_columns(episode.slice(slice(0, 1)) if len(episode) > 1 else episode)
    return {name: a[:1] if name == "episode_id" else a[:0] for name, a in columns.items()}


def _index_part(entry: Any, id_: Any) -> Part | None:
    """The types of a v2 chunk from its index entry (see docs/format.md), or None.

    None where a column the step rows hold is not stored as numpy'd arrays: a list-mode
    column's items get their dtype when the read task numpys them.
    """
    meta, leaves = entry.get("meta", {}), entry.get("leaves", {})
    columns = meta.get("columns", {})
    fields = [
        ("obs", columns.get("observations")),
        ("action", columns.get("actions")),
        ("reward", columns.get("rewards")),
    ] + [(f"extra.{key}", column) for key, column in meta.get("extra_model_outputs", [])]
    found = {name: _leaf_types(column, leaves) for name, column in fields}
    if any(types is None for types in found.values()):
        return None
    rewards = found.pop("reward") or []
    if len(rewards) != 1 or rewards[0][1] is not None:  # nested rewards: step_columns refuses
        return None
    part: Part = {"episode_id": np.array([str(id_)], dtype=object), "t": np.empty(0, np.int64)}
    for name, types in found.items():
        for column, leaf in types or ():
            suffix = "" if leaf is None else f".{leaf}"
            part[name + suffix] = column
            if name == "obs":
                part["next_obs" + suffix] = column
    part["reward"] = np.empty(rewards[0][0].shape, np.float64)  # float64 in every chunk
    part["terminated"] = part["truncated"] = np.empty(0, bool)
    return part


def _leaf_types(column: Any, leaves: Any) -> list[tuple[np.ndarray, int | None]] | None:
    """Per leaf of a stored column: a row-less array of its type, and its leaf number.

    The number is None where the column is not nested (the leaves are listed in
    ``episodes.structs.flatten`` order, the order of the step columns' ``obs.0``, ...).
    """
    if not isinstance(column, dict) or column.get("layout") != "arrays":
        return None
    if not column.get("finalized"):
        return None
    nested = column.get("structure") != "*"
    out: list[tuple[np.ndarray, int | None]] = []
    for k, leaf in enumerate(column.get("leaves") or ()):
        info = leaves.get(leaf.get("file")) if isinstance(leaf, dict) else None
        if not isinstance(info, dict) or "dtype" not in info:
            return None
        rows = np.empty((0, *info.get("shape", ())), np.dtype(info.get("dtype")))
        out.append((rows, k if nested else None))
    return out

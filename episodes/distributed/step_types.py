"""The dtype of every step column across a whole dataset, found before any read task runs.

Ray Data gathers the blocks of different read tasks into one batch (``iter_batches``, a sort,
a shuffle) and refuses blocks whose column types differ: int8 observations in one shard and
int64 in another (as a runner that widened a column between samples writes them), float32
beside float64 tensors; a column that some blocks lack fails there, or comes back as floats
with NaN in its missing rows. :func:`dataset_step_types` reads each chunk's step columns,
their types and the nesting of its observations, actions and extra model outputs, and refuses,
before anything is read, chunks with other columns or nestings (a Dict observation with other
keys would fill ``obs.0`` with another key's values) and column types no block could hold (the
rules of :func:`~episodes.distributed.step_blocks.check_same_columns`); each read task then
casts its number columns to the joined types, so that every block of the dataset has one
schema (strings are not cast: Arrow holds them alike whatever their numpy width).

A chunk's types come from its shard's index (format v2: the documented ``leaves`` of its
entry, each checked as a reader checks it, no data read) where its observations, actions and
extra model outputs are stored as numpy'd arrays; otherwise (a list-mode chunk, a format v1
dataset) from the chunk, read as a read task reads it (``numpy=True``).

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
import tree

from episodes.distributed.rows import step_columns
from episodes.distributed.step_blocks import JoinedTypes, join_types
from episodes.episode import SingleAgentEpisode

__all__ = ["dataset_step_types"]

Part = dict[str, np.ndarray]
#: Per field (``obs``, ``action``, ``extra.<key>``): the paths of its leaves, in column order.
Nesting = dict[str, tuple[tuple[str, ...], ...]]


def dataset_step_types(path: str, where: str) -> dict[str, np.dtype[Any]]:
    """The dtype each number column of the dataset at ``path`` joins in, over all its chunks.

    Chunks without steps give no rows and are left out. Chunks alike are compared once.

    Raises:
        ValueError: Two chunks' step columns differ in name, in nesting (the leaves' paths) or
            in a type no block can join (``where`` names the chunks; the message both
            chunks, by episode and position).
        episodes.io.DatasetError: The dataset cannot be read (a damaged index entry too).

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
    first: tuple[list[str], Nesting, str] | None = None
    seen: set[tuple[Any, ...]] = set()
    for part, nesting, label in _type_parts(path):
        types = [(n, a.dtype.str, a.shape[1:]) for n, a in part.items() if n != "episode_id"]
        signature = (tuple(sorted(types)), tuple(sorted(nesting.items())))
        if signature in seen:
            continue
        seen.add(signature)
        names = sorted(part)
        if first is None:
            first = (names, nesting, label)
        elif names != first[0]:
            raise ValueError(
                f"{where} do not share step columns: {first[0]} in {first[2]}, {names} in "
                f"{label}; the blocks lacking a column would fail or fill it with NaN (read "
                "episodes instead)"
            )
        elif nesting != first[1]:
            raise ValueError(_nesting_differs(where, first[1], first[2], nesting, label))
        join_types(joined, part, where, label)
    return {
        name: column.dtype
        for name, (column, _) in joined.items()
        if column.dtype.kind not in "USO"  # strings: one Arrow type whatever their width
    }


def _nesting_differs(where: str, a: Nesting, a_label: str, b: Nesting, b_label: str) -> str:
    """The message for two chunks whose step columns share names but not their nesting."""
    if a.keys() != b.keys():
        # Fields that hold the same column names: a nested ``h`` (columns ``extra.h.0``, ...)
        # beside flat ``h.0``, ``h.1``; one chunk's field is missing from the other's nesting.
        only_a = {f: a[f] for f in sorted(a.keys() - b.keys())}
        only_b = {f: b[f] for f in sorted(b.keys() - a.keys())}
        return (
            f"{where} do not share the nesting of their step columns: fields {only_a} in "
            f"{a_label}, {only_b} in {b_label} (field: leaves); columns of one name would "
            "hold another field's values (read episodes instead)"
        )
    field = next(f for f in sorted(a) if a[f] != b[f])
    return (
        f"{where} do not share the nesting of {field!r}: leaves {a[field]} in {a_label}, "
        f"{b[field]} in {b_label}; their columns {field}.0, ... would hold other leaves' "
        "values (read episodes instead)"
    )


def _type_parts(path: str) -> Iterator[tuple[Part, Nesting, str]]:
    """Per chunk with steps: its step columns without rows, its nesting, and its label."""
    from episodes import io
    from episodes.io.shards import is_v2

    if not is_v2(Path(path)):
        for i, episode in enumerate(io.read_episodes(path, numpy=True)):
            if len(episode):
                yield (*_episode_part(episode), _label(episode.id_, i))
        return
    dataset = io.Dataset(path, max_open_shards=1)
    for i, row in enumerate(dataset.summaries):
        if not row.length:
            continue
        shard, j = dataset.locate(i)
        found = _index_part(shard.entry_of(j), row.id_, f"{shard.where} episode {j}")
        if found is None:  # read as a read task reads it: the reader's checks and errors
            found = _episode_part(dataset.episode(i, numpy=True))
        yield (*found, _label(row.id_, i))


def _label(id_: Any, i: int) -> str:
    return f"episode {str(id_)!r} (chunk {i})"


def _episode_part(episode: SingleAgentEpisode) -> tuple[Part, Nesting]:
    """The types of a numpy'd chunk with steps (its first step's columns) and its nesting."""
    columns = step_columns(episode.slice(slice(0, 1)) if len(episode) > 1 else episode)
    part = {name: a[:1] if name == "episode_id" else a[:0] for name, a in columns.items()}
    items = [("obs", episode.get_observations(0)), ("action", episode.get_actions(0))]
    items += [
        (f"extra.{k}", episode.get_extra_model_outputs(k, 0)) for k in episode.extra_model_outputs
    ]
    nesting = {
        name: tuple(tuple(str(p) for p in path) for path, _ in tree.flatten_with_path(item))
        for name, item in items
    }
    return part, nesting


def _index_part(entry: Any, id_: Any, where: str) -> tuple[Part, Nesting] | None:
    """The types of a v2 chunk from its index entry (see docs/format.md), or None.

    None where a column the step rows hold is not stored as numpy'd arrays: a list-mode
    column's items get their dtype when the read task numpys them.

    Raises:
        episodes.io.CorruptDatasetError: A leaf entry or structure a reader would refuse.
    """
    meta, leaves = entry.get("meta", {}), entry.get("leaves", {})
    columns = meta.get("columns", {})
    fields = [
        ("obs", columns.get("observations")),
        ("action", columns.get("actions")),
        ("reward", columns.get("rewards")),
    ] + [(f"extra.{key}", column) for key, column in meta.get("extra_model_outputs", [])]
    found = {name: _leaf_types(column, leaves, where) for name, column in fields}
    if any(types is None for types in found.values()):
        return None
    rewards = found.pop("reward") or []
    if len(rewards) != 1 or rewards[0][1] != ():  # nested rewards: step_columns refuses
        return None
    part: Part = {"episode_id": np.array([str(id_)], dtype=object), "t": np.empty(0, np.int64)}
    nesting: Nesting = {}
    for name, types in found.items():
        nested = len(types or ()) != 1 or (types or [])[0][1] != ()
        nesting[name] = tuple(leaf_path for _, leaf_path in types or ())
        for k, (column, _) in enumerate(types or ()):
            suffix = f".{k}" if nested else ""
            part[name + suffix] = column
            if name == "obs":
                part["next_obs" + suffix] = column
    part["reward"] = np.empty(rewards[0][0].shape, np.float64)  # float64 in every chunk
    part["terminated"] = part["truncated"] = np.empty(0, bool)
    return part, nesting


def _leaf_types(
    column: Any, leaves: Any, where: str
) -> list[tuple[np.ndarray, tuple[str, ...]]] | None:
    """Per leaf of a stored column, in column order: a row-less array of its type, its path.

    The path is the leaf's place in the item, ``()`` for a column that is not nested.
    """
    from episodes.io.arrow_leaves import check_leaf_info
    from episodes.io.shard_codec import skeleton_paths

    if not isinstance(column, dict) or column.get("layout") != "arrays":
        return None
    if not column.get("finalized"):
        return None
    files = [
        leaf.get("file") if isinstance(leaf, dict) else None for leaf in column.get("leaves") or ()
    ]
    paths = skeleton_paths(column.get("structure"), where)
    if len(paths) != len(files) or not all(isinstance(leaves.get(f), dict) for f in files):
        return None  # the reader names what is wrong
    out = []
    for file, leaf_path in zip(files, paths):
        dtype, shape = check_leaf_info(leaves[file], f"{where} leaf {file}")
        out.append((np.empty((0, *shape), dtype), leaf_path))
    return out

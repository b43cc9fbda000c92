"""How ``from_dataset`` adds a dataset's pieces: time order, checks, errors naming the dataset."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from episodes.io.errors import DatasetError
from episodes.io.item_types import dataset_item_types
from episodes.io.joins import manifest_pieces
from episodes.io.shard_codec import EXTRAS
from episodes.io.shard_reader import Dataset
from episodes.io.values import id_key
from episodes.replay.adding import chunk_label
from episodes.replay.errors import EvictedEpisodeError
from episodes.replay.ingest import Chunk, _rows, plan_add, prepare_all

__all__ = ["joined_columns", "widen"]  # helpers of episodes.replay.persistence and .buffer


def joined_columns(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Per column, the dtype and row shape the dataset's pieces join in (of each leaf if nested).

    The join of the torch datasets (``episodes.io.item_types``), over the pieces with steps:
    int8 beside uint8 gives int16, float16 beside float32 float32. A nested column's entry maps
    each leaf's record path (:mod:`episodes.replay.nested` field names) to its joined dtype and
    shape. Empty where it does not apply (no join, another format, damage): each piece is then
    added, or refused, as read.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     for obs in (np.zeros((2, 1), np.uint8), np.zeros((2, 1), np.int8)):
        ...         w.write(SingleAgentEpisode(observations=obs, actions=[0], rewards=[1.0],
        ...                                    len_lookback_buffer=0).to_numpy())
        >>> joined_columns(path)["observations"]
        (dtype('int16'), (1,))
    """
    try:
        reader = Dataset(path, max_open_shards=1)
        gives = np.array([row.length > 0 for row in reader.summaries], bool)
        joined = dataset_item_types(reader, gives, lambda types: types)
    except (DatasetError, OSError, ValueError):  # read as before: reading reports it
        return {}
    return {
        name: types[1][0] if types[0] == ((),) else dict(zip(map(_record_path, types[0]), types[1]))
        for name, (types, _) in joined.items()
    }


def _record_path(path: tuple[Any, ...]) -> tuple[str, ...]:
    # A leaf's tree path as record field names: a Dict key's repr, a Tuple place's number.
    return tuple(str(part) if type(part) is int else repr(part) for part in path)


def widen(chunk: Chunk, joined: dict[str, Any]) -> None:
    """Casts a chunk's rows up to the dataset's joined dtypes (values kept), where they join.

    Nested observations leaf by leaf, by the same rule, into records of the widened leaves.

    Example:
        >>> from types import SimpleNamespace
        >>> chunk = SimpleNamespace(obs=np.array([[255]], np.uint8), actions=np.zeros(0),
        ...                         extras={})
        >>> widen(chunk, {"observations": (np.dtype(np.int16), (1,))})
        >>> chunk.obs.dtype, chunk.obs.tolist()
        (dtype('int16'), [[255]])
        >>> from episodes.replay.nested import nested_rows, unpack
        >>> chunk.obs = nested_rows({"a": np.array([0.1], np.float32)}, "obs", 1, True)
        >>> widen(chunk, {"observations": {("'a'",): (np.dtype(np.float64), ())}})
        >>> unpack(chunk.obs)["a"].dtype
        dtype('float64')
    """
    chunk.obs = _widened(chunk.obs, joined.get("observations"))
    chunk.actions = _widened(chunk.actions, joined.get("actions"))
    chunk.extras = {
        key: _widened(rows, joined.get(f"{EXTRAS}/{key}")) for key, rows in chunk.extras.items()
    }


def _widened(rows: np.ndarray, want: Any) -> np.ndarray:
    if want is None or (rows.dtype.names is None) != (type(want) is tuple):
        return rows  # no join, or nested against flat: add decides
    if rows.dtype.names is not None:
        paths = _leaf_paths(rows.dtype, ())
        dtype = _widened_records(rows.dtype, (), want)
        if set(paths) != want.keys() or dtype == rows.dtype:
            return rows  # another structure: add refuses it
        out = np.empty(len(rows), dtype)
        for path in paths:
            _field(out, path)[...] = _field(rows, path)
        return out
    dtype = _widened_dtype(rows.dtype, rows.shape[1:], want)
    return rows if dtype == rows.dtype else rows.astype(dtype)


def _widened_dtype(dtype: np.dtype[Any], shape: tuple[int, ...], want: Any) -> np.dtype[Any]:
    """``dtype`` or the joined dtype of ``want``, if that holds every value of one as shaped."""
    if want is None or dtype == want[0] or shape != tuple(want[1]):
        return dtype
    kinds = {"i" if d.kind == "u" else d.kind for d in (dtype, want[0])}
    if len(kinds) != 1 or np.result_type(dtype, want[0]) != want[0]:
        return dtype  # not of the join (another kind, a narrower dtype): add decides
    return np.dtype(want[0])


def _widened_records(dtype: np.dtype[Any], path: tuple[str, ...], want: dict[Any, Any]) -> Any:
    """A record dtype with each leaf widened, in its own structure and field order."""
    if dtype.names is None:
        return np.dtype((_widened_dtype(dtype.base, dtype.shape, want.get(path)), dtype.shape))
    fields = [(name, dtype.fields[name][0]) for name in dtype.names]  # type: ignore[index]
    return np.dtype([(n, _widened_records(d, (*path, n), want)) for n, d in fields])


def _leaf_paths(dtype: np.dtype[Any], path: tuple[str, ...]) -> list[tuple[str, ...]]:
    if dtype.names is None:
        return [path]
    subs = [(dtype.fields[n][0], (*path, n)) for n in dtype.names]  # type: ignore[index]
    return [leaf for sub, at in subs for leaf in _leaf_paths(sub, at)]


def _field(rows: np.ndarray, path: tuple[str, ...]) -> np.ndarray:
    for name in path:
        rows = rows[name]
    return rows


def _add(buffer: Any, episode: Any, end: tuple[int, bool, int, Any] | None, path: Any) -> None:
    try:
        _add_piece(buffer, episode, end)
    except (TypeError, ValueError) as error:
        if type(error) is not ValueError and type(error) is not TypeError:
            raise  # a subclass keeps its own type and words
        # add names the piece as its list's chunk 0: here the dataset and the episode do
        words = str(error).removeprefix(f"{chunk_label(0, episode.id_)}: ")
        joins = any(join in words for join in _JOIN_WORDS)  # else a shape, a dtype...
        hint = (
            f" (a piece repeated or missing? `episodes validate {os.fspath(path)}` checks the "
            "dataset)"
        )
        raise type(error)(
            f"dataset {os.fspath(path)!r}, episode {episode.id_!r}: {words}{hint if joins else ''}"
        ) from None


# What add says of a chunk that does not join its stored episode (ingest.check_joins).
_JOIN_WORDS = (
    "is already done",
    "but the buffer holds it up to",
    "differs from the one the buffer",
)


def _add_piece(buffer: Any, episode: Any, end: tuple[int, bool, int, Any] | None) -> None:
    try:
        buffer.add(episode)
    except EvictedEpisodeError:
        # An earlier piece was evicted while loading: this one goes with its episode, as a
        # chunk of one add whose earlier chunk evicted its episode does (checked as joining
        # there, its steps counted), so that the counters do not depend on the piecing.
        chunks = prepare_all([episode], {episode.id_}, ())
        if end is not None:
            columns = buffer._store.obs  # an earlier piece was stored: the columns are made
            if columns is not None:  # both observations as add compares them: as stored
                buffer._check_fit(chunks)
                end = (*end[:3], columns.fit(end[3][None], "observations")[0])
            try:
                plan_add(chunks, {episode.id_: end}, iter(()), (), 0, 2**62)
            except ValueError as error:  # its words say "the buffer holds": it holds none
                raise ValueError(
                    f"a later piece of episode {episode.id_!r}, evicted while the dataset was "
                    f"loaded, does not continue where its earlier pieces stopped: {error}"
                ) from None
        buffer._num_added += sum(chunk.n for chunk in chunks)


def _stopped(
    piece: Any, before: tuple[int, bool, int, Any] | None
) -> tuple[int, bool, int, Any] | None:
    """Where an episode stands after ``piece`` (as ``plan_add`` reads a stored one), if begun."""
    done = piece.is_terminated or piece.is_truncated
    if not len(piece) and (not done or before is None):
        return before  # a piece add ignores changes nothing
    # The last observation as its chunk's row (a record if nested), which plan_add compares
    # the next piece's first one with; a copy: not the whole piece kept alive.
    rows = _rows(
        piece.get_observations(slice(-1, None)),
        "observations",
        1,
        piece.observations.finalized,
        piece.observation_space,
    )
    return piece.t_started + len(piece), done, 0, np.array(rows[-1])


def _time_ranks(path: str | os.PathLike[str]) -> dict[int, tuple[Any, int]]:
    """Per manifest index, its episode's key and the piece's place in the episode's time order."""
    spans: dict[Any, list[tuple[int, int, int]]] = {}
    seen: dict[Any, tuple[Any, str]] = {}  # Python-equal id -> (the first such id, its key)
    for index, (id_, t_started, t, _) in enumerate(manifest_pieces(path)):
        key = id_key(id_)
        _check_id(id_, key, seen)
        spans.setdefault(key, []).append((t_started, t, index))
    return {
        index: (key, rank)
        for key, pieces in spans.items()
        for rank, (_, _, index) in enumerate(sorted(pieces))
    }


def _check_id(id_: Any, key: str, seen: dict[Any, tuple[Any, str]]) -> None:
    """Refuses a dataset id the buffer cannot keep apart from another one, or cannot key by."""
    try:
        first, first_key = seen.setdefault(id_, (id_, key))
    except TypeError:
        raise TypeError(
            f"episode id {id_!r} is unhashable ({type(id_).__name__}): a replay buffer finds "
            "episodes by id, so it takes hashable ids only (a tuple, not a list)"
        ) from None
    if first_key != key:
        raise ValueError(
            f"episode ids {first!r} and {id_!r} are different episodes in the dataset but equal "
            "in Python, and a replay buffer finds episodes by Python equality: it cannot hold "
            "both (give them ids that differ in value)"
        )

"""Whole-dataset operations: migrate v1 -> v2, merge, split (train/validation), filter.

Each reads its sources with :func:`~episodes.io.read_episodes` (v1 or v2), streaming one
episode at a time, and writes a new v2 dataset with :class:`~episodes.io.DatasetWriter`;
sources are never modified. All pieces of one episode id stay together.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import EpisodeWriter, dataset_info
    >>> root = tempfile.mkdtemp()
    >>> with EpisodeWriter(root + "/v1") as w:
    ...     _ = w.write_many(SingleAgentEpisode(str(i), observations=[0, 1], actions=[0],
    ...                      rewards=[float(i)], len_lookback_buffer=0) for i in range(4))
    >>> migrate(root + "/v1", root + "/v2")
    4
    >>> filter_dataset(root + "/v2", root + "/best", min_return=2.0)
    2
    >>> dataset_info(root + "/best").version
    2
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, SupportsFloat, SupportsIndex

from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag
from episodes.io.copy_checks import MERGE_REMEDY, refuse_other_envs
from episodes.io.copy_storage import SAME, copy_storage
from episodes.io.errors import DatasetError
from episodes.io.joined_pieces import joined_pieces
from episodes.io.joins import join_problems, manifest_pieces
from episodes.io.metadata import DatasetMetadata, given_metadata
from episodes.io.other_env import other_env_problem
from episodes.io.quarantine import warn_quarantined
from episodes.io.reader import DatasetInfo, EpisodeSummary, dataset_info, read_episodes
from episodes.io.returns import exact_returns
from episodes.io.shard_writer import DEFAULT_SHARD_BYTES, DatasetWriter
from episodes.io.shards import is_v2
from episodes.io.staging import Staged, is_staged, place, remove_empty, stage
from episodes.io.tool_args import (
    filter_args,
    merge_sources,
    parse_custom_data,
    resolved,
    same_json_value,
    split_args,
    with_provenance,
)
from episodes.io.v2_read import pieces_with_walls
from episodes.io.values import id_key, signless_zeros
from episodes.io.writer import removed_if_failed

__all__ = [
    "filter_dataset",
    "merge",
    "migrate",
    "other_env_problem",
    "parse_custom_data",
    "removed_if_failed",
    "split",
]

PathLike = str | os.PathLike[str]
Walls = tuple[float | None, float | None]


def _given_metadata(metadata: Any) -> DatasetMetadata | None:
    """``metadata`` checked as ``DatasetWriter`` checks it, before anything is read or made.

    An empty dict is no None: it would have been taken as "not given", so a merge skipped its
    env-id check.
    """
    return given_metadata(metadata)  # a dict refused, saying how to make one


def _metadata_of(path: PathLike, info: DatasetInfo | None = None) -> DatasetMetadata:
    info = dataset_info(path) if info is None else info  # ``info``: path's, read already
    if info.metadata is None:
        return DatasetMetadata()
    return DatasetMetadata.from_json(info.metadata, f"{path} metadata")


def _check_new(dst: PathLike) -> Path:
    """``dst`` resolved, if it is new or an empty directory (``.`` too: staged inside it)."""
    final = Path(dst)
    if final.is_symlink():  # renaming the copy into place would fail on it (or replace it)
        raise DatasetError(f"{dst} is a symbolic link; choose a new directory")
    # A staged directory in it (a copy into it killed outright) is no data: stage() removes it.
    if final.exists() and (
        not final.is_dir() or not all(is_staged(p.name) for p in final.iterdir())
    ):
        state = "is not empty" if final.is_dir() else "is not a directory"
        raise DatasetError(f"{dst} exists and {state}; choose a new directory")
    return resolved(final)


def _fill(
    sources: Iterable[PathLike],
    intos: Sequence[Path],
    metadata: DatasetMetadata,
    writer_kwargs: dict[str, Any],
    stops: Sequence[int | None] = (),
    ids: Sequence[Any] | None = None,
    side: Callable[[SingleAgentEpisode], int] | None = None,
    join: bool = False,
) -> list[int]:
    """Copies the pieces (of ``ids``: all if None) to ``intos``; the pieces written to each.

    One pass: each piece goes to ``intos[side(piece)]`` (the first where ``side`` is None).
    ``join``: each id's pieces (of all sources) go as one piece, joined.
    """
    counts = [0] * len(intos)
    with contextlib.ExitStack() as stack:
        writers = [
            stack.enter_context(DatasetWriter(into, metadata=metadata, **writer_kwargs))
            for into in intos
        ]
        # Checksums verified: a copy must not give damaged data fresh ones. ``stop``: the
        # pieces a decision was made on, not those a writer committed since (a snapshot).
        pairs = list(itertools.zip_longest(sources, stops))
        pieces: Iterator[tuple[SingleAgentEpisode, Walls]] = itertools.chain.from_iterable(
            _pieces(src, stop, ids) for src, stop in pairs
        )
        if join:
            pieces = joined_pieces([src for src, _ in pairs], [stop for _, stop in pairs])
        for episode, wall in pieces:
            k = 0 if side is None else side(episode)
            writers[k]._write(episode, wall)  # the source's wall times, not this clock's
            counts[k] += 1
    return counts


def _pieces(
    src: PathLike, stop: int | None, ids: Any
) -> Iterator[tuple[SingleAgentEpisode, Walls]]:
    """A source's pieces (checksums verified), each with the wall times its copy keeps.

    Only those of ``ids`` (if given), found from the manifest: no other piece is decoded. A
    v2 source's walls are its index entries'; a v1 source stores none, so its copies hold
    None (no wall time is made up from the copying process's clock).
    """
    if is_v2(Path(src)):
        warn_quarantined(src)  # the copy of a dataset with lost lines would lose their shards
        return pieces_with_walls(src, stop=stop, verify=True, ids=ids)
    return ((ep, (None, None)) for ep in read_episodes(src, verify=True, stop=stop, ids=ids))


def _check_apart(dst: PathLike, final: Path, sources: Iterable[PathLike]) -> None:
    """Refuses a destination inside a source or around one (the copy would change it)."""
    for src in sources:
        b = resolved(src)
        if final.is_relative_to(b) or b.is_relative_to(final):
            raise ValueError(f"the destination {dst} lies inside the source {src} or around it")


def _copy(
    sources: Iterable[PathLike],
    dst: PathLike,
    metadata: DatasetMetadata,
    writer_kwargs: dict[str, Any],
    stops: Sequence[int | None] = (),
    ids: Sequence[Any] | None = None,
    join: bool = False,
) -> int:
    """Writes the pieces (of ``ids``: all if None) into a staged directory, then ``dst``.

    A copy that fails part-way leaves no ``dst`` behind (a retry is not refused).
    """
    final = _check_new(dst)
    sources = list(sources)
    _check_apart(dst, final, sources)
    staged = stage(final)
    try:
        (count,) = _fill(sources, [staged.path], metadata, writer_kwargs, stops, ids, join=join)
        place(staged.path, final)  # an empty directory is filled in place
    except BaseException:
        staged.drop()
        remove_empty(staged.made)
        raise
    staged.drop()  # gone, or emptied into an existing directory: its lock goes
    return count


def migrate(
    src: PathLike,
    dst: PathLike,
    *,
    metadata: DatasetMetadata | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    data_format: str = "arrow",
    compression: str | None = None,
) -> int:
    """Converts a dataset (v1 or v2) into a new v2 dataset; returns the episode pieces copied.

    Every field of every episode piece is kept (the round trip is exact).

    Raises:
        DatasetError: ``src``'s pieces would not join (steps stored twice, missing, or after
            an end), as :func:`filter_dataset` refuses them, before anything is written.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> root = tempfile.mkdtemp()
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> with EpisodeWriter(root + "/v1") as w:
        ...     _ = w.write(ep)
        >>> migrate(root + "/v1", root + "/v2"), dataset_info(root + "/v2").version
        (1, 2)
        >>> [e == ep for e in read_episodes(root + "/v2")]
        [True]
    """
    given = _given_metadata(metadata)
    stops = _refuse_overlaps([src], "in {}")  # as filter, split and merge: no damage copied
    meta = given if given is not None else _metadata_of(src)
    kwargs = {"shard_bytes": shard_bytes, "data_format": data_format, "compression": compression}
    return _copy([src], dst, meta, kwargs, stops)  # migrate


def merge(
    sources: Sequence[PathLike],
    dst: PathLike,
    *,
    metadata: DatasetMetadata | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    data_format: str = SAME,
    compression: str | None = SAME,
    join_pieces: bool = False,
) -> int:
    """Concatenates datasets into a new v2 dataset; returns the episode pieces written.

    ``join_pieces=True`` writes each id as one piece: its pieces of every source joined as
    :func:`load_episode` joins them (so each id loads back equal, and reads one piece instead
    of thousands: a continuing task's run), one id held in memory at a time; it keeps each
    id's earliest ``wall_start`` and latest ``wall_end``. ``merge([src], dst,
    join_pieces=True)`` compacts one dataset.

    The metadata defaults to the first source's, with the sources listed in ``user`` under
    ``merged_from`` (or, where that key is taken, ``merged_from_2``, ...; see
    :func:`~episodes.io.tool_args.with_provenance`). ``data_format`` and ``compression`` are
    :class:`DatasetWriter`'s, or ``"same"`` (the default): what every shard of the sources
    has, else ``"arrow"`` and ``None`` (see :mod:`episodes.io.copy_storage`).

    Raises:
        DatasetError: ``dst`` is not empty, two sources hold the same steps of an episode
            (checked from their manifests before anything is written), or the sources are of
            different envs: other observation or action spaces, or (when ``metadata`` is not
            given, so the first source's would describe them all) other metadata env ids.
        TypeError: ``sources`` is one path (a str or ``os.PathLike``: pass ``[path]``), or
            holds something that is no path, or ``join_pieces`` is no bool.
        ValueError: ``data_format`` or ``compression`` is none of the values above.
        CorruptDatasetError: (``join_pieces``) an id's pieces do not join as
            ``load_episode`` would refuse them (nothing is left at ``dst``).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> root = tempfile.mkdtemp()
        >>> for name in "ab":
        ...     with DatasetWriter(f"{root}/{name}") as w:
        ...         w.write(SingleAgentEpisode(name, observations=[0]))
        >>> merge([f"{root}/a", f"{root}/b"], f"{root}/ab")
        2
        >>> run = SingleAgentEpisode("r", observations=[0, 1, 2], actions=[0, 0],
        ...                          rewards=[1.0, 1.0], len_lookback_buffer=0)
        >>> with DatasetWriter(f"{root}/run") as w:
        ...     w.write_many([run[0:1], run[1:2]])
        >>> merge([f"{root}/run"], f"{root}/joined", join_pieces=True)
        1
    """
    sources = merge_sources(sources)  # one path alone would be iterated as characters
    join = as_flag(join_pieces, "join_pieces")
    given = _given_metadata(metadata)
    copy_storage([], data_format, compression)  # checked before anything is read
    stops = _refuse_overlaps(sources)
    refuse_other_envs(sources, by_id=given is None)
    meta = given if given is not None else _metadata_of(sources[0])
    if given is None:
        meta.user = with_provenance(meta.user, "merged_from", [str(s) for s in sources])
    kwargs = {"shard_bytes": shard_bytes, **copy_storage(sources, data_format, compression)}
    return _copy(sources, dst, meta, kwargs, stops, join=join)


def _refuse_overlaps(sources: Sequence[PathLike], how: str = "once {} are merged") -> list[int]:
    """Refuses sources whose pieces would not join once merged; the pieces judged, per source.

    The same steps twice, steps after an episode's end or left out: merging a dataset with
    itself or a copy of it, or two whose episodes share ids (a merge's refusal says what to
    do: ``MERGE_REMEDY``). The counts bound the copy to the pieces judged here.
    """
    pieces = [manifest_pieces(src) for src in sources]
    problems = join_problems(piece for found in pieces for piece in found)
    if problems:
        names = ", ".join(str(src) for src in sources)
        remedy = MERGE_REMEDY if len(sources) > 1 else ""
        raise DatasetError(f"{problems[0]} {how.format(names)}; nothing was written{remedy}")
    return [len(found) for found in pieces]


def _fraction(id_: Any, seed: int) -> float:
    # repr of an id holding a dict depends on its key order, and a dataset joins the pieces of
    # {"x": 1, "y": 2} and {"y": 2, "x": 1} into one episode: such ids hash their id_key.
    shown = id_key(id_) if _holds_dict(id_) else repr(signless_zeros(id_))
    key = json.dumps([seed, id_ if isinstance(id_, (str, int)) else shown])
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _holds_dict(id_: Any) -> bool:
    if isinstance(id_, dict):
        return True
    return isinstance(id_, (list, tuple)) and any(_holds_dict(item) for item in id_)


def split(
    src: PathLike,
    train: PathLike,
    validation: PathLike,
    *,
    fraction: SupportsFloat = 0.1,
    seed: SupportsIndex = 0,
    data_format: str = SAME,
    compression: str | None = SAME,
) -> tuple[int, int]:
    """Splits a dataset by episode id; returns the pieces written to each side.

    An id goes to ``validation`` when a hash of ``(seed, id)`` falls below ``fraction``, so
    the split is deterministic, and all pieces of one episode land on the same side. Both
    halves keep the source's metadata, the split recorded in its ``user`` under ``split`` (or
    ``split_2``, ... where that key is taken: no key of the source's is replaced), and its
    data format and compression unless given (as :func:`merge` keeps them).

    Raises:
        TypeError: ``fraction`` is no real number (a str or a bool; numpy floats are taken).
        ValueError: ``fraction`` is outside ``[0, 1]``, or ``seed`` is not an int >= 0 (the
            package's seed rule, :func:`episodes.seeds.check_seed`; numpy ints are taken and
            stored in the metadata as ``int``), or ``data_format`` or ``compression`` is
            none of :func:`merge`'s, all before anything is written.
        DatasetError: ``src``'s pieces would not join (steps stored twice, or after an end),
            found from its manifest before anything is written, as :func:`merge` refuses them.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> root = tempfile.mkdtemp()
        >>> with DatasetWriter(f"{root}/all") as w:
        ...     w.write_many(SingleAgentEpisode(str(i), observations=[0]) for i in range(50))
        >>> sum(split(f"{root}/all", f"{root}/train", f"{root}/val", fraction=0.2))
        50
    """
    fraction, seed = split_args(fraction, seed)  # plain Python: they go into the metadata
    copy_storage([], data_format, compression)  # checked before anything is read
    info = dataset_info(src)
    meta = _metadata_of(src, info)
    # Both halves from the pieces committed now: one snapshot of a source still written to.
    stop = [info.num_chunks]
    _refuse_overlaps([src], "in {}")
    kwargs = copy_storage([src], data_format, compression)
    in_val = lambda id_: _fraction(id_, seed) < fraction  # noqa: E731
    record = {"from": str(src), "fraction": fraction, "seed": seed}
    meta.user = with_provenance(meta.user, "split", record)
    finals = [_check_new(train), _check_new(validation)]  # resolved
    if finals[0] == finals[1]:
        raise ValueError(f"train and validation are the same directory: {train}")
    a, b = finals
    if a.is_relative_to(b) or b.is_relative_to(a):  # renaming one in would fill the other
        raise ValueError(f"train and validation lie one inside the other: {train}, {validation}")
    for dst, final in zip((train, validation), finals):
        _check_apart(dst, final, [src])
    staged: list[Staged] = []
    undos: list[Callable[[], None]] = []
    try:  # both or neither: a failure part-way leaves neither directory behind
        for final in finals:
            staged.append(stage(final))
        into = [part.path for part in staged]  # one pass: each piece read once, to its side
        n_train, n_val = _fill([src], into, meta, kwargs, stop, None, lambda ep: in_val(ep.id_))
        for part, final in zip(staged, finals):
            undos.append(place(part.path, final))
    except BaseException:
        for undo in undos:  # train goes back out: a retry is not refused
            with contextlib.suppress(OSError):
                undo()
        for part in staged:
            part.drop()
        remove_empty([p for part in staged for p in part.made])
        raise
    for part in staged:
        part.drop()  # gone, or emptied into an existing directory: their locks go
    return n_train, n_val


def filter_dataset(
    src: PathLike,
    dst: PathLike,
    *,
    min_return: SupportsFloat | None = None,
    max_return: SupportsFloat | None = None,
    min_length: SupportsIndex | None = None,
    max_length: SupportsIndex | None = None,
    done_only: bool = False,
    custom_data: dict[str, Any] | None = None,
    predicate: Callable[[EpisodeSummary], bool] | None = None,
    data_format: str = SAME,
    compression: str | None = SAME,
) -> int:
    """Copies the episodes whose whole-episode summary passes every given test.

    Returns the pieces written. ``custom_data`` keeps only episodes whose ``custom_data`` (their
    pieces' merged in time order, as :func:`load_episode` gives it) holds every given key with
    an equal value (e.g. ``{"env_index": 0}`` from the env runner); all pieces of an episode
    are kept or dropped together.
    ``predicate`` receives the :class:`~episodes.io.EpisodeSummary` (id, pieces, length,
    return, flags). The copy keeps the source's metadata, the source recorded in its ``user``
    under ``filtered_from`` (or ``filtered_from_2``, ... where that key is taken), and its
    data format and compression unless given (as :func:`merge` keeps them).

    Values compare as JSON values do: ``True`` equals no number (nor ``1`` ``True``), ``1``
    equals ``1.0``, ``"1"`` no number; lists and tuples compare item by item.

    Raises:
        ValueError: A NaN return bound, a negative length bound, a lower bound above its upper
            one, or a NaN in ``custom_data`` (mistakes that would filter silently).
        TypeError: A bound that is no real number (``"1"``; numpy numbers are taken), a
            length bound that is no int (``2.5``), a ``done_only`` that is no bool (``"no"``),
            a ``custom_data`` that is no mapping, or a ``predicate`` that cannot be called,
            all before anything is written (a bad ``data_format`` or ``compression`` too:
            ``ValueError``).
        DatasetError: ``src``'s pieces would not join, as :func:`split` refuses them.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> root = tempfile.mkdtemp()
        >>> with DatasetWriter(root + "/all") as w:
        ...     w.write_many(SingleAgentEpisode(str(n), observations=[0] * (n + 1),
        ...                  actions=[0] * n, rewards=[1.0] * n, len_lookback_buffer=0)
        ...                  for n in range(1, 4))
        >>> filter_dataset(root + "/all", root + "/long", min_length=2)
        2
        >>> sorted(s.length for s in dataset_info(root + "/long").episodes)
        [2, 3]
    """
    low_ret, high_ret, low_len, high_len, done_only, wanted_data, predicate = filter_args(
        min_return, max_return, min_length, max_length, done_only, custom_data, predicate
    )  # plain Python numbers (numpy's taken), or None
    copy_storage([], data_format, compression)  # checked before anything is read
    info = dataset_info(src)
    _refuse_overlaps([src], "in {}")  # its summaries would count steps twice
    # The manifest holds no inf (JSON), nor a sum of ints beyond float range: such returns read
    # back as NaN and are summed exactly from the rewards here (inf passes min_return).
    exact: dict[Any, Fraction | float] = {}
    if low_ret is not None or high_ret is not None:
        unknown = [s.id_ for s in info.episodes if math.isnan(s.ret)]  # their pieces alone
        exact = exact_returns(src, unknown, info.num_chunks) if unknown else {}

    def passes(s: EpisodeSummary) -> bool:
        ret = exact.get(id_key(s.id_), s.ret) if math.isnan(s.ret) else s.ret
        return (
            (low_ret is None or ret >= low_ret)
            and (high_ret is None or ret <= high_ret)
            and (low_len is None or s.length >= low_len)
            and (high_len is None or s.length <= high_len)
            and (not done_only or s.terminated or s.truncated)
            and (predicate is None or predicate(s))
        )

    kept = [s.id_ for s in info.episodes if passes(s)]
    wanted = {id_key(x) for x in kept}
    meta = _metadata_of(src, info)
    meta.user = with_provenance(meta.user, "filtered_from", str(src))
    if wanted_data:
        # Decided per episode, on the custom_data load_episode gives it (its pieces' merged in
        # time order, the later winning), so all pieces of an id stay together.
        merged = _merged_custom_data(src, kept, info.num_chunks)
        wanted = {
            key
            for key, data in merged.items()
            if all(k in data and same_json_value(data[k], v) for k, v in wanted_data.items())
        }

    # Only the kept ids' pieces are read (the others are neither decoded nor verified: none
    # is copied). The pieces judged above only: one committed since may change a length.
    ids = [s.id_ for s in info.episodes if id_key(s.id_) in wanted]
    kwargs = copy_storage([src], data_format, compression)
    return _copy([src], dst, meta, kwargs, [info.num_chunks], ids)


def _merged_custom_data(src: PathLike, ids: list[Any], stop: int) -> dict[Any, dict[Any, Any]]:
    """Per id key of ``ids``: its pieces' ``custom_data`` merged in time order (later wins).

    Only the pieces before ``stop`` (manifest order): those the filter judged; only those of
    ``ids`` are read.
    """
    keys = {id_key(x) for x in ids}
    pieces: dict[Any, list[tuple[tuple[int, int, int], dict[Any, Any]]]] = {}
    for i, piece in enumerate(read_episodes(src, stop=stop, ids=ids)):
        key = id_key(piece.id_)
        if key in keys:
            # load_episode's order: (t_started, t), so a piece without steps comes before the
            # one starting where it is; the later piece on a tie.
            order = (piece.t_started, piece.t, i)
            pieces.setdefault(key, []).append((order, piece.custom_data))
    merged: dict[Any, dict[Any, Any]] = {}
    for key, parts in pieces.items():
        merged[key] = {}
        for _, data in sorted(parts, key=lambda part: part[0]):
            merged[key].update(data)
    return merged

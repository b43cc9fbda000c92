"""Shards no manifest line lists, listed again: ``relist_shards`` and ``discard_unlisted``.

A manifest that lost lines (cut by a copy that stopped, put back from an older backup) leaves
committed shards that no line lists; a writer that opens the dataset alone moves their files
to ``unlisted/shards/`` (:mod:`episodes.io.quarantine`). :func:`relist_shards` checks each
such shard against its own index (the index's size and CRC-32 of the data file, every piece
decoded) and appends a manifest line for each good one, as a writer's commit does (chained,
sealed, fsynced), after moving its files back. :func:`discard_unlisted` removes what is left.
Both run only while no writer has the dataset open (``episodes relist`` on the command line).

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter, read_episodes
    >>> path = Path(tempfile.mkdtemp())
    >>> with DatasetWriter(path, shard_bytes=1) as w:
    ...     w.write_many(SingleAgentEpisode(x, observations=[0]) for x in "ab")
    >>> lines = (path / "manifest.jsonl").read_bytes().splitlines(keepends=True)
    >>> _ = (path / "manifest.jsonl").write_bytes(b"".join(lines[:2]))  # shard "b" lost
    >>> DatasetWriter(path).close()  # opens alone: b's files go to unlisted/shards/
    >>> [e.id_ for e in read_episodes(path)]
    ['a']
    >>> [(s.pieces, s.problem, s.relisted) for s in relist_shards(path)]
    [(1, None, True)]
    >>> [e.id_ for e in read_episodes(path)]
    ['a', 'b']
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import fcntl
import hashlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from episodes.indexing import as_flag
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetIOError,
    DatasetLockedError,
    NotADatasetError,
    try_flock,
)
from episodes.io.format import (
    MANIFEST_FILE,
    append_line,
    parse_json,
    piece_return,
    read_regular_file,
)
from episodes.io.listed_files import _v2_root
from episodes.io.manifest_lines import chained_line, mend_tail
from episodes.io.quarantine import _NOT_PLAIN, QUARANTINE_DIR, open_quarantine
from episodes.io.relist_mend import SPLIT, join_split, plain, restore_listed
from episodes.io.shards import (
    DATA_SUFFIX,
    INDEX_SUFFIX,
    SHARD_NAME,
    SHARDS_DIR,
    EpisodeRow,
    ShardEntry,
    read_v2_manifest,
)
from episodes.io.values import decode_value, id_key

__all__ = ["UnlistedShard", "discard_unlisted", "relist_shards"]

_MAX_INDEX_BYTES = 1 << 30  # a reader's bound
_QUARANTINE = f"{QUARANTINE_DIR}/{SHARDS_DIR}"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


@dataclass(frozen=True)
class UnlistedShard:
    """A shard no manifest line listed, as :func:`relist_shards` found it.

    Attributes:
        name: The shard's name (its files are ``NAME.json`` and ``NAME.arrow``/``.parquet``).
        place: Where its files were: ``"unlisted/shards"`` (quarantined) or ``"shards"``.
        files: Its file names there.
        pieces: Episode pieces its index holds (0 where it could not be read).
        steps: Their steps.
        problem: Why it is not (or would not be) listed again; None for a good shard.
        relisted: Its manifest line was appended, or, for a shard a line lists already, its
            files were moved back (False for every shard of a dry run).

    Example:
        >>> shard = UnlistedShard("0123456789abcdef", "shards", (), 0, 0, "no index file", False)
        >>> shard.ok
        False
    """

    name: str
    place: str
    files: tuple[str, ...]
    pieces: int
    steps: int
    problem: str | None
    relisted: bool

    @property
    def ok(self) -> bool:
        """Whether the shard passed every check (relisted, or would be in a dry run)."""
        return self.problem is None


def relist_shards(
    path: str | os.PathLike[str], *, dry_run: bool = False, sync: bool = True
) -> list[UnlistedShard]:
    """Lists again the good shards of ``unlisted/shards/`` and those unlisted in ``shards/``.

    Each shard (oldest index file first, the order its commit most likely had) is read with
    every checksum of its own index and every piece decoded; it is refused where that fails,
    where a file is missing, where a piece has the id and steps of a piece listed already
    (the same, or overlapping ones: its line was not lost, or the data was written again),
    or where a listed shard has its name. A good shard's files move back into ``shards/``,
    then its line is appended to the manifest as a writer appends one (a torn last line is
    cut first). Refused shards stay where they are.

    Two states a failure can leave are mended first. A shard whose files lie partly in each
    place (a move of its files killed midway) is joined in ``shards/``, then checked. Files a
    manifest line lists already while ``shards/`` lacks them (a manifest put back whole after
    a lone writer moved its lost lines' shards out) move back where their sizes and index
    SHA-256 are the line's; such a shard is reported first, ``relisted`` with no line appended.

    Args:
        path: A v2 dataset.
        dry_run: Check and report only: nothing is moved, appended or cut.
        sync: fsync the moves and each appended line.

    Returns:
        One :class:`UnlistedShard` per shard found, in the order they were checked.

    Raises:
        DatasetLockedError: A writer has the dataset open: nothing was changed.
        UnsafeDataError: ``unlisted`` or ``unlisted/shards`` is a symlink or no directory.
        DatasetIOError: The system refused to open ``shards/`` or the quarantine (no
            permission, an I/O error): its ``strerror`` and the path are named.
        NotADatasetError: ``path`` is no v2 dataset.
        CorruptDatasetError: The manifest is damaged.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp(); DatasetWriter(path).close()
        >>> relist_shards(path)
        []
    """
    dry_run, sync = as_flag(dry_run, "dry_run"), as_flag(sync, "sync")
    root = _v2_root(path, "unlisted shards").absolute()
    found: list[UnlistedShard] = []
    with _alone(root, "relist shards", create=not dry_run) as shards_fd:
        _, entries, _, _ = read_v2_manifest(root)
        for restored, files, problem in restore_listed(
            root, entries, shards_fd, dry_run=dry_run, sync=sync
        ):
            steps = sum(row.length for row in restored.episodes)
            relisted = problem is None and not dry_run
            count = len(restored.episodes)
            found.append(
                UnlistedShard(restored.name, _QUARANTINE, files, count, steps, problem, relisted)
            )
        split = join_split(root, entries, shards_fd, dry_run=dry_run, sync=sync)
        listed = {e.name for e in entries}
        pieces = _Pieces()
        for listed_entry in entries:
            pieces.add(listed_entry.episodes)
        candidates = _candidates(root, entries)
        manifest: int | None = None
        try:
            for place, stem, names in candidates:
                if stem in split:  # a dry run: the files of a stopped move are not joined
                    if place == SHARDS_DIR:
                        found.append(UnlistedShard(stem, place, (), 0, 0, SPLIT, False))
                    continue
                shard, entry = _check(root, place, stem, names, listed, pieces)
                if entry is not None and not dry_run:
                    if manifest is None:
                        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW
                        manifest = os.open(root / MANIFEST_FILE, flags)
                    if place == _QUARANTINE:
                        _move_back(root, names, shards_fd, sync=sync)
                    _append(manifest, entry, sync=sync)
                    shard = dataclasses.replace(shard, relisted=True)
                if entry is not None:
                    pieces.add(entry.episodes)
                    listed.add(stem)
                found.append(shard)
        finally:
            if manifest is not None:
                os.close(manifest)
    return found


def discard_unlisted(
    path: str | os.PathLike[str], *, dry_run: bool = False, sync: bool = True
) -> list[str]:
    """Removes the files of ``unlisted/shards/`` (and the directories, then empty).

    What :func:`relist_shards` refused or was not asked to list (a commit killed before its
    line leaves a shard there too) only takes space. Files left unlisted in ``shards/`` are
    not touched: the next writer that opens the dataset alone moves them to the quarantine.
    Nor is a file a manifest line lists while ``shards/`` lacks it (a manifest put back whole
    after its lost lines' shards were moved out): :func:`relist_shards` moves it back.

    Args:
        path: A v2 dataset.
        dry_run: Only name the files that would be removed.
        sync: fsync the directory after the removals.

    Returns:
        The names removed (or that would be), sorted.

    Raises:
        DatasetLockedError: A writer has the dataset open: nothing was removed.
        UnsafeDataError: ``unlisted`` or ``unlisted/shards`` is a symlink or no directory.
        DatasetIOError: The system refused to open one of them (no permission, an I/O error).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = Path(tempfile.mkdtemp()); DatasetWriter(path).close()
        >>> os.makedirs(path / "unlisted" / "shards")
        >>> _ = (path / "unlisted" / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
        >>> discard_unlisted(path), os.listdir(path)
        (['0123456789abcdef.arrow'], ['manifest.jsonl', 'shards'])
    """
    dry_run, sync = as_flag(dry_run, "dry_run"), as_flag(sync, "sync")
    root = _v2_root(path, "unlisted shards").absolute()
    with _alone(root, "discard unlisted shards", create=False):
        _, entries, _, _ = read_v2_manifest(root)
        listed = {e.name + s for e in entries for s in (DATA_SUFFIX[e.data_format], INDEX_SUFFIX)}
        fd = open_quarantine(root, create=False)
        if fd is None:
            return []
        try:
            # A listed shard's file that shards/ lacks is no leftover: relist moves it back.
            names = sorted(
                n
                for n in os.listdir(fd)
                if plain(fd, n) and not (n in listed and not os.path.lexists(root / SHARDS_DIR / n))
            )
            if dry_run:
                return names
            for name in names:
                os.unlink(name, dir_fd=fd)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):  # not empty: something else was put there
            os.rmdir(root / _QUARANTINE)
            os.rmdir(root / QUARANTINE_DIR)
        return names


@contextlib.contextmanager
def _alone(root: Path, what: str, *, create: bool) -> Iterator[int | None]:
    """Holds ``shards/`` exclusively, as a writer that opens alone does; yields its descriptor."""
    shards = root / SHARDS_DIR
    if create:
        shards.mkdir(exist_ok=True)
    try:
        fd = os.open(shards, _DIR_FLAGS)
    except FileNotFoundError:
        yield None  # no shards/: no writer ever opened it (one opening now waits for none)
        return
    except OSError as err:
        if err.errno not in _NOT_PLAIN:  # no permission, an I/O error: not the layout
            raise DatasetIOError(
                err.errno,
                f"cannot open {shards} to {what}: {err.strerror or err} (nothing changed)",
            ) from err
        raise NotADatasetError(
            f"{shards} is not a plain directory (a symlink?): refusing to {what} through it"
        ) from err
    try:
        if try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, root) is not None:
            raise DatasetLockedError(
                f"{root}: a writer has the dataset open (or another relist or discard runs on "
                f"it); close every writer of it, then {what} again (nothing was changed)"
            )
        yield fd
    finally:
        os.close(fd)  # the lock goes with it


def _candidates(root: Path, entries: list[ShardEntry]) -> list[tuple[str, str, list[str]]]:
    """``(place, stem, file names)`` of each unlisted shard, its index's oldest first."""
    listed = {e.name + s for e in entries for s in (DATA_SUFFIX[e.data_format], INDEX_SUFFIX)}
    suffixes = (*DATA_SUFFIX.values(), INDEX_SUFFIX)
    found: list[tuple[int, str, str, list[str]]] = []
    places: list[tuple[str, int | None]] = [(_QUARANTINE, open_quarantine(root, create=False))]
    with contextlib.suppress(FileNotFoundError):
        places.append((SHARDS_DIR, os.open(root / SHARDS_DIR, _DIR_FLAGS)))
    for place, dir_fd in places:
        if dir_fd is None:
            continue
        try:
            stems: dict[str, list[str]] = {}
            for name in set(os.listdir(dir_fd)) - listed:
                stem, _, rest = name.partition(".")
                if SHARD_NAME.match(stem) and f".{rest}" in suffixes and plain(dir_fd, name):
                    stems.setdefault(stem, []).append(name)
            for stem, names in stems.items():
                found.append((_mtime(dir_fd, stem), stem, place, sorted(names)))
        finally:
            os.close(dir_fd)
    found.sort(key=lambda item: item[:3])
    return [(place, stem, names) for _, stem, place, names in found]


def _mtime(dir_fd: int, stem: str) -> int:
    """When the shard's index was written (just before its commit), 0 where it has none."""
    try:
        return os.stat(stem + INDEX_SUFFIX, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns
    except OSError:
        return 0


class _Pieces:
    """The listed pieces' ``(t_started, t)`` by id: a piece that repeats one is refused.

    Looked up by bisection, so that relisting the pieces of one long episode (thousands of
    shards) stays linear. By id: the set of pieces; the pieces with steps, sorted, and the union
    of their step ranges, as sorted disjoint open intervals (touching ones stay apart: a piece
    may start where one ends); the steps of those without steps (one strictly inside clashes).
    """

    def __init__(self) -> None:
        self._same: set[tuple[str, int, int]] = set()
        self._sorted: dict[str, list[tuple[int, int]]] = {}  # read to name a clashing piece
        self._spans: dict[str, tuple[list[int], list[int]]] = {}
        self._points: dict[str, list[int]] = {}

    def add(self, rows: tuple[EpisodeRow, ...]) -> None:
        for row in rows:
            key, t0, t1 = _key(row), row.t_started, row.t
            self._same.add((key, t0, t1))
            if t0 == t1:
                bisect.insort(self._points.setdefault(key, []), t0)
                continue
            bisect.insort(self._sorted.setdefault(key, []), (t0, t1))
            starts, ends = self._spans.setdefault(key, ([], []))
            lo, hi = bisect.bisect_right(ends, t0), bisect.bisect_left(starts, t1)
            if lo < hi:  # merged with the ranges it overlaps
                t0, t1 = min(t0, starts[lo]), max(t1, ends[hi - 1])
            starts[lo:hi], ends[lo:hi] = [t0], [t1]

    def clash(self, rows: tuple[EpisodeRow, ...]) -> str | None:
        for row in rows:
            other = self._clashing(_key(row), row.t_started, row.t)
            if other is not None:
                how = (
                    "the same steps as" if other == (row.t_started, row.t) else "steps overlapping"
                )
                return (
                    f"its piece of episode {row.id_!r} (steps {row.t_started} to {row.t}) "
                    f"has {how} a listed piece ({other[0]} to {other[1]})"
                )
        return None

    def _clashing(self, key: str, a: int, b: int) -> tuple[int, int] | None:
        """A listed piece of ``key`` with steps ``[a, b)``, or overlapping them, or None."""
        if (key, a, b) in self._same:
            return a, b
        points = self._points.get(key, [])
        j = bisect.bisect_right(points, a)
        if j < len(points) and points[j] < b:
            return points[j], points[j]
        starts, ends = self._spans.get(key, ((), ()))
        i = bisect.bisect_left(starts, b)  # the ranges that start before the piece ends
        if not (i and ends[i - 1] > a):
            return None
        pieces = self._sorted[key]
        for k in range(bisect.bisect_left(pieces, (b,)) - 1, -1, -1):  # one overlaps: found
            if pieces[k][1] > a:
                return pieces[k]
        return None


def _key(row: EpisodeRow) -> str:
    return id_key(decode_value(row.id_, blob=None, where="episode id"))


def _check(
    root: Path, place: str, stem: str, names: list[str], listed: set[str], pieces: _Pieces
) -> tuple[UnlistedShard, ShardEntry | None]:
    """The report of one shard, and its manifest entry where it may be listed again."""
    count = steps = 0
    entry: ShardEntry | None = None
    try:
        if stem in listed:
            raise DatasetError("a listed shard has its name")
        if stem + INDEX_SUFFIX not in names:
            raise DatasetError("no index file: it cannot be checked (discard it)")
        if place == _QUARANTINE and any(os.path.lexists(root / SHARDS_DIR / n) for n in names):
            raise DatasetError("shards/ holds a file of its name")
        base = root / QUARANTINE_DIR if place == _QUARANTINE else root
        entry = _verified(base, stem)
        count, steps = len(entry.episodes), sum(row.length for row in entry.episodes)
        clash = pieces.clash(entry.episodes)
        if clash is not None:
            raise DatasetError(clash)
    except DatasetIOError:
        raise  # the system failed a look: nothing is known about the shard
    except DatasetError as err:
        return UnlistedShard(stem, place, tuple(names), count, steps, str(err), False), None
    return UnlistedShard(stem, place, tuple(names), count, steps, None, False), entry


def _verified(base: Path, stem: str) -> ShardEntry:
    """The entry of shard ``base/shards/stem``, built from its index and read back whole."""
    from episodes.io.shard_codec import decode_rows
    from episodes.io.shard_reader import Shard

    where = f"shard {stem}"
    raw = read_regular_file(base / SHARDS_DIR / f"{stem}{INDEX_SUFFIX}", where, _MAX_INDEX_BYTES)
    index = parse_json(raw, f"{where} index")
    data = index.get("data") if isinstance(index, dict) else None
    items = index.get("episodes") if isinstance(index, dict) else None
    fmt = data.get("format") if isinstance(data, dict) else None
    if not (isinstance(fmt, str) and fmt in DATA_SUFFIX and isinstance(items, list)):
        raise CorruptDatasetError(f"{where}: the index is not a shard index")
    rows = []
    for j, item in enumerate(items):
        meta = item.get("meta") if isinstance(item, dict) else None
        if not isinstance(meta, dict):
            raise CorruptDatasetError(f"{where}: episode {j} of the index has no 'meta'")
        keys = ("id", "t_started", "t", "is_terminated", "is_truncated")
        summary = [meta.get(k) for k in keys]
        summary.insert(3, None)
        rows.append(EpisodeRow.from_json(summary, f"{where} episode {j}"))
    size = data.get("size") if isinstance(data, dict) else None
    if type(size) is not int:
        raise CorruptDatasetError(f"{where}: the index has no data file size")
    sha = hashlib.sha256(raw).hexdigest()
    entry = ShardEntry(stem, fmt, sha, len(raw), size, tuple(rows))
    shard = Shard(base, entry, verify=True, whole_index=True)
    rets = []
    try:
        for j, row in enumerate(rows):
            k, first = shard.part_of(j)
            episode = decode_rows(
                shard.entry_of(j),
                shard.parts[k],
                first,
                spaces=shard.spaces,
                where=f"{where} episode {j}",
                table_where=where,
            )
            if (episode.t_started, episode.t) != (row.t_started, row.t):
                raise CorruptDatasetError(f"{where} episode {j}: t_started/t disagree")
            ret = piece_return(episode)
            rets.append(ret if math.isfinite(ret) else math.nan)
    finally:
        shard.close()
    episodes = tuple(dataclasses.replace(row, ret=r) for row, r in zip(rows, rets, strict=True))
    entry = dataclasses.replace(entry, episodes=episodes)
    # Its line read back as a reader will: nothing the manifest refuses is appended.
    return ShardEntry.from_json(entry.to_json(), where)


def _move_back(root: Path, names: list[str], shards_fd: int | None, *, sync: bool) -> None:
    """Renames a quarantined shard's files into ``shards/``: data first, as a commit does."""
    assert shards_fd is not None
    into = open_quarantine(root, create=False)
    assert into is not None
    try:
        for name in sorted(names, key=lambda n: n.endswith(INDEX_SUFFIX)):
            os.rename(name, name, src_dir_fd=into, dst_dir_fd=shards_fd)
        if sync:  # in place before the line that lists them
            os.fsync(shards_fd)
            os.fsync(into)
    finally:
        os.close(into)


def _append(fd: int, entry: ShardEntry, *, sync: bool) -> None:
    """Appends ``entry``'s line as ``DatasetWriter`` does: under the lock, chained and sealed."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        mend_tail(fd, sync=False)  # a killed writer's torn line goes; append_line syncs
        append_line(fd, chained_line(fd, entry.to_json()), sync=sync)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)

r"""Format v2 layout: the manifest (header line + one line per shard), shard names, checks.

A v2 dataset is a directory::

    DATASET/
      manifest.jsonl       line 1: the header (format, version, metadata); then one line per
                           committed shard, appended under an flock and fsynced
      shards/
        NAME.arrow         the shard's rows (Arrow IPC file; or NAME.parquet)
        NAME.json          the shard's index: one entry per episode (rows, fields, spaces)
        .tmp-NAME.arrow.part  being written (invisible to readers; no ``*.arrow`` glob
                              matches it)

Every manifest line ends with ``"crc32":"xxxxxxxx"}``: the CRC-32 of the line's bytes before
``,"crc32"``. This module imports no pyarrow. See ``docs/format.md``.

Example:
    >>> line = seal_line({"v": 2})
    >>> line
    b'{"v": 2,"crc32":"3161982c"}\n'
    >>> unseal_line(line[:-1], "x")
    {'v': 2}
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from episodes.io.errors import (
    CorruptDatasetError,
    UnsafeDataError,
    UnsupportedVersionError,
    stat_or_none,
)
from episodes.io.format import (
    CHUNKS_DIR,
    FORMAT_NAME,
    MANIFEST_FILE,
    MAX_INT64,
    TMP_PREFIX,
    read_regular_file,
)
from episodes.io.manifest_lines import (
    mend_tail,
    seal_line,
    unseal_line,
)
from episodes.io.manifest_prefix import parse_manifest
from episodes.io.values import decode_value, id_key

__all__ = [
    "SHARDS_DIR",
    "V2",
    "ShardEntry",
    "holds_immutable_ids",
    "mend_tail",
    "piece_ends",
    "read_v2_manifest",
    "seal_line",
    "shard_file",
    "temp_data_file",
    "summarises",
    "unseal_line",
]

V2 = 2
SHARDS_DIR = "shards"
SHARD_NAME = re.compile(r"^[0-9a-f]{16}$")
DATA_SUFFIX = {"arrow": ".arrow", "parquet": ".parquet"}
INDEX_SUFFIX = ".json"
#: Ends a data file being written: ``.tmp-NAME.arrow.part``, which no glob of committed data
#: files (``*.arrow``, ``*.parquet``) matches. Earlier versions wrote ``.tmp-NAME.arrow``: the
#: clean-up recognises both by :data:`~episodes.io.format.TMP_PREFIX`.
TEMP_DATA_SUFFIX = ".part"
MAX_MANIFEST_BYTES = 1 << 30
_HEADER_START = b'{"format": '


def is_v2(root: Path) -> bool:
    """Whether ``root`` looks like a v2 dataset.

    That is: no v1 ``format.json``, and a manifest that starts with a v2 header (or is no
    regular file, which the v2 reader then refuses), or one beside a ``shards/`` and no v1
    ``chunks/`` (a damaged header, which the v2 reader reports as damage).

    Raises:
        DatasetIOError: The system failed a look (no permission, an I/O error).

    Example:
        >>> is_v2(Path("/nonexistent"))
        False
    """
    if stat_or_none(root / "format.json") is not None:
        return False
    if stat_or_none(root / MANIFEST_FILE) is None:
        return False
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(root / MANIFEST_FILE, flags)
    except OSError:
        return True  # a symlink or unreadable: the v2 reader reports it
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        if os.read(fd, len(_HEADER_START)) == _HEADER_START:
            return True
    except OSError:
        return True  # the v2 reader reports it
    finally:
        os.close(fd)
    return (
        stat_or_none(root / SHARDS_DIR, follow=False) is not None
        and stat_or_none(root / CHUNKS_DIR, follow=False) is None
    )


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if type(value) is not int or not 0 <= value <= MAX_INT64:
        raise CorruptDatasetError(f"{where}: {key!r} must be a non-negative int64, got {value!r}")
    return value


def _is_v2(version: Any) -> bool:
    # 2.0 == 2, but no writer writes a float version (v1 refuses 1.0 too); True is no version.
    return type(version) is int and version == V2


@dataclass(frozen=True)
class EpisodeRow:
    """One episode (piece) of a shard, as summarised in the manifest.

    Example:
        >>> row = EpisodeRow("ep", 0, 3, 2.5, True, False)
        >>> EpisodeRow.from_json(row.to_json(), "row") == row
        True
    """

    id_: Any
    t_started: int
    t: int
    ret: float
    terminated: bool
    truncated: bool

    @property
    def length(self) -> int:
        """Steps in the piece.

        Example:
            >>> EpisodeRow("ep", 4, 10, 0.0, False, False).length
            6
        """
        return self.t - self.t_started

    def to_json(self) -> list[Any]:
        """The compact manifest form.

        Example:
            >>> EpisodeRow("ep", 0, 3, float("inf"), True, False).to_json()  # no inf in JSON
            ['ep', 0, 3, None, True, False]
        """
        ret = self.ret if math.isfinite(self.ret) else None  # JSON has no inf/nan
        return [self.id_, self.t_started, self.t, ret, self.terminated, self.truncated]

    @classmethod
    def from_json(cls, obj: Any, where: str) -> EpisodeRow:
        """Parses and checks one manifest episode summary.

        Example:
            >>> math.isnan(EpisodeRow.from_json(["ep", 0, 3, None, True, False], "row").ret)
            True
            >>> try:
            ...     EpisodeRow.from_json(["ep", 3, 1, 0.0, True, False], "row")  # t < t_started
            ... except CorruptDatasetError:
            ...     print("refused")
            refused
        """
        row = _plain_row(obj) if cls is EpisodeRow else None
        if row is not None:
            return row
        if not (isinstance(obj, list) and len(obj) == 6):
            raise CorruptDatasetError(f"{where}: malformed episode summary {obj!r}")
        id_, t0, t1, ret, term, trunc = obj
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (t0, t1))
        number = ret is None or (isinstance(ret, (int, float)) and not isinstance(ret, bool))
        flags = isinstance(term, bool) and isinstance(trunc, bool)
        if not (ints and number and flags) or not 0 <= t0 <= t1 <= MAX_INT64:
            raise CorruptDatasetError(f"{where}: malformed episode summary {obj!r}")
        try:
            number_ret = math.nan if ret is None else float(ret)
        except OverflowError:  # an integer beyond float: no summary this format writes
            raise CorruptDatasetError(f"{where}: malformed episode summary {obj!r}") from None
        return cls(id_, t0, t1, number_ret, term, trunc)


def _plain_row(obj: Any) -> EpisodeRow | None:
    """The row of a summary as the writer writes it (exact types), else None.

    One test per field instead of ``from_json``'s general ones: a manifest line lists every
    piece of its shard, and a reader parses them all. Anything else takes the general path.
    """
    if type(obj) is list and len(obj) == 6:
        id_, t0, t1, ret, term, trunc = obj
        if (
            type(t0) is int
            and type(t1) is int
            and type(term) is bool
            and type(trunc) is bool
            and 0 <= t0 <= t1 <= MAX_INT64
        ):
            if type(ret) is float:
                return EpisodeRow(id_, t0, t1, ret, term, trunc)
            if ret is None:
                return EpisodeRow(id_, t0, t1, math.nan, term, trunc)
    return None


def summarises(meta: Any, row: EpisodeRow) -> bool:
    """Whether an index entry's ``meta`` has the id, time range and flags ``row`` lists.

    The return is not compared: it takes the rewards (``validate_dataset`` sums them).

    Example:
        >>> meta = {"id": "a", "t_started": 0, "t": 3, "is_terminated": True,
        ...         "is_truncated": False}
        >>> row = EpisodeRow("a", 0, 3, 2.5, True, False)
        >>> summarises(meta, row), summarises({**meta, "id": "b"}, row)
        (True, False)
    """
    if not isinstance(meta, dict):
        return False
    id_, row_id = meta.get("id"), row.id_
    if type(id_) is not type(row_id):
        return False
    if type(id_) is not str and isinstance(id_, (dict, list)):  # str: the usual id
        same_id = json.dumps(id_) == json.dumps(row_id)
    else:
        same_id = id_ == row_id
    return (
        same_id
        and (meta.get("t_started"), meta.get("t")) == (row.t_started, row.t)
        and meta.get("is_terminated") is row.terminated
        and meta.get("is_truncated") is row.truncated
    )


@dataclass(frozen=True)
class ShardEntry:
    """One committed shard, as listed in the manifest.

    Example:
        >>> rows = (EpisodeRow("a", 0, 2, 1.0, True, False), EpisodeRow(3, 0, 1, 0.5, False, True))
        >>> entry = ShardEntry("0123456789abcdef", "arrow", "0" * 64, 10, 90, rows)
        >>> ShardEntry.from_json(entry.to_json(), "line 2") == entry
        True
    """

    name: str
    data_format: str
    index_sha256: str
    index_size: int
    data_size: int
    episodes: tuple[EpisodeRow, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the shard's two files.

        Example:
            >>> ShardEntry("0123456789abcdef", "arrow", "0" * 64, 10, 90, ()).nbytes
            100
        """
        return self.index_size + self.data_size

    def to_json(self) -> dict[str, Any]:
        """The manifest line's object (before sealing).

        Example:
            >>> rows = (EpisodeRow("a", 0, 2, 1.0, True, False),)
            >>> obj = ShardEntry("0123456789abcdef", "arrow", "0" * 64, 10, 90, rows).to_json()
            >>> obj["v"], obj["shard"], obj["episodes"]
            (2, '0123456789abcdef', [['a', 0, 2, 1.0, True, False]])
        """
        return {
            "v": V2,
            "shard": self.name,
            "data_format": self.data_format,
            "index_sha256": self.index_sha256,
            "index_size": self.index_size,
            "data_size": self.data_size,
            "episodes": [e.to_json() for e in self.episodes],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> ShardEntry:
        """Parses and checks a manifest shard line.

        Example:
            >>> entry = ShardEntry("0123456789abcdef", "parquet", "0" * 64, 10, 90, ())
            >>> ShardEntry.from_json(unseal_line(seal_line(entry.to_json()), "l"), "l") == entry
            True
            >>> ShardEntry.from_json({**entry.to_json(), "shard": "../x"}, "line 2")
            Traceback (most recent call last):
            ...
            episodes.io.errors.UnsafeDataError: line 2: shard name '../x' is not a plain shard name
        """
        version = obj.get("v")
        if not _is_v2(version):
            raise UnsupportedVersionError(f"{where}: format version {version!r} is not 2")
        name = obj.get("shard")
        if not isinstance(name, str) or not SHARD_NAME.match(name):
            raise UnsafeDataError(f"{where}: shard name {name!r} is not a plain shard name")
        data_format = obj.get("data_format")
        # A list or dict is unhashable: the type is checked before the dict lookup.
        if not isinstance(data_format, str) or data_format not in DATA_SUFFIX:
            raise CorruptDatasetError(f"{where}: unknown data_format {data_format!r}")
        sha = obj.get("index_sha256")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise CorruptDatasetError(f"{where}: index_sha256 is not a SHA-256 hex digest")
        rows = obj.get("episodes")
        if not isinstance(rows, list):
            raise CorruptDatasetError(f"{where}: 'episodes' must be a list")
        return cls(
            name=name,
            data_format=data_format,
            index_sha256=sha,
            index_size=_int(obj, "index_size", where),
            data_size=_int(obj, "data_size", where),
            episodes=tuple(
                _plain_row(r) or EpisodeRow.from_json(r, f"{where} episode {i}")
                for i, r in enumerate(rows)
            ),
        )


def shard_file(root: Path, name: str, suffix: str) -> Path:
    """``root/shards/NAME+suffix`` for a checked shard name.

    Example:
        >>> shard_file(Path("/d"), "0123456789abcdef", ".json").as_posix()
        '/d/shards/0123456789abcdef.json'
    """
    if not SHARD_NAME.match(name):
        raise UnsafeDataError(f"shard name {name!r} is not a plain shard name")
    return root / SHARDS_DIR / f"{name}{suffix}"


def check_header(obj: Any, where: str) -> dict[str, Any]:
    """Checks the manifest's header line; returns it.

    Example:
        >>> check_header({"format": "episodes-dataset", "version": 2, "created": 0.0,
        ...               "library_version": "0", "metadata": {}}, "x")["version"]
        2
    """
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise CorruptDatasetError(f"{where}: the first line is not an {FORMAT_NAME!r} header")
    version = obj.get("version")
    if not _is_v2(version):
        raise UnsupportedVersionError(
            f"{where}: format version {version!r} is not supported (this library reads 1 and 2)"
        )
    if not isinstance(obj.get("metadata"), dict):
        raise CorruptDatasetError(f"{where}: header 'metadata' must be an object")
    for key in ("created_utc", "library_version"):  # DatasetInfo's str | None
        if not isinstance(obj.get(key), (str, type(None))):
            value = obj[key]
            raise CorruptDatasetError(
                f"{where}: header {key!r} must be a string, got {type(value).__name__} {value!r}"
            )
    return obj


def read_v2_manifest(root: Path) -> tuple[dict[str, Any], list[ShardEntry], int, bool]:
    """Reads a v2 manifest: ``(header, committed shards, valid byte prefix, torn tail)``.

    A last line without its newline is torn (a writer killed mid-append, or one appending
    right now) and ignored, unless it is a whole sealed line (CRC-32 and all): that line was
    appended whole and only its newline is missing, so it is read. Any damaged complete line
    is corruption, and so is a whole line followed by other bytes (a damaged newline).

    Lines this process read before, byte for byte the same, are not parsed again
    (:mod:`episodes.io.manifest_prefix`): opening an N-shard dataset again costs its new lines.

    Example:
        >>> import tempfile; d = Path(tempfile.mkdtemp())
        >>> _ = (d / MANIFEST_FILE).write_bytes(seal_line({"format": "episodes-dataset",
        ...     "version": 2, "metadata": {}}))
        >>> read_v2_manifest(d)[1:]
        ([], 80, False)
    """
    raw = read_regular_file(root / MANIFEST_FILE, MANIFEST_FILE, MAX_MANIFEST_BYTES)
    label = str(root / MANIFEST_FILE)
    return parse_manifest(os.path.abspath(root), raw, check_header, _shard_line, label=label)


def _shard_line(obj: Any, where: str) -> tuple[ShardEntry, str, bool]:
    entry = ShardEntry.from_json(obj, where)
    return entry, entry.name, holds_immutable_ids(entry)


_IMMUTABLE_IDS = (str, int, float, bool, type(None))


def holds_immutable_ids(entry: ShardEntry) -> bool:
    """Whether no episode id of ``entry`` can change: none is a list or a dict.

    A tuple id is stored as a list, which whoever holds the entry could change; an entry
    without such ids may be shared by every reader of a process.

    Example:
        >>> rows = (EpisodeRow("a", 0, 1, 0.0, True, False),)
        >>> holds_immutable_ids(ShardEntry("0123456789abcdef", "arrow", "0" * 64, 2, 0, rows))
        True
    """
    return all(type(row.id_) in _IMMUTABLE_IDS for row in entry.episodes)


def temp_data_file(shards: Path, name: str, data_format: str) -> Path:
    """Where shard ``name``'s data file is written before it is renamed into place.

    Example:
        >>> temp_data_file(Path("ds/shards"), "0123456789abcdef", "parquet").name
        '.tmp-0123456789abcdef.parquet.part'
    """
    return shards / f"{TMP_PREFIX}{name}{DATA_SUFFIX[data_format]}{TEMP_DATA_SUFFIX}"


def piece_ends(rows: Sequence[EpisodeRow]) -> list[tuple[bool, bool]]:
    """Per piece, ``(terminated, truncated)``: how the episode ends where the piece's steps end.

    A piece's own flags, except where a piece that is not done is followed by a piece of the
    same id without steps, starting at its ``t``, that ended the episode (a valid layout,
    which ``load_episode`` joins): the piece's last step is then the episode's last.

    Example:
        >>> steps = EpisodeRow("a", 0, 3, 3.0, False, False)
        >>> end = EpisodeRow("a", 3, 3, 0.0, True, False)  # written once the episode ended
        >>> piece_ends([steps, end, EpisodeRow("b", 0, 1, 1.0, False, False)])
        [(True, False), (True, False), (False, False)]
    """
    ends = [(row.terminated, row.truncated) for row in rows]
    enders: dict[tuple[str, int], tuple[bool, bool]] = {}
    for row in rows:
        if row.t == row.t_started and (row.terminated or row.truncated):
            enders[_key(row), row.t] = (row.terminated, row.truncated)
    if enders:  # rare: ids decoded only then
        for i, row in enumerate(rows):
            if not any(ends[i]) and (_key(row), row.t) in enders:
                ends[i] = enders[_key(row), row.t]
    return ends


def _key(row: EpisodeRow) -> str:
    return id_key(decode_value(row.id_, blob=None, where="manifest id"))

"""Dataset layout: names, the format version, ``format.json`` and the append-only manifest.

A dataset is a directory::

    DATASET/
      format.json        {"format": "episodes-dataset", "version": 1}
      manifest.jsonl     one JSON object per committed chunk, appended and fsynced
      .lock              held (flock) by the one writer allowed at a time
      chunks/
        00000000-1a2b3c4d/   one committed chunk: meta.json + .npy files
        .tmp-...             a chunk being written (invisible to readers)

Only chunks listed in the manifest exist for readers. See ``docs/format.md``.

Example:
    >>> FORMAT_VERSION
    1
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from episodes.io.errors import (
    CorruptDatasetError,
    NotADatasetError,
    UnsafeDataError,
    UnsupportedVersionError,
    read_failure,
    stat_or_none,
)

__all__ = [
    "CHUNKS_DIR",
    "FORMAT_FILE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LOCK_FILE",
    "MANIFEST_FILE",
    "MAX_JSON_BYTES",
    "META_FILE",
    "ManifestEntry",
    "check_format",
    "chunk_path",
    "append_line",
    "fsync_dir",
    "piece_return",
    "read_regular_file",
    "write_json_atomic",
]

FORMAT_NAME = "episodes-dataset"
FORMAT_VERSION = 1  # the chunk format (v1) and its per-chunk encoding; DatasetWriter writes v2
FORMAT_FILE = "format.json"
MANIFEST_FILE = "manifest.jsonl"
LOCK_FILE = ".lock"
CHUNKS_DIR = "chunks"
META_FILE = "meta.json"
TMP_PREFIX = ".tmp-"
CHUNK_NAME = re.compile(r"^[0-9]{8,}-[0-9a-f]{8}$")
FILE_NAME = re.compile(r"^[a-z0-9]+(\.[0-9]+)?\.npy$")
MAX_JSON_BYTES = 1 << 30  # a manifest or any other JSON file read whole
MAX_META_BYTES = 256 << 20
MAX_FORMAT_BYTES = 1 << 20
#: The largest count (of steps, of bytes) a manifest may hold: what a file offset or a numpy
#: index can be. A bigger one is damage, and would overflow the tools that print it.
MAX_INT64 = (1 << 63) - 1
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once (and is then refused), never blocks
    | getattr(os, "O_CLOEXEC", 0)
)


def read_regular_file(path: Path, what: str, max_bytes: int) -> bytes:
    """Reads a whole file that must be a regular file (not a symlink, FIFO or device).

    The size is checked before reading, so a huge or endless file is refused instead of
    filling memory, and a FIFO is refused instead of blocking.

    Raises:
        CorruptDatasetError: The file is missing or larger than ``max_bytes``.
        UnsafeDataError: The path is a symlink or not a regular file.
        DatasetIOError: The system failed the read (out of file descriptors, an I/O error).

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "x"; _ = p.write_bytes(b"ab")
        >>> read_regular_file(p, "test file", 10)
        b'ab'
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:  # out of descriptors is no damage: DatasetIOError, not cached
        raise read_failure(err, f"{what} {path}") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeDataError(f"{what} {path} is not a regular file (refused)")
        if st.st_size > max_bytes:
            raise CorruptDatasetError(
                f"{what} {path} is implausibly large ({st.st_size} bytes, limit {max_bytes})"
            )
        parts = []
        left = st.st_size + 1  # one byte more tells a file that grew while being read
        while left > 0:
            part = os.read(fd, min(left, 1 << 24))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        data = b"".join(parts)
        if len(data) > max_bytes:
            raise CorruptDatasetError(f"{what} {path} grew beyond {max_bytes} bytes")
        return data
    except OSError as err:
        raise read_failure(err, f"{what} {path}") from err
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flushes a directory entry (new names, renames) to disk.

    Example:
        >>> import tempfile; fsync_dir(Path(tempfile.gettempdir()))
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(fd: int, line: bytes, sync: bool = True) -> None:
    r"""Appends ``line`` whole to the file open at ``fd``, or leaves the file as it was.

    ``os.write`` may write only part of its bytes (a full disk, a signal, more than 2 GiB); the
    rest is written in further calls. With ``sync`` the line is fsynced too. If a call fails, the
    file is cut back to its old end: no torn line stays before the next writer's, and a line
    whose fsync failed is not half committed.

    Example:
        >>> import tempfile
        >>> fd, name = tempfile.mkstemp()
        >>> append_line(fd, b"{}\n"); os.close(fd); Path(name).read_bytes()
        b'{}\n'
    """
    end = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(line)
    try:
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.ftruncate(fd, end)
        raise


def write_json_atomic(path: Path, value: Any) -> None:
    """Writes JSON to a temporary name, fsyncs it and renames it over ``path``.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "x.json"
        >>> write_json_atomic(p, {"a": 1}); p.read_text()
        '{"a": 1}'
    """
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(value, allow_nan=False))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def load_json_file(path: Path, what: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Reads a JSON file strictly (no code runs), raising :class:`CorruptDatasetError`.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "x.json"; _ = p.write_text("[1]")
        >>> load_json_file(p, "test file")
        [1]
    """
    raw = read_regular_file(path, what, max_bytes)
    return parse_json(raw, f"{what} {path}")


def parse_json(raw: bytes, what: str) -> Any:
    """Parses JSON bytes strictly, raising :class:`CorruptDatasetError`.

    Example:
        >>> parse_json(b'{"a": 1}', "x")
        {'a': 1}
    """
    # A shard index of many episodes is millions of small objects: the cyclic collector
    # would run over and over while they are built (2 s instead of 0.4 s for 32k episodes).
    pause = len(raw) > 1 << 20 and gc.isenabled()
    if pause:
        gc.disable()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise CorruptDatasetError(f"{what} is not valid JSON: {err}") from err
    finally:
        if pause:
            gc.enable()


def check_version(value: Any, where: str) -> None:
    """Raises :class:`UnsupportedVersionError` unless ``value`` is a version we can read.

    Example:
        >>> check_version(1, "meta.json")
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptDatasetError(f"{where}: format version must be an int, got {value!r}")
    if value != FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"{where}: format version {value} is not supported (this library reads version "
            f"{FORMAT_VERSION})"
        )


def not_a_dataset(root: Path) -> str:
    """The words for a directory that is neither a format v2 nor a format v1 dataset.

    Example:
        >>> not_a_dataset(Path("data"))
        'data is not an episodes dataset (no format v2 manifest.jsonl, no v1 format.json)'
    """
    return f"{root} is not an episodes dataset (no format v2 {MANIFEST_FILE}, no v1 {FORMAT_FILE})"


def check_format(root: Path) -> None:
    """Checks that ``root`` is a dataset directory of a supported version.

    Raises:
        NotADatasetError: ``root`` is missing or has no ``format.json``.
        DatasetIOError: The system failed a look at them (no permission, an I/O error).
        UnsupportedVersionError: The version is not one we read.
        CorruptDatasetError: ``format.json`` is malformed.

    Example:
        >>> check_format(Path("/nonexistent"))
        Traceback (most recent call last):
        ...
        episodes.io.errors.NotADatasetError: /nonexistent does not exist
    """
    st = stat_or_none(root)  # no permission to look is DatasetIOError, not "no dataset"
    if st is None:
        raise NotADatasetError(f"{root} does not exist")
    if not stat.S_ISDIR(st.st_mode):
        raise NotADatasetError(f"{root} is not a directory")
    path = root / FORMAT_FILE
    if stat_or_none(path) is None:
        raise NotADatasetError(not_a_dataset(root))
    info = load_json_file(path, FORMAT_FILE, MAX_FORMAT_BYTES)
    if not isinstance(info, dict) or info.get("format") != FORMAT_NAME:
        raise CorruptDatasetError(f"{path} does not describe an {FORMAT_NAME!r}")
    check_version(info.get("version"), str(path))


@dataclass(frozen=True)
class ManifestEntry:
    """One committed chunk, as listed in ``manifest.jsonl``.

    Attributes:
        chunk: Relative path of the chunk directory (``chunks/NAME``).
        id_: The episode id (JSON value).
        t_started: The chunk's ``t_started``.
        t: The chunk's ``t``.
        ret: Sum of the chunk's rewards after the lookback.
        terminated: The chunk's terminated flag.
        truncated: The chunk's truncated flag.
        meta_sha256: SHA-256 (hex) of the chunk's ``meta.json``.
        nbytes: Total size of the chunk's files.

    Example:
        >>> e = ManifestEntry("chunks/c", "ep", 2, 5, 1.5, True, False, "0" * 64, 100)
        >>> ManifestEntry.from_json(e.to_json(), "manifest line 1") == e
        True
    """

    chunk: str
    id_: Any
    t_started: int
    t: int
    ret: float
    terminated: bool
    truncated: bool
    meta_sha256: str
    nbytes: int

    @property
    def length(self) -> int:
        """Number of steps in the chunk (``t - t_started``).

        Example:
            >>> ManifestEntry("chunks/c", "ep", 2, 5, 1.5, True, False, "0" * 64, 100).length
            3
        """
        return self.t - self.t_started

    def to_json(self) -> dict[str, Any]:
        """The manifest line's object.

        Example:
            >>> obj = ManifestEntry("chunks/c", 7, 0, 1, 1.5, True, False, "0" * 64, 9).to_json()
            >>> obj["v"], obj["id"], obj["return"]
            (1, 7, 1.5)
        """
        return {
            "v": FORMAT_VERSION,
            "chunk": self.chunk,
            "id": self.id_,
            "t_started": self.t_started,
            "t": self.t,
            # Strict JSON has no NaN/Infinity tokens (other tools could not read the line).
            "return": self.ret if math.isfinite(self.ret) else None,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "meta_sha256": self.meta_sha256,
            "nbytes": self.nbytes,
        }

    @classmethod
    def from_json(cls, obj: Any, where: str) -> ManifestEntry:
        """Parses and checks a manifest line's object (raises our errors, never builds junk).

        Example:
            >>> e = ManifestEntry("chunks/c", "ep", 0, 2, 1.0, False, True, "ab" * 32, 64)
            >>> ManifestEntry.from_json(json.loads(json.dumps(e.to_json())), "line 1") == e
            True
            >>> ManifestEntry.from_json({**e.to_json(), "t": True}, "line 2")
            Traceback (most recent call last):
            ...
            episodes.io.errors.CorruptDatasetError: line 2: 't' has the wrong type (True)
        """
        if not isinstance(obj, dict):
            raise CorruptDatasetError(f"{where}: expected a JSON object")
        check_version(obj.get("v"), where)
        for key, types in (
            ("chunk", str),
            ("t_started", int),
            ("t", int),
            ("return", float),
            ("terminated", bool),
            ("truncated", bool),
            ("meta_sha256", str),
            ("nbytes", int),
        ):
            if key not in obj:
                raise CorruptDatasetError(f"{where}: missing key {key!r}")
            value = obj[key]
            # JSON numbers come back as int or float; true/false are no numbers.
            if key == "return" and value is None:
                continue  # a non-finite return (written as null)
            wrong = (
                isinstance(value, bool) != (types is bool)
                or (types is float and not isinstance(value, (int, float)))
                or (types is not float and not isinstance(value, types))
            )
            if wrong:
                raise CorruptDatasetError(f"{where}: {key!r} has the wrong type ({obj[key]!r})")
        if "id" not in obj:
            raise CorruptDatasetError(f"{where}: missing key 'id'")
        if not re.fullmatch(r"[0-9a-f]{64}", obj["meta_sha256"]):
            raise CorruptDatasetError(f"{where}: meta_sha256 is not a SHA-256 hex digest")
        # v1 stores any int time step, but no chunk holds 2**63 steps or bytes.
        length = obj["t"] - obj["t_started"]
        if (
            obj["t_started"] < 0
            or not 0 <= length <= MAX_INT64
            or not 0 <= obj["nbytes"] <= MAX_INT64
        ):
            raise CorruptDatasetError(
                f"{where}: t_started/t/nbytes out of range (0 <= t_started <= t, t - t_started "
                "and nbytes below 2**63)"
            )
        return cls(
            chunk=obj["chunk"],
            id_=obj["id"],
            t_started=obj["t_started"],
            t=obj["t"],
            ret=_as_return(obj["return"], where),
            terminated=obj["terminated"],
            truncated=obj["truncated"],
            meta_sha256=obj["meta_sha256"],
            nbytes=obj["nbytes"],
        )


def chunk_path(root: Path, relative: str) -> Path:
    """Resolves a manifest's chunk path, refusing anything outside ``root/chunks``.

    Only ``chunks/NAME`` with a writer-made ``NAME`` is accepted: no absolute paths, no ``..``,
    no other directories, and no symlink that leads out of the dataset.

    Raises:
        UnsafeDataError: The path is not a plain chunk name inside the dataset.

    Example:
        >>> chunk_path(Path("/d"), "../etc")
        Traceback (most recent call last):
        ...
        episodes.io.errors.UnsafeDataError: manifest chunk path '../etc' is not a plain \
chunks/NAME path inside the dataset
    """
    parts = relative.split("/")
    if len(parts) != 2 or parts[0] != CHUNKS_DIR or not CHUNK_NAME.match(parts[1]):
        raise UnsafeDataError(
            f"manifest chunk path {relative!r} is not a plain {CHUNKS_DIR}/NAME path inside "
            "the dataset"
        )
    path = root / CHUNKS_DIR / parts[1]
    check_inside(root, path)
    return path


def check_inside(root: Path, path: Path) -> None:
    """Raises :class:`UnsafeDataError` if ``path`` (symlinks resolved) leaves ``root``.

    Example:
        >>> check_inside(Path("/d"), Path("/d/chunks/x"))
    """
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise UnsafeDataError(f"{path} resolves to {real}, outside the dataset {real_root}")


def _as_return(value: Any, where: str) -> float:
    """A manifest's ``return``: a JSON number, or null for a non-finite one (NaN)."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except OverflowError:  # an integer beyond float: no return this format writes
        raise CorruptDatasetError(f"{where}: 'return' is out of range ({value!r})") from None


def piece_return(episode: Any) -> float:
    """The sum of a piece's rewards after its lookback, for the manifest.

    Int rewards beyond float range give ``inf`` or ``-inf`` (``get_return``), which the
    manifest stores as ``null``, as it stores NaN. Rewards ``get_return`` refuses (vectors
    of a multi-objective env, complex or no numbers) have no return: NaN, stored as ``null``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> piece_return(SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0],
        ...                                 rewards=[1.0, 10**400], len_lookback_buffer=0))
        inf
    """
    import numpy as np  # loaded already: the episode holds numpy arrays

    try:
        # Float rewards summing past float max give inf, inf and -inf NaN: quietly, both.
        with np.errstate(over="ignore", invalid="ignore"):
            return float(episode.get_return())
    except (TypeError, ValueError):
        return math.nan

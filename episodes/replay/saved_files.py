"""The two files of a saved replay buffer besides its episodes: ``replay.json`` and priorities.

Both are read as regular files only (never a FIFO, device or symlink, so a load cannot block
or wander out of the save) after their size is checked, and both are checksummed:
``replay.json`` carries the CRC-32 of its own content (``crc32``: its other fields dumped as
canonical JSON, so white space does not count) and of ``priorities.npy``'s bytes
(``priorities_crc32``). A save written before the checksums (version 1) is read without them.
``priorities.npy``'s header is parsed by numpy's literal-only parser and checked against the
slot count and the file's size before any data is read. Every damage is a ``ValueError``;
the system failing a read (no permission, out of descriptors) stays the
:class:`~episodes.io.DatasetIOError` (an ``OSError``) it is.

Example:
    >>> meta = seal({"version": 2, "kind": "uniform", "capacity": 10})
    >>> meta["crc32"] == meta_crc32(meta), meta_crc32({**meta, "capacity": 12}) == meta["crc32"]
    (True, False)
"""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from episodes.io import DatasetError, DatasetIOError
from episodes.io.format import read_regular_file
from episodes.io.npy_read import NPY_HEADER_ERRORS, read_npy_header

__all__ = [
    "MAX_META_BYTES",
    "META_CRC",
    "PRIORITIES_CRC",
    "meta_crc32",
    "priorities_file",
    "read_priorities",
    "read_meta",
    "read_priorities_bytes",
    "read_save_file",
    "seal",
]

META_CRC = "crc32"
PRIORITIES_CRC = "priorities_crc32"
# The evicted ids make replay.json grow with a run (about 40 bytes per uuid id): 4 GiB holds
# some 100 million of them; more is damage (a sparse or runaway file), refused unread.
MAX_META_BYTES = 4 << 30
_MAX_NPY_HEADER = (1 << 16) + 12  # what np.save writes for any 1-D array, with room to spare


def read_save_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes, or a ``ValueError``.

    Raises:
        ValueError: The file is missing, too large, a symlink or no regular file.
        episodes.io.DatasetIOError: The system failed the read (no damage known).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp())
        >>> read_save_file(path, 10)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: ... is not a regular file (refused)
    """
    try:
        return read_regular_file(path, "file", max_bytes)
    except DatasetIOError:
        raise
    except DatasetError as err:
        raise ValueError(str(err)) from None


def read_meta(path: Path) -> Any:
    """The parsed JSON of ``replay.json`` at ``path`` (at most :data:`MAX_META_BYTES` bytes).

    Raises:
        ValueError: The file is missing, too large, no regular file or no JSON (too deeply
            nested JSON included).
        episodes.io.DatasetIOError: The system failed the read (no damage known).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "replay.json"
        >>> _ = path.write_text('{"version": 2}')
        >>> read_meta(path)
        {'version': 2}
    """
    raw = read_save_file(path, MAX_META_BYTES)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError as err:  # nesting too deep for the parser
        raise ValueError(f"replay.json is nested too deeply ({err})") from None


def meta_crc32(meta: dict[str, Any]) -> int:
    """CRC-32 of ``meta``'s fields but its own checksum, dumped as canonical JSON.

    Example:
        >>> meta_crc32({"b": 1, "a": [1.5]}) == meta_crc32({"a": [1.5], "b": 1, "crc32": 7})
        True
    """
    body = {key: value for key, value in meta.items() if key != META_CRC}
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def seal(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its checksum (:func:`meta_crc32`) added.

    Example:
        >>> seal({"version": 2})
        {'version': 2, 'crc32': 1511901680}
    """
    return {**meta, META_CRC: meta_crc32(meta)}


def priorities_file(priorities: np.ndarray) -> bytes:
    """The bytes of ``priorities.npy`` for ``priorities``: a 1-D float64 ``.npy`` file.

    Example:
        >>> data = priorities_file(np.array([1.0, 2.0]))
        >>> read_priorities_bytes(data, 2, zlib.crc32(data)).tolist()
        [1.0, 2.0]
    """
    out = io.BytesIO()
    array = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


def read_priorities(path: Path, count: int, crc: int | None) -> np.ndarray:
    """The ``count`` priorities in ``path`` (a ``.npy`` file whose CRC-32 is ``crc``, if known).

    Raises:
        ValueError: Not a regular file, a checksum mismatch, a damaged header, a dtype other
            than float64, another shape than ``(count,)`` or another size than it implies.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "priorities.npy"
        >>> _ = path.write_bytes(priorities_file(np.ones(3)))
        >>> read_priorities(path, 3, None).tolist()
        [1.0, 1.0, 1.0]
        >>> read_priorities(path, 4, None)
        Traceback (most recent call last):
        ValueError: priorities.npy holds shape (3,), expected (4,) (one priority per stored step)
    """
    raw = read_save_file(path, 8 * count + _MAX_NPY_HEADER)
    return read_priorities_bytes(raw, count, crc)


def read_priorities_bytes(raw: bytes, count: int, crc: int | None) -> np.ndarray:
    """:func:`read_priorities` of a file's bytes ``raw``.

    Example:
        >>> read_priorities_bytes(b"not npy", 1, None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: priorities.npy is no valid .npy file (...)
    """
    if crc is not None and zlib.crc32(raw) != crc:
        raise ValueError("priorities.npy does not match the CRC-32 that replay.json records")
    f = io.BytesIO(raw)
    try:
        shape, _, dtype = read_npy_header(f, "priorities.npy")
    except (*NPY_HEADER_ERRORS, DatasetError) as err:
        raise ValueError(
            f"priorities.npy is no valid .npy file ({type(err).__name__}: {err})"
        ) from None
    # Only what save writes: a pickle, an object or a structured dtype is never read.
    if dtype.kind != "f" or dtype.itemsize != 8 or dtype.fields is not None:
        raise ValueError(f"priorities.npy holds dtype {dtype}, expected float64")
    if tuple(shape) != (count,):
        raise ValueError(
            f"priorities.npy holds shape {tuple(shape)}, expected ({count},) "
            "(one priority per stored step)"
        )
    offset = f.tell()
    if len(raw) != offset + 8 * count:  # checked before the data is touched
        raise ValueError(
            f"priorities.npy is {len(raw)} bytes, its header implies {offset + 8 * count}"
        )
    return np.frombuffer(raw, dtype, count, offset).astype(np.float64)

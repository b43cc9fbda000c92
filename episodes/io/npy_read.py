"""Reading one ``.npy`` leaf of a format v1 chunk: checked, never unpickled, maybe mapped.

The header is parsed by numpy's literal-only parser and checked against its CRC-32; object
and structured dtypes are refused before any data is read. Arrays of at least 1 MiB are
mapped copy-on-write from the file already opened (a bounded number alive at once, see
:mod:`episodes.io.leaf_maps`; past that they are read). An ``OSError`` the system raises
(``EMFILE``, ``EIO``) is a :class:`~episodes.io.errors.DatasetIOError`, not damage.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "a.npy"
    >>> np.save(path, np.arange(3))
    >>> read_npy(path, path.stat().st_size, None, "a.npy").tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import math
import os
import stat
import struct
import tokenize
import zlib
from pathlib import Path
from typing import Any, Literal

import numpy as np

from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    UnsafeDataError,
    read_failure,
    stat_listed_file,
)
from episodes.io.format import META_FILE, check_inside
from episodes.io.leaf_maps import may_map, track_map
from episodes.io.values import SAFE_KINDS, check_code_points, crc32_of

__all__ = ["MMAP_THRESHOLD", "NPY_HEADER_ERRORS", "load_array", "read_npy", "read_npy_header"]

MMAP_THRESHOLD = 1 << 20  # arrays of at least 1 MiB are memory-mapped


def load_array(
    root: Path,
    chunk_dir: Path,
    name: str,
    files: dict[str, dict[str, int]],
    verify: bool,
    where: str,
) -> np.ndarray:
    """Reads and checks leaf ``name`` of a chunk against its ``files`` entry (see the module).

    Example:
        >>> import json, tempfile
        >>> from episodes.io.writer import EpisodeWriter
        >>> from episodes import SingleAgentEpisode
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write(SingleAgentEpisode("x", observations=[0, 1], actions=[1],
        ...                                    rewards=[1.0]).to_numpy())
        >>> chunk = next(Path(path, "chunks").iterdir())
        >>> files = json.loads((chunk / "meta.json").read_text())["files"]
        >>> load_array(Path(path), chunk, "obs.0.npy", files, True, chunk.name).tolist()
        [0, 1]
    """
    label = f"{where}/{name}"
    if name not in files:
        raise CorruptDatasetError(f"{label}: not listed in {META_FILE}")
    path = chunk_dir / name
    check_inside(root, path)
    st = stat_listed_file(path, label, files[name]["size"])
    try:
        array = read_npy(path, st.st_size, files[name].get("hcrc32"), label)
    except DatasetError:
        raise
    except OSError as err:  # raised by the system, not by numpy's parser: EMFILE, EIO...
        raise read_failure(err, label) from err
    except NPY_HEADER_ERRORS as err:
        raise CorruptDatasetError(f"{label} is not a valid .npy file: {err}") from err
    expected = files[name]["crc32"]
    if verify and expected is not None:
        if crc32_of(array) != expected:
            raise CorruptDatasetError(f"{label}: CRC-32 mismatch (the data is corrupted)")
    return array


# What numpy's header parser and reading a damaged file can raise (a damaged closing brace
# makes the literal parser's tokenizer raise TokenError, a damaged literal SyntaxError, a bad
# key KeyError). A short file is a ValueError.
NPY_HEADER_ERRORS = (
    ValueError,
    EOFError,
    SyntaxError,
    TypeError,
    KeyError,
    OverflowError,
    MemoryError,
    RecursionError,
    struct.error,
    tokenize.TokenError,
)


def read_npy_header(f: Any, label: str) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` file open at ``f``, read literally.

    Raises:
        CorruptDatasetError: A ``.npy`` version other than 1.0 or 2.0; a damaged header
            raises one of ``NPY_HEADER_ERRORS``.

    Example:
        >>> import io
        >>> buf = io.BytesIO(); np.save(buf, np.zeros(3)); _ = buf.seek(0)
        >>> read_npy_header(buf, "x.npy")
        ((3,), False, dtype('float64'))
    """
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise CorruptDatasetError(f"{label}: unsupported .npy version {version}")


def read_npy(path: Path, size: int, header_crc: int | None, label: str) -> np.ndarray:
    """The checked array of a ``.npy`` file of ``size`` bytes (its header's CRC-32 if given).

    Raises:
        CorruptDatasetError: A damaged header, or one that disagrees with the size.
        UnsafeDataError: Not a regular file, or an object or structured dtype.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "big.npy"
        >>> np.save(path, np.zeros(1 << 18, np.float64))  # 2 MiB: mapped copy-on-write
        >>> array = read_npy(path, path.stat().st_size, None, "big.npy")
        >>> array[0] = 1.0; float(np.load(path)[0])  # the file never changes
        0.0
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise UnsafeDataError(f"{label} is not a regular file (refused)")
        shape, fortran, dtype = read_npy_header(f, label)
        if dtype.hasobject or dtype.kind not in SAFE_KINDS or dtype.fields is not None:
            raise UnsafeDataError(
                f"{label} holds dtype {dtype}; object and structured arrays (which may "
                "carry pickles) are refused"
            )
        offset = f.tell()
        _check_header(f, offset, header_crc, label)
        count = math.prod(shape)
        if offset + count * dtype.itemsize != size:
            raise CorruptDatasetError(f"{label}: header and file size disagree (truncated?)")
        order: Literal["C", "F"] = "F" if fortran else "C"
        array: np.ndarray | None = None
        if count * dtype.itemsize >= MMAP_THRESHOLD:
            array = _map_npy(f, dtype, offset, tuple(shape), order)
        if array is None:
            f.seek(offset)
            data = f.read(count * dtype.itemsize)
            flat = np.frombuffer(data, dtype=dtype, count=count)
            array = flat.reshape(tuple(shape), order=order).copy(order="C")
        check_code_points(array, label)
        return array


def _map_npy(
    f: Any, dtype: np.dtype[Any], offset: int, shape: tuple[int, ...], order: Literal["C", "F"]
) -> np.ndarray | None:
    """The array as a copy-on-write map of the open file, or None to read it (leaf_maps)."""
    if not may_map():
        return None
    try:  # the file already opened and checked, not its path again
        array = np.memmap(f, dtype=dtype, mode="c", offset=offset, shape=shape, order=order)
    except OSError:  # out of descriptors or address space: read instead
        return None
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    track_map(base)
    return array


def _check_header(f: Any, offset: int, expected: int | None, label: str) -> None:
    """Compares the header bytes with their recorded CRC-32 (cheap, so always checked)."""
    if expected is None:
        return
    f.seek(0)
    header = f.read(offset)
    if zlib.crc32(header) != expected:
        raise CorruptDatasetError(f"{label}: header CRC-32 mismatch (the .npy header is damaged)")

r"""Manifest lines of format v2: each sealed with its own CRC-32 and chained to the one before.

A line is ``PREFIX,"crc32":"XXXXXXXX"}`` and a newline, ``XXXXXXXX`` the CRC-32 of ``PREFIX``. A
shard line also names the line it was appended after (``"prev"``: that line's CRC-32), so a
lost or moved middle line is found, which each line's own seal cannot show. See
``docs/format.md``.

Example:
    >>> header = seal_line({"format": "episodes-dataset"})
    >>> first = seal_line({"v": 2, "prev": line_crc(header)})
    >>> check_follows(unseal_line(first, "line 2"), line_crc(header), "line 2")
"""

from __future__ import annotations

import json
import os
import re
import zlib
from typing import Any

from episodes.io.errors import CorruptDatasetError
from episodes.io.format import MANIFEST_FILE

__all__ = [
    "chained_line",
    "check_follows",
    "line_crc",
    "mend_tail",
    "seal_line",
    "seal_lines",
    "unseal_line",
    "whole_line",
]

_CRC_TAIL = re.compile(rb',"crc32":"([0-9a-f]{8})"\}$')
# The seal of a line: JSON escapes every '"' inside a string and json.dumps puts a space
# after ',' and ':', so these bytes occur nowhere else in a line, only at its end.
_SEAL = re.compile(rb',"crc32":"[0-9a-f]{8}"\}')
# The seal of a manifest's last line, newline included: what a new line's "prev" names.
_LAST_SEAL = re.compile(rb',"crc32":"([0-9a-f]{8})"\}\n$')


def seal_line(obj: dict[str, Any]) -> bytes:
    r"""One manifest line for ``obj``: JSON with its own CRC-32 appended, and a newline.

    Example:
        >>> seal_line({"a": 1}).endswith(b"}\n")
        True
    """
    if not obj:
        raise ValueError("a manifest line holds at least one key")
    prefix = json.dumps(obj, allow_nan=False).encode("utf-8")[:-1]
    return prefix + b',"crc32":"%08x"}\n' % zlib.crc32(prefix)


def unseal_line(line: bytes, where: str) -> Any:
    """Checks a manifest line's CRC-32 and returns its object (without the ``crc32`` key).

    Raises:
        CorruptDatasetError: The CRC is missing or wrong, or the line is not JSON.

    Example:
        >>> unseal_line(b'{"a": 1,"crc32":"00000000"}', "x")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: x: CRC-32 mismatch (the line is damaged)
    """
    match = _CRC_TAIL.search(line)
    if match is None:
        raise CorruptDatasetError(f"{where}: no CRC-32 at the end of the line")
    prefix = line[: match.start()]
    if zlib.crc32(prefix) != int(match.group(1), 16):
        raise CorruptDatasetError(f"{where}: CRC-32 mismatch (the line is damaged)")
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise CorruptDatasetError(f"{where} is not valid JSON: {err}") from err
    if not isinstance(obj, dict):
        raise CorruptDatasetError(f"{where}: expected a JSON object")
    obj.pop("crc32", None)
    return obj


def line_crc(line: bytes) -> str:
    """The CRC-32 a sealed line ends with, as its 8 hex digits (checked by ``unseal_line``).

    Example:
        >>> line_crc(seal_line({"v": 2}))
        '3161982c'
    """
    return line.rstrip(b"\n")[-10:-2].decode("ascii")


def check_follows(obj: dict[str, Any], before: str, where: str) -> None:
    """Checks a shard line's ``prev``: the CRC-32 of the line it was appended after.

    Each line is sealed on its own, so a lost or moved middle line would leave every line
    valid; the chain catches it. Lines of writers before the chain have no ``prev``.

    Raises:
        CorruptDatasetError: ``prev`` names another line: a line before it is missing or
            out of order.

    Example:
        >>> check_follows({"v": 2, "prev": "3161982c"}, "3161982c", "line 2")
        >>> check_follows({"v": 2, "prev": "00000000"}, "3161982c", "line 2")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: line 2 was appended after another line than \
the one before it: a manifest line is missing or out of order
    """
    prev = obj.pop("prev", None)
    if prev is not None and prev != before:
        raise CorruptDatasetError(
            f"{where} was appended after another line than the one before it: a manifest "
            "line is missing or out of order"
        )


def chained_line(fd: int, obj: dict[str, Any]) -> bytes:
    """The sealed line of ``obj``, naming the last line of the manifest open at ``fd``.

    Only while no writer appends (the caller holds the manifest's flock), after
    :func:`mend_tail`: the file ends with a whole line.

    Example:
        >>> import tempfile
        >>> fd, name = tempfile.mkstemp(); os.close(fd); fd = os.open(name, os.O_RDWR | os.O_APPEND)
        >>> _ = os.write(fd, seal_line({"v": 2}))
        >>> unseal_line(chained_line(fd, {"v": 2}), "x"); os.close(fd)
        {'v': 2, 'prev': '3161982c'}
    """
    end = os.lseek(fd, 0, os.SEEK_END)
    seal = _LAST_SEAL.search(os.pread(fd, 32, max(end - 32, 0)))
    if seal is None:
        raise CorruptDatasetError(f"{MANIFEST_FILE}: the last line has no CRC-32 seal")
    return seal_line({**obj, "prev": seal.group(1).decode("ascii")})


def whole_line(tail: bytes, where: str) -> bool:
    """Whether a last line without its newline was written whole (False: a torn prefix).

    Raises:
        CorruptDatasetError: The tail holds a line's seal but fails its CRC-32, or goes on
            after it: no append writes that, so it is damage.

    Example:
        >>> line = seal_line({"v": 2})
        >>> whole_line(line[:-1], "x"), whole_line(line[:5], "x")
        (True, False)
        >>> whole_line(line[:-1] + b"J", "x")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: x: a whole line followed by other bytes instead \
of its newline (damaged)
    """
    seal = _SEAL.search(tail)
    if seal is None:
        return False
    if seal.end() != len(tail):
        raise CorruptDatasetError(
            f"{where}: a whole line followed by other bytes instead of its newline (damaged)"
        )
    unseal_line(tail, where)
    return True


def mend_tail(fd: int, *, sync: bool = True) -> None:
    r"""Makes the manifest open at ``fd`` end in a newline before a line is appended.

    A torn last line (a killed writer's) is cut off; a whole line that only lacks its newline
    gets it back (it is committed: readers count it). Only while no writer appends (the
    caller holds the manifest's flock, or is alone).

    Raises:
        CorruptDatasetError: The last line is damaged (see :func:`whole_line`).

    Example:
        >>> import tempfile; from pathlib import Path
        >>> fd, name = tempfile.mkstemp(); os.close(fd); fd = os.open(name, os.O_RDWR | os.O_APPEND)
        >>> _ = os.write(fd, seal_line({"v": 2})[:-1]); mend_tail(fd, sync=False)
        >>> Path(name).read_bytes()
        b'{"v": 2,"crc32":"3161982c"}\n'
        >>> _ = os.write(fd, b'{"v": 2, "sh'); mend_tail(fd, sync=False); os.close(fd)
        >>> Path(name).read_bytes()
        b'{"v": 2,"crc32":"3161982c"}\n'
    """
    end = os.lseek(fd, 0, os.SEEK_END)
    if not end or os.pread(fd, 1, end - 1) == b"\n":
        return  # the usual case: the last append completed
    start = end
    while start > 0:  # back to the byte after the last newline, a block at a time
        block = os.pread(fd, min(start, 1 << 20), start - min(start, 1 << 20))
        newline = block.rfind(b"\n")
        if newline >= 0:
            start -= len(block) - newline - 1
            break
        start -= len(block)
    if whole_line(os.pread(fd, end - start, start), f"{MANIFEST_FILE} last line"):
        os.pwrite(fd, b"\n", end)
    else:
        os.ftruncate(fd, start)
    if sync:
        os.fsync(fd)


def seal_lines(objs: list[dict[str, Any]]) -> bytes:
    r"""A whole manifest: the header ``objs[0]``, then each line chained to the one before.

    For tools that write a manifest at once (a writer appends with :func:`chained_line`).

    Example:
        >>> raw = seal_lines([{"format": "episodes-dataset"}, {"v": 2}])
        >>> second = raw.split(b"\n")[1]
        >>> unseal_line(second, "line 2")["prev"] == line_crc(raw.split(b"\n")[0])
        True
    """
    lines = [seal_line(objs[0])] if objs else []
    for obj in objs[1:]:
        lines.append(seal_line({**obj, "prev": line_crc(lines[-1])}))
    return b"".join(lines)

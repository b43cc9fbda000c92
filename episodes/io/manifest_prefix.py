"""Parsing a v2 manifest's lines, resuming after the lines this process parsed before.

A manifest only grows: a commit appends one line, and the only other change is a writer cutting
a torn last line (never a whole one). A process that opens the same dataset again and again (a
Ray worker running a read or a write task per shard, every ``DatasetWriter`` of a sink, a
trainer reopening its dataset) would parse and check every line at each open, so N opens of an
N-shard dataset cost N squared lines. :func:`parse_manifest` keeps what it found in the whole
lines it parsed; a later call on bytes that start with exactly those bytes takes it and parses
the lines after them only. Bytes that differ anywhere in that prefix (damage, a dataset
replaced under the same path) are parsed from the start, and their damage raised.

The comparison is of bytes, not of a checksum, so resuming gives exactly what a parse from the
start gives. At most :data:`MAX_KEPT` manifests are kept (the most recently read), none larger
than :data:`MAX_KEPT_BYTES`: what is kept is about what the parsed entries hold anyway.

Example:
    >>> from episodes.io.manifest_lines import seal_line
    >>> header = seal_line({"format": "x"})
    >>> line = seal_line({"n": 1, "prev": line_crc(header)})
    >>> parse = (lambda obj, where: obj), (lambda obj, where: (obj, str(obj["n"]), True))
    >>> parse_manifest("/data/a", header + line, *parse)[1:]
    ([{'n': 1}], 83, False)
    >>> known_lines("/data/a")  # parsed once: a longer manifest resumes after them
    2
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from episodes.io.errors import CorruptDatasetError
from episodes.io.format import MANIFEST_FILE
from episodes.io.kept_manifests import KeptManifests
from episodes.io.manifest_lines import check_follows, line_crc, unseal_line, whole_line

__all__ = ["MAX_KEPT", "MAX_KEPT_BYTES", "forget", "known_lines", "parse_manifest"]

MAX_KEPT = 8
MAX_KEPT_BYTES = 64 << 20

#: ``(object, where) -> header``: checks the header line's object.
HeaderParser = Callable[[Any, str], dict[str, Any]]
#: ``(object, where) -> (entry, name, shareable)``: checks a shard line's object (names must
#: not repeat); ``shareable`` says that the entry holds nothing a caller could change, so that
#: every later read may be handed the same object (else the line is parsed again for each).
LineParser = Callable[[Any, str], tuple[Any, str, bool]]


@dataclass(frozen=True)
class _Prefix:
    raw: bytes  # whole lines, the last ending with its newline
    header_line: bytes  # parsed again for each read: every caller gets its own header
    entries: tuple[Any, ...]
    unshared: tuple[tuple[int, bytes], ...]  # (position, line) of entries parsed per read
    names: frozenset[str]
    last_crc: str  # what the next line's "prev" names


_kept = KeptManifests[_Prefix](MAX_KEPT)


def parse_manifest(
    key: str, raw: bytes, parse_header: HeaderParser, parse_line: LineParser, *, label: str = ""
) -> tuple[dict[str, Any], list[Any], int, bool]:
    """``(header, entries, valid byte prefix, torn tail)`` of the manifest bytes ``raw``.

    ``key`` names the manifest (its absolute path; ``label``: its path in messages). A last
    line without its newline is torn and ignored, unless it is a whole sealed line: that one is
    read. Each line's seal and its ``prev`` are checked, then the parsers. The header, and every
    entry its parser did not call shareable, come back as the caller's own objects.

    Raises:
        CorruptDatasetError: No header line, a damaged line, a line that does not follow the
            one before it, or a shard named twice (and whatever the parsers raise).

    Example:
        >>> from episodes.io.manifest_lines import seal_line
        >>> header = seal_line({"format": "x"})
        >>> parse = (lambda obj, where: obj), (lambda obj, where: (obj, "a", False))
        >>> parse_manifest("/data/b", header + header[:9], *parse)[2:]  # a torn last line
        (35, True)
    """
    known = _kept.get(key)
    if known is not None and not raw.startswith(known.raw):
        known = None
    start = 0 if known is None else len(known.raw)
    lines = raw[start:].split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    number = 1 if known is None else 2 + len(known.entries)  # of the first line parsed here
    if tail and whole_line(tail, f"{MANIFEST_FILE} line {number + len(lines) - 1}"):
        complete, tail = lines, b""  # counted below as if its newline were there
    ended = len(lines) - 1  # how many lines of ``complete`` end with a newline
    header_where = f"{MANIFEST_FILE} line 1"
    if known is None:
        if not complete:
            raise CorruptDatasetError(
                f"{label or MANIFEST_FILE} has no header line (empty, or cut inside its first "
                "line): the shards are intact, but nothing reads them without it; put the "
                "manifest back from a copy of the dataset (docs: format.md, after a failure)"
            )
        # Checked before its CRC is taken for the next line's ``prev``: a damaged seal is
        # the CorruptDatasetError of unseal_line.
        header = parse_header(unseal_line(complete[0], header_where), MANIFEST_FILE)
        known = _Prefix(b"", complete[0], (), (), frozenset(), line_crc(complete[0]))
        good = len(complete[0]) + 1
        complete, ended, number = complete[1:], ended - 1, 2
    else:
        good = start
        header = parse_header(unseal_line(known.header_line, header_where), MANIFEST_FILE)
    entries, before = list(known.entries), known.last_crc
    for position, line in known.unshared:
        where = f"{MANIFEST_FILE} line {position + 2}"
        obj = unseal_line(line, where)
        obj.pop("prev", None)  # checked when the line was first read
        entries[position] = parse_line(obj, where)[0]
    names: list[str] = []  # of the lines parsed here, in order
    named: set[str] = set()
    unshared: list[tuple[int, bytes]] = []
    kept = (good, before, len(entries)) if ended >= 0 else None  # the prefix to keep
    # Every piece is a few objects that live on: the cyclic collector would walk them again
    # and again while they are built (as parse_json pauses it for a large index).
    pause = len(raw) - start > 1 << 20 and gc.isenabled()
    if pause:
        gc.disable()
    try:
        for k, line in enumerate(complete):
            where = f"{MANIFEST_FILE} line {number + k}"
            obj = unseal_line(line, where)
            check_follows(obj, before, where)
            before = line_crc(line)
            entry, name, shareable = parse_line(obj, where)
            if name in known.names or name in named:
                raise CorruptDatasetError(f"{MANIFEST_FILE} lists shard {name!r} twice")
            names.append(name)
            named.add(name)
            if not shareable:
                unshared.append((len(entries), line))
            entries.append(entry)
            good += len(line) + 1
            if k < ended:
                kept = (good, before, len(entries))
    finally:
        if pause:
            gc.enable()
    if kept is not None and kept[0] > start:
        end, last_crc, count = kept
        _keep(key, known, raw[:end], entries[:count], names, unshared, last_crc)
    return header, entries, min(good, len(raw)), bool(tail)


def _keep(
    key: str,
    known: _Prefix,
    raw: bytes,
    entries: list[Any],
    names: list[str],
    unshared: list[tuple[int, bytes]],
    last_crc: str,
) -> None:
    """Keeps the prefix ``raw`` of ``key``'s manifest (its first ``len(entries)`` shards)."""
    if len(raw) > MAX_KEPT_BYTES:
        forget(key)
        return
    count = len(entries)
    fresh = names[: count - len(known.entries)]
    private = known.unshared + tuple(u for u in unshared if u[0] < count)
    # An unshared entry kept here is never handed out again: each read parses its own.
    prefix = _Prefix(
        raw, known.header_line, tuple(entries), private, known.names.union(fresh), last_crc
    )
    _kept.put(key, prefix)


def known_lines(key: str) -> int:
    """How many lines of ``key``'s manifest are kept (0: none; the header counts).

    Example:
        >>> known_lines("/nowhere")
        0
    """
    known = _kept.peek(key)
    return 0 if known is None else 1 + len(known.entries)


def forget(key: str | None = None) -> None:
    """Drops what is kept of ``key``'s manifest (of every manifest when None).

    Example:
        >>> forget("/data/a"); known_lines("/data/a")
        0
    """
    _kept.drop(key)

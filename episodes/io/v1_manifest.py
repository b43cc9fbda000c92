"""Reading a format v1 manifest, and what an ``EpisodeWriter`` needs of it, resuming.

``manifest.jsonl`` only grows: a commit appends one line, and the only other change is a
writer cutting a torn last line (never a whole one). An ``EpisodeWriter`` opening a dataset
needs the chunks it lists (a chunk directory it does not list is a killed writer's leftover)
and the next sequence number; parsing and checking every line at each open made one writer
per appended episode cost N squared lines. :func:`listed_chunks` keeps what it found in the
whole lines it parsed; a later call on a manifest that starts with exactly those bytes parses
the lines after them only. Bytes that differ anywhere in that prefix (damage, a dataset
replaced under the same path) are parsed from the start, and their damage raised: the
comparison is of bytes, so resuming gives exactly what a parse from the start gives.

At most :data:`MAX_KEPT` manifests are kept (the most recently read), none larger than
:data:`MAX_KEPT_BYTES`, each with the names of the chunks it lists.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import EpisodeWriter
    >>> path = Path(tempfile.mkdtemp())
    >>> with EpisodeWriter(path) as w:
    ...     _ = w.write_many([SingleAgentEpisode(observations=[0])] * 2)
    >>> listed_chunks(path).next_seq, known_lines(str(path))  # 2 lines parsed, and kept
    (2, 2)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import filterfalse
from pathlib import Path

from episodes.io.errors import CorruptDatasetError
from episodes.io.format import (
    CHUNK_NAME,
    CHUNKS_DIR,
    MANIFEST_FILE,
    MAX_JSON_BYTES,
    TMP_PREFIX,
    ManifestEntry,
    read_regular_file,
)
from episodes.io.kept_manifests import KeptManifests

__all__ = [
    "MAX_KEPT",
    "MAX_KEPT_BYTES",
    "ListedChunks",
    "check_torn",
    "forget",
    "known_lines",
    "listed_chunks",
    "manifest_entries",
    "read_manifest",
]

MAX_KEPT = 8
MAX_KEPT_BYTES = 64 << 20
_IN_CHUNKS = f"{CHUNKS_DIR}/"  # what every chunk path a writer makes starts with
_CUT = len(_IN_CHUNKS)


def read_manifest(root: Path) -> tuple[list[ManifestEntry], int, bool]:
    """Reads the committed entries of ``root/manifest.jsonl``.

    A writer appends each line whole, its newline last: a final line without its newline (a
    writer killed mid-append) is ignored as torn. A line that ends in a newline was appended
    whole, so if it does not parse it is damaged, the last one too (taking it for torn would
    let the next writer cut it off and delete its chunk).

    Returns:
        ``(entries, good_bytes, torn)``: the entries, the byte length of the valid prefix and
        whether a torn tail was ignored.

    Raises:
        CorruptDatasetError: A complete line is malformed, the final line is a whole JSON value
            followed by other bytes instead of its newline, or a chunk is listed twice.

    Example:
        >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / MANIFEST_FILE).write_text("")
        >>> read_manifest(d)
        ([], 0, False)
    """
    return manifest_entries(read_regular_file(root / MANIFEST_FILE, MANIFEST_FILE, MAX_JSON_BYTES))


def manifest_entries(raw: bytes) -> tuple[list[ManifestEntry], int, bool]:
    """:func:`read_manifest` of the manifest's bytes ``raw``, already read.

    Example:
        >>> manifest_entries(b'{"v": 1, "chu')  # a torn first line
        ([], 0, True)
    """
    entries, good, torn = _parse(raw, 0, 1)
    seen: set[str] = set()
    for entry in entries:
        if entry.chunk in seen:
            raise CorruptDatasetError(f"{MANIFEST_FILE} lists chunk {entry.chunk!r} twice")
        seen.add(entry.chunk)
    return entries, good, torn


def _parse(raw: bytes, start: int, first: int) -> tuple[list[ManifestEntry], int, bool]:
    """``read_manifest`` of the lines of ``raw[start:]`` (line ``first`` on), no twice check."""
    lines = raw[start:].split(b"\n")
    # ``raw`` ends with "\n" when complete, so the last element is b"" (or a torn tail).
    complete, tail = lines[:-1], lines[-1]
    entries: list[ManifestEntry] = []
    good = start
    for number, line in enumerate(complete, start=first):
        where = f"{MANIFEST_FILE} line {number}"
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            raise CorruptDatasetError(f"{where} is not valid JSON: {err}") from err
        entries.append(ManifestEntry.from_json(obj, where))
        good += len(line) + 1
    if tail:
        check_torn(tail, f"{MANIFEST_FILE} line {first + len(complete)}")
    return entries, good, bool(tail)


def check_torn(tail: bytes, where: str) -> None:
    r"""Raises unless ``tail``, a final line without its newline, can be a torn append.

    A killed writer leaves a prefix of ``{...}\n``. A whole JSON value followed by other bytes
    is no such prefix: the line was written whole and its newline was damaged since.

    Example:
        >>> check_torn(b'{"v": 1, "chu', "line 3")  # a prefix: torn
        >>> try:
        ...     check_torn(b'{"v": 1}J', "line 3")  # the newline damaged: 0x0a -> 0x4a
        ... except CorruptDatasetError as err:
        ...     print(err)
        line 3: a whole line followed by other bytes instead of its newline (damaged)
    """
    # Undecodable bytes become U+FFFD: a damaged newline may be no UTF-8 at all (0x8a).
    text = tail.decode("utf-8", errors="replace")
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return
    if end < len(text):
        raise CorruptDatasetError(
            f"{where}: a whole line followed by other bytes instead of its newline (damaged)"
        )


@dataclass(frozen=True)
class ListedChunks:
    """What a v1 manifest lists, for a writer opening the dataset.

    Attributes:
        names: The ``NAME`` of every ``chunks/NAME`` listed.
        temporary: Those of them named like a chunk being written (no writer lists one; it
            is removed as a leftover all the same, as it always was).
        next_seq: The next chunk's sequence number: one past the largest listed (0 if none).
        good: The byte length of the manifest's valid prefix (its whole lines).
        torn: Whether a torn last line follows that prefix (the writer cuts it).

    Example:
        >>> listed = ListedChunks(frozenset({"00000000-0badcafe"}), frozenset(), 1, 220, False)
        >>> listed.leftovers(["00000000-0badcafe", "00000001-0badcafe", ".tmp-x", "notes"])
        ['.tmp-x', '00000001-0badcafe']
    """

    names: frozenset[str]
    temporary: frozenset[str]
    next_seq: int
    good: int
    torn: bool

    def leftovers(self, present: Iterable[str]) -> list[str]:
        """The names of ``present`` (in ``chunks/``) that killed writers left, sorted.

        That is, temporary names, and chunk names the manifest does not list (each name
        looked up at C speed, not in a Python loop). Example: see the class.
        """
        present = list(present)
        unlisted = set(filterfalse(self.names.__contains__, present))  # at C speed
        unlisted.update(self.temporary.intersection(present))
        return sorted(n for n in unlisted if n.startswith(TMP_PREFIX) or CHUNK_NAME.match(n))


@dataclass(frozen=True)
class _Known:
    raw: bytes  # whole lines, the last ending with its newline
    lines: int
    names: frozenset[str]
    next_seq: int


_NOTHING = _Known(b"", 0, frozenset(), 0)
_kept = KeptManifests[_Known](MAX_KEPT)


def listed_chunks(root: Path) -> ListedChunks:
    """What ``root/manifest.jsonl`` lists, parsing only the lines this process has not seen.

    The same checks and errors as :func:`read_manifest` (a chunk path without a ``/``, or a
    chunk name not starting with a number, raises as the writer always did); the lines of a
    kept prefix were checked when it was parsed.

    Example:
        >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / MANIFEST_FILE).write_text("")
        >>> listed_chunks(d)
        ListedChunks(names=frozenset(), temporary=frozenset(), next_seq=0, good=0, torn=False)
    """
    raw = read_regular_file(root / MANIFEST_FILE, MANIFEST_FILE, MAX_JSON_BYTES)
    key = str(root)
    known = _kept.get(key) or _NOTHING
    if not raw.startswith(known.raw):
        known = _NOTHING
    entries, good, torn = _parse(raw, len(known.raw), known.lines + 1)
    seen: set[str] = set()
    for entry in entries:  # every kept chunk path is ``chunks/NAME``: the name says it
        chunk = entry.chunk
        if chunk in seen or (chunk.startswith(_IN_CHUNKS) and chunk[_CUT:] in known.names):
            raise CorruptDatasetError(f"{MANIFEST_FILE} lists chunk {chunk!r} twice")
        seen.add(chunk)
    fresh = [entry.chunk.split("/", 1)[1] for entry in entries]
    next_seq = max([known.next_seq, *(1 + int(name.split("-", 1)[0]) for name in fresh)])
    names = known.names.union(fresh) if fresh else known.names
    # A kept prefix lists no temporary name (a manifest that does is parsed whole each time).
    temporary = frozenset(name for name in fresh if name.startswith(TMP_PREFIX))
    if fresh:
        mine = _Known(raw[:good], known.lines + len(fresh), names, next_seq)
        keepable = not temporary and all(chunk.startswith(_IN_CHUNKS) for chunk in seen)
        _keep(key, mine, keepable)
    return ListedChunks(names, temporary, next_seq, good, torn)


def _keep(key: str, known: _Known, keepable: bool) -> None:
    """Keeps ``known`` for ``key``, unless too large or holding a path no writer makes."""
    if not keepable or len(known.raw) > MAX_KEPT_BYTES:
        _kept.drop(key)
    else:
        _kept.put(key, known)


def known_lines(key: str) -> int:
    """How many lines of the manifest of the dataset at ``key`` (its path) are kept.

    Example:
        >>> known_lines("/nowhere")
        0
    """
    return (_kept.peek(key) or _NOTHING).lines


def forget(key: str | None = None) -> None:
    """Drops what is kept of ``key``'s manifest (of every manifest when None).

    Example:
        >>> forget("/data/a"); known_lines("/data/a")
        0
    """
    _kept.drop(key)

"""A shard's index (``NAME.json``): checked against its manifest line, entries parsed when read.

An index lists one entry per episode piece (about 1.4 KiB each): a shard of 32k pieces has an
index of 45 MB, millions of Python objects once parsed whole. Holding them made every later
pass of the cyclic garbage collector walk them all (0.5 s each), and parsing them whole is
most of the cost of reading one episode. :func:`read_index` goes through the JSON text once:
each piece's entry is parsed, checked against the manifest's summary of the piece (row range,
id, time range, flags) and dropped, keeping only where it starts; :class:`IndexEntries` parses
an entry again when a read needs it. The checks, their order and their errors are those of a
whole parse; a text this scan does not expect (not an object, ``episodes`` twice or not an
array, anything malformed) is parsed whole instead, so malformed JSON raises as it always did.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import Dataset, DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
    >>> shard, _ = Dataset(path).locate(0)
    >>> raw = (shard.path.parent / f"{shard.entry.name}.json").read_bytes()
    >>> index, firsts, counts = read_index(raw, shard.entry, "shard x")
    >>> len(index["episodes"]), index["episodes"][1]["meta"]["id"], list(firsts), list(counts)
    (2, 'b', [0, 1], [1, 1])
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

from episodes.io.errors import CorruptDatasetError
from episodes.io.fork_lock import ForkLock
from episodes.io.format import FORMAT_NAME, MAX_INT64, parse_json
from episodes.io.shards import (
    DATA_SUFFIX,
    V2,
    EpisodeRow,
    ShardEntry,
    holds_immutable_ids,
    summarises,
)

__all__ = [
    "MAX_CHECKED_BYTES",
    "MAX_CHECKED_MEMORY",
    "IndexEntries",
    "checked_indexes",
    "checked_memory",
    "forget_checked",
    "read_index",
]

_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as the json module skips it
_WS_CHARS = (" ", "\t", "\n", "\r")
# json.loads's defaults (NaN and Infinity read as floats); raw_decode(text, i) parses one value.
_SCAN = json.JSONDecoder().raw_decode
_CACHED = 16  # entries kept parsed per shard: a read parses its episode's entry once
#: Bytes of shard indexes (their text) whose checked scans a process keeps (the most recent).
#: A second bound, on the text alone: the memory a scan is counted at (MAX_CHECKED_MEMORY's)
#: is its text and more, so at equal values this one never binds; lower it to keep less text.
MAX_CHECKED_BYTES = 64 << 20
#: Bytes of memory the kept scans may hold, estimated (``checked_memory``): the index text, the
#: row arrays and the manifest entry each keeps alive (its rows and ids), 1.2x to 1.8x the text
#: alone. This is the bound on the cache's memory; the least recently read scans go first.
MAX_CHECKED_MEMORY = 64 << 20
# What a kept scan holds beyond its index text, its row arrays' items and its pieces' ids
# (counted with sys.getsizeof), measured with tracemalloc as what forget_checked() frees
# (CPython 3.11, 1 to 1,024 pieces a shard): about 1,050 bytes a scan (the _Checked, the
# arrays' headers, the manifest entry's name and checksum) and 230 a piece (its EpisodeRow,
# return and times); rounded up, so the estimate is a bound.
_SCAN_BYTES = 1200
_ROW_BYTES = 240


class IndexEntries(Sequence[Any]):
    """The index's ``episodes`` list: each entry parsed from the index text when read.

    Example:
        >>> entries = IndexEntries('{"episodes": [{"rows": [0, 2]}, [7]]}', array("q", [14, 32]))
        >>> len(entries), entries[0], entries[-1], entries[0] is entries[0]
        (2, {'rows': [0, 2]}, [7], True)
        >>> entries[-3]
        Traceback (most recent call last):
        ...
        IndexError: index entry -1 out of range for 2
    """

    def __init__(self, text: str, starts: array[int]):
        self._text, self._starts = text, starts
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def starts(self) -> array[int]:
        """Where each entry starts in the text (shared: do not change it).

        Example:
            >>> IndexEntries('[{"a": 1}, {"b": 2}]', array("q", [1, 11])).starts.tolist()
            [1, 11]
        """
        return self._starts

    @overload
    def __getitem__(self, j: int) -> Any: ...

    @overload
    def __getitem__(self, j: slice) -> list[Any]: ...

    def __getitem__(self, j: int | slice) -> Any:
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        if j < 0:
            j += len(self)
        entry = self._cache.get(j)
        if entry is None:
            if not 0 <= j < len(self):
                raise IndexError(f"index entry {j} out of range for {len(self)}")
            entry = _SCAN(self._text, self._starts[j])[0]
            if len(self._cache) >= _CACHED:
                self._cache.clear()
            self._cache[j] = entry
        return entry


def read_index(
    raw: bytes, entry: ShardEntry, where: str, *, whole: bool = False
) -> tuple[dict[str, Any], array[int], array[int]]:
    """Parses and checks a shard's index (its bytes already matched the manifest's SHA-256).

    ``whole`` parses the index into objects at once and keeps them, for a reader that goes
    through every episode of the shard (each entry is then parsed once, not twice).

    Returns:
        ``(index, firsts, counts)``: the index (``episodes`` an :class:`IndexEntries`, or a
        list when parsed whole), and each piece's first row and row count.

    Raises:
        CorruptDatasetError: The index is not valid JSON, is malformed, or disagrees with the
            manifest line.

    Example:
        >>> from episodes.io.shards import ShardEntry
        >>> shard = ShardEntry("0123456789abcdef", "arrow", "0" * 64, 2, 0, ())
        >>> read_index(b"[]", shard, "shard x")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: shard x: the index is not an \
'episodes-dataset' shard index
    """
    check = _PieceCheck(entry.episodes, where)
    index: Any
    known = None if whole else _checked_before(raw, entry)
    try:
        if whole:
            raise _Unexpected
        index = _scan(raw.decode("utf-8"), check, known)
    except (_Unexpected, UnicodeDecodeError):
        check = _PieceCheck(entry.episodes, where)
        index = parse_json(raw, f"{where} index")
        episodes = index.get("episodes") if isinstance(index, dict) else None
        if isinstance(episodes, list):
            for i, item in enumerate(episodes):
                check(i, item)
    _check_top(index, entry, where)
    if check.failure is not None:
        raise CorruptDatasetError(check.failure)
    if check.start != index["data"]["rows"]:
        raise CorruptDatasetError(f"{where}: episode rows do not add up to the shard's rows")
    if known is None and not whole and isinstance(index["episodes"], IndexEntries):
        _remember(raw, entry, index["episodes"], check)
    return index, check.firsts, check.counts


class _Unexpected(Exception):
    """The text is not an index as the writer writes it: parse it whole."""


def _scan(text: str, check: _PieceCheck, known: _Checked | None = None) -> dict[str, Any]:
    """The top-level object, its ``episodes`` array scanned entry by entry.

    ``known`` is this text's array as checked before: the array is not scanned again.
    """
    i = _skip(text, 0)
    if text[i : i + 1] != "{":
        raise _Unexpected
    top: dict[str, Any] = {}
    i = _skip(text, i + 1)
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                raise _Unexpected
            key, i = _value(text, i)
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                raise _Unexpected
            i = _skip(text, i + 1)
            if key == "episodes" and key in top:
                raise _Unexpected  # json.loads keeps the last: rare enough to parse whole
            if key == "episodes" and known is not None and i == known.opens:
                top[key], i = known.entries(text, check)
            elif key == "episodes" and text[i : i + 1] == "[":
                top[key], i = _scan_entries(text, i, check)
            else:
                top[key], i = _value(text, i)
            i = _skip(text, i)
            if text[i : i + 1] == ",":
                i = _skip(text, i + 1)
            elif text[i : i + 1] == "}":
                i += 1
                break
            else:
                raise _Unexpected
    if _skip(text, i) != len(text):
        raise _Unexpected
    if not isinstance(top.get("episodes"), IndexEntries):
        raise _Unexpected
    return top


def _scan_entries(text: str, i: int, check: _PieceCheck) -> tuple[IndexEntries, int]:
    """The array starting at ``text[i]``: each entry checked, then only its start kept."""
    scan = _SCAN
    starts = array("q")
    check.opens = i
    i = _skip(text, i + 1)
    if text[i : i + 1] == "]":
        check.closes = i + 1
        return IndexEntries(text, starts), i + 1
    try:
        while True:
            item, end = scan(text, i)
            check(len(starts), item)
            starts.append(i)
            # The writer's separator first: one comparison instead of two matches.
            if text.startswith(", ", end) and text[end + 2 : end + 3] not in _WS_CHARS:
                i = end + 2
                continue
            i = _skip(text, end)
            if text[i : i + 1] == ",":
                i = _skip(text, i + 1)
            elif text[i : i + 1] == "]":
                check.closes = i + 1
                return IndexEntries(text, starts), i + 1
            else:
                raise _Unexpected
    except (ValueError, RecursionError) as err:
        raise _Unexpected from err


def _skip(text: str, i: int) -> int:
    """Where the first character at or after ``i`` that is no JSON whitespace is."""
    match = _WS.match(text, i)
    assert match is not None  # the pattern matches the empty string too
    return match.end()


def _value(text: str, i: int) -> tuple[Any, int]:
    try:
        value, end = _SCAN(text, i)
    except (ValueError, RecursionError) as err:
        raise _Unexpected from err
    return value, end


class _PieceCheck:
    """Checks entries one at a time, as a whole parse's loop did, keeping the first failure.

    It is raised after the index's own checks (the failure a whole parse met first).
    """

    def __init__(self, rows: tuple[EpisodeRow, ...], where: str):
        self.rows, self.where = rows, where
        self.start = 0
        self.failure: str | None = None
        # Plain arrays, not a tuple per piece: a shard may hold 100k pieces.
        self.firsts, self.counts = array("q"), array("q")
        self.opens = self.closes = -1  # where the scanned ``episodes`` array starts and ends

    def __call__(self, i: int, item: Any) -> None:
        if self.failure is not None or i >= len(self.rows):
            return  # more entries than rows: the count check fails first
        rows = item.get("rows") if isinstance(item, dict) else None
        if not (isinstance(rows, list) and len(rows) == 2 and _plain_ints(*rows)):
            self.failure = f"{self.where}: episode {i} has a malformed row range"
            return
        first, count = rows
        # Row numbers are int64 further on (the plain arrays below, Arrow's offsets).
        if first != self.start or count < 0 or count > MAX_INT64 - first:
            self.failure = f"{self.where}: episode {i} has a malformed row range"
            return
        if not summarises(item.get("meta"), self.rows[i]):  # a forged manifest row
            self.failure = (
                f"{self.where}: episode {i}'s id, t_started/t or flags disagree with the manifest"
            )
            return
        self.firsts.append(first)
        self.counts.append(count)
        self.start += count


def _plain_ints(first: Any, count: Any) -> bool:
    """Whether both are ints and neither a bool (``type`` first: JSON ints pass at once)."""
    return (type(first) is int or (isinstance(first, int) and not isinstance(first, bool))) and (
        type(count) is int or (isinstance(count, int) and not isinstance(count, bool))
    )


def _check_top(index: Any, entry: ShardEntry, where: str) -> None:
    """The index's own fields, in the order a reader has always checked them."""
    if not isinstance(index, dict) or index.get("format") != FORMAT_NAME:
        raise CorruptDatasetError(f"{where}: the index is not an {FORMAT_NAME!r} shard index")
    if type(index.get("version")) is not int or index["version"] != V2:  # not 2.0, not True
        raise CorruptDatasetError(f"{where}: index version {index.get('version')!r} is not 2")
    data, episodes = index.get("data"), index.get("episodes")
    if not isinstance(data, dict) or not isinstance(episodes, (list, IndexEntries)):
        raise CorruptDatasetError(f"{where}: the index lacks 'data' or 'episodes'")
    if not isinstance(index.get("spaces"), list):
        raise CorruptDatasetError(f"{where}: the index lacks 'spaces'")
    ints = all(
        isinstance(data.get(k), int)
        and not isinstance(data.get(k), bool)
        and 0 <= data[k] <= MAX_INT64
        for k in ("size", "crc32", "rows")
    )
    name = f"{entry.name}{DATA_SUFFIX[entry.data_format]}"
    if not ints or data.get("file") != name or data.get("format") != entry.data_format:
        raise CorruptDatasetError(f"{where}: malformed 'data' entry in the index")
    if data["size"] != entry.data_size or len(episodes) != len(entry.episodes):
        raise CorruptDatasetError(f"{where}: the index disagrees with the manifest")


@dataclass(frozen=True)
class _Checked:
    """What a scan found in an index's ``episodes`` array, for the same bytes and entry."""

    entry: ShardEntry  # held: its ``id`` keys the cache and is not reused while it lives
    raw: bytes
    opens: int
    closes: int
    starts: array[int]
    firsts: array[int]
    counts: array[int]
    rows: int
    memory: int  # estimated bytes it holds (what _memory counts)

    def entries(self, text: str, check: _PieceCheck) -> tuple[IndexEntries, int]:
        """The array as scanning gave it, ``check`` left as scanning left it.

        The rows' arrays are copies (C-speed): ``read_index`` hands them to its caller.
        """
        check.firsts, check.counts = array("q", self.firsts), array("q", self.counts)
        check.start = self.rows
        check.opens, check.closes = self.opens, self.closes
        return IndexEntries(text, self.starts), self.closes


_checked: OrderedDict[int, _Checked] = OrderedDict()
_held = 0  # bytes of the kept scans' indexes
_held_memory = 0  # what they hold, estimated
_checked_lock = ForkLock()  # a forked child gets a fresh one


def _checked_before(raw: bytes, entry: ShardEntry) -> _Checked | None:
    """The scan of exactly these bytes against this very entry object, if one passed before.

    The checks depend on the bytes and the entry only, so they would pass again; comparing
    bytes (not a checksum) keeps that exact. Entries are shared by a process's reads of a
    manifest (:mod:`episodes.io.manifest_prefix`), so one ``load_episode`` per id no longer
    scans the whole index of the episode's shard each time.
    """
    with _checked_lock:
        known = _checked.get(id(entry))
        if known is None or known.entry is not entry or known.raw != raw:
            return None
        _checked.move_to_end(id(entry))
        return known


def _remember(raw: bytes, entry: ShardEntry, entries: IndexEntries, check: _PieceCheck) -> None:
    # An id that is a list could be changed between reads, and the checks with it.
    if len(raw) > MAX_CHECKED_BYTES or not holds_immutable_ids(entry):
        return
    # Copies: the first caller holds the originals.
    rows = [array("q", entries.starts), array("q", check.firsts), array("q", check.counts)]
    memory = _memory(raw, entry, rows)
    if memory > MAX_CHECKED_MEMORY:
        return
    starts, firsts, counts = rows
    known = _Checked(
        entry, raw, check.opens, check.closes, starts, firsts, counts, check.start, memory
    )
    global _held, _held_memory
    with _checked_lock:
        replaced = _checked.pop(id(entry), None)
        if replaced is not None:
            _held -= len(replaced.raw)
            _held_memory -= replaced.memory
        _checked[id(entry)] = known
        _held += len(raw)
        _held_memory += memory
        # Running totals: a miss costs no walk of the rest.
        while _held > MAX_CHECKED_BYTES or _held_memory > MAX_CHECKED_MEMORY:
            _, oldest = _checked.popitem(last=False)
            _held -= len(oldest.raw)
            _held_memory -= oldest.memory


def _memory(raw: bytes, entry: ShardEntry, rows: list[array[int]]) -> int:
    """The bytes a kept scan of ``raw`` against ``entry`` holds, estimated (an upper bound)."""
    pieces = entry.episodes
    ids = sum(map(sys.getsizeof, [row.id_ for row in pieces]))  # str, int, float, bool, None
    items = sum(a.itemsize * len(a) for a in rows)
    return len(raw) + _SCAN_BYTES + items + len(pieces) * _ROW_BYTES + ids


def checked_indexes() -> int:
    """How many shard indexes' checked scans this process keeps.

    Example:
        >>> forget_checked(); checked_indexes()
        0
    """
    with _checked_lock:
        return len(_checked)


def checked_memory() -> int:
    """The bytes of memory the kept scans hold, estimated; at most ``MAX_CHECKED_MEMORY``.

    Example:
        >>> forget_checked(); checked_memory()
        0
    """
    with _checked_lock:
        return _held_memory


def forget_checked() -> None:
    """Drops every kept scan: the next open of each shard checks its whole index again.

    Example:
        >>> forget_checked(); checked_indexes()
        0
    """
    global _held, _held_memory
    with _checked_lock:
        _checked.clear()
        _held = _held_memory = 0

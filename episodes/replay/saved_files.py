"""The two files of a saved replay buffer besides its episodes: ``replay.json`` and priorities.

Both are read as regular files only (never a FIFO, device or symlink, so a load cannot block
or wander out of the save) after their size is checked, and both are checksummed:
``replay.json`` carries the CRC-32 of its own content (``crc32``: its other fields dumped as
canonical JSON, so white space does not count) and of ``priorities.npy``'s bytes
(``priorities_crc32``). A save written before the checksums (version 1) is read without them.
``replay.json``'s ``episodes`` field binds the save's ``episodes/`` dataset to it: the number
of episodes and steps saved, the CRC-32 of their ids in order and that of the dataset's
``manifest.jsonl`` (whose lines carry the SHA-256 of every shard index, whose entries carry the
data's checksums), so episodes appended to the dataset, or another save's dataset put in its
place, are refused. The manifest is compared where ``episodes/`` is a v2 dataset, as every save
that records it writes (a chunk dataset there is compared by the rest). Saves written before
the field load without that check. ``next_uid`` and ``first_uid`` say how a load numbers the
saved steps (:func:`uid_fields`, :func:`loaded_uids`); saves written before them lack them.
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
from episodes.io.format import MANIFEST_FILE, read_regular_file
from episodes.io.npy_read import NPY_HEADER_ERRORS, read_npy_header
from episodes.io.shards import is_v2
from episodes.replay.integers import ITEM_ID_LIMIT

__all__ = [
    "EPISODES",
    "ITEM_IDS",
    "MAX_META_BYTES",
    "META_CRC",
    "PRIORITIES_CRC",
    "check_episodes_record",
    "checked_record",
    "episodes_record",
    "loaded_uids",
    "meta_crc32",
    "priorities_file",
    "read_priorities",
    "read_meta",
    "read_priorities_bytes",
    "read_save_file",
    "seal",
    "uid_fields",
]

META_CRC = "crc32"
EPISODES = "episodes"  # the field binding episodes/ to replay.json
_RECORD = ("count", "steps", "ids_crc32", "manifest_crc32")
_MAX_MANIFEST = 1 << 30  # the dataset reader's own cap on a manifest
PRIORITIES_CRC = "priorities_crc32"
# The evicted ids make replay.json grow with a run (about 40 bytes per uuid id): 4 GiB holds
# some 100 million of them; more is damage (a sparse or runaway file), refused unread.
MAX_META_BYTES = 4 << 30
ITEM_IDS = ("next_uid", "first_uid")  # replay.json's fields of item ids (since 2026-12-06)
_MAX_NPY_HEADER = (1 << 16) + 12  # what np.save writes for any 1-D array, with room to spare


def uid_fields(buffer: Any) -> dict[str, int]:
    """``replay.json``'s item id fields for ``buffer``: its ``next_uid`` and ``first_uid``.

    ``first_uid`` is recorded where the stored steps' ids run on by one in the saved order
    (oldest episode first, each in time order: the rows as a load lays them out), so that a
    load can keep them: it is the first of them.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> uid_fields(buf)
        {'next_uid': 0}
        >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0], actions=[0], rewards=[1.0],
        ...                             len_lookback_buffer=0) for i in "ab"])
        >>> uid_fields(buf)
        {'next_uid': 2, 'first_uid': 0}
    """
    store, table = buffer._store, buffer._table
    fields = {ITEM_IDS[0]: int(store.next_uid)}
    live = np.flatnonzero(store.live[: store.end])
    rows = np.fromiter(table.order.values(), np.int64, len(table.order))  # oldest first
    rank = np.zeros(max(table.size, 1), np.int64)  # each episode row's place among them
    rank[rows] = np.arange(len(rows))
    uids, ranks = store.uid[live], rank[store.ep[live]]
    # Slot order is each episode's time order and the ids rise along it: one run of ids, the
    # episodes one after another.
    if len(live) and uids[-1] - uids[0] == len(live) - 1 and np.all(ranks[1:] >= ranks[:-1]):
        fields[ITEM_IDS[1]] = int(uids[0])
    return fields


def loaded_uids(meta: dict[str, Any]) -> tuple[int, int]:
    """The item id a load numbers the saved steps from, and the least id it issues after them.

    The saved ids where ``first_uid`` was recorded (:func:`uid_fields`); otherwise the steps
    are numbered after every id the saved buffer issued (``next_uid``) and its
    ``added_timesteps`` (all a save written before ``next_uid`` has), so that a batch's
    indices sampled before the save name no loaded step.

    Raises:
        ValueError: A ``next_uid`` or ``first_uid`` that is no int in ``0 .. 2**62 - 1``.

    Example:
        >>> loaded_uids({"counters": {"added_timesteps": 5}, "next_uid": 7})
        (7, 7)
        >>> loaded_uids({"counters": {"added_timesteps": 5}, "next_uid": 7, "first_uid": 3})
        (3, 7)
        >>> loaded_uids({"counters": {"added_timesteps": 5}})  # written before next_uid
        (5, 5)
    """
    for key in ITEM_IDS:
        value = meta.get(key, 0)
        if type(value) is not int or not 0 <= value < ITEM_ID_LIMIT:
            raise ValueError(f"{key}: {value!r} is no item id")
    added = meta["counters"].get("added_timesteps")  # checked later: a guess until then
    issued = max(
        meta.get(ITEM_IDS[0], 0), added if type(added) is int and 0 <= added < ITEM_ID_LIMIT else 0
    )
    return meta.get(ITEM_IDS[1], issued), issued


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


def episodes_record(dataset: Path, ids: list[Any], steps: int) -> dict[str, int]:
    """What identifies the episodes saved in ``dataset``: their ids, count, steps, manifest.

    ``ids`` are JSON-safe (as the dataset encodes them), in order. The manifest's CRC-32 is 0
    where the dataset is no v2 one (a chunk dataset's manifest is not compared).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = Path(tempfile.mkdtemp()) / "episodes"
        >>> DatasetWriter(path).close()
        >>> record = episodes_record(path, [], 0)
        >>> sorted(record), check_episodes_record(record, path, [], 0)
        (['count', 'ids_crc32', 'manifest_crc32', 'steps'], None)
        >>> check_episodes_record(record, path, ["a"], 5)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: episodes/ holds 1 episodes of 5 steps, replay.json records 0 of 0: ...
    """
    crc = 0
    if is_v2(dataset):
        crc = zlib.crc32(read_save_file(dataset / MANIFEST_FILE, _MAX_MANIFEST))
    return {
        "count": len(ids),
        "steps": steps,
        "ids_crc32": zlib.crc32(json.dumps(ids).encode()),
        "manifest_crc32": crc,
    }


def checked_record(record: Any) -> dict[str, int]:
    """``record`` (replay.json's ``episodes`` field), refused unless three ints >= 0.

    Raises:
        ValueError: No dict of ``count``, ``steps`` and ``manifest_crc32``, each an int >= 0
            (no bool), the CRC-32 below ``2**32``.

    Example:
        >>> checked_record({"count": 1, "steps": 2, "manifest_crc32": True})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: episodes: {...'manifest_crc32': True} is no record of saved episodes
    """
    if (
        not isinstance(record, dict)
        or sorted(record) != sorted(_RECORD)
        or not all(type(record[key]) is int and record[key] >= 0 for key in _RECORD)
        or record["manifest_crc32"] >= 1 << 32
    ):
        raise ValueError(f"{EPISODES}: {record!r:.200} is no record of saved episodes")
    return record


def check_episodes_record(record: Any, dataset: Path, ids: list[Any], steps: int) -> None:
    """Refuses a ``record`` that ``dataset``'s episodes and manifest do not match.

    ``ids`` (JSON-safe, in order) and ``steps`` are those of the episodes read from
    ``dataset``; see :func:`episodes_record`.

    Raises:
        ValueError: A malformed record (:func:`checked_record`), or episodes, steps, ids or a
            manifest CRC-32 other than it records.
    """
    record = checked_record(record)
    if (len(ids), steps) != (record["count"], record["steps"]):
        raise ValueError(
            f"episodes/ holds {len(ids)} episodes of {steps} steps, replay.json records "
            f"{record['count']} of {record['steps']}: it is not the dataset saved with replay.json"
        )
    found = episodes_record(dataset, ids, steps)
    for key, what in (("ids_crc32", "episode ids"), ("manifest_crc32", f"{MANIFEST_FILE}")):
        if found[key] != record[key] and (key != "manifest_crc32" or found[key]):
            raise ValueError(
                f"the {what} of episodes/ do not match the CRC-32 replay.json records: it is not "
                "the dataset saved with replay.json"
            )

"""A reader's error on a dataset whose ``unlisted/shards/`` holds files, pointing at ``relist``.

A writer that opens a dataset alone moves the shard files no manifest line lists to
``unlisted/shards/`` (:mod:`episodes.io.quarantine`). Readers never look there, so a manifest
put back whole after such a move names shards they find missing, and an episode whose line was
lost is "not found". Neither error says where the files went; this adds the one sentence.

Example:
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> from episodes.io.errors import CorruptDatasetError
    >>> root = Path(tempfile.mkdtemp()); os.makedirs(root / "unlisted" / "shards")
    >>> _ = (root / "unlisted" / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
    >>> err = with_relist_hint(CorruptDatasetError("shard 0123456789abcdef is missing"), root)
    >>> "`episodes relist" in str(err), type(err).__name__
    (True, 'CorruptDatasetError')
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TypeVar

from episodes.io.errors import CorruptDatasetError, DatasetError
from episodes.io.quarantine import QUARANTINE_DIR, quarantined
from episodes.io.shards import SHARDS_DIR

__all__ = ["hinted_reads", "raise_hinted", "with_relist_hint"]

_E = TypeVar("_E", bound=DatasetError)
_T = TypeVar("_T")


def with_relist_hint(err: _E, path: str | os.PathLike[str]) -> _E:
    """``err``, or a copy saying what ``path``'s ``unlisted/shards/`` holds, if anything.

    Only called once a read failed: it lists one directory. The copy has ``err``'s type, so
    callers catch it as before.

    Example:
        >>> import tempfile
        >>> from episodes.io.errors import EpisodeNotFoundError
        >>> err = EpisodeNotFoundError("no episode 'b'")
        >>> with_relist_hint(err, tempfile.mkdtemp()) is err  # no unlisted/shards/
        True
    """
    if "`episodes relist" in str(err):  # hinted on a deeper level already
        return err
    names = quarantined(path)
    if not names:
        return err
    shards = len({name.split(".", 1)[0] for name in names})
    where = f"{os.fspath(path)}/{QUARANTINE_DIR}/{SHARDS_DIR}/"
    hint = (
        f"{err}; {where} holds {len(names)} file{'s' * (len(names) != 1)} ({shards} "
        f"shard{'s' * (shards != 1)}) that a writer which opened the dataset alone moved out of "
        f"shards/ (lost manifest lines, or a manifest put back whole afterwards): `episodes "
        f"relist {os.fspath(path)}` checks them and moves them back, listing those no line "
        'lists (see "After a failure" in docs/format.md)'
    )
    copy = type(err)(hint)
    copy.__dict__.update(err.__dict__)
    return copy


def raise_hinted(err: DatasetError, path: str | os.PathLike[str]) -> None:
    """Raises :func:`with_relist_hint`'s copy of ``err`` (from ``err``), if it made one.

    Call it in an ``except`` block followed by a bare ``raise``: where ``unlisted/shards/``
    holds nothing, ``err`` goes on as it was (not as its own cause).

    Example:
        >>> import tempfile
        >>> try:
        ...     raise CorruptDatasetError("shard x is missing")
        ... except CorruptDatasetError as err:
        ...     raise_hinted(err, tempfile.mkdtemp())  # nothing quarantined: returns
        ...     print("unchanged:", err)
        unchanged: shard x is missing
    """
    hinted = with_relist_hint(err, path)
    if hinted is not err:
        raise hinted from err


def hinted_reads(items: Iterator[_T], path: str | os.PathLike[str]) -> Iterator[_T]:
    """``items``, with a ``CorruptDatasetError`` met on the way passed to :func:`raise_hinted`.

    Example:
        >>> import tempfile
        >>> list(hinted_reads(iter([1, 2]), tempfile.mkdtemp()))
        [1, 2]
    """
    try:
        yield from items
    except CorruptDatasetError as err:
        raise_hinted(err, path)
        raise

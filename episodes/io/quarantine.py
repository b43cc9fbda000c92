"""A v2 dataset's quarantine: where a lone writer moves shard files no manifest line lists.

A writer that opens a dataset while no other writer is active cleans up after dead ones
(:func:`remove_leftovers`). Temporary files (``.tmp-...``: a shard being filled when its writer
died) are garbage and removed. Shard files under a final name that no line lists are moved,
not removed: they may be committed shards whose manifest lines were lost (a manifest cut by a
copy that stopped, or put back from an older backup), as well as a commit killed between its
renames and its line. They go, renamed within the dataset (no copy), to::

    DATASET/unlisted/shards/NAME.arrow   (and NAME.json)

laid out as ``shards/`` so that a shard there is read as one in ``shards/`` is.
:func:`~episodes.io.unlisted.relist_shards` (``episodes relist``) checks them and lists the
good ones again; :func:`~episodes.io.unlisted.discard_unlisted` removes them. Readers, the copy
tools and ``validate`` read only the files the manifest lists. No pyarrow.

Example:
    >>> import tempfile
    >>> from episodes.io import DatasetWriter
    >>> path = Path(tempfile.mkdtemp()); DatasetWriter(path).close()
    >>> for name in ("0123456789abcdef.arrow", ".tmp-0123456789abcdef.arrow.part"):
    ...     _ = (path / "shards" / name).write_bytes(b"x")
    >>> remove_leftovers(path); os.listdir(path / "shards"), quarantined(path)
    ([], ['0123456789abcdef.arrow'])
"""

from __future__ import annotations

import errno
import os
import stat
import warnings
from collections.abc import Iterable
from pathlib import Path

from episodes.io.errors import DatasetError, DatasetIOError, UnsafeDataError
from episodes.io.format import MANIFEST_FILE, TMP_PREFIX
from episodes.io.manifest_lines import mend_tail
from episodes.io.shards import (
    DATA_SUFFIX,
    INDEX_SUFFIX,
    SHARD_NAME,
    SHARDS_DIR,
    ShardEntry,
    read_v2_manifest,
)

__all__ = [
    "QUARANTINE_DIR",
    "open_quarantine",
    "quarantine_notes",
    "quarantine_problem",
    "quarantined",
    "remove_leftovers",
    "warn_quarantined",
]

#: The quarantine's top directory in a v2 dataset; its files lie in ``QUARANTINE_DIR/shards``.
QUARANTINE_DIR = "unlisted"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def open_quarantine(root: Path, *, create: bool) -> int | None:
    """A descriptor of ``root/unlisted/shards`` (made where missing with ``create``), or None.

    Each level is opened without following a link: a symlink or a file at either name is
    refused, so nothing is ever moved into, or read from, another directory.

    Raises:
        UnsafeDataError: ``unlisted`` or ``unlisted/shards`` is a symlink or no directory.
        DatasetIOError: The system refused to make or open one (no permission, an I/O error).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> open_quarantine(root, create=False) is None
        True
        >>> os.close(open_quarantine(root, create=True)); os.listdir(root / "unlisted")
        ['shards']
    """
    fd = os.open(root, _DIR_FLAGS)
    here = root
    try:
        for name in (QUARANTINE_DIR, SHARDS_DIR):
            here /= name
            if create:
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass  # made before, or no directory: the open below tells
                except OSError as err:
                    raise _open_failure(here, err, "make") from err
                else:
                    os.fsync(fd)  # the new name outlives a crash before the moves into it
            try:
                inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as err:
                if err.errno in _NOT_PLAIN:
                    raise UnsafeDataError(_unsafe(root)) from err
                raise _open_failure(here, err, "open") from err
            os.close(fd)
            fd = inner
        return os.dup(fd)
    finally:
        os.close(fd)


#: What opening a directory without following a link fails with at a link (or a file).
_NOT_PLAIN = (errno.ELOOP, errno.ENOTDIR)


def _open_failure(path: Path, err: OSError, verb: str) -> DatasetIOError:
    """The system, not the layout, refused a directory: say what failed, not "a symlink"."""
    return DatasetIOError(err.errno, f"cannot {verb} the directory {path}: {err.strerror or err}")


def _unsafe(root: Path) -> str:
    return (
        f"{root / QUARANTINE_DIR} (or its shards/) is a symlink or not a directory: "
        "refusing to move shard files through it (rename or remove it)"
    )


def quarantine_problem(root: Path) -> str | None:
    """Why ``root/unlisted`` cannot hold quarantined shards, or None (absent, or fine).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "unlisted").write_bytes(b"x") and None
        >>> quarantine_problem(root).endswith("(rename or remove it)")
        True
    """
    try:
        fd = open_quarantine(root, create=False)
    except (UnsafeDataError, DatasetIOError) as err:
        return str(err)
    if fd is not None:
        os.close(fd)
    return None


def quarantined(root: str | os.PathLike[str]) -> list[str]:
    """The file names in ``root/unlisted/shards``, sorted (none where it is absent or unsafe).

    Example:
        >>> quarantined("/nonexistent")
        []
    """
    try:
        fd = open_quarantine(Path(root), create=False)
    except (UnsafeDataError, OSError):
        return []
    if fd is None:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def quarantine_notes(root: str | os.PathLike[str], shards: Iterable[ShardEntry] = ()) -> list[str]:
    """What ``episodes validate`` notes of the quarantine: its files, or why it is unsafe.

    ``shards`` are the manifest's: a quarantined file that one of them lists while ``shards/``
    lacks it (a manifest put back whole after a lone writer ran) is named first, as a file
    the readers miss, which ``episodes relist`` moves back (``--discard`` never removes it).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); os.makedirs(root / "unlisted" / "shards")
        >>> _ = (root / "unlisted" / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
        >>> quarantine_notes(root)[0].startswith("unlisted/shards/ holds 1 file (1 shard)")
        True
    """
    problem = quarantine_problem(Path(root))
    if problem is not None:
        return [problem]
    names = quarantined(root)
    if not names:
        return []
    listed = {e.name + s for e in shards for s in (DATA_SUFFIX[e.data_format], INDEX_SUFFIX)}
    missing = {n for n in names if n in listed and not os.path.lexists(Path(root) / SHARDS_DIR / n)}
    others = [n for n in names if n not in missing]
    lost = (
        "moved there by a writer that opened the dataset alone (lost manifest lines, or "
        "commits killed before their line): `episodes relist DIR` lists the good ones again, "
        "`episodes relist --discard DIR` removes them"
    )
    if not missing:
        return [
            f"{QUARANTINE_DIR}/{SHARDS_DIR}/ holds {_count(others)} that no manifest line "
            f"lists, {lost}"
        ]
    note = (
        f"{QUARANTINE_DIR}/{SHARDS_DIR}/ holds {_count(missing)} that manifest lines list while "
        "shards/ lacks them (a manifest put back whole after a writer that opened the dataset "
        "alone moved them there): readers fail on their shards until `episodes relist DIR` "
        "moves them back"
    )
    if others:  # one note: the CLI counts the notes after 20 as files in shards/
        note += f"; and {_count(others)} that no manifest line lists, {lost} (never the former)"
    return [note]


def _count(names: Iterable[str]) -> str:
    names = list(names)
    shards = len({name.split(".", 1)[0] for name in names})
    return f"{len(names)} file{'s' * (len(names) != 1)} ({shards} shard{'s' * (shards != 1)})"


def remove_leftovers(path: Path, *, sync: bool = True) -> None:
    """Cleans what dead writers left in a v2 dataset; quarantines complete shard files.

    A torn last manifest line and temporary files go. Files named as shards (``NAME.arrow``,
    ``NAME.parquet``, ``NAME.json``) that no line lists are moved to ``unlisted/shards/``,
    never removed. A shard whose file names are taken there already stays in ``shards/``
    (nothing in the quarantine is overwritten), and so does every such file where
    ``unlisted`` is a symlink or no directory: it is never followed.

    Only safe while no other writer is active (the caller holds ``shards/`` exclusively).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = Path(tempfile.mkdtemp()); DatasetWriter(path).close()
        >>> _ = (path / "shards" / ".tmp-left.arrow.part").write_bytes(b"x")
        >>> remove_leftovers(path); sorted(p.name for p in (path / "shards").iterdir())
        []
    """
    _, entries, _, _ = read_v2_manifest(path)  # refuses a damaged manifest: nothing moved
    fd = os.open(path / MANIFEST_FILE, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    try:
        mend_tail(fd, sync=sync)
    finally:
        os.close(fd)
    listed = {e.name for e in entries}
    # Every writer that opens alone looks: a set difference leaves out the listed shards'
    # files, so only the others are looked at one by one (no path object per listed file).
    expected = {
        e.name + suffix for e in entries for suffix in (DATA_SUFFIX[e.data_format], INDEX_SUFFIX)
    }
    shards = path / SHARDS_DIR
    unlisted: dict[str, list[str]] = {}
    for name in set(os.listdir(shards)) - expected:
        child = shards / name
        if not _plain_file(child):
            continue
        stem = name.split(".", 1)[0]
        if name.startswith(TMP_PREFIX):
            child.unlink()
        elif SHARD_NAME.match(stem) and stem not in listed:
            unlisted.setdefault(stem, []).append(name)
    if unlisted:
        _quarantine(path, unlisted, sync=sync)
    for child in path.iterdir():
        if child.name.startswith(TMP_PREFIX) and child.is_file():
            child.unlink()


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _quarantine(root: Path, stems: dict[str, list[str]], *, sync: bool) -> None:
    """Moves each stem's files into the quarantine: all of them, or none where one is taken."""
    try:
        into = open_quarantine(root, create=True)
    except DatasetError:  # unsafe, or the system refused it (no permission, an I/O error)
        return  # left in shards/, unlisted: readers ignore them, `validate` names them
    assert into is not None
    source = os.open(root / SHARDS_DIR, _DIR_FLAGS)
    try:
        taken = set(os.listdir(into))
        for stem in sorted(stems):
            names = stems[stem]
            if taken.intersection(names):
                continue  # never over a quarantined file: both are kept
            for name in names:
                os.rename(name, name, src_dir_fd=source, dst_dir_fd=into)
            taken.update(names)
        if sync:  # as a commit's renames are
            os.fsync(into)
            os.fsync(source)
    finally:
        os.close(source)
        os.close(into)


def warn_quarantined(source: str | os.PathLike[str]) -> None:
    """Warns that a copy leaves out the files of ``source``'s quarantine, if it has any.

    The copy tools read the pieces the manifest lists; shards a lone writer quarantined (lost
    manifest lines among them) would be gone from a copy that replaces its source.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); os.makedirs(root / "unlisted" / "shards")
        >>> _ = (root / "unlisted" / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always"); warn_quarantined(root)
        >>> "not copied" in str(caught[0].message)
        True
    """
    names = quarantined(source)
    if names:
        warnings.warn(
            f"{source} holds {len(names)} file{'s' * (len(names) != 1)} in "
            f"{QUARANTINE_DIR}/{SHARDS_DIR}/ that no manifest line lists: they are not copied "
            f"(`episodes relist {source}` lists the good ones first)",
            UserWarning,
            stacklevel=3,
        )

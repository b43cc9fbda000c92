"""The files a v2 dataset lists, and those in its ``shards/`` that no manifest line lists.

A shard exists for readers only once its manifest line is written. A commit interrupted after
its files took their final names (or a killed writer, or a writer still writing) leaves files
in ``shards/`` that no line lists; a tool that globs ``shards/*.arrow`` would read them, and
count again the episodes written since. :func:`data_files` gives the files to read instead;
:func:`unlisted_files` names the others (``episodes validate`` notes them). No pyarrow.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
    >>> [p.suffix for p in data_files(path)], unlisted_files(path)
    (['.arrow'], [])
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from episodes.io.errors import NotADatasetError, UnsupportedVersionError, stat_or_none
from episodes.io.format import FORMAT_FILE, TMP_PREFIX, not_a_dataset
from episodes.io.shards import (
    DATA_SUFFIX,
    INDEX_SUFFIX,
    SHARD_NAME,
    SHARDS_DIR,
    is_v2,
    read_v2_manifest,
    shard_file,
)

__all__ = ["data_files", "describe_unlisted", "unlisted_files"]


def _v2_root(path: str | os.PathLike[str], what: str) -> Path:
    root = Path(path)
    st = stat_or_none(root)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise NotADatasetError(f"{root} does not exist or is not a directory")
    if stat_or_none(root / FORMAT_FILE) is not None:
        raise UnsupportedVersionError(
            f"{root} is a format v1 dataset: {what} are those of format v2 (convert it with "
            "`episodes migrate`)"
        )
    if not is_v2(root):
        raise NotADatasetError(not_a_dataset(root))
    return root


def data_files(path: str | os.PathLike[str]) -> list[Path]:
    """The data files (``shards/NAME.arrow`` or ``.parquet``) the manifest of a v2 dataset lists.

    In manifest order: the files to hand a foreign reader (pyarrow, Polars, DuckDB) instead
    of a glob of ``shards/``, which also matches unlisted files (see :func:`unlisted_files`).
    A torn last manifest line (a writer killed mid-append, or one appending now) lists no file.

    Raises:
        NotADatasetError: ``path`` is not a dataset.
        UnsupportedVersionError: ``path`` is a format v1 dataset (its chunks hold ``.npy``
            files; ``episodes migrate`` converts it).
        CorruptDatasetError: The manifest is damaged.

    Example:
        >>> import tempfile
        >>> import pyarrow.ipc
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
        >>> [pyarrow.ipc.open_file(f).read_all().num_rows for f in data_files(path)]
        [2]
    """
    root = _v2_root(path, "data files")
    _, entries, _, _ = read_v2_manifest(root)
    return [shard_file(root, e.name, DATA_SUFFIX[e.data_format]) for e in entries]


def unlisted_files(path: str | os.PathLike[str]) -> list[str]:
    """The names in a v2 dataset's ``shards/`` that no manifest line lists, sorted.

    Temporary files (``.tmp-...``: a shard being written, or one a killed writer left) and
    shard files whose manifest line was never written (a commit interrupted after the
    rename, a writer killed there, or a manifest line lost since). Readers of the manifest
    ignore them; a writer that opens the dataset alone removes the temporary ones and moves
    the shard-named ones to ``unlisted/shards/``. Anything else a user put there is named
    too: a glob of ``shards/`` would read it.

    Raises:
        NotADatasetError: ``path`` is not a dataset.
        UnsupportedVersionError: ``path`` is a format v1 dataset.
        CorruptDatasetError: The manifest is damaged.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp(); DatasetWriter(path).close()
        >>> _ = (Path(path) / "shards" / "0123456789abcdef.arrow").write_bytes(b"x")
        >>> unlisted_files(path)
        ['0123456789abcdef.arrow']
    """
    root = _v2_root(path, "shard files")
    # Listed first, the manifest read after: a shard committed in between (its files renamed
    # before its line is appended) is then found listed, not named.
    present = set(os.listdir(root / SHARDS_DIR)) if stat_or_none(root / SHARDS_DIR) else set()
    _, entries, _, _ = read_v2_manifest(root)
    listed = {e.name + s for e in entries for s in (DATA_SUFFIX[e.data_format], INDEX_SUFFIX)}
    return sorted(present - listed)


def describe_unlisted(name: str) -> str:
    """The words ``episodes validate`` notes a name of :func:`unlisted_files` with.

    Example:
        >>> describe_unlisted(".tmp-0123456789abcdef.arrow.part")
        'shards/.tmp-0123456789abcdef.arrow.part: a temporary file (a shard being written, or \
one a killed writer left); no manifest line lists it'
    """
    where = f"{SHARDS_DIR}/{name}"
    if name.startswith(TMP_PREFIX):
        what = "a temporary file (a shard being written, or one a killed writer left)"
    elif SHARD_NAME.match(name.split(".", 1)[0]):
        what = "a shard file of an interrupted commit or a killed writer"
    else:
        what = "not a file of the dataset"
    return f"{where}: {what}; no manifest line lists it"

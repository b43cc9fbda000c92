"""Error types of the on-disk dataset format.

Every problem found while reading a dataset raises a :class:`DatasetError` subclass, so callers
can catch one type for files that are missing, damaged, unsafe or from an unknown format
version. Values that cannot be stored safely are refused at write time with
:class:`UnstorableValueError` (also a ``TypeError``), before anything touches the disk.

Example:
    >>> issubclass(CorruptDatasetError, DatasetError)
    True
"""

from __future__ import annotations

__all__ = [
    "CorruptDatasetError",
    "DatasetError",
    "DatasetLockedError",
    "EpisodeNotFoundError",
    "NotADatasetError",
    "UnsafeDataError",
    "UnstorableValueError",
    "UnsupportedVersionError",
]


class DatasetError(Exception):
    """Base type of every dataset error (read and write).

    Example:
        >>> from episodes.io import dataset_info
        >>> try:
        ...     dataset_info("/nonexistent/dataset")
        ... except DatasetError as err:
        ...     print(type(err).__name__)
        NotADatasetError
    """


class NotADatasetError(DatasetError):
    """The path does not exist or is not an episodes dataset directory.

    Example:
        >>> import tempfile
        >>> from episodes.io import dataset_info
        >>> try:
        ...     dataset_info(tempfile.mkdtemp())  # an empty directory
        ... except NotADatasetError:
        ...     print("not a dataset")
        not a dataset
    """


class UnsupportedVersionError(DatasetError):
    """The dataset (or one of its files) declares a format version this library cannot read.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter, EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> EpisodeWriter(path).close()  # a format v1 dataset
        >>> try:
        ...     DatasetWriter(path)
        ... except UnsupportedVersionError:
        ...     print("v1: use EpisodeWriter or migrate")
        v1: use EpisodeWriter or migrate
    """


class CorruptDatasetError(DatasetError):
    """A file is missing, truncated, malformed, or disagrees with its checksum or metadata.

    Example:
        >>> import os, tempfile
        >>> from pathlib import Path
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, read_episodes
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0]))
        >>> os.truncate(next(Path(path, "shards").glob("*.arrow")), 100)  # damage the shard
        >>> try:
        ...     list(read_episodes(path))
        ... except CorruptDatasetError:
        ...     print("truncated shard")
        truncated shard
    """


class UnsafeDataError(CorruptDatasetError):
    """A file could run code when loaded (pickles, object arrays) or points outside the dataset.

    Such files are refused without being loaded.

    Example:
        >>> issubclass(UnsafeDataError, CorruptDatasetError)
        True
    """


class EpisodeNotFoundError(DatasetError):
    """No committed chunk carries the requested episode id.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, load_episode
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> try:
        ...     load_episode(path, "b")
        ... except EpisodeNotFoundError:
        ...     print("no episode 'b'")
        no episode 'b'
    """


class DatasetLockedError(DatasetError):
    """Another writer holds the dataset's lock.

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path):
        ...     try:
        ...         EpisodeWriter(path)
        ...     except DatasetLockedError:
        ...         print("locked")
        locked
    """


class UnstorableValueError(DatasetError, TypeError):
    """A value cannot be stored safely (refused at write time, nothing is written).

    Example:
        >>> issubclass(UnstorableValueError, TypeError)
        True
    """

"""Episodes on disk: a pickle-free, crash-safe, versioned dataset format.

Format v2 (:class:`DatasetWriter`, :class:`Dataset`) packs episodes into large Arrow/Parquet
shards with dataset metadata, random access and concurrent writers; format v1
(:class:`EpisodeWriter`) keeps one folder per episode chunk. The reading functions read both.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> path = tempfile.mkdtemp()
    >>> with EpisodeWriter(path) as writer:
    ...     _ = writer.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0],
    ...                                         rewards=[1.0]))
    >>> [len(ep) for ep in read_episodes(path, numpy=True)]
    [0]
"""

from typing import TYPE_CHECKING, Any

try:  # the format needs POSIX: flock, fsync of directories, hard links (not on Windows)
    import fcntl  # noqa: F401
except ImportError as _err:
    raise ImportError(
        "episodes.io needs a POSIX system (Linux or macOS): its writers rely on file locks "
        "(flock), fsync of directories and hard links, which Windows does not provide"
    ) from _err

from episodes.io.episode_loads import load_episodes
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetIOError,
    DatasetLockedError,
    EpisodeNotFoundError,
    NotADatasetError,
    UnsafeDataError,
    UnstorableValueError,
    UnsupportedVersionError,
)
from episodes.io.format import FORMAT_VERSION
from episodes.io.metadata import DatasetMetadata
from episodes.io.reader import (
    DatasetInfo,
    EpisodeSummary,
    dataset_info,
    load_episode,
    read_episodes,
)
from episodes.io.writer import EpisodeWriter

if TYPE_CHECKING:  # the lazy names below, typed for checkers without importing pyarrow
    from episodes.io.flat_arrays import flat_transitions
    from episodes.io.joins import PieceJoins, piece_problems
    from episodes.io.listed_files import data_files
    from episodes.io.minari_io import export_minari, import_minari
    from episodes.io.shard_reader import Dataset
    from episodes.io.shard_writer import DatasetWriter
    from episodes.io.tools import filter_dataset, merge, migrate, split
    from episodes.io.unlisted import UnlistedShard, discard_unlisted, relist_shards
    from episodes.io.validation import ValidationReport, validate_dataset

# Format v2 needs pyarrow: its names load on first use, so `import episodes.io` stays light.
_LAZY = {
    "Dataset": "episodes.io.shard_reader",
    "DatasetWriter": "episodes.io.shard_writer",
    "migrate": "episodes.io.tools",
    "merge": "episodes.io.tools",
    "split": "episodes.io.tools",
    "filter_dataset": "episodes.io.tools",
    "flat_transitions": "episodes.io.flat_arrays",
    "piece_problems": "episodes.io.joins",
    "data_files": "episodes.io.listed_files",
    "PieceJoins": "episodes.io.joins",
    "validate_dataset": "episodes.io.validation",
    "ValidationReport": "episodes.io.validation",
    "export_minari": "episodes.io.minari_io",
    "import_minari": "episodes.io.minari_io",
    "relist_shards": "episodes.io.unlisted",
    "discard_unlisted": "episodes.io.unlisted",
    "UnlistedShard": "episodes.io.unlisted",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'episodes.io' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "FORMAT_VERSION",
    "CorruptDatasetError",
    "Dataset",
    "DatasetError",
    "DatasetInfo",
    "DatasetIOError",
    "DatasetMetadata",
    "DatasetWriter",
    "DatasetLockedError",
    "EpisodeNotFoundError",
    "EpisodeSummary",
    "EpisodeWriter",
    "NotADatasetError",
    "PieceJoins",
    "UnlistedShard",
    "ValidationReport",
    "validate_dataset",
    "UnsafeDataError",
    "UnstorableValueError",
    "UnsupportedVersionError",
    "data_files",
    "dataset_info",
    "discard_unlisted",
    "export_minari",
    "filter_dataset",
    "flat_transitions",
    "import_minari",
    "load_episode",
    "load_episodes",
    "merge",
    "migrate",
    "piece_problems",
    "read_episodes",
    "relist_shards",
    "split",
]

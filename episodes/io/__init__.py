"""Episodes on disk: a pickle-free, crash-safe, versioned dataset format.

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

from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetLockedError,
    EpisodeNotFoundError,
    NotADatasetError,
    UnsafeDataError,
    UnstorableValueError,
    UnsupportedVersionError,
)
from episodes.io.format import FORMAT_VERSION
from episodes.io.reader import (
    DatasetInfo,
    EpisodeSummary,
    dataset_info,
    load_episode,
    read_episodes,
)
from episodes.io.writer import EpisodeWriter

__all__ = [
    "FORMAT_VERSION",
    "CorruptDatasetError",
    "DatasetError",
    "DatasetInfo",
    "DatasetLockedError",
    "EpisodeNotFoundError",
    "EpisodeSummary",
    "EpisodeWriter",
    "NotADatasetError",
    "UnsafeDataError",
    "UnstorableValueError",
    "UnsupportedVersionError",
    "dataset_info",
    "load_episode",
    "read_episodes",
]

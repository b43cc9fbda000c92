"""Whole-dataset validation: every checksum and every join, for either format version.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import EpisodeWriter
    >>> path = tempfile.mkdtemp()
    >>> with EpisodeWriter(path) as writer:
    ...     _ = writer.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0],
    ...                                         rewards=[1.0], len_lookback_buffer=0))
    >>> report = validate_dataset(path)
    >>> report.ok, report.pieces, report.problems
    (True, 1, [])
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import DatasetError, DatasetIOError
from episodes.io.joins import PieceJoins, piece_problems
from episodes.io.reader import iter_chunks, load_chunk
from episodes.io.shards import is_v2

__all__ = ["ValidationReport", "validate_dataset"]


@dataclass
class ValidationReport:
    """What :func:`validate_dataset` found.

    Attributes:
        problems: One line per problem (a damaged piece, or pieces that do not join).
        pieces: The episode pieces (chunks) read.
        shards: The v2 dataset's shards (None for v1).
        torn_manifest: An incomplete last manifest line (a killed writer) was ignored.
    """

    problems: list[str] = field(default_factory=list)
    pieces: int = 0
    shards: int | None = None
    torn_manifest: bool = False

    @property
    def ok(self) -> bool:
        """True when nothing is wrong: then ``load_episode`` loads every id."""
        return not self.problems


def validate_dataset(
    path: str | os.PathLike[str], *, on_piece: Callable[[], None] | None = None
) -> ValidationReport:
    """Reads every piece of a dataset with its checksums and checks every join.

    Args:
        path: A v1 or v2 dataset.
        on_piece: Called after each piece is read (a progress bar's ``update``).

    Raises:
        DatasetError: (a subclass) the dataset cannot be opened at all (not a dataset, a
            damaged manifest), or the system failed a read (``DatasetIOError``: out of file
            descriptors, an I/O error); a damaged piece is a problem in the report instead.

    Example:
        >>> validate_dataset("/nonexistent")
        Traceback (most recent call last):
        ...
        episodes.io.errors.NotADatasetError: /nonexistent does not exist
    """
    report = ValidationReport()
    if is_v2(Path(path)):
        from episodes.io.shard_reader import Dataset

        ds = Dataset(path, verify=True, max_open_shards=1)
        report.pieces, report.shards = len(ds), len(ds.shards)
        report.torn_manifest = ds.torn_manifest
        read: Callable[[int], SingleAgentEpisode] = ds.episode
    else:
        root, entries, report.torn_manifest = iter_chunks(path)
        report.pieces = len(entries)

        def read(i: int) -> SingleAgentEpisode:
            return load_chunk(root, entries[i], verify=True)

    report.problems = piece_problems(path)
    joins = PieceJoins.of(path)
    for i in range(report.pieces):
        try:
            report.problems += joins.check(i, read(i))
        except DatasetIOError:
            raise  # the system failed the read: nothing is known about the piece
        except DatasetError as err:
            if str(err) not in report.problems:  # a damaged shard refuses each of its pieces
                report.problems.append(str(err))
        if on_piece is not None:
            on_piece()
    return report

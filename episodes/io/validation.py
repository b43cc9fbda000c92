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

import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.io.dataset_spaces import DatasetSpaces
from episodes.io.errors import CorruptDatasetError, DatasetError, DatasetIOError
from episodes.io.format import TMP_PREFIX, piece_return
from episodes.io.joins import PieceJoins, piece_problems
from episodes.io.listed_files import describe_unlisted, unlisted_files
from episodes.io.quarantine import quarantine_notes
from episodes.io.reader import chunk_nbytes, iter_chunks, load_chunk
from episodes.io.shards import SHARD_NAME, is_v2

__all__ = ["ValidationReport", "validate_dataset"]


@dataclass
class ValidationReport:
    """What :func:`validate_dataset` found.

    Attributes:
        problems: One line per problem (a damaged piece, or pieces that do not join; a join
            that only ``load_episode(..., numpy=True)`` makes says so:
            :data:`~episodes.io.joins.NUMPY_ONLY`).
        pieces: The episode pieces (chunks) read.
        shards: The v2 dataset's shards (None for v1).
        torn_manifest: An incomplete last manifest line (a killed writer) was ignored.
        notes: Warnings, no problems (``ok`` stays True): first one line on the pieces
            whose observation or action space is not the dataset's, if any (they load, but
            the replay buffer and the torch datasets stack every piece's steps in one shape
            and nesting: see :mod:`episodes.io.dataset_spaces`); then one line on the files
            a writer that opened alone moved to ``unlisted/shards/`` (``episodes relist``
            lists the good ones again), if any; then one line per file in a v2 dataset's
            ``shards/`` that no manifest line lists (a shard being written, a killed
            writer's leftover, an interrupted commit's shard, a lost line's). Readers of
            the manifest ignore them; a glob of ``shards/*.arrow`` would read them.

    Example:
        >>> report = ValidationReport(pieces=2, shards=1)
        >>> report.ok, report.pieces
        (True, 2)
        >>> report.problems.append("shard 00000: data CRC-32 mismatch")
        >>> report.ok
        False
    """

    problems: list[str] = field(default_factory=list)
    pieces: int = 0
    shards: int | None = None
    torn_manifest: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong: then ``load_episode`` loads every id."""
        return not self.problems


def validate_dataset(
    path: str | os.PathLike[str], *, on_piece: Callable[[], None] | None = None
) -> ValidationReport:
    """Reads every piece of a dataset with its checksums and checks every join and space.

    Pieces whose observation or action space is not the dataset's (that of the first piece
    that has one: :class:`~episodes.io.dataset_spaces.DatasetSpaces`) are a note, no problem:
    ``load_episode`` loads them, but the batch readers stack all steps in one shape.

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
        report.notes = quarantine_notes(path, ds.shards) + [
            _unlisted_note(n) for n in unlisted_files(path)
        ]
        read: Callable[[int], SingleAgentEpisode] = ds.episode
        listed = [
            (f"shard {s.name} episode {j}", row.ret)
            for s in ds.shards
            for j, row in enumerate(s.episodes)
        ]
    else:
        root, entries, report.torn_manifest = iter_chunks(path)
        report.pieces = len(entries)
        listed = [(e.chunk, e.ret) for e in entries]

        def read(i: int) -> SingleAgentEpisode:
            episode = load_chunk(root, entries[i], verify=True)
            if chunk_nbytes(root, entries[i]) != entries[i].nbytes:  # no checksum covers it
                raise CorruptDatasetError(f"{entries[i].chunk}: nbytes disagrees with its files")
            return episode

    report.problems = piece_problems(path)
    joins, spaces = PieceJoins.of(path), DatasetSpaces()
    for i in range(report.pieces):
        try:
            episode = read(i)
            report.problems += joins.check(i, episode)
            report.problems += _return_problems(episode, *listed[i])
            spaces.add(episode, listed[i][0])
        except DatasetIOError:
            raise  # the system failed the read: nothing is known about the piece
        except DatasetError as err:
            if str(err) not in report.problems:  # a damaged shard refuses each of its pieces
                report.problems.append(str(err))
        if on_piece is not None:
            on_piece()
    other_spaces = spaces.note()  # first: the CLI counts the notes after 20 as unlisted files
    report.notes[:0] = [other_spaces] if other_spaces else []
    return report


def _unlisted_note(name: str) -> str:
    note = describe_unlisted(name)
    if SHARD_NAME.match(name.split(".", 1)[0]) and not name.startswith(TMP_PREFIX):
        note += " (if its line was lost, `episodes relist DIR` lists it again)"
    return note


def _return_problems(episode: SingleAgentEpisode, where: str, listed: float) -> list[str]:
    """The manifest's return of a piece checked against the sum of its rewards.

    No checksum covers a v1 line, and a v2 line's CRC-32 is no defence against an edit.
    """
    actual = piece_return(episode)
    # Written as the writer summed it, so equal; a non-finite sum is written as null (NaN).
    if _same_return(actual, listed) or _same_return(_earlier_return(episode), listed):
        return []
    return [f"{where}: the manifest's return {listed!r} is not the sum of its rewards {actual!r}"]


def _same_return(actual: float, listed: float) -> bool:
    return actual == listed or (not math.isfinite(actual) and math.isnan(listed))


def _earlier_return(episode: SingleAgentEpisode) -> float:
    """The return writers stored before 2026-12-03, which summed differently.

    float16/float32 rewards were summed in their own dtype (rounded, or inf), the components of
    vector rewards added up, a complex sum taken by its real part, and rewards that are no
    numbers stored as 0.0. Such manifests are not damaged: the validator accepts either sum.
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # numpy's ComplexWarning for the real part
            total: Any = np.asarray(episode.get_rewards()).sum()
            return float(np.real(total))
    except (TypeError, ValueError, OverflowError):
        return 0.0

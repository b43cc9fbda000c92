"""Which pieces of a dataset the torch datasets join into one run of steps, and their reads.

A runner's episode is stored in pieces, one per ``DatasetWriter.write`` of a chunk: the
torch datasets' windows and n-step horizons go over the whole episode, as
``load_episode`` and ``EpisodeReplayBuffer.from_dataset`` join it. :func:`piece_runs` finds,
from the manifest alone (no data read), the pieces that continue one another: the pieces of
one id in time order (``t_started``, then ``t``, then manifest position), each starting at the
``t`` where the one before it stopped, which must not have ended the episode; the neighbours
``episodes validate`` checks join (``joins.PieceJoins``). Any other pair (steps left out,
steps stored twice, steps after the episode's end) starts a new run: no window or n-step
horizon crosses it, as none can in the episode, and each run gives the items it holds.

A run is a few numpy rows per piece (no data): :class:`PieceRuns` finds the pieces holding a
run's steps ``[a, b)`` (:meth:`PieceRuns.spans`) and :func:`joined_steps` joins what was taken
from each.

Example:
    >>> from episodes.io.shards import EpisodeRow
    >>> rows = [EpisodeRow("a", 0, 3, 3.0, False, False), EpisodeRow("b", 0, 2, 2.0, True, False),
    ...         EpisodeRow("a", 3, 5, 2.0, False, True)]
    >>> runs = piece_runs(rows)
    >>> runs.lengths.tolist(), runs.spans(0, 2, 4)
    ([5, 2], [(0, 2, 3), (2, 0, 1)])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tree

from episodes.io.shards import EpisodeRow, piece_ends
from episodes.io.values import decode_value, id_key

__all__ = ["PieceRuns", "joined_steps", "piece_runs"]


class PieceRuns:
    """The runs of steps a dataset's pieces make, in the order their first piece is stored.

    Attributes:
        pieces: The manifest index of each piece of a run, run by run, in time order
            (:func:`piece_runs` leaves out pieces without steps).
        bounds: Per run and one more, where its pieces start in ``pieces``.
        starts: Per entry of ``pieces``, the steps of its run before it.
        steps: Per entry of ``pieces``, its steps.
        lengths: Per run, its steps.
        terminated: Per run, whether its last step ended the episode that way.
        truncated: Per run, likewise.

    Example:
        >>> runs = PieceRuns(np.array([4, 1, 0]), np.array([0, 2, 3]), np.array([3, 2, 1]),
        ...                  np.array([True, False]), np.zeros(2, bool))
        >>> runs.lengths.tolist(), runs.starts.tolist(), runs.spans(0, 1, 5)
        ([5, 1], [0, 3, 0], [(4, 1, 3), (1, 0, 2)])
    """

    def __init__(
        self,
        pieces: np.ndarray,
        bounds: np.ndarray,
        steps: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ):
        self.pieces, self.bounds, self.steps = pieces, bounds, steps
        before = np.cumsum(steps) - steps  # steps of the dataset before each piece
        base = before[bounds[:-1]] if len(steps) else np.zeros(0, np.int64)
        self.starts = before - np.repeat(base, np.diff(bounds))
        self.lengths = np.add.reduceat(steps, bounds[:-1]) if len(steps) else base
        self.terminated, self.truncated = terminated, truncated

    @classmethod
    def separate(cls, lengths: np.ndarray, flags: Sequence[tuple[bool, bool]]) -> PieceRuns:
        """Each piece a run of its own (``flags``: each piece's ``piece_ends``), as counted before.

        Example:
            >>> flags = [(False, False), (False, False), (True, False)]
            >>> runs = PieceRuns.separate(np.array([2, 0, 3]), flags)
            >>> runs.lengths.tolist(), runs.spans(2, 0, 3), runs.terminated.tolist()
            ([2, 0, 3], [(2, 0, 3)], [False, False, True])
        """
        lengths = np.asarray(lengths, dtype=np.int64)
        ends = np.array(flags, dtype=bool).reshape(-1, 2)
        pieces = np.arange(len(lengths), dtype=np.int64)
        return cls(
            pieces, np.arange(len(lengths) + 1, dtype=np.int64), lengths, ends[:, 0], ends[:, 1]
        )

    def spans(self, run: int, a: int, b: int) -> list[tuple[int, int, int]]:
        """``(piece, start, stop)`` per piece holding run steps ``[a, b)`` (``a < b``), in order.

        ``start`` and ``stop`` count the piece's own steps.

        Example:
            >>> runs = PieceRuns(np.array([4, 1]), np.array([0, 2]), np.array([3, 2]),
            ...                  np.zeros(1, bool), np.zeros(1, bool))
            >>> runs.spans(0, 1, 5), runs.spans(0, 3, 4)
            ([(4, 1, 3), (1, 0, 2)], [(1, 0, 1)])
        """
        lo, hi = int(self.bounds[run]), int(self.bounds[run + 1])
        if hi - lo == 1:  # the run is one piece
            return [(int(self.pieces[lo]), a, b)]
        k = lo + int(np.searchsorted(self.starts[lo:hi], a, side="right")) - 1
        out = []
        while a < b:
            start, steps = int(self.starts[k]), int(self.steps[k])
            stop = min(b, start + steps)
            out.append((int(self.pieces[k]), a - start, stop - start))
            a, k = stop, k + 1
        return out


def piece_runs(rows: Sequence[EpisodeRow]) -> PieceRuns:
    """The runs that a dataset's manifest rows (``Dataset.summaries``) make (see the module).

    Runs come in the order of their first piece in the manifest; runs without steps are left
    out. A run ends the episode as its last piece with steps does (``shards.piece_ends``: a
    later piece without steps, starting where it stops, may have ended it).

    Example:
        >>> from episodes.io.shards import EpisodeRow
        >>> rows = [EpisodeRow("a", 0, 2, 0.0, False, False),
        ...         EpisodeRow("a", 3, 4, 0.0, True, False)]  # steps [2, 3) missing
        >>> runs = piece_runs(rows)
        >>> runs.lengths.tolist(), runs.terminated.tolist()
        ([2, 1], [False, True])
    """
    n = len(rows)
    if not n:
        none = np.zeros(0, np.int64)
        return PieceRuns(none, np.zeros(1, np.int64), none, none.astype(bool), none.astype(bool))
    t0 = np.fromiter((row.t_started for row in rows), np.int64, n)
    t1 = np.fromiter((row.t for row in rows), np.int64, n)
    done = np.fromiter((row.terminated or row.truncated for row in rows), bool, n)
    ids = np.arange(n, dtype=np.int64)
    if np.isin(t0, t1[~done]).any():  # some piece may continue another: ids are read
        codes: dict[tuple[bool, str], int] = {}
        for i, row in enumerate(rows):
            raw = row.id_
            # A string id is stored as itself (most ids): keyed apart from every other kind.
            key = (True, raw) if raw.__class__ is str else (False, _id_key(raw))
            ids[i] = codes.setdefault(key, i)
    order = np.lexsort((np.arange(n), t1, t0, ids))  # per id, in time order
    before, after = order[:-1], order[1:]
    joins = (ids[before] == ids[after]) & (t1[before] == t0[after]) & ~done[before]
    heads = np.concatenate([[True], ~joins])
    run_of = np.empty(n, np.int64)
    run_of[order] = np.cumsum(heads) - 1
    # Runs in the order of their first piece in the manifest (pieces without steps too).
    first = np.minimum.reduceat(order, np.flatnonzero(heads))
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    steps = t1 - t0
    kept = order[steps[order] > 0]  # a stable sort keeps each run's time order
    kept = kept[np.argsort(rank[run_of[kept]], kind="stable")]
    runs = run_of[kept]
    bounds = np.flatnonzero(np.concatenate([[True], runs[1:] != runs[:-1], [True]]))
    if not len(kept):
        bounds = bounds[:1]
    ends = np.array(piece_ends(rows), dtype=bool)[kept[bounds[1:] - 1]].reshape(-1, 2)
    return PieceRuns(kept, bounds.astype(np.int64), steps[kept], ends[:, 0], ends[:, 1])


def _id_key(raw: Any) -> str:
    return id_key(decode_value(raw, blob=None, where="manifest id"))


def joined_steps(parts: Sequence[Any]) -> Any:
    """Items taken from consecutive pieces (structs of arrays, steps first) as one struct.

    Example:
        >>> joined_steps([{"a": np.array([1, 2])}, {"a": np.array([3])}])["a"].tolist()
        [1, 2, 3]
    """
    if len(parts) == 1:
        return parts[0]
    if parts[0].__class__ is np.ndarray:  # a flat column
        return np.concatenate(parts)
    return tree.map_structure(lambda *leaves: np.concatenate(leaves), *parts)

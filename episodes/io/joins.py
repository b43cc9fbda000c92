"""Whether the pieces of each episode in a dataset join, as ``load_episode`` joins them.

The manifest alone shows pieces that hold the same steps twice, continue past the episode's
end or leave steps out (:func:`piece_problems`). Whether neighbouring pieces meet, the next
one starting with the observation the one before it ends with, needs their data:
:class:`PieceJoins` checks that while a validator reads the pieces once, in any order, keeping
only the borders of pieces whose neighbour has not been read yet.

Example:
    >>> import tempfile
    >>> from episodes.io import DatasetWriter
    >>> ep = SingleAgentEpisode("x", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
    ...                         len_lookback_buffer=0)
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([ep[0:1], ep[1:2]])
    >>> piece_problems(path), PieceJoins.of(path).check(1, ep[1:2])
    ([], [])
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import DatasetError
from episodes.io.piece_dtypes import widen_pieces
from episodes.io.reader import iter_chunks
from episodes.io.shard_reader import Dataset
from episodes.io.shards import is_v2
from episodes.io.values import concat_piece, decode_value, id_key
from episodes.spaces import equal_in_space
from episodes.structs import flatten

__all__ = ["NUMPY_ONLY", "PieceJoins", "manifest_pieces", "piece_problems"]

PathLike = str | os.PathLike[str]
Piece = tuple[Any, int, int, bool]

#: How :class:`PieceJoins` ends the problem of a join that ``load_episode(..., numpy=True)`` makes.
NUMPY_ONLY = "load_episode(..., numpy=True) joins it"


def manifest_pieces(path: PathLike) -> list[Piece]:
    """``(id, t_started, t, done)`` of every piece in manifest order (no episode data read).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("x", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                                terminated=True, len_lookback_buffer=0))
        >>> manifest_pieces(path)
        [('x', 0, 1, True)]
    """
    root = Path(path)
    if is_v2(root):
        ds = Dataset(root, max_open_shards=1)
        ids = [decode_value(s.id_, blob=None, where="manifest id") for s in ds.summaries]
        rows: Sequence[Any] = ds.summaries
    else:
        rows = iter_chunks(root)[1]
        ids = [decode_value(e.id_, blob=None, where=f"manifest id of {e.chunk}") for e in rows]
    return [
        (id_, row.t_started, row.t, row.terminated or row.truncated)
        for id_, row in zip(ids, rows, strict=True)
    ]


def _by_id(pieces: Iterable[Piece]) -> dict[str, list[tuple[int, int, bool, Any, int]]]:
    """Per id (its ``id_key``), ``(t_started, t, done, id, index)`` of its pieces in time order."""
    by_id: dict[str, list[tuple[int, int, bool, Any, int]]] = {}
    for index, (id_, a, b, done) in enumerate(pieces):
        by_id.setdefault(id_key(id_), []).append((a, b, done, id_, index))
    for spans in by_id.values():
        spans.sort(key=lambda span: (span[0], span[1], span[4]))
    return by_id


def join_problems(pieces: Iterable[Piece]) -> list[str]:
    """Per id, pieces that repeat steps, continue past the end or leave steps out.

    Example:
        >>> join_problems([("a", 0, 3, False), ("a", 5, 6, True)])
        ["episode 'a': steps [3, 5) are missing"]
    """
    problems = []
    for spans in _by_id(pieces).values():
        end, ended = spans[0][1], spans[0][2]
        for a, b, done, id_, _ in spans[1:]:
            if b > a and a < end:
                problems.append(f"episode {id_!r}: steps [{a}, {min(b, end)}) are stored twice")
            elif ended and b > a:
                problems.append(f"episode {id_!r}: steps from t={a} follow its end")
            elif ended:  # concat_episode refuses even a piece without steps there
                problems.append(f"episode {id_!r}: a piece at t={a} follows its end")
            elif a < end:  # a piece without steps inside stored ones joins nowhere
                problems.append(f"episode {id_!r}: a piece at t={a} lies inside stored steps")
            elif a > end:
                problems.append(f"episode {id_!r}: steps [{end}, {a}) are missing")
            end, ended = max(end, b), ended or done
    return problems


def piece_problems(path: PathLike) -> list[str]:
    """What keeps an episode's pieces in ``path`` from joining, from the manifest alone.

    Pieces of one id must not hold the same steps twice, must not follow a piece that ended
    the episode and must not leave steps out (``load_episode`` could not join them). Whether
    neighbouring pieces meet at the same observation needs their data: see :class:`PieceJoins`.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> ep = SingleAgentEpisode("x", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([ep, ep])
        >>> piece_problems(path)
        ["episode 'x': steps [0, 1) are stored twice"]
    """
    return join_problems(manifest_pieces(path))


@dataclass
class _Joined:
    """An episode joined up to some piece, as far as the next join needs it."""

    # Its last piece (held as read: numpy reads are memory-mapped views), or a one-step shell
    # of it where the joined columns' layouts are not the last piece's.
    end: SingleAgentEpisode
    columns: tuple[Any, ...]  # the joined columns' layouts (see _columns_of)
    # The joined episode's spaces, (observation, action): its first piece's (concat_episode
    # keeps them), in which, or else in the next piece's, the next join compares
    # observations, and which a list-mode piece's steps must lie in.
    spaces: tuple[Any, Any] = (None, None)


def _columns_of(piece: SingleAgentEpisode) -> tuple[Any, ...]:
    """Per column: list mode, or the numpy layout (nesting, leaf dtypes and item shapes)."""
    out: list[Any] = []
    for name, column in piece.named_columns().items():
        store = column.store
        if not store.is_numpy:
            out.append((name, None))
        else:  # no items, but the column's nesting, dtypes and item shapes
            leaves, structure = flatten(store.window(0, 0))
            out.append((name, repr(structure), [(x.dtype.str, x.shape[1:]) for x in leaves]))
    return tuple(out)


def _last_step(piece: SingleAgentEpisode) -> SingleAgentEpisode:
    """The piece's last step as a piece of its own (a copy to try a join on)."""
    n = len(piece)
    return copy.deepcopy(piece if n == 0 else piece[n - 1 : n])


class PieceJoins:
    """Checks, one read piece at a time, that each piece starts where the one before it ended.

    Neighbours are the pieces of one id in time order whose manifest ranges meet
    (``t == t_started``; other pairs are :func:`piece_problems`' to report). Each piece is
    joined, as ``load_episode``'s ``concat_episode`` joins it, onto the episode built so far:
    its first observation must equal the last one (leaf-wise, NaNs equal), its
    extra-model-output keys must be the episode's (new ones only while it has no steps), and
    the episode's columns (its first piece's layouts) must take every one of its items; where
    the layouts differ, the join is tried on a one-step copy. A join that fails so but that
    ``load_episode(..., numpy=True)`` makes (pieces stored in other dtypes, joined in numpy's
    ``result_type``: :mod:`episodes.io.piece_dtypes`) is still a problem, the default
    ``numpy=None`` refusing the id, ending with :data:`NUMPY_ONLY`; later pieces then join
    onto the widened columns. Pieces may be checked in any
    order: a piece read before its predecessor waits for it, and a joined episode is kept
    (as its last piece) only until its successor is checked, so reading a dataset in time
    order holds one piece per running episode.

    Example:
        >>> ep = SingleAgentEpisode("x", observations=[0, 1, 2], actions=[0, 1],
        ...                         rewards=[1.0, 1.0], len_lookback_buffer=0)
        >>> joins = PieceJoins([("x", 0, 1, False), ("x", 1, 2, False)])
        >>> joins.check(1, ep[1:2]), joins.check(0, ep[0:1])
        ([], [])
        >>> joins = PieceJoins([("x", 0, 1, False), ("x", 1, 2, False)])
        >>> _ = joins.check(0, ep[0:1])
        >>> joins.check(1, ep[0:1])  # observations [0, 1], where the piece before ends with 1
        ["episode 'x': piece at t=1 does not start with its predecessor's last observation"]
    """

    def __init__(self, pieces: Sequence[Piece]):
        self._before: dict[int, int] = {}
        self._after: dict[int, int] = {}
        self._where: dict[int, tuple[Any, int]] = {}
        for spans in _by_id(pieces).values():
            for prev, cur in zip(spans, spans[1:]):
                if prev[1] == cur[0] and not prev[2]:
                    self._before[cur[4]] = prev[4]
                    self._after[prev[4]] = cur[4]
                    self._where[cur[4]] = (cur[3], cur[0])
        self._joined: dict[int, _Joined] = {}  # joined up to a piece whose successor waits
        self._waiting: dict[int, SingleAgentEpisode] = {}  # read before their predecessor
        self._read: set[int] = set()

    @classmethod
    def of(cls, path: PathLike) -> PieceJoins:
        """The checker for the dataset at ``path`` (reads its manifest).

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("x", observations=[0]))
            >>> PieceJoins.of(path).pending
            0
        """
        return cls(manifest_pieces(path))

    @property
    def pending(self) -> int:
        """Pieces held (as a one-step shell, or whole), waiting for a neighbour to be checked.

        Example:
            >>> ep = SingleAgentEpisode("x", observations=[0, 1, 2], actions=[0, 1],
            ...                         rewards=[1.0, 1.0], len_lookback_buffer=0)
            >>> joins = PieceJoins([("x", 0, 1, False), ("x", 1, 2, False)])
            >>> _ = joins.check(0, ep[0:1]); joins.pending
            1
        """
        return len(self._joined) + len(self._waiting)

    def check(self, index: int, piece: SingleAgentEpisode) -> list[str]:
        """Records piece ``index`` (manifest order) and returns the joins it breaks.

        Example:
            >>> joins = PieceJoins([("x", 0, 0, False)])
            >>> joins.check(0, SingleAgentEpisode("x", observations=[0]))
            []
        """
        if index in self._read:
            return []
        self._read.add(index)
        prev = self._before.get(index)
        if prev is not None and prev not in self._joined:
            self._waiting[index] = piece  # joined once its predecessor is
            return []
        problems: list[str] = []
        # Pieces join in time order: each onto the episode joined so far, then any successor
        # that was read before it.
        while True:
            joined = self._joined.pop(prev) if prev is not None else None
            result = self._join(joined, piece, index, problems)
            after = self._after.get(index)
            if after is None:
                return problems
            self._joined[index] = result
            if after not in self._waiting:
                return problems
            prev, index, piece = index, after, self._waiting.pop(after)

    def _join(
        self,
        joined: _Joined | None,
        piece: SingleAgentEpisode,
        index: int,
        problems: list[str],
    ) -> _Joined:
        """``joined`` with ``piece`` appended, as load_episode's concat would (problems noted)."""
        columns = _columns_of(piece)
        own = _Joined(piece, columns, (piece.observation_space, piece.action_space))
        if joined is None:
            return own
        id_, t = self._where[index]
        shell = joined.end
        if len(piece.observations) == 0 or len(shell.observations) == 0:
            # concat_episode refuses such a join, so load_episode fails on this id.
            problems.append(
                f"episode {id_!r}: piece at t={t} does not join its predecessor: both need at "
                "least one observation"
            )
            return own
        space = piece.observation_space if joined.spaces[0] is None else joined.spaces[0]
        if not equal_in_space(piece.observations.get(0), shell.observations.get(-1), space):
            problems.append(
                f"episode {id_!r}: piece at t={t} does not start with its predecessor's last "
                "observation"
            )
            return own
        mine, theirs = set(shell.extra_model_outputs), set(piece.extra_model_outputs)
        # concat's rule: new keys only while the episode has no steps; a piece with steps
        # gives every key the episode records.
        if (theirs - mine and len(shell) > 0) or (len(piece) > 0 and mine - theirs):
            problems.append(
                f"episode {id_!r}: piece at t={t} has other extra-model-output keys "
                f"({sorted(map(str, theirs))}) than its predecessor ({sorted(map(str, mine))})"
            )
            return own
        # The same layouts take each other's items; a piece without steps appends none (the
        # episode's last observation stays its own), so it is tried as the others are.
        if columns == joined.columns and len(shell) > 0 and len(piece) > 0:
            return _Joined(piece, columns, joined.spaces)
        # Otherwise the joined episode's columns (its first piece's) must take this piece's
        # items, every one (an int column refuses 0.5): tried, as load_episode would.
        trial = _last_step(shell)
        # The joined episode's spaces: it compares in them, and checks a list piece's steps.
        trial.observation_space, trial.action_space = joined.spaces
        try:  # one id_key, not always an equal id (NaN): concat_piece, as load_episode
            concat_piece(trial, piece)
        except (AssertionError, ValueError, TypeError) as err:
            problem = f"episode {id_!r}: piece at t={t} does not join its predecessor: {err}"
            wide = _wide_join(shell, piece, joined.spaces)
            if wide is None:
                problems.append(problem)
                return own
            # load_episode(numpy=True) joins it (each leaf in the pieces' result_type), but the
            # default numpy=None refuses the id: still a problem, saying so. Later pieces join
            # onto the widened columns, as numpy=True joins them.
            problems.append(f"{problem} ({NUMPY_ONLY})")
            trial = wide
        return _Joined(_last_step(trial), _columns_of(trial), joined.spaces)


def _wide_join(
    shell: SingleAgentEpisode, piece: SingleAgentEpisode, spaces: tuple[Any, Any]
) -> SingleAgentEpisode | None:
    """``shell``'s last step joined with ``piece`` as ``load_episode(numpy=True)`` joins them.

    None where that join fails too. ``piece`` is left as read (the casts are on a copy).
    """
    trial, later = _last_step(shell), copy.deepcopy(piece)
    trial.observation_space, trial.action_space = spaces
    try:
        widen_pieces([trial, later])
        concat_piece(trial, later)
    except (AssertionError, ValueError, TypeError, DatasetError):
        return None
    return trial

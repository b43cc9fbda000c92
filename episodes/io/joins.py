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
from episodes.io.reader import iter_chunks
from episodes.io.shard_reader import Dataset
from episodes.io.shards import is_v2
from episodes.io.values import decode_value, id_key
from episodes.structs import data_equal, flatten

__all__ = ["PieceJoins", "manifest_pieces", "piece_problems"]

PathLike = str | os.PathLike[str]
Piece = tuple[Any, int, int, bool]


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
        rows: list[Any] = ds.summaries
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
class _Border:
    observation: Any
    keys: frozenset[str]
    has_steps: bool
    piece: SingleAgentEpisode  # held until the neighbour is read (numpy reads are mmap views)
    columns: tuple[Any, ...]  # what decides whether columns take each other's items


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


def _edge(piece: SingleAgentEpisode, first: bool) -> SingleAgentEpisode:
    """The piece's first or last step as a piece of its own (a copy to try the join on)."""
    n = len(piece)
    edge = piece if n == 0 else piece[0:1] if first else piece[n - 1 : n]
    return copy.deepcopy(edge)


class PieceJoins:
    """Checks, one read piece at a time, that each piece starts where the one before it ended.

    Neighbours are the pieces of one id in time order whose manifest ranges meet
    (``t == t_started``; other pairs are :func:`piece_problems`' to report). Like
    ``concat_episode``, the later piece's first observation must equal the earlier one's last
    (leaf-wise, NaNs equal), two pieces with steps must have the same extra-model-output
    keys, and their numpy columns must take each other's items (where the layouts differ, the
    two border steps are joined on trial). Pieces may be checked in any order; a piece is kept
    only until its neighbour is checked, so reading a dataset in time order holds one piece
    per running episode.

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
        self._first: dict[int, _Border] = {}  # read pieces whose predecessor is not read yet
        self._last: dict[int, _Border] = {}  # read pieces whose successor is not read yet
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
        """Borders held, waiting for a neighbour to be checked.

        Example:
            >>> ep = SingleAgentEpisode("x", observations=[0, 1, 2], actions=[0, 1],
            ...                         rewards=[1.0, 1.0], len_lookback_buffer=0)
            >>> joins = PieceJoins([("x", 0, 1, False), ("x", 1, 2, False)])
            >>> _ = joins.check(0, ep[0:1]); joins.pending
            1
        """
        return len(self._first) + len(self._last)

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
        keys = frozenset(str(k) for k in piece.extra_model_outputs)
        has_steps = len(piece) > 0
        problems = []
        prev = self._before.get(index)
        after = self._after.get(index)
        columns = _columns_of(piece) if prev is not None or after is not None else ()
        inherited = None
        if prev is not None:
            first = _Border(piece.observations.get(0), keys, has_steps, piece, columns)
            if prev in self._read:
                inherited = self._last.pop(prev)
                problems += self._compare(inherited, first, index)
            else:
                self._first[index] = first
        if after is not None:
            last = _Border(piece.observations.get(-1), keys, has_steps, piece, columns)
            if not has_steps and inherited is not None:
                # A piece without steps passes its predecessor's keys on: the successor joins
                # the episode built so far (checked when the pieces come in time order).
                last = _Border(
                    last.observation,
                    inherited.keys,
                    inherited.has_steps,
                    inherited.piece,
                    inherited.columns,
                )
            if after in self._read:
                problems += self._compare(last, self._first.pop(after), after)
            else:
                self._last[index] = last
        return problems

    def _compare(self, last: _Border, first: _Border, later: int) -> list[str]:
        id_, t = self._where[later]
        if not data_equal(first.observation, last.observation):
            return [
                f"episode {id_!r}: piece at t={t} does not start with its predecessor's last "
                "observation"
            ]
        if last.has_steps and first.has_steps and last.keys != first.keys:
            return [
                f"episode {id_!r}: piece at t={t} has other extra-model-output keys "
                f"({sorted(first.keys)}) than its predecessor ({sorted(last.keys)})"
            ]
        if last.columns == first.columns:
            return []  # the same column layouts take each other's items
        # Otherwise the columns must still take each other's items (another shape or dtype
        # kind cannot): tried on the two border steps, as load_episode's concat would.
        trial = _edge(last.piece, first=False)
        try:
            trial.concat_episode(_edge(first.piece, first=True))
        except (AssertionError, ValueError, TypeError) as err:
            return [f"episode {id_!r}: piece at t={t} does not join its predecessor: {err}"]
        return []

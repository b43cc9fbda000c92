"""Where the n-step horizons of a stored piece go on: the first steps of the pieces after it.

An episode written one ``runner.sample()`` at a time is stored in pieces that continue one
another (``episodes.io.piece_windows.piece_runs`` finds them from the manifest alone). The
Ray read tasks give each piece's steps as n-step transitions; the last ``n_step - 1`` steps of
a piece that another continues sum rewards over the first steps of that one (of several, where
pieces are shorter than ``n_step - 1``), as ``TransitionDataset`` and the episode written whole
give them. The driver works out, once from the manifest, which steps of which pieces each piece
needs (:func:`piece_continuations`); each read task reads only those steps
(:func:`read_continuations`) and hands them to ``nstep_columns(..., after=...)``.

Example:
    >>> from episodes.io.shards import EpisodeRow
    >>> rows = [EpisodeRow("a", 0, 3, 3.0, False, False), EpisodeRow("b", 0, 2, 2.0, True, False),
    ...         EpisodeRow("a", 3, 4, 1.0, False, False), EpisodeRow("a", 4, 9, 5.0, True, False)]
    >>> follows = piece_continuations(rows, n_step=3)
    >>> follows[0]  # a's first piece: a's 1-step piece, then 1 step of its last
    Continuation(spans=((2, 1), (3, 1)), terminated=False, truncated=False)
    >>> sorted(follows)  # b and a's last piece end their runs: nothing follows them
    [0, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from episodes.indexing import whole_number
from episodes.io.piece_windows import piece_runs
from episodes.io.shards import EpisodeRow, is_v2, piece_ends
from episodes.structs import flatten, is_nested, unflatten

__all__ = ["Continuation", "manifest_layout", "piece_continuations", "read_continuations"]


class Continuation(NamedTuple):
    """The steps that continue a piece, as far as its n-step horizons reach.

    Attributes:
        spans: ``(piece, steps)`` per piece continuing it, in time order: its first ``steps``
            steps (manifest indexes).
        terminated: Whether the episode ends that way after the last of those steps.
        truncated: Likewise.

    Example:
        >>> Continuation(((4, 2),), True, False).spans
        ((4, 2),)
    """

    spans: tuple[tuple[int, int], ...]
    terminated: bool
    truncated: bool


def piece_continuations(rows: Sequence[EpisodeRow], n_step: int) -> dict[int, Continuation]:
    """Per piece another continues, the steps its ``n_step`` horizons reach into.

    Args:
        rows: The dataset's manifest rows (``Dataset.summaries``; those of a v1 manifest too).
        n_step: Steps per transition: ``n_step - 1`` steps after a piece are wanted.

    Returns:
        A dict from manifest index to :class:`Continuation`; pieces that end their run (the
        episode, or the steps stored of it) are left out, and every piece for ``n_step == 1``.

    Raises:
        ValueError: ``n_step`` is no whole number of at least 1.

    Example:
        >>> from episodes.io.shards import EpisodeRow
        >>> rows = [EpisodeRow("a", 0, 2, 0.0, False, False),
        ...         EpisodeRow("a", 2, 3, 0.0, False, True)]
        >>> piece_continuations(rows, 4)  # the run ends after one more step: truncated
        {0: Continuation(spans=((1, 1),), terminated=False, truncated=True)}
        >>> piece_continuations(rows, 1)
        {}
    """
    want = whole_number(n_step, "n_step", 1) - 1
    out: dict[int, Continuation] = {}
    if not want:
        return out
    runs = piece_runs(rows)
    bounds = runs.bounds.tolist()
    for run in np.flatnonzero(np.diff(runs.bounds) > 1).tolist():  # runs of several pieces
        pieces = runs.pieces[bounds[run] : bounds[run + 1]].tolist()
        steps = runs.steps[bounds[run] : bounds[run + 1]].tolist()
        terminated, truncated = bool(runs.terminated[run]), bool(runs.truncated[run])
        for p in range(len(pieces) - 1):  # per piece, at most n_step - 1 pieces after it
            spans, got, q = [], 0, p + 1
            while got < want and q < len(pieces):
                take = min(steps[q], want - got)
                spans.append((pieces[q], take))
                got, q = got + take, q + 1
            whole = q == len(pieces) and spans[-1][1] == steps[-1]  # up to the run's end
            out[pieces[p]] = Continuation(tuple(spans), terminated and whole, truncated and whole)
    return out


def manifest_layout(
    path: str, parallelism: int, n_step: int = 1
) -> tuple[list[tuple[int, int]], np.ndarray, dict[int, Continuation]]:
    """A dataset's read ranges, per chunk its end flags, and the chunks' continuations.

    ``[start, stop)`` chunk ranges: one per v2 shard, or ``parallelism`` even v1 ranges. Per
    chunk ``(terminated, truncated)`` after its last step: its own flags, unless a later chunk
    of its episode without steps, starting where it ends, ended the episode (as
    ``load_episode`` joins them; see ``episodes.io.shards.piece_ends``). And
    :func:`piece_continuations` for ``n_step``. All from one read of the manifest, so they agree
    while writers append.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> first = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> second = first.cut()
        >>> second.add_env_step(2, 0, 1.0, terminated=True)
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([first, second])
        >>> ranges, ends, follows = manifest_layout(path, 1, n_step=2)
        >>> ranges, ends.tolist(), follows
        ([(0, 2)], [[False, False], [True, False]], {0: Continuation(spans=((1, 1),), \
terminated=True, truncated=False)})
    """
    from episodes import io
    from episodes.io.reader import iter_chunks

    if is_v2(Path(path)):
        ds = io.Dataset(path, max_open_shards=1)
        bounds, start = [], 0
        for shard in ds.shards:
            bounds.append((start, start + len(shard.episodes)))
            start += len(shard.episodes)
        ranges = [b for b in bounds if b[1] > b[0]]
        rows: Sequence[EpisodeRow] = ds.summaries
    else:
        rows = [  # a v1 manifest line holds the same summary
            EpisodeRow(e.id_, e.t_started, e.t, e.ret, e.terminated, e.truncated)
            for e in iter_chunks(path)[1]
        ]
        count = len(rows)
        parts = max(1, min(int(parallelism), count))
        edges = np.linspace(0, count, parts + 1).round().astype(int).tolist()
        ranges = [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    ends = np.array(piece_ends(rows), dtype=bool).reshape(-1, 2)
    return ranges, ends, piece_continuations(rows, n_step)


def read_continuations(
    path: str, start: int, chunks: Sequence[Any], follows: Mapping[int, Continuation]
) -> list[dict[str, Any] | None]:
    """Per chunk of a read task (manifest indexes from ``start``), the steps continuing it.

    Each as ``nstep_columns(..., after=...)`` takes it: ``observations`` (one more than
    ``rewards``, the first the chunk's last), ``rewards``, ``terminated``, ``truncated``; None
    where nothing continues the chunk. A continuing chunk among ``chunks`` (numpy'd, as read)
    is not read again; of another, only the steps wanted are read (``Dataset.steps`` of a v2
    dataset; a v1 chunk is read whole).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> first = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> second = first.cut()
        >>> second.add_env_step(2, 0, 5.0)
        >>> second.add_env_step(3, 0, 6.0)
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([first, second])
        >>> _, _, follows = manifest_layout(path, 1, n_step=2)
        >>> [after] = read_continuations(path, 0, [first.to_numpy()], follows)
        >>> after["observations"].tolist(), after["rewards"].tolist(), after["terminated"]
        ([1, 2], [5.0], False)
    """
    reader: list[Any] = []  # the v2 reader, opened at the first chunk read from it

    def head(piece: int, count: int) -> tuple[Any, Any]:
        """Observations ``[0, count]`` and rewards ``[0, count)`` of the piece."""
        local = piece - start
        if 0 <= local < len(chunks):
            chunk = chunks[local]
        else:
            from episodes import io

            if not reader:
                v2 = is_v2(Path(path))
                reader.append(io.Dataset(path, max_open_shards=4) if v2 else None)
            if reader[0] is not None:
                steps = reader[0].steps(piece, 0, count)
                obs, rewards = steps["observations"], steps["rewards"]
                if _batched(obs) and isinstance(rewards, np.ndarray):
                    return obs, rewards
            # v1, or columns stored as JSON: the chunk, numpy'd as the read task reads it.
            [chunk] = io.read_episodes(path, start=piece, stop=piece + 1, numpy=True)
        return chunk.get_observations(slice(0, count + 1)), chunk.get_rewards(slice(0, count))

    out: list[dict[str, Any] | None] = []
    for i in range(start, start + len(chunks)):
        follow = follows.get(i)
        if follow is None:
            out.append(None)
            continue
        parts = [head(piece, count) for piece, count in follow.spans]
        observations = _joined([parts[0][0], *[_rows_from(obs, 1) for obs, _ in parts[1:]]])
        rewards = np.concatenate([np.asarray(r) for _, r in parts])
        out.append(
            {
                "observations": observations,
                "rewards": rewards,
                "terminated": follow.terminated,
                "truncated": follow.truncated,
            }
        )
    return out


def _batched(batch: Any) -> bool:
    leaves = flatten(batch)[0] if is_nested(batch) else [batch]
    return all(isinstance(leaf, np.ndarray) for leaf in leaves)


def _rows_from(batch: Any, start: int) -> Any:
    if is_nested(batch):
        leaves, structure = flatten(batch)
        return unflatten(structure, [np.asarray(leaf)[start:] for leaf in leaves])
    return np.asarray(batch)[start:]


def _joined(parts: Sequence[Any]) -> Any:
    """Batched observations of consecutive pieces as one batch (leaf by leaf)."""
    if len(parts) == 1:
        return parts[0]
    if not is_nested(parts[0]):
        return np.concatenate([np.asarray(part) for part in parts])
    flat = [flatten(part) for part in parts]
    leaves = [np.concatenate([np.asarray(f[0][i]) for f in flat]) for i in range(len(flat[0][0]))]
    return unflatten(flat[0][1], leaves)

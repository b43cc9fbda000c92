"""The order in which ``from_dataset`` adds a dataset's pieces, and their adds in batches.

Episodes come in the order ``dataset_info`` lists them, where each one's first piece was
*written* (as ``TransitionDataset``, ``SequenceDataset`` and ``export_minari`` give them); an
episode's pieces in time order (``t_started``, ``t``). A piece waits for the piece before it in
its episode's time order, and an episode's first piece waits until every episode written before
it has begun (stored a step, or had all its pieces added): a dataset written in time order is
added in the order it was written, chunk by chunk, as a runner's vector env added it. The order
is worked out from the manifest first (each piece's step count), and the pieces are then read
in it, one at a time (by index): a piece never waits in memory for another one to be read, only
for its add batch.

The pieces go to ``add`` in batches of consecutive pieces (one ``add`` of many chunks leaves
what adding them one by one leaves: its evictions are decided after each chunk, and a chunk of
an episode an earlier chunk of the same add evicted goes with it); a piece of an episode an
earlier add evicted is added alone (:func:`episodes.replay.dataset_pieces._add`), and a batch
``add`` refuses is added again piece by piece (``add`` changed nothing), so that a refusal names
the piece, the dataset and the episode as before.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from episodes.io.reader import iter_chunks, load_chunk
from episodes.io.shard_reader import Dataset
from episodes.io.shards import is_v2
from episodes.io.values import SameIds
from episodes.replay.dataset_pieces import _add, _stopped, _time_ranks

__all__ = ["fill_from_dataset"]

_BATCH_PIECES = 512  # pieces an add takes at most (held in memory till then)
_BATCH_STEPS = 4_096  # steps an add takes at most (an extra copy of them: 115 MB of Atari frames)


def fill_from_dataset(
    buffer: Any,
    path: str | os.PathLike[str],
    default: bool,
    stored: dict[str, tuple[int, bool, int, Any]] | None = None,
) -> int:
    """Adds every piece of the dataset at ``path`` to ``buffer``; the steps read.

    ``default``: the capacity is the steps read, raised as pieces come (pieces another writer
    commits while it reads too), so that loading evicts nothing. ``stored``: where the
    episodes the buffer held before stop (by ``id_key``, as ``_stopped`` gives it), so that a
    piece of one evicted while loading is checked against it as one ``add`` would check it.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> path = tempfile.mkdtemp()
        >>> def piece(id_, a, b):
        ...     return SingleAgentEpisode(id_, observations=list(range(a, b + 1)),
        ...         actions=[0] * (b - a), rewards=[1.0] * (b - a), t_started=a,
        ...         terminated=id_ == "B" or a > 0, len_lookback_buffer=0)
        >>> with EpisodeWriter(path) as writer:
        ...     for p in (piece("A", 3, 6), piece("B", 0, 4), piece("A", 0, 3)):
        ...         _ = writer.write(p)
        >>> buffer = EpisodeReplayBuffer(100)
        >>> fill_from_dataset(buffer, path, False), buffer.get_episode_ids()
        (10, ['A', 'B'])
    """
    adder = _Adder(buffer, path)
    ranks = _time_ranks(path)
    with _Pieces(path) as pieces:
        order, added = _add_order(ranks, pieces.lengths)
        _presize(buffer, sum(pieces.lengths[i] for i in order[:added]), default)
        left = Counter(key for key, _ in ranks.values())  # pieces of each episode to come
        ends: dict[Any, tuple[int, bool, int, Any]] = dict(stored or {})  # where they stopped
        read = 0
        for position, (index, piece) in enumerate(zip(order, pieces.read(order), strict=True)):
            read += len(piece)
            if default and read > buffer.capacity:
                buffer.capacity = read
            if position >= added:
                continue  # read, as before, but not added: an earlier piece never came
            key = ranks.get(index, (None, 0))[0]
            if key is None:  # committed after the manifest was read: as it comes
                adder.add(piece, None)
                continue
            adder.add(piece, ends.get(key))
            left[key] -= 1
            stopped = _stopped(piece, ends.get(key)) if left[key] else None
            if stopped is None:  # the episode's last piece: nothing left to check against it
                ends.pop(key, None)
            else:
                ends[key] = stopped
        adder.flush()
    return read


def _presize(buffer: Any, steps: int, default: bool) -> None:
    """Sizes an empty buffer's columns for ``steps`` rows where they will all be kept.

    The manifest gives the step count up front; growing the columns as batches come would hold
    an old and a new copy of a column at each growth (a peak of about twice the frames of an
    Atari dataset). Where the capacity is smaller, evictions come and the columns grow and
    compact as ``add`` sizes them.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buffer = EpisodeReplayBuffer(10_000)
        >>> _presize(buffer, 5_000, False); buffer._store.size
        5000
    """
    store = buffer._store
    if store.end or store.obs is not None or not (default or steps <= buffer.capacity):
        return
    store.capacity = int(buffer.capacity)
    store.reserve(steps)


def _add_order(ranks: dict[int, tuple[Any, int]], lengths: list[int]) -> tuple[list[int], int]:
    """The manifest indices in the order their pieces are added, and how many are added.

    Worked out from the pieces' step counts (``lengths``, of the manifest the pieces are read
    from) as the module says. Indices beyond ``ranks`` (committed after it was read) come after
    the others, in order. A piece whose episode's earlier piece that manifest does not list
    (``ranks`` read from a longer one) comes last and is not added: it is read, as before.

    Example:
        >>> ranks = {0: ("A", 1), 1: ("B", 0), 2: ("A", 0)}
        >>> _add_order(ranks, [3, 4, 3]), _add_order(ranks, [3, 4, 3, 2])
        (([2, 0, 1], 3), ([2, 0, 1, 3], 4))
    """
    keys = list(dict.fromkeys(key for key, _ in ranks.values()))  # as first written
    place = {key: i for i, key in enumerate(keys)}
    gate = 0  # the episodes before it have begun: the one there may begin
    begun: set[Any] = set()
    waiting: dict[tuple[Any, int], int] = {}
    expected: Counter[Any] = Counter()
    left = Counter(key for key, _ in ranks.values())
    order: list[int] = []
    for index in range(len(lengths)):
        key, rank = ranks.get(index, (None, 0))
        if key is None:
            order.append(index)
            continue
        waiting[key, rank] = index
        todo = [key]
        while todo:
            key = todo.pop()
            while place[key] <= gate and (key, expected[key]) in waiting:
                added = waiting.pop((key, expected[key]))
                order.append(added)
                expected[key] += 1
                left[key] -= 1
                if lengths[added] or not left[key]:  # stored a step, or all its pieces added
                    begun.add(key)
            while gate < len(keys) and keys[gate] in begun:
                gate += 1
                if gate < len(keys):
                    todo.append(keys[gate])
    return order + sorted(waiting.values()), len(order)


class _Pieces:
    """The dataset's pieces by manifest index (either format), from one manifest read.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[0],
        ...         rewards=[1.0], len_lookback_buffer=0) for x in "ab"])
        >>> with _Pieces(path) as pieces:
        ...     pieces.lengths, [p.id_ for p in pieces.read([1, 0])]
        ([1, 1], ['b', 'a'])
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.dataset: Dataset | None = None
        if is_v2(Path(path)):  # as read_episodes tells the formats apart
            self.dataset = Dataset(path)
            rows: Any = self.dataset.summaries
        else:
            self.root, self.entries, _ = iter_chunks(path)
            rows = self.entries
        #: Each piece's steps, as the manifest says (a piece read is checked against it).
        self.lengths = [row.t - row.t_started for row in rows]

    def read(self, order: list[int]) -> Iterator[Any]:
        """The pieces at ``order``, numpy'd, each read when the one before it is done with."""
        same_ids = SameIds()  # as read_episodes: one id object for a NaN-holding id's pieces
        if self.dataset is not None:
            pieces: Any = self.dataset.iter_episodes(order, numpy=True)
        else:
            pieces = (load_chunk(self.root, self.entries[i], numpy=True) for i in order)
        return (same_ids.of(piece) for piece in pieces)

    def __enter__(self) -> _Pieces:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dataset is not None:
            self.dataset.close()


class _Adder:
    """Pieces added in batches, as adding them one by one would (see the module)."""

    def __init__(self, buffer: Any, path: Any) -> None:
        from episodes.replay.buffer import EpisodeReplayBuffer
        from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

        self.buffer, self.path = buffer, path
        self.batch: list[tuple[Any, Any]] = []
        self.steps = 0
        # A subclass's own add (or the hooks it calls) is called once a piece, as before.
        prioritized = isinstance(buffer, PrioritizedEpisodeReplayBuffer)
        base = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
        hooks = ("add", "_check_fit", "_prepare", "_write", "_on_append", "_on_reserve", "_evict")
        self.batched = all(getattr(type(buffer), h) is getattr(base, h) for h in hooks)

    def add(self, piece: Any, end: Any) -> None:
        try:
            evicted = piece.id_ in self.buffer._evicted
        except TypeError:  # unhashable: add refuses it, naming it
            evicted = True
        if not self.batched or evicted:
            self.flush()  # in its place: after the pieces before it
            _add(self.buffer, piece, end, self.path)
            return
        self.batch.append((piece, end))
        self.steps += len(piece)
        # No more steps than the capacity: an add reserves rows for all of its steps, and the
        # store keeps them (a 500-step buffer would hold 4,096 rows for good).
        if len(self.batch) >= _BATCH_PIECES or self.steps >= min(
            _BATCH_STEPS, self.buffer.capacity
        ):
            self.flush()

    def flush(self) -> None:
        batch, self.batch, self.steps = self.batch, [], 0
        if len(batch) > 1:
            try:
                self.buffer.add([piece for piece, _ in batch])
                return
            except (TypeError, ValueError):
                pass  # nothing changed: one by one, the refusal naming its piece
        for piece, end in batch:
            _add(self.buffer, piece, end, self.path)

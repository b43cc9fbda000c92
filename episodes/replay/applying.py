"""Carrying out an ``add``'s plan: the table in plan order, the rows and evictions in batches.

The table is updated chunk by chunk and eviction by eviction in the plan's order (rows freed by
an eviction are reused by the chunks after it, as they always were). The step rows wait and are
written in one ``append_many`` per batch: only an eviction of an episode with waiting rows
writes them first (its slots are read from the store). The evicted slots are marked dead once,
after the last write: a slot's place does not depend on when others die, so the store, the
table and a prioritized buffer's leaves end as they would after one write and one eviction at
a time, and a thousand tiny rollouts cost a few numpy calls rather than a few thousand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.replay import sampling

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer
    from episodes.replay.ingest import Chunk

__all__ = ["apply_one_by_one", "apply_plan", "evict_one", "write_chunks"]


class _Waiting:
    """Rows booked in the table but not yet written: what ``append_many`` takes."""

    __slots__ = ("chunks", "prev", "rows", "start", "t0s", "touched")

    def __init__(self, start: int) -> None:
        self.start = start  # the slot the next booked row gets
        self.chunks: list[Chunk] = []
        self.rows: list[int] = []
        self.prev: list[int] = []
        self.t0s: list[int] = []
        self.touched: set[int] = set()  # table rows with waiting steps


def apply_plan(buffer: EpisodeReplayBuffer, steps: list[tuple[str, Any]]) -> None:
    """Carries out ``steps`` (``Plan.steps``, checked) on ``buffer``; nothing here refuses.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> from episodes.replay.ingest import prepare
        >>> buf = EpisodeReplayBuffer(4)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> b = prepare(SingleAgentEpisode("b", observations=[0.0, 1.0, 2.0, 3.0],
        ...                                actions=[0, 1, 0], rewards=[1.0] * 3,
        ...                                len_lookback_buffer=0))
        >>> buf._store.reserve(3)
        >>> apply_plan(buf, [("chunk", b), ("evict", "a")])
        >>> buf.get_episode_ids(), buf.get_num_timesteps(), buf.get_evicted_ids()
        (['b'], 3, ['a'])
    """
    store, table = buffer._store, buffer._table
    waiting = _Waiting(store.end)
    killed: list[np.ndarray] = []
    for kind, item in steps:
        if kind == "chunk":
            _book(buffer, item, waiting)
        elif kind == "drop":
            buffer._num_added += item.n  # added and evicted with its episode in this call
        else:
            row = table.order[item]
            if row in waiting.touched:  # its slots are read from the store: write them first
                waiting = _flush(buffer, waiting)
            killed.append(sampling.episode_slots(store, table, row))
            table.close(item)
            buffer._note_evicted(item)
    _flush(buffer, waiting)
    if killed:
        slots = killed[0] if len(killed) == 1 else np.concatenate(killed)
        store.kill(slots)
        buffer._on_kill(slots)


def apply_one_by_one(buffer: EpisodeReplayBuffer, steps: list[tuple[str, Any]]) -> None:
    """:func:`apply_plan` through ``buffer``'s ``_write`` and ``_evict``, one eviction at a time.

    For a subclass with its own ``_write`` or ``_evict``: each is called as before batching
    (the rows written before an eviction, then the eviction).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> from episodes.replay.ingest import prepare
        >>> buf = EpisodeReplayBuffer(4)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> b = prepare(SingleAgentEpisode("b", observations=[0.0, 1.0, 2.0, 3.0],
        ...                                actions=[0, 1, 0], rewards=[1.0] * 3,
        ...                                len_lookback_buffer=0))
        >>> buf._store.reserve(3)
        >>> apply_one_by_one(buf, [("chunk", b), ("evict", "a")])
        >>> buf.get_episode_ids(), buf.get_num_timesteps(), buf.get_evicted_ids()
        (['b'], 3, ['a'])
    """
    pending: list[Chunk] = []
    for kind, item in steps:
        if kind == "chunk":
            pending.append(item)
        elif kind == "drop":
            buffer._num_added += item.n  # added and evicted with its episode in this call
        else:
            buffer._write(pending)  # an eviction reads the rows written before it
            pending = []
            buffer._evict(item)
    buffer._write(pending)


def write_chunks(buffer: EpisodeReplayBuffer, chunks: list[Chunk]) -> None:
    """Enters ``chunks`` in the table in order, then writes their rows in one batch.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> from episodes.replay.ingest import prepare
        >>> buf = EpisodeReplayBuffer(4)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0],
        ...                            rewards=[1.0], len_lookback_buffer=0))
        >>> buf._store.reserve(1)
        >>> write_chunks(buf, [prepare(SingleAgentEpisode("b", observations=[0.0, 1.0],
        ...                                               actions=[0], rewards=[2.0],
        ...                                               len_lookback_buffer=0))])
        >>> buf.get_episode_ids(), buf.get_added_timesteps()
        (['a', 'b'], 2)
    """
    waiting = _Waiting(buffer._store.end)
    for chunk in chunks:
        _book(buffer, chunk, waiting)
    _flush(buffer, waiting)


def evict_one(buffer: EpisodeReplayBuffer, id_: Any) -> None:
    """Evicts one stored episode: its slots die, its row is freed, its id remembered.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(4)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0],
        ...                            rewards=[1.0], len_lookback_buffer=0))
        >>> evict_one(buf, "a")
        >>> buf.get_num_timesteps(), buf.get_evicted_ids(), buf.get_num_episodes_evicted()
        (0, ['a'], 1)
    """
    table, store = buffer._table, buffer._store
    row = table.order[id_]
    slots = sampling.episode_slots(store, table, row)
    store.kill(slots)
    buffer._on_kill(slots)
    table.close(id_)
    buffer._note_evicted(id_)


def _book(buffer: EpisodeReplayBuffer, chunk: Chunk, waiting: _Waiting) -> None:
    """Enters ``chunk`` in the table (its slots are the next ones); its rows wait."""
    table = buffer._table
    row, n = table.order.get(chunk.id_), chunk.n
    if not n:  # the end of an episode written before it: flags and final info
        assert row is not None  # plan_add keeps such an end only for a begun episode
        table.terminated[row] = chunk.terminated
        table.truncated[row] = chunk.truncated
        table.set_final(row, chunk.obs[-1:], chunk.infos[-1])
        table.join_meta(row, chunk.meta)
        return
    opened = row is None
    if row is None:
        row = table.open(
            chunk.id_,
            t_begin=chunk.t0,
            final_obs=chunk.obs[-1:],
            final_info=chunk.infos[-1],
            meta=chunk.meta,
        )
        buffer._evicted.pop(chunk.id_, None)  # on_evicted="restart": stored again
    else:  # a continuing chunk: its metadata joins the episode's, as concat_episode
        table.join_meta(row, chunk.meta)
    prev = int(table.last_slot[row])
    if prev < 0:
        table.first_slot[row] = waiting.start
    waiting.start += n
    table.last_slot[row] = waiting.start - 1
    table.t_end[row] = chunk.t0 + n
    table.terminated[row] = chunk.terminated
    table.truncated[row] = chunk.truncated
    if not opened:  # open stored the chunk's last observation and info already
        table.set_final(row, chunk.obs[-1:], chunk.infos[-1])
    waiting.chunks.append(chunk)
    waiting.rows.append(row)
    waiting.prev.append(prev)
    waiting.t0s.append(chunk.t0)
    waiting.touched.add(row)


def _flush(buffer: EpisodeReplayBuffer, waiting: _Waiting) -> _Waiting:
    """Writes the waiting rows; returns an empty batch starting after them."""
    if waiting.chunks:
        parts = [(chunk.rows(), chunk.extras, chunk.step_infos()) for chunk in waiting.chunks]
        slots = buffer._store.append_many(
            parts,
            np.array(waiting.rows, np.int64),
            np.array(waiting.t0s, np.int64),
            np.array(waiting.prev, np.int64),
        )
        buffer._num_added += len(slots)
        buffer._on_append(slots)
    return _Waiting(waiting.start)

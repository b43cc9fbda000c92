"""Batched reads of sampled items' episodes: their stored time range, and their steps by time.

Hindsight relabelling (HER) picks, for every item of a batch, a step of the item's own
episode (a later one, the last, or any); :func:`episode_bounds` gives each item's episode range
and :func:`items_at` the items at the picked times, both in a few numpy passes over the batch
rather than one call per episode.

An episode's slots rise with its time, and a run of adjacent slots (an added chunk) holds
consecutive steps: a target time is first looked for at its offset from the item's slot, and
where another episode's chunk lies between, the item's run end is found by bisection and its
link followed to the next run, all items at once, one round per run crossed; once a whole run
was crossed, runs as long and as far apart (a vector env's chunks) are skipped in one probe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.replay import sampling
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable
from episodes.structs import short_repr

__all__ = ["episode_bounds", "items_at", "stored_row"]

# Rounds of run crossings before the items left are looked up one episode at a time.
_ROUNDS = 64


def stored_row(table: EpisodeTable, evicted: Any, episode_id: Any, batched: str) -> int:
    """The table row of one stored episode id; a clear error for anything else.

    ``batched`` names the method taking the items of many episodes at once, for the error
    about an array or list of ids.

    Raises:
        TypeError: ``episode_id`` is unhashable (an array or list of ids).
        KeyError: The episode is not stored (evicted, where the buffer remembers it).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0],
        ...                            rewards=[1.0], len_lookback_buffer=0))
        >>> stored_row(buf._table, {"old": None}, "a", "items_at")
        0
        >>> stored_row(buf._table, {"old": None}, "old", "items_at")
        Traceback (most recent call last):
        ...
        KeyError: "episode 'old' is not stored: it was evicted"
    """
    try:
        row = table.order.get(episode_id)
    except TypeError:  # unhashable: numpy's words name neither the argument nor the fix
        raise TypeError(
            f"episode_id must be one episode id (a hashable value), got "
            f"{type(episode_id).__name__} {short_repr(episode_id)}: for the items of many "
            f"episodes at once, pass item indices to {batched}"
        ) from None
    if row is None:
        gone = ": it was evicted" if episode_id in evicted else ""
        raise KeyError(f"episode {short_repr(episode_id)} is not stored{gone}")
    return row


def _slots(store: StepStore, indices: Any) -> np.ndarray:
    items = np.atleast_1d(sampling.int_array(indices, "indices", KeyError))
    if items.ndim != 1:
        raise ValueError(f"indices must be one index or a 1-d sequence, got shape {items.shape}")
    return sampling.slots_of(store, items)


def episode_bounds(
    store: StepStore, table: EpisodeTable, indices: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item index: its episode's first stored step, one past its last, and whether done.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], t_started=5, len_lookback_buffer=0))
        >>> [x.tolist() for x in episode_bounds(buf._store, buf._table, [1, 0])]
        [[5, 5], [7, 7], [False, False]]
    """
    rows = store.ep[_slots(store, indices)]
    done = table.terminated[rows] | table.truncated[rows]
    return table.t_begin[rows], table.t_end[rows], done


def items_at(store: StepStore, table: EpisodeTable, indices: Any, t: Any) -> np.ndarray:
    """The items of the episodes of ``indices`` at env times ``t`` (one time, or one per item).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> def chunk(id_, t0, n):
        ...     return SingleAgentEpisode(id_, observations=[0.0] * (n + 1), actions=[0] * n,
        ...                               rewards=[1.0] * n, t_started=t0, len_lookback_buffer=0)
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add([chunk("a", 0, 2), chunk("b", 0, 1), chunk("a", 2, 2)])  # interleaved
        >>> items_at(buf._store, buf._table, [0, 2, 4], [3, 0, 0]).tolist()
        [4, 2, 0]
    """
    slots = _slots(store, indices)
    times = sampling.int_array(t, "times", KeyError)
    if times.ndim > 1 or (times.ndim == 1 and len(times) != len(slots)):
        raise ValueError(
            f"times must be one time or one per index ({len(slots)}), got shape {times.shape}"
        )
    times = np.broadcast_to(times, slots.shape)
    rows = store.ep[slots]
    begin, end = table.t_begin[rows], table.t_end[rows]
    outside = (times < begin) | (times >= end)
    if outside.any():
        at = int(np.flatnonzero(outside)[0])
        items = store.uid[slots]
        raise KeyError(
            f"times {short_repr(times[outside].tolist())} outside the stored steps of their "
            f"items' episodes: item {items[at]} of episode {short_repr(table.ids[rows[at]])} "
            f"holds [{begin[at]}, {end[at]}), asked {times[at]}"
        )
    return store.uid[_find(store, table, slots, rows, times)]


def _find(
    store: StepStore, table: EpisodeTable, slots: np.ndarray, rows: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """The slots of episode ``rows`` at ``times`` (all stored), walked from ``slots``.

    Each item starts from the nearest in time of its own slot, its episode's first slot and
    its last, and walks toward the target (forward along ``nxt`` or back along ``prv``).
    """
    now = store.t[slots]
    first, last = table.first_slot[rows], table.last_slot[rows]
    ahead = times >= now
    # Forward from the item's slot or back from the episode's last, whichever is nearer in time;
    # back from the item's slot or forward from the episode's first likewise.
    from_last = ahead & (table.t_end[rows] - 1 - times < times - now)
    from_first = ~ahead & (times - table.t_begin[rows] < now - times)
    cur = np.where(from_last, last, np.where(from_first, first, slots))
    sign = np.where(ahead ^ from_last ^ from_first, 1, -1)
    out = np.empty_like(slots)
    todo = np.arange(len(slots))
    # Per item: the length of the run crossed last and the slot distance from its start to the
    # next run's (0: not known yet); chunks of one runner are alike long and alike far apart.
    run, stride = np.zeros_like(slots), np.zeros_like(slots)
    edge_start = from_last | from_first  # whether cur begins its run toward the target
    for _ in range(_ROUNDS):
        target, row = times[todo], rows[todo]
        dist = (target - store.t[cur]) * sign
        # The target at its offset from cur, and where runs like the last would put it.
        guess = cur + sign * dist
        hit = _holds(store, row, guess, target)
        known = ~hit & (stride > 0)
        if known.any():
            runs = np.maximum(run, 1)
            skip = np.where(known, dist // runs * stride + dist % runs, 0)
            guess = np.where(known, cur + sign * skip, guess)
            hit |= known & _holds(store, row, guess, target)
        out[todo[hit]] = guess[hit]
        miss = ~hit
        if not miss.any():
            return out
        todo, cur, sign, dist, row, run, edge_start = (
            a[miss] for a in (todo, cur, sign, dist, row, run, edge_start)
        )
        edge = cur + sign * _run_end(store, row, cur, sign, dist, run)
        step = np.where(sign > 0, store.nxt[edge], store.prv[edge])
        run = np.abs(edge - cur) + 1
        stride = np.where(edge_start, np.abs(step - cur), 0)
        edge_start = np.ones_like(edge_start)
        kept = step >= 0  # no next run although the target is stored: walk that episode
        if not kept.all():
            _by_episode(store, table, out, todo[~kept], rows, times)
            todo, step, sign, run, stride, edge_start = (
                a[kept] for a in (todo, step, sign, run, stride, edge_start)
            )
        cur = step
        if not len(todo):
            return out
    _by_episode(store, table, out, todo, rows, times)
    return out


def _run_end(
    store: StepStore,
    row: np.ndarray,
    cur: np.ndarray,
    sign: np.ndarray,
    dist: np.ndarray,
    run: np.ndarray,
) -> np.ndarray:
    """Per item, the largest ``k < dist`` with slot ``cur + sign * k`` the step ``k`` away.

    That slot ends ``cur``'s run toward the target (``k = 0`` always holds, ``dist`` never:
    it was no hit). Chunks of one runner are alike long, so the length of the run crossed
    last is tried first (two probes); a bisection of what is left finds the others.
    """
    base = store.t[cur]

    def holds(k: np.ndarray) -> np.ndarray:
        return _holds(store, row, cur + sign * k, base + sign * k)

    lo, hi = np.zeros_like(dist), dist.copy()
    tried = np.clip(run - 1, 0, dist - 1)  # the last run's length again
    ok = holds(tried)
    lo, hi = np.where(ok, tried, lo), np.where(ok, hi, tried)
    after = np.minimum(lo + 1, hi)  # the step past it: where the run is that long, it fails
    ends = ~holds(after) | (after == hi)
    hi = np.where(ok & ends, lo + 1, hi)
    lo = np.where(~ends & ok, after, lo)
    while True:
        wide = hi - lo > 1
        if not wide.any():
            return lo
        mid = np.where(wide, (lo + hi) // 2, lo)
        ok = holds(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok | ~wide, hi, mid)


def _holds(store: StepStore, row: np.ndarray, slot: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each slot (clipped into the stored ones) is a live step of ``row`` at ``t``."""
    at = np.clip(slot, 0, store.end - 1)
    return store.live[at] & (store.ep[at] == row) & (store.t[at] == t)


def _by_episode(
    store: StepStore,
    table: EpisodeTable,
    out: np.ndarray,
    todo: np.ndarray,
    rows: np.ndarray,
    times: np.ndarray,
) -> None:
    """Fills ``out[todo]`` one episode at a time (episodes of many short runs, broken links)."""
    for row in np.unique(rows[todo]).tolist():
        mine = todo[rows[todo] == row]
        steps = sampling.episode_slots(store, table, row)
        out[mine] = steps[times[mine] - table.t_begin[row]]

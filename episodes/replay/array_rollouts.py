"""``add_rollouts``: a batch of rollouts given as arrays, stored as one finished episode each.

The result is what ``add`` of the equivalent ``SingleAgentEpisode`` chunks gives (the same
state, samples and evictions), but without an episode or a chunk per rollout: the rows of all
rollouts are fitted to the columns and written in one go, the table rows of the kept rollouts
filled at once, and the evictions found from the lengths' running sum. Only an evicted episode
costs Python of its own (its id is remembered, its table row freed).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.replay import sampling
from episodes.replay.applying import apply_one_by_one, apply_plan
from episodes.replay.counters import EVICTED_IDS_KEPT
from episodes.replay.episode_ids import check_episode_id
from episodes.replay.ingest import Chunk, plan_add
from episodes.replay.metadata import EpisodeMeta
from episodes.replay.nested import put_rows
from episodes.replay.rollout_arrays import Rollouts, read_rollouts
from episodes.replay.store import StepStore, deferred_interrupts
from episodes.replay.table import StoredEpisodes
from episodes.structs import short_repr

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = ["add_rollouts", "fresh_ids"]

_FEW = 32  # evictions found one by one below this; above, in one pass over the slots


def add_rollouts(
    buffer: EpisodeReplayBuffer,
    observations: Any,
    actions: Any,
    rewards: Any,
    *,
    terminated: Any = None,
    truncated: Any = None,
    lengths: Any = None,
    extra_model_outputs: Mapping[str, Any] | None = None,
    ids: Any = None,
) -> list[Any]:
    """Stores ``B`` rollouts as ``B`` new episodes; returns their ids (``EpisodeReplayBuffer``'s).

    See :meth:`~episodes.replay.EpisodeReplayBuffer.add_rollouts`.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> add_rollouts(buf, np.zeros((2, 3, 1)), np.zeros((2, 2)), np.ones((2, 2)), ids=[7, 8])
        [7, 8]
        >>> buf.get_num_timesteps()
        4
    """
    got = read_rollouts(
        observations,
        actions,
        rewards,
        terminated=terminated,
        truncated=truncated,
        lengths=lengths,
        extra_model_outputs=extra_model_outputs,
    )
    names = _ids(buffer, ids, len(got.n))
    if not len(names):
        return names
    got.obs, got.actions, got.extras, got.last_obs = _fitted(buffer, got)
    from episodes.replay.buffer import EpisodeReplayBuffer as Base
    from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

    cls = type(buffer)
    own_writes = (cls._write, cls._evict) != (Base._write, Base._evict)
    if own_writes or cls._check_fit not in (
        Base._check_fit,
        PrioritizedEpisodeReplayBuffer._check_fit,
    ):
        _as_chunks(buffer, got, names, batched=not own_writes)  # a subclass's hooks, as add
        return names
    if isinstance(buffer, PrioritizedEpisodeReplayBuffer):  # its _check_fit's own check
        start = buffer._max_priority
        if not math.isfinite(
            buffer._tree.total + len(got.obs) * buffer._leaf_of(start, buffer.alpha)
        ):
            raise ValueError(
                f"adding these steps at max_priority={start} would make the sum of all "
                "priorities infinite"
            )
    _store_all(buffer, got, names)
    return names


def _ids(buffer: EpisodeReplayBuffer, ids: Any, b: int) -> list[Any]:
    if ids is None:
        return fresh_ids(b)
    scalar = isinstance(ids, np.ndarray) and ids.ndim == 0  # its tolist() is one id
    unordered = isinstance(ids, (set, frozenset))
    if scalar or unordered or isinstance(ids, (str, bytes, Mapping)) or not hasattr(ids, "__len__"):
        # A set's order is its hash order (a str's changes between processes): which rollout
        # would get which id is chance.
        why = " (a set has no order: give a list)" if unordered else ""
        raise TypeError(
            f"ids: expected a sequence of B = {b} episode ids, got {short_repr(ids)}{why}"
        )
    names = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
    if len(names) != b:
        raise ValueError(f"ids: expected B = {b} episode ids, got {len(names)}")
    for i, id_ in enumerate(names):
        if id_ is None:  # add never sees one: an episode made with id_=None draws a uuid
            raise ValueError(f"ids[{i}] is None: give every rollout an id, or ids=None")
        try:
            check_episode_id(id_)  # a tensor hashes by identity: refused as add refuses it
        except TypeError as err:
            raise TypeError(f"ids[{i}]: {err}") from None
    unique = len(set(names)) == b
    if not unique:
        raise ValueError("ids: each rollout is a new episode and needs an id of its own")
    for taken, held in ((buffer._table.order, "a stored"), (buffer._evicted, "an evicted")):
        if any(id_ in taken for id_ in names):
            id_ = next(id_ for id_ in names if id_ in taken)
            raise ValueError(
                f"ids: {short_repr(id_)} names {held} episode; each rollout is a new "
                "episode and needs an id of its own"
            )
    return names


def fresh_ids(count: int) -> list[str]:
    """``count`` new random uuid4 hex ids, as ``SingleAgentEpisode`` makes its default id.

    One read of the OS's random bytes for all (``uuid.uuid4()`` makes one read and one object
    per id, which cost more than storing a rollout's rows).

    Example:
        >>> import uuid
        >>> ids = fresh_ids(3)
        >>> len(set(ids)), all(uuid.UUID(hex=i).version == 4 and uuid.UUID(hex=i).hex == i
        ...                    for i in ids)
        (3, True)
    """
    raw = np.frombuffer(os.urandom(16 * count), np.uint8).reshape(count, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.tobytes().hex()
    return [text[at : at + 32] for at in range(0, 32 * count, 32)]


def _fitted(buffer: EpisodeReplayBuffer, got: Rollouts) -> tuple[Any, Any, Any, Any]:
    """The rows in the columns' dtypes (an empty buffer's columns fixed by the first rollout)."""
    store = buffer._store
    if store.obs is None:
        store = StepStore()
        store.init_columns(got.obs[:1], got.actions[:1], {k: v[:1] for k, v in got.extras.items()})
    obs, actions, extras = store.fit_rows(got.obs, got.actions, got.extras)
    assert store.obs is not None
    return obs, actions, extras, store.obs.fit(got.last_obs, "observations")


def _victims(buffer: EpisodeReplayBuffer, n: np.ndarray) -> int:
    """How many of the stored episodes, then of the new ones, the add evicts, oldest first.

    After each episode added, the oldest go while more than ``capacity`` steps are stored and
    more than one episode: the ones kept after rollout ``j`` are the shortest suffix of the
    ages whose steps fit, but at least the newest. That suffix only shrinks from the front as
    ``j`` grows, so the last rollout's says who went.
    """
    table = buffer._table
    held = table.lengths(table.rows_by_age())
    steps = np.concatenate([[0], np.cumsum(np.concatenate([held, n]))])
    last = len(held) + len(n) - 1
    over = int(steps[-1]) - buffer.capacity  # in Python: a capacity may pass int64
    if over <= 0:
        return 0
    return min(int(np.searchsorted(steps, over, "left")), last)


def _store_all(buffer: EpisodeReplayBuffer, got: Rollouts, names: list[Any]) -> None:
    store, table = buffer._store, buffer._table
    b, total = len(names), len(got.obs)
    gone = _victims(buffer, got.n)
    old = list(itertools.islice(table.order, min(gone, len(table))))
    new_gone = gone - len(old)
    kept = b - new_gone
    # As add: the one move and every large allocation come before the first change.
    store.capacity = int(buffer.capacity)
    if store.compacts_for(total):
        buffer._compact()
    store.reserve(total)
    with deferred_interrupts():
        buffer._on_reserve()
        try:
            table.reserve(kept, got.last_obs[:1])
            store.init_columns(
                got.obs[:1], got.actions[:1], {k: v[:1] for k, v in got.extras.items()}
            )
        except BaseException:
            if table.final_obs is not None and store.obs is None:
                from episodes.replay.table import EpisodeTable

                buffer._table = EpisodeTable()  # its layout is the next add's to fix
            raise
        killed = [_closed_oldest(buffer, old)] if old else []
        rows = _opened(table, got, names[new_gone:], store.end, new_gone)
        slots = _written(store, got, np.concatenate([np.full(new_gone, -1), rows]))
        buffer._num_added += total
        buffer._on_append(slots)
        _noted(buffer, names[:new_gone])
        if new_gone:
            killed.append(slots[: int(got.n[:new_gone].sum())])
        if killed:
            dead = killed[0] if len(killed) == 1 else np.concatenate(killed)
            store.kill(dead)
            buffer._on_kill(dead)
    if store.needs_compaction():
        with contextlib.suppress(MemoryError):  # housekeeping, all or nothing: the next add
            buffer._compact()


def _closed_oldest(buffer: EpisodeReplayBuffer, ids: list[Any]) -> np.ndarray:
    """Closes the stored episodes ``ids``, the oldest ones in order; returns their slots."""
    store, table = buffer._store, buffer._table
    if len(ids) < _FEW:  # a few: found by their own slot ranges, as add finds them
        each = [sampling.episode_slots(store, table, table.order[id_]) for id_ in ids]
        table.close_oldest(len(ids))
        _noted(buffer, ids)
        return each[0] if len(each) == 1 else np.concatenate(each)
    rows = table.close_oldest(len(ids))
    doomed = np.zeros(table.size, bool)
    doomed[rows] = True
    ep = store.ep[: store.end]
    # A row held by a stored episode is its alone: its live slots are the episode's.
    slots = np.flatnonzero(store.live[: store.end] & doomed[np.maximum(ep, 0)] & (ep >= 0))
    _noted(buffer, ids)
    return slots


def _noted(buffer: EpisodeReplayBuffer, ids: list[Any]) -> None:
    """Remembers ``ids`` as evicted, in order (as ``_note_evicted`` one at a time)."""
    from episodes.replay.buffer import EpisodeReplayBuffer

    evicted = buffer._evicted
    if type(buffer)._note_evicted is not EpisodeReplayBuffer._note_evicted or not isinstance(
        evicted, OrderedDict
    ):
        for id_ in ids:
            buffer._note_evicted(id_)
        return
    evicted.update(dict.fromkeys(ids))  # none is there: new ids, or stored ones
    for _ in range(len(evicted) - EVICTED_IDS_KEPT):
        evicted.popitem(last=False)
    buffer._num_episodes_evicted += len(ids)


def _opened(table: Any, got: Rollouts, names: list[Any], end: int, skip: int) -> np.ndarray:
    """Enters the kept rollouts (the last ``len(names)``) in the table; returns their rows."""
    k = len(names)
    if not k:
        return np.zeros(0, np.int64)
    rows = table.open_reserved(names)
    n = got.n[skip:]
    starts = end + np.concatenate([[0], np.cumsum(got.n)])[skip:-1]
    table.t_begin[rows] = 0
    table.t_end[rows] = n
    table.first_slot[rows] = starts
    table.last_slot[rows] = starts + n - 1
    table.terminated[rows] = got.terminated[skip:]
    table.truncated[rows] = got.truncated[skip:]
    put_rows(table.final_obs.data, rows, got.last_obs[skip:])
    return rows


def _written(store: StepStore, got: Rollouts, ep_rows: np.ndarray) -> np.ndarray:
    """Writes every kept step at the end, one new episode per rollout; returns the slots."""
    assert store.obs is not None and store.actions is not None
    total, n = len(got.obs), got.n
    window = slice(store.end, store.end + total)
    put_rows(store.obs.data, window, got.obs)
    put_rows(store.actions.data, window, got.actions)
    store.rewards[window] = got.rewards
    for key, values in got.extras.items():
        put_rows(store.extras[key].data, window, values)
    slots = np.arange(store.end, store.end + total)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]) + store.end
    store.live[window] = True
    store.ep[window] = np.repeat(ep_rows, n)
    store.t[window] = slots - np.repeat(starts, n)
    nxt, prv = slots + 1, slots - 1
    nxt[starts + n - 1 - store.end] = -1
    prv[starts - store.end] = -1
    store.nxt[window], store.prv[window] = nxt, prv
    store.uid[window] = np.arange(store.next_uid, store.next_uid + total)
    store.next_uid += total
    store.end += total
    store.num_live += total
    return slots


def _as_chunks(buffer: EpisodeReplayBuffer, got: Rollouts, names: list[Any], batched: bool) -> None:
    """The rollouts through add's own steps, for a subclass with hooks of its own."""
    cuts = np.cumsum(got.n)[:-1]
    extras = {key: np.split(values, cuts) for key, values in got.extras.items()}
    parts = zip(np.split(got.obs, cuts), np.split(got.actions, cuts), np.split(got.rewards, cuts))
    chunks = [
        Chunk(
            id_=names[i],
            t0=0,
            obs=np.concatenate([obs, got.last_obs[i : i + 1]]),
            actions=actions,
            rewards=rewards,
            extras={key: split[i] for key, split in extras.items()},
            infos=[None] * (len(rewards) + 1),
            terminated=bool(got.terminated[i]),
            truncated=bool(got.truncated[i]),
            empty_infos=True,
            meta=EpisodeMeta(None, None, None, None, None, None),
            position=i,
        )
        for i, (obs, actions, rewards) in enumerate(parts)
    ]
    buffer._check_fit(chunks)
    table, store = buffer._table, buffer._store
    plan = plan_add(
        chunks, StoredEpisodes(table), iter(table.order), buffer._evicted, store.num_live,
        buffer.capacity,
    )  # fmt: skip
    store.capacity = int(buffer.capacity)
    if store.compacts_for(len(got.obs)):
        buffer._compact()
    store.reserve(len(got.obs))
    with deferred_interrupts():
        buffer._prepare(chunks)
        (apply_plan if batched else apply_one_by_one)(buffer, plan.steps)
    if store.needs_compaction():
        with contextlib.suppress(MemoryError):  # housekeeping, all or nothing: the next add
            buffer._compact()

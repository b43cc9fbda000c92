"""``get_state``/``set_state`` of the replay buffers: compacted columns, layout and counters.

The live rows are stored compacted; ``layout`` says where each sat (and where the columns
ended), so that a restored buffer has the same dead rows in the same places and draws the same
samples from the same generator state. A state without ``layout`` restores compacted. Which
episode-table row holds which episode is not part of the state: whole episodes are drawn by
their position in the stored order, which the state keeps. Evicted ids are kept in eviction
order (they need not be of one type, so they are not sorted).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.replay.columns import Column
from episodes.replay.sampling import check_non_negative, check_positive
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = [
    "buffer_state",
    "checked_counts",
    "generator_from_state",
    "parsed_state",
    "restore_buffer",
]

_COUNTERS = ("added_timesteps", "sampled_timesteps", "episodes_evicted")

_VERSION = 1


def buffer_state(buffer: EpisodeReplayBuffer) -> dict[str, Any]:
    """A snapshot that shares nothing with the buffer: live rows only, in slot order.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buffer_state(EpisodeReplayBuffer(5))["num_timesteps"]
        0
    """
    store, table = buffer._store, buffer._table
    keep = np.flatnonzero(store.live[: store.end])
    remap = np.full(store.end + 1, -1, np.int64)
    remap[keep] = np.arange(len(keep))
    rows = np.fromiter(table.order.values(), np.int64, len(table.order))
    row_of = np.full(max(table.size, 1), -1, np.int64)
    row_of[rows] = np.arange(len(rows))
    state: dict[str, Any] = {
        "version": _VERSION,
        "capacity": buffer.capacity,
        "batch_size_B": buffer.batch_size_B,
        "num_timesteps": int(store.num_live),
        "num_added": buffer._num_added,
        "num_sampled": buffer._num_sampled,
        "num_episodes_evicted": buffer._num_episodes_evicted,
        "evicted": list(buffer._evicted),  # eviction order
        "rng": buffer.rng.bit_generator.state,
        "spaces": buffer._spaces,
        "next_uid": store.next_uid,
        "steps": {
            "obs": store.obs.data[keep] if store.obs is not None else None,
            "actions": store.actions.data[keep] if store.actions is not None else None,
            "rewards": store.rewards[keep],
            "extras": {k: c.data[keep] for k, c in store.extras.items()},
            "infos": copy.deepcopy(list(store.infos[keep])),
            "ep": row_of[store.ep[keep]],
            "t": store.t[keep],
            "nxt": remap[store.nxt[keep]],
            "prv": remap[store.prv[keep]],
            "uid": store.uid[keep],
        },
        "episodes": {
            "ids": list(table.order),
            "final_obs": table.final_obs.data[rows] if table.final_obs is not None else None,
            "final_info": copy.deepcopy(list(table.final_info[rows])),
            "terminated": table.terminated[rows],
            "truncated": table.truncated[rows],
            "t_begin": table.t_begin[rows],
            "t_end": table.t_end[rows],
            "first_slot": remap[table.first_slot[rows]],
            "last_slot": remap[table.last_slot[rows]],
        },
        # The dead slots' uids too: item ids are searched in slot order.
        "layout": {
            "slots": keep,
            "end": store.end,
            "size": store.size,
            "uid": store.uid[: store.end].copy(),
        },
    }
    return state


def restore_buffer(buffer: EpisodeReplayBuffer, state: dict[str, Any]) -> None:
    """Rebuilds ``buffer`` from :func:`buffer_state`'s output (nothing changes if it raises).

    Raises:
        ValueError: Not a state of this version, or a broken one.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> copy = EpisodeReplayBuffer(3)
        >>> restore_buffer(copy, buffer_state(EpisodeReplayBuffer(10, batch_size_B=4)))
        >>> copy.capacity, copy.batch_size_B, copy.get_num_timesteps()
        (10, 4, 0)
        >>> restore_buffer(copy, {"version": 0})
        Traceback (most recent call last):
        ...
        ValueError: not a replay buffer state of version 1
    """
    for name, value in parsed_state(state).items():
        setattr(buffer, name, value)


def parsed_state(state: dict[str, Any]) -> dict[str, Any]:
    """The buffer attributes :func:`buffer_state`'s output stands for, checked, not yet set.

    Raises:
        ValueError: Not a state of this version, or a broken one (missing keys, columns of
            different lengths, steps of episodes the state does not hold).

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> parsed = parsed_state(buffer_state(EpisodeReplayBuffer(10)))
        >>> parsed["capacity"], parsed["_num_added"]
        (10, 0)
    """
    if not isinstance(state, dict) or state.get("version") != _VERSION:
        raise ValueError("not a replay buffer state of version 1")
    try:
        return _parsed(state)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError, OverflowError) as err:
        # OverflowError: a generator state out of its integers' range.
        raise ValueError(f"a broken replay buffer state: {type(err).__name__}: {err}") from err


def _parsed(state: dict[str, Any]) -> dict[str, Any]:
    steps, eps = state["steps"], state["episodes"]
    n, rows = len(eps["ids"]), len(steps["rewards"])
    # The constructor's checks: a buffer could never have had other values.
    capacity = check_positive(state["capacity"], "capacity")
    batch_size_B = check_positive(state["batch_size_B"], "batch_size_B")
    if len(set(eps["ids"])) != n:  # a repeated id would leave the first one's steps orphaned
        raise ValueError(f"episode ids repeat: {list(eps['ids'])[:10]!r}")
    names = ("terminated", "truncated", "t_end", "t_begin", "first_slot", "last_slot")
    for name in (*names, "final_obs", "final_info"):
        if not (name == "final_obs" and eps[name] is None) and len(eps[name]) != n:
            raise ValueError(f"episodes[{name!r}] holds {len(eps[name])} rows for {n} ids")
    # Columns written with numpy broadcast: a column of one row would fill every step.
    columns = [(name, steps[name]) for name in ("ep", "t", "uid", "nxt", "prv", "infos")]
    if steps["obs"] is not None:
        columns += [("obs", steps["obs"]), ("actions", steps["actions"])]
        columns += [(f"extras[{k!r}]", v) for k, v in steps["extras"].items()]
        obs, finals = np.asarray(steps["obs"]), np.asarray(eps["final_obs"])
        if finals.shape[1:] != obs.shape[1:] or finals.dtype != obs.dtype:
            raise ValueError(
                f"final observations of shape {finals.shape[1:]} and dtype {finals.dtype} "
                f"for observations of {obs.shape[1:]} and {obs.dtype}"
            )
    if state.get("layout") is not None:
        columns.append(("layout['slots']", state["layout"]["slots"]))
    for name, column in columns:
        if len(column) != rows:
            raise ValueError(f"steps[{name}] holds {len(column)} rows for {rows} rewards")
    owners = np.asarray(steps["ep"], np.int64)
    if rows and (owners.min() < 0 or owners.max() >= n):
        raise ValueError(f"steps of episode rows {sorted(set(owners.tolist()))} for {n} ids")
    store = _restore_store(steps, state["next_uid"], state.get("layout"))
    table = EpisodeTable()
    for i, id_ in enumerate(eps["ids"]):
        row = table.open(
            id_,
            t_begin=int(eps["t_begin"][i]),
            final_obs=eps["final_obs"][i : i + 1],
            final_info=copy.deepcopy(eps["final_info"][i]),
        )
        assert row == i
    for name in ("terminated", "truncated", "t_end"):
        getattr(table, name)[:n] = eps[name]
    for name in ("first_slot", "last_slot"):
        getattr(table, name)[:n] = _placed(eps[name], state.get("layout"))
    counters = [state["num_added"], state["num_sampled"], state["num_episodes_evicted"]]
    added, sampled, num_evicted, evicted = checked_counts(
        dict(zip(_COUNTERS, counters)), state["evicted"], table.order.keys(), rows
    )
    rng = generator_from_state(state["rng"])
    return {
        "capacity": capacity,
        "batch_size_B": batch_size_B,
        "_store": store,
        "_table": table,
        "_num_added": added,
        "_num_sampled": sampled,
        "_num_episodes_evicted": num_evicted,
        "_evicted": evicted,
        "_spaces": (state["spaces"][0], state["spaces"][1]),
        "rng": rng,
    }


def generator_from_state(state: Any) -> np.random.Generator:
    """A generator in ``state`` (a ``bit_generator.state``), of the bit generator it names.

    The buffer's generator may be any numpy bit generator (``seed=Generator(MT19937(0))``):
    a PCG64 would refuse an MT19937 state. Only numpy's bit generator classes are looked up
    by name; arrays of the state may come as lists (a state read back from JSON).

    Raises:
        ValueError: No dict, a name that is no numpy bit generator, or a state numpy refuses.

    Example:
        >>> rng = np.random.Generator(np.random.MT19937(0)); _ = rng.random()
        >>> again = generator_from_state(rng.bit_generator.state)
        >>> type(again.bit_generator).__name__, again.random() == rng.random()
        ('MT19937', True)
    """
    name = state.get("bit_generator") if isinstance(state, dict) else None
    kind = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise ValueError(f"the generator state names no numpy bit generator: {name!r}")
    rng = np.random.Generator(kind())
    try:
        rng.bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise ValueError(f"a {name} state numpy refuses ({err})") from None
    return rng


def checked_counts(
    counters: Mapping[str, Any], evicted: Any, stored_ids: Collection[Any], num_timesteps: int
) -> tuple[int, int, int, dict[Any, None]]:
    """Counters and evicted ids a buffer storing ``stored_ids`` could have, checked.

    Returns:
        Added steps, sampled items, evicted episodes, and the evicted ids in their order (as
        the insertion-ordered dict the buffers keep).

    Raises:
        ValueError: A counter missing or not an int >= 0 (a bool is no count), fewer added
            steps than ``num_timesteps``, or evicted ids that are not a list or tuple, repeat,
            or name a stored episode. ``TypeError``: an unhashable evicted id.

    Example:
        >>> counts = {"added_timesteps": 9, "sampled_timesteps": 0, "episodes_evicted": 2}
        >>> checked_counts(counts, [7, "a"], {"b"}, 4)
        (9, 0, 2, {7: None, 'a': None})
        >>> checked_counts(counts, ["b"], {"b"}, 4)
        Traceback (most recent call last):
        ...
        ValueError: evicted ids 'b' are stored episodes too: a stored episode was never evicted
    """
    if not isinstance(counters, Mapping) or any(key not in counters for key in _COUNTERS):
        raise ValueError(f"counters must be a dict with keys {list(_COUNTERS)}, got {counters!r}")
    added, sampled, num_evicted = (
        check_non_negative(counters[key], f"counters[{key!r}]") for key in _COUNTERS
    )
    if added < num_timesteps:
        raise ValueError(
            f"counters['added_timesteps'] is {added}, below the {num_timesteps} steps stored"
        )
    if not isinstance(evicted, (list, tuple)):
        raise ValueError(f"evicted ids must be a list, got {type(evicted).__name__}")
    try:
        ordered = dict.fromkeys(evicted)
    except TypeError:
        bad = next(i for i in evicted if not _hashable(i))
        raise TypeError(f"evicted id {bad!r} is unhashable ({type(bad).__name__})") from None
    if len(ordered) != len(evicted):
        seen: set[Any] = set()
        for id_ in evicted:
            if id_ in seen:
                raise ValueError(f"evicted id {id_!r} is listed twice")
            seen.add(id_)
    both = ordered.keys() & stored_ids
    if both:
        names = ", ".join(sorted(map(repr, both))[:5])
        raise ValueError(
            f"evicted ids {names} are stored episodes too: a stored episode was never evicted"
        )
    return added, sampled, num_evicted, ordered


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _placed(compact: np.ndarray, layout: dict[str, Any] | None) -> np.ndarray:
    """Compact row numbers (-1: none) as the slots the rows sat in."""
    compact = np.asarray(compact, np.int64)
    if layout is None:
        return compact
    slots = np.asarray(layout["slots"], np.int64)
    return np.where(compact >= 0, slots[np.maximum(compact, 0)] if len(slots) else -1, -1)


def _restore_store(
    steps: dict[str, Any], next_uid: int, layout: dict[str, Any] | None
) -> StepStore:
    store = StepStore()
    n = len(steps["rewards"])
    end = n if layout is None else int(layout["end"])
    rows = end if layout is None else max(int(layout["size"]), end)
    if rows:  # an empty buffer's state restores no rows, as a new buffer has none
        store.reserve(rows)
    at = np.arange(n) if layout is None else np.asarray(layout["slots"], np.int64)
    if steps["obs"] is not None:
        store.obs = Column(store.size, steps["obs"])
        store.actions = Column(store.size, steps["actions"])
        store.obs.data[at] = steps["obs"]
        store.actions.data[at] = steps["actions"]
        for key, values in steps["extras"].items():
            store.extras[key] = Column(store.size, values)
            store.extras[key].data[at] = values
    store.rewards[at] = steps["rewards"]
    for i, info in zip(at.tolist(), copy.deepcopy(list(steps["infos"]))):
        store.infos[i] = info
    for name in ("ep", "t", "uid"):
        getattr(store, name)[at] = steps[name]
    for name in ("nxt", "prv"):
        getattr(store, name)[at] = _placed(steps[name], layout)
    if layout is not None:
        store.uid[:end] = layout["uid"]
        if not np.array_equal(store.uid[at], np.asarray(steps["uid"], np.int64)):
            raise ValueError("the steps' item ids (uid) differ from the layout's at their slots")
    store.live[at] = True
    store.end, store.num_live = end, n
    store.next_uid = _checked_next_uid(store.uid[:end], next_uid)
    return store


def _checked_next_uid(uids: np.ndarray, next_uid: Any) -> int:
    """``next_uid``, refused unless the slots' item ids rise from 0 up and it lies above them.

    Items are found by searching the ids in slot order, and new steps are numbered from
    ``next_uid``: ids that repeat, fall or reach it would make two steps one item.
    """
    if isinstance(next_uid, (bool, np.bool_)) or not isinstance(next_uid, (int, np.integer)):
        raise TypeError(f"next_uid must be an int, got {next_uid!r}")
    if len(uids) and (uids[0] < 0 or np.any(uids[1:] <= uids[:-1])):
        raise ValueError("item ids (uid) must be >= 0 and rise from slot to slot")
    least = int(uids[-1]) + 1 if len(uids) else 0
    if not least <= int(next_uid) < 2**63:
        raise ValueError(f"next_uid {next_uid} must be at least {least}: the ids it stores")
    return int(next_uid)

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
from itertools import repeat
from operator import is_not
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from episodes.replay.columns import Column, as_rows, float32_rewards
from episodes.replay.counters import COUNTERS, checked_counts
from episodes.replay.integers import ITEM_ID_LIMIT
from episodes.replay.metadata import meta_from_state, meta_state
from episodes.replay.nested import put_rows, take_rows
from episodes.replay.rng import checked_generator, generator_from_state
from episodes.replay.sampling import check_non_negative, check_positive, int_array
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable
from episodes.spaces import space_from_dict, space_to_dict

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = [
    "buffer_state",
    "generator_from_state",
    "parsed_state",
    "restore_buffer",
]


_VERSION = 1


def buffer_state(buffer: EpisodeReplayBuffer) -> dict[str, Any]:
    """A snapshot that shares nothing with the buffer: live rows only, in slot order.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buffer_state(EpisodeReplayBuffer(5))["num_timesteps"]
        0
    """
    store, table = buffer._store, buffer._table
    checked_generator(buffer.rng, "rng")  # a state that set_state could not restore
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
        # JSON-safe dicts, as an episode's state holds its spaces (None for none).
        "spaces": [_space_entry(space) for space in buffer._spaces],
        "next_uid": store.next_uid,
        "steps": {
            "obs": take_rows(store.obs.data, keep) if store.obs is not None else None,
            "actions": take_rows(store.actions.data, keep) if store.actions is not None else None,
            "rewards": store.rewards[keep],
            "extras": {k: take_rows(c.data, keep) for k, c in store.extras.items()},
            "infos": list(copied_infos(store.infos[keep])),
            "ep": row_of[store.ep[keep]],
            "t": store.t[keep],
            "nxt": remap[store.nxt[keep]],
            "prv": remap[store.prv[keep]],
            "uid": store.uid[keep],
        },
        "episodes": {
            "ids": list(table.order),
            "final_obs": take_rows(table.final_obs.data, rows)
            if table.final_obs is not None
            else None,
            "final_info": copy.deepcopy(list(table.final_info[rows])),
            "terminated": table.terminated[rows],
            "truncated": table.truncated[rows],
            "t_begin": table.t_begin[rows],
            "t_end": table.t_end[rows],
            "first_slot": remap[table.first_slot[rows]],
            "last_slot": remap[table.last_slot[rows]],
            # custom_data (copied), ids and clocks: one list item per episode.
            **meta_state(list(table.meta[rows])),
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
    issued = getattr(getattr(buffer, "_store", None), "next_uid", 0)
    for name, value in parsed_state(state, issued).items():
        setattr(buffer, name, value)


def parsed_state(state: dict[str, Any], issued: int = 0) -> dict[str, Any]:
    """The buffer attributes :func:`buffer_state`'s output stands for, checked, not yet set.

    New steps are numbered from the state's ``next_uid`` or ``issued`` (the ids the receiving
    buffer has handed out), whichever is larger: one buffer never issues an id twice, so a
    batch sampled before a rollback never names the steps of a later add.

    Raises:
        ValueError: Not a state of this version, or a broken one (missing keys, columns of
            different lengths, steps of episodes the state does not hold or that do not run
            their episode's ``t_begin .. t_end - 1`` once each with the links that implies,
            more steps than the capacity in several episodes, infos that are no list,
            spaces that are neither ``space_to_dict`` dicts nor spaces, step columns ``add``
            would refuse, a generator state that is not one its bit generator can hold).

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> parsed = parsed_state(buffer_state(EpisodeReplayBuffer(10)))
        >>> parsed["capacity"], parsed["_num_added"]
        (10, 0)
    """
    if not isinstance(state, dict) or state.get("version") != _VERSION:
        raise ValueError("not a replay buffer state of version 1")
    try:
        parsed = _parsed(state)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError, OverflowError) as err:
        # OverflowError: a generator state out of its integers' range.
        raise ValueError(f"a broken replay buffer state: {type(err).__name__}: {err}") from err
    parsed["_store"].next_uid = max(parsed["_store"].next_uid, issued)
    return parsed


def _parsed(state: dict[str, Any]) -> dict[str, Any]:
    steps, eps = state["steps"], state["episodes"]
    n, rows = len(eps["ids"]), len(steps["rewards"])
    # Derived (get_num_timesteps counts the steps), but a state that says otherwise is broken.
    if "num_timesteps" in state and not _is_count(state["num_timesteps"], rows):
        raise ValueError(f"num_timesteps is {state['num_timesteps']!r} for {rows} stored steps")
    # The constructor's checks: a buffer could never have had other values.
    capacity = check_positive(state["capacity"], "capacity")
    batch_size_B = check_positive(state["batch_size_B"], "batch_size_B")
    if rows > capacity and n > 1:  # add's rule (and load's): over capacity, one episode is left
        raise ValueError(
            f"{rows} steps of {n} episodes exceed the capacity {capacity}: a buffer holds more "
            "steps than its capacity only as a single episode"
        )
    if len(set(eps["ids"])) != n:  # a repeated id would leave the first one's steps orphaned
        raise ValueError(f"episode ids repeat: {list(eps['ids'])[:10]!r}")
    names = ("terminated", "truncated", "t_end", "t_begin", "first_slot", "last_slot")
    for name in (*names, "final_obs", "final_info"):
        if not (name == "final_obs" and eps[name] is None) and len(eps[name]) != n:
            raise ValueError(f"episodes[{name!r}] holds {len(eps[name])} rows for {n} ids")
    for name in ("terminated", "truncated"):  # "False" or 0.5 would be cast to True
        flags = np.asarray(eps[name])
        if flags.dtype != np.bool_ and flags.size:
            raise ValueError(f"episodes[{name!r}] must hold bools, got {flags.dtype} values")
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
    elif rows:
        raise ValueError(f"{rows} steps without observations (steps['obs'] is None)")
    if state.get("layout") is not None:
        columns.append(("layout['slots']", state["layout"]["slots"]))
    for name, column in columns:
        if len(column) != rows:
            raise ValueError(f"steps[{name}] holds {len(column)} rows for {rows} rewards")
    _check_values(steps)
    _check_threads(steps, eps, n, rows)
    _check_infos(steps["infos"], "steps['infos']")
    _check_infos(eps["final_info"], "episodes['final_info']")
    spaces = _spaces(state["spaces"])
    metas = meta_from_state(eps, n)  # a state made before they were kept: none
    added = check_non_negative(state["num_added"], "counters['added_timesteps']")
    store = _restore_store(steps, state["next_uid"], state.get("layout"), max(capacity, added))
    table = EpisodeTable()
    for i, id_ in enumerate(eps["ids"]):
        row = table.open(
            id_,
            t_begin=int(eps["t_begin"][i]),
            final_obs=eps["final_obs"][i : i + 1],
            final_info=copy.deepcopy(eps["final_info"][i]),
            meta=metas[i],
        )
        assert row == i
    for name in ("terminated", "truncated", "t_end"):
        getattr(table, name)[:n] = eps[name]
    for name in ("first_slot", "last_slot"):
        getattr(table, name)[:n] = _placed(eps[name], state.get("layout"))
    counters = [state["num_added"], state["num_sampled"], state["num_episodes_evicted"]]
    added, sampled, num_evicted, evicted = checked_counts(
        dict(zip(COUNTERS, counters)), state["evicted"], table.order.keys(), rows
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
        "_spaces": spaces,
        "rng": rng,
    }


def _indices(values: Any, name: str, length: int) -> np.ndarray:
    """A 1-d int64 column of ``length`` values well inside int64 (differences cannot wrap)."""
    array = int_array(values, name)
    if array.shape != (length,):
        raise ValueError(f"{name} must be {length} integers, got shape {array.shape}")
    if length and (array.min() < -(2**62) or array.max() > 2**62):
        raise ValueError(f"{name} holds values beyond +-2**62")
    return array


def _times(values: Any, name: str, length: int) -> np.ndarray:
    """A 1-d int64 column of ``length`` times (any int64: an episode may start anywhere)."""
    array = int_array(values, name)
    if array.shape != (length,):
        raise ValueError(f"{name} must be {length} integers, got shape {array.shape}")
    return array


def _spans(later: np.ndarray, earlier: np.ndarray, name: str) -> np.ndarray:
    """``later - earlier`` of int64 times, refused where the difference would wrap around.

    Judged in floats first: a true difference beyond +-2**62 spans more steps than any buffer
    holds, so it is refused before the exact int64 subtraction could wrap.
    """
    rough = later.astype(np.float64) - earlier.astype(np.float64)
    if len(rough) and (rough.min() < -(2.0**62) or rough.max() > 2.0**62):
        raise ValueError(f"{name} spans more than 2**62 steps")
    return later - earlier


def _is_count(value: Any, count: int) -> bool:
    """Whether ``value`` is the int ``count`` (a numpy int too; no bool, float or str)."""
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    return is_int and int(value) == count


def _check_values(steps: dict[str, Any]) -> None:
    """Refuses step columns ``add`` would refuse (a state's are stored as they come).

    Numeric arrays under str keys, and rewards that are real numbers a float32 holds: none
    parsed from strings, cut to their real part or overflowing to infinity.
    """
    if steps["obs"] is not None:
        named = [("steps['obs']", steps["obs"]), ("steps['actions']", steps["actions"])]
        for key, values in steps["extras"].items():
            if not isinstance(key, str):  # add keeps one column per key, named by it
                raise ValueError(f"steps['extras'] key {key!r} must be a str")
            named.append((f"steps['extras'][{key!r}]", values))
        for name, values in named:
            as_rows(values, name)
    float32_rewards(np.asarray(steps["rewards"]))


def _check_threads(steps: dict[str, Any], eps: dict[str, Any], n: int, rows: int) -> None:
    """Refuses steps that do not run each episode's ``t_begin .. t_end - 1`` once, in slot order.

    Each step's episode row and ``t`` decide everything else: where it sits among its
    episode's steps, its links (``nxt``/``prv``) and the episodes' first and last slots, all
    of which must be the ones the steps imply. Vectorized over the steps (no per-step Python).
    """
    owners = _indices(steps["ep"], "steps['ep']", rows)
    t = _times(steps["t"], "steps['t']", rows)
    t_begin = _times(eps["t_begin"], "episodes['t_begin']", n)
    lengths = _spans(_times(eps["t_end"], "episodes['t_end']", n), t_begin, "an episode")
    if rows and (owners.min() < 0 or owners.max() >= n):
        raise ValueError(f"steps of episode rows {sorted(set(owners.tolist()))} for {n} ids")
    counts = np.bincount(owners, minlength=n)
    if not np.array_equal(counts, lengths) or (n and lengths.min() < 1):
        # A buffer stores no episode without steps: one is opened by its first steps.
        i = int(np.flatnonzero((counts != lengths) | (lengths < 1))[0])
        raise ValueError(
            f"episode {list(eps['ids'])[i]!r} runs from t_begin={t_begin[i]} to "
            f"t_end={t_begin[i] + lengths[i]} ({lengths[i]} steps), but {counts[i]} steps are its"
        )
    place = _spans(t, t_begin[owners], "a step's t from its t_begin")  # its position
    outside = (place < 0) | (place >= lengths[owners])
    if outside.any():
        s = int(np.flatnonzero(outside)[0])
        raise ValueError(f"step {s} at t={t[s]} lies outside its episode's t_begin .. t_end - 1")
    # Positions are within range and as many as the episode's steps: once each unless repeated.
    key = (np.cumsum(lengths) - lengths)[owners] + place
    slot_of = np.full(rows, -1, np.int64)
    slot_of[key] = np.arange(rows)
    if rows and slot_of.min() < 0:
        raise ValueError("an episode holds two steps of the same t (and lacks another t)")
    last = place == lengths[owners] - 1
    nxt = np.where(last, -1, slot_of[np.minimum(key + 1, rows - 1)])
    if np.any(nxt[~last] <= np.flatnonzero(~last)):  # episodes' steps lie in time order
        raise ValueError("an episode's steps are not in time order (slot order)")
    prv = np.where(place == 0, -1, slot_of[np.maximum(key - 1, 0)])
    firsts = slot_of[np.cumsum(lengths) - lengths] if rows else np.full(n, -1)
    lasts = slot_of[np.cumsum(lengths) - 1] if rows else np.full(n, -1)
    for name, got, implied in (
        ("steps['nxt']", steps["nxt"], nxt),
        ("steps['prv']", steps["prv"], prv),
        ("episodes['first_slot']", eps["first_slot"], firsts),
        ("episodes['last_slot']", eps["last_slot"], lasts),
    ):
        if not np.array_equal(_indices(got, name, len(implied)), implied):
            raise ValueError(f"{name} links steps other than their episodes' t order implies")


def copied_infos(infos: Any) -> np.ndarray:
    """The infos as a new object array, the dicts deep-copied and the Nones kept.

    A None is an empty info, as the buffer keeps them. The dicts are copied in one call, so an
    info two steps share stays shared; deep-copying every entry cost a Python call per step,
    also where no info was recorded.

    Example:
        >>> info = {"a": [1]}
        >>> out = copied_infos([None, info, info])
        >>> out[0] is None, out[1] == info, out[1] is not info, out[1] is out[2]
        (True, True, True, True)
    """
    items = list(infos)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    # Identity tests, in C: an ``!= None`` would ask an array info for its truth value.
    given = np.flatnonzero(np.fromiter(map(is_not, items, repeat(None)), bool, len(items)))
    if len(given):
        out[given] = copy.deepcopy(list(out[given]))
    return out


def _check_infos(infos: Any, name: str) -> None:
    """Refuses infos that are no list of items (None: an empty info, as the buffer stores it).

    The items are not checked: ``add`` takes an episode's infos as they are (dicts, as a
    gymnasium env gives, or anything else a user recorded), so a state holds them too.
    """
    if not isinstance(infos, (list, tuple, np.ndarray)) or (
        isinstance(infos, np.ndarray) and (infos.dtype != object or infos.ndim != 1)
    ):
        raise ValueError(f"{name} must be a list of infos, got {type(infos).__name__}")


def _space_entry(space: Any) -> Any:
    """``space_to_dict(space)``; a space it cannot write (a user's own class) as itself."""
    try:
        return space_to_dict(space)
    except TypeError:
        return space  # as states held every space before they were dicts


def _spaces(spaces: Any) -> tuple[Any, Any]:
    """The observation and action space of ``spaces``: two dicts of ``space_to_dict`` or None.

    States made before the spaces were stored as dicts hold the gymnasium spaces themselves:
    those are taken as they are.
    """
    if not isinstance(spaces, (list, tuple)) or len(spaces) != 2:
        raise ValueError(f"spaces must be an [observation, action] pair, got {spaces!r:.80}")
    decoded = []
    for which, space in zip(("observation", "action"), spaces):
        if isinstance(space, dict):
            space = space_from_dict(space)
        elif not (space is None or isinstance(space, gym.Space)):
            raise ValueError(
                f"the {which} space must be a space's dict (space_to_dict) or None, "
                f"got {type(space).__name__}"
            )
        decoded.append(space)
    return decoded[0], decoded[1]


def _placed(compact: np.ndarray, layout: dict[str, Any] | None) -> np.ndarray:
    """Compact row numbers (-1: none) as the slots the rows sat in."""
    compact = np.asarray(compact, np.int64)
    if layout is None:
        return compact
    slots = np.asarray(layout["slots"], np.int64)
    return np.where(compact >= 0, slots[np.maximum(compact, 0)] if len(slots) else -1, -1)


def _restore_store(
    steps: dict[str, Any], next_uid: int, layout: dict[str, Any] | None, most: int
) -> StepStore:
    # The layout is checked before anything is allocated. A store of ``most`` steps added (or
    # held) grows to at most twice the rows it needed, unless ``set_counters`` lowered the
    # count since: a larger ``size`` is reserved only up to that bound (the rows beyond it
    # hold nothing), so a crafted one allocates nothing and a real one still restores.
    store = StepStore()
    n = len(steps["rewards"])
    end = n if layout is None else check_non_negative(layout["end"], "layout['end']")
    rows = end if layout is None else max(check_non_negative(layout["size"], "layout['size']"), end)
    if layout is not None and len(layout["uid"]) != end:
        raise ValueError(f"layout['end'] is {end}, but layout['uid'] holds {len(layout['uid'])}")
    # Integers, not truncated on the way into the int64 column (0.5 is no item id).
    _times(steps["uid"], "steps['uid']", n)
    if layout is not None:
        _times(layout["uid"], "layout['uid']", end)
    rows = min(rows, 2 * max(64, most, end))
    at = np.arange(n) if layout is None else _indices(layout["slots"], "layout['slots']", n)
    if n and (at[0] < 0 or at[-1] >= end or np.any(at[1:] <= at[:-1])):
        raise ValueError(f"layout['slots'] must rise from slot to slot within 0 .. {end - 1}")
    if rows:  # an empty buffer's state restores no rows, as a new buffer has none
        store.reserve(rows)
    if steps["obs"] is not None:
        store.obs = Column(store.size, steps["obs"])
        store.actions = Column(store.size, steps["actions"])
        put_rows(store.obs.data, at, np.asarray(steps["obs"]))
        put_rows(store.actions.data, at, np.asarray(steps["actions"]))
        for key, values in steps["extras"].items():
            store.extras[key] = Column(store.size, values)
            put_rows(store.extras[key].data, at, np.asarray(values))
    store.rewards[at] = steps["rewards"]
    store.infos[at] = copied_infos(steps["infos"])
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
    if not least <= int(next_uid) < ITEM_ID_LIMIT:
        raise ValueError(
            f"next_uid {next_uid} must be at least {least} (the ids it stores) and below 2**62"
        )
    return int(next_uid)

"""Turning added chunks into rows, and planning an ``add`` so that bad input changes nothing.

``plan_add`` checks every chunk and simulates the evictions the add will cause before the
buffer is touched. A chunk that continues an episode evicted earlier in the same call goes with
its episode (checked as it would have been had it come first); one that continues an episode
evicted by an earlier call follows ``on_evicted``: refused (the default), dropped, or stored as
the start of a new episode under its id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.connectors.learner import check_end_observation
from episodes.episode import SingleAgentEpisode
from episodes.episode.reward_values import REAL_TYPES
from episodes.replay.adding import done_refusal, gap_refusal, named_refusal
from episodes.replay.columns import as_rows
from episodes.replay.episode_ids import check_episode_id
from episodes.replay.errors import EvictedEpisodeError
from episodes.replay.metadata import EpisodeMeta, chunk_meta
from episodes.replay.nested import (
    NESTED_COLUMNS,
    NESTED_REFUSAL,
    list_rows,
    nested_rows,
    records_equal,
    unpack,
)
from episodes.replay.quick_rows import quick_rows, rewards_as_float32
from episodes.replay.store import all_empty_infos
from episodes.spaces import UNSTACKABLE_SPACES, equal_in_space, find_space_kind
from episodes.spaces.item_walks import mapping_words, other_mapping
from episodes.structs import arrays_equal, deep_copied, short_repr

__all__ = ["Chunk", "Plan", "plan_add", "prepare", "prepare_all"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class Chunk:
    """One added chunk as rows: ``n`` steps and ``n + 1`` observations and infos.

    Example:
        >>> chunk = prepare(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                                    rewards=[1.0, 2.0], t_started=5, terminated=True,
        ...                                    len_lookback_buffer=0))
        >>> chunk.id_, chunk.t0, chunk.terminated, chunk.truncated, len(chunk.infos)
        ('a', 5, True, False, 3)
    """

    id_: str
    t0: int
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    extras: dict[str, np.ndarray]
    infos: list[Any]
    terminated: bool
    truncated: bool
    spaces: tuple[Any, Any] = (None, None)  # the episode's observation and action space
    empty_infos: bool = False  # every info is empty: the store has no step info to write
    # The first observation as the chunk gave it: the border a join compares, as
    # ``concat_episode`` does, before ``obs`` is cast to the buffer's column.
    border: Any = None
    # The chunk's custom_data (the buffer's copy), ids and clocks: one entry per chunk.
    meta: EpisodeMeta | None = None
    position: int = 0  # its place in the list given to add, which add's refusals name

    def __post_init__(self) -> None:  # noqa: D105 - see ``border``
        if self.border is None and len(self.obs):
            self.border = self.obs[0]

    @property
    def n(self) -> int:
        """Number of steps.

        Example:
            >>> chunk = prepare(SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                                    rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> chunk.n, len(chunk.obs)
            (2, 3)
        """
        return len(self.rewards)

    def rows(self) -> dict[str, np.ndarray]:
        """The per-step columns (observations without the last one).

        Example:
            >>> chunk = prepare(SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                                    rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> rows = chunk.rows()
            >>> sorted(rows), rows["obs"].tolist(), rows["actions"].tolist()
            (['actions', 'obs', 'rewards'], [0.0, 1.0], [0, 1])
        """
        return {"obs": self.obs[:-1], "actions": self.actions, "rewards": self.rewards}

    def step_infos(self) -> list[Any] | None:
        """The infos of the steps (the last info is the latest observation's); None if all empty.

        Example:
            >>> def chunk(infos):
            ...     return prepare(SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                    rewards=[1.0, 2.0], infos=infos, len_lookback_buffer=0))
            >>> chunk([{}, {"k": 0}, {}]).step_infos(), chunk([{}, {}, {}]).step_infos()
            ([None, {'k': 0}], None)
        """
        return None if self.empty_infos else self.infos[:-1]


def prepare_all(
    episodes: list[SingleAgentEpisode], stored: Container[Any], evicted: Container[Any]
) -> list[Chunk]:
    """The chunks an add plans: each one with steps, and each without steps that ends an episode.

    A chunk without steps that ends its episode (terminated or truncated) is kept when its id
    is stored, evicted (``plan_add`` refuses it then) or begun by an earlier chunk of the same
    add: it continues that episode as any chunk does, its last step the episode's end (a
    dataset's last, empty cut). Other chunks without steps are skipped unread.

    Raises:
        TypeError: As :func:`prepare`, naming the chunk (``adding.named_refusal``).
        ValueError: Likewise; an ending chunk without an observation (it joins no chunk).

    Example:
        >>> head = SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0],
        ...                           len_lookback_buffer=0)
        >>> tail = SingleAgentEpisode("a", observations=[1.0], t_started=1, terminated=True,
        ...                           len_lookback_buffer=0)
        >>> [(c.id_, c.n, c.terminated) for c in prepare_all([head, tail], {}, {})]
        [('a', 1, False), ('a', 0, True)]
        >>> prepare_all([tail], {}, {})  # nothing stored or begun for "a" to end
        []
    """
    chunks: list[Chunk] = []
    begun: set[Any] = set()  # ids are hashable: prepare checked them
    for position, episode in enumerate(episodes):
        try:  # free unless raised: a refusal names the chunk
            chunk = prepare(episode)
        except (TypeError, ValueError) as error:
            raise named_refusal(error, position, getattr(episode, "id_", ...)) from None
        ends = chunk is None and (episode.is_terminated or episode.is_truncated)
        if ends and any(episode.id_ in ids for ids in (begun, stored, evicted)):
            chunk = _ending(episode)
        if chunk is not None:
            begun.add(chunk.id_)
            chunk.position = position
            chunks.append(chunk)
    return chunks


def _ending(episode: SingleAgentEpisode) -> Chunk:
    """A chunk without steps that ends its episode: its one observation, info and flags."""
    # Actions and extras are left out: with no steps there are none, and a successor without
    # steps may lack extra keys (as ``concat_episode`` allows).
    check_end_observation(episode)  # none: a ValueError, as the converter's
    return Chunk(
        id_=episode.id_,
        t0=_start(episode, 0),
        obs=_rows(
            episode.get_observations(),
            "observations",
            1,
            episode.observations.finalized,
            episode.observation_space,
        ),
        actions=np.empty(0),
        rewards=np.empty(0, np.float32),
        extras={},
        infos=_owned(list(episode.get_infos())[-1:] or [None], episode.id_, len(episode)),
        terminated=bool(episode.is_terminated),
        truncated=bool(episode.is_truncated),
        spaces=(episode.observation_space, episode.action_space),
        meta=chunk_meta(episode),
    )


def _start(episode: SingleAgentEpisode, n: int) -> int:
    """``t_started``, checked: the chunk's times ``t_started .. t_started + n`` must fit int64."""
    # The buffer keeps times in int64 columns: a time beyond them would fail half-way
    # through a write (or wrap), after the episode was registered.
    t0 = int(episode.t_started)
    if not _INT64_MIN <= t0 <= t0 + n <= _INT64_MAX:
        raise ValueError(
            f"chunk of episode {episode.id_!r}: its times t={t0} .. {t0 + n} leave int64 "
            f"[-2**63, 2**63 - 1], where the buffer keeps them"
        )
    return t0


def prepare(episode: SingleAgentEpisode) -> Chunk | None:
    """Reads a chunk through the public getters; None for a chunk with no steps.

    Raises:
        TypeError: Not a ``SingleAgentEpisode``, an unhashable or array id (the buffer finds
            episodes by id), values that are not numeric arrays (observations, actions and
            extras may nest them in dicts and tuples: :mod:`episodes.replay.nested`), rewards
            that are not real numbers, or an extra-model-output key that is not a str (``0`` and
            ``"0"`` would be one column).
        ValueError: Times (``t_started`` to ``t_started + len``) beyond int64, or rewards not
            one scalar per step or that a float32 cannot hold.

    Example:
        >>> ep = SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[1], rewards=[0.5],
        ...                         len_lookback_buffer=0)
        >>> chunk = prepare(ep)
        >>> chunk.n, chunk.obs.tolist(), chunk.rewards.dtype
        (1, [0.0, 1.0], dtype('float32'))
    """
    if not isinstance(episode, SingleAgentEpisode):
        raise TypeError(f"add() takes SingleAgentEpisode chunks, got {type(episode).__name__}")
    check_episode_id(episode.id_)
    if len(episode) == 0:
        return None
    n = len(episode)
    t0 = _start(episode, n)
    infos = list(episode.get_infos())
    empty_infos = all_empty_infos(infos)  # the common case, scanned once per chunk
    for key in episode.extra_model_outputs:
        if not isinstance(key, str):  # one column per key, named by it (np.str_ is a str)
            raise TypeError(
                f"extra_model_outputs key {key!r} must be a str: the buffer keeps one column "
                "per key, named by it"
            )
    extras = {
        str(key): _rows(
            episode.get_extra_model_outputs(key),
            f"extra_model_outputs[{key!r}]",
            n,
            episode.extra_model_outputs[key].finalized,
        )
        for key in episode.extra_model_outputs
    }
    stored = _rewards(episode.get_rewards(), n)
    return Chunk(
        id_=episode.id_,
        t0=t0,
        obs=_rows(
            episode.get_observations(),
            "observations",
            n + 1,
            episode.observations.finalized,
            episode.observation_space,
        ),
        actions=_rows(
            episode.get_actions(), "actions", n, episode.actions.finalized, episode.action_space
        ),
        rewards=stored,
        extras=extras,
        infos=[None] * len(infos) if empty_infos else _owned(infos, episode.id_),
        terminated=bool(episode.is_terminated),
        truncated=bool(episode.is_truncated),
        spaces=(episode.observation_space, episode.action_space),
        empty_infos=empty_infos,
        meta=chunk_meta(episode),
    )


def _rows(
    values: Any, what: str, count: int, finalized: bool = False, space: Any = None
) -> np.ndarray:
    # A numpy'd episode returns a nested column as a tuple or dict of per-leaf columns, which
    # np.asarray would stack leaf-major ([leaves, steps, ...]); a list-mode one holds tuples
    # or dicts per step: stacking equal-shaped tuple members loses their space.
    # A numpy'd column of list-structured items ([x, y] observations) reads a list of leaves.
    # A declared Dict or Tuple space decides, whatever form its items came in (a Tuple's
    # items may be lists, which would otherwise stack as rows in list mode only).
    if (quick := quick_rows(values, count, space)) is not None:
        return quick  # numpy'd plain rows: nothing below would refuse or change them
    unstackable = None if space is None else find_space_kind(space, UNSTACKABLE_SPACES)
    if unstackable is not None:
        # Equal-length Sequence items would stack, and a later, longer valid one be refused.
        raise TypeError(
            f"{what}: replay stores numeric arrays only; the items of a {unstackable} space "
            "have no fixed layout"
        )
    if values.__class__ is list and values and (mapping := other_mapping(values[0])) is not None:
        raise TypeError(mapping_words(what, mapping))  # read as its keys, or not at all
    nested = isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))
    nested = nested or bool(
        # A list-mode column's items: tuples or dicts are Tuple or Dict items, unless a space
        # says they are rows (a Box item given as a tuple; numpy'd lists are looked at below).
        space is None and not finalized and isinstance(values, list) and values
        and isinstance(values[0], (tuple, dict))
    )  # fmt: skip
    if finalized and isinstance(values, list) and not nested:
        # List-structured items ([x, y] observations without a Box space) are rows in list
        # mode; numpy'd (or read from a dataset) they are a list of per-leaf columns, which
        # stack back into the same rows.
        values = list_rows(values, what)
    if nested or isinstance(values, (tuple, dict)):
        if not what.startswith(NESTED_COLUMNS):  # observations, actions, extras: records
            raise TypeError(NESTED_REFUSAL.format(what=what))
        return nested_rows(values, what, count, finalized, space)
    if not finalized and isinstance(values, list) and values and isinstance(values[0], dict):
        raise TypeError(f"{what}: items nested unlike the declared space")  # dicts, a flat one
    rows = as_rows(values, what)
    if len(rows) != count:
        raise TypeError(f"{what}: {len(rows)} rows, expected {count} (nested items?)")
    return rows


def _rewards(values: Any, n: int) -> np.ndarray:
    """The chunk's rewards as the float32 column stores them (``float32_rewards``).

    Ints beyond int64 (numpy keeps them as objects) are stored too, as any int float32 holds;
    beyond float32 they are the overflow ``ValueError``. Rewards that stack into a numeric
    array (the usual case) are read as any column: the items are looked at only otherwise.

    Example:
        >>> _rewards([2**70, 1], 2)
        array([1.1805916e+21, 1.0000000e+00], dtype=float32)
    """
    try:
        rows = _rows(values, "rewards", n)
    except TypeError:
        scalars = _scalar_rewards(values, n)
        if scalars is None:  # nested or ragged: the column's own refusal says so
            raise
        rows = scalars
    return rewards_as_float32(rows)


def _scalar_rewards(values: Any, n: int) -> np.ndarray | None:
    """``n`` scalar rewards that numpy does not stack as numbers, as float64; None if not scalars.

    Raises:
        TypeError: A scalar that is not a real number (a string, None, a complex number).
        ValueError: An int no float holds.
    """
    if isinstance(values, np.ndarray) and values.ndim == 1:
        values = values.tolist()  # a numpy'd column of objects (or strings)
    if not isinstance(values, list) or len(values) != n:
        return None
    types = set(map(type, values))
    if any(issubclass(t, (list, tuple, dict, np.ndarray)) for t in types):
        return None
    odd = next((t for t in types if not issubclass(t, REAL_TYPES)), None)
    if odd is not None:
        raise TypeError(f"rewards must be real numbers, got one of type {odd.__name__}")
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:  # an int beyond float64, so beyond float32 too
        raise ValueError(
            "rewards hold values a float32 column cannot (they overflow to inf)"
        ) from None


def _owned(infos: list[Any], id_: Any, first: int = 0) -> list[Any]:
    # Deep copies, so that the caller changing an info dict later cannot reach into the
    # buffer; an empty one (None or {}) is stored as None (read back as a new {}). Any other
    # value, falsy (0, [], "") or an array, is what the episode recorded and is kept.
    return [
        None
        if info is None or (type(info) is dict and not info)
        else deep_copied(info, f"infos[{ts}]", f" of episode {id_!r}")
        for ts, info in enumerate(infos, first)
    ]


@dataclass
class Plan:
    """What an ``add`` does, in order: ``("chunk", Chunk)``, ``("evict", id)``, ``("drop", Chunk)``.

    A dropped chunk continues an episode that an earlier chunk of the same add evicted, or (with
    ``on_evicted="drop"``, or one without steps) one that an earlier add evicted.

    Example:
        >>> ep = SingleAgentEpisode("b", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                         rewards=[1.0, 1.0], len_lookback_buffer=0)
        >>> old = (3, True, 3, np.zeros(()))
        >>> plan = plan_add([prepare(ep)], {"old": old}, iter(["old"]), set(), 3, 4)
        >>> [(kind, getattr(item, "id_", item)) for kind, item in plan.steps]  # 5 steps > 4
        [('chunk', 'b'), ('evict', 'old')]
    """

    steps: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class _Known:
    t_end: int
    done: bool
    length: int
    last_obs: np.ndarray
    added: bool = True  # begun or continued by a chunk of this add, else as stored before it


def _same_border(chunk: Chunk, stored: np.ndarray) -> bool:
    """Whether ``chunk`` starts with ``stored``, the observation its episode's rows end with.

    In the column's dtype (NaNs equal), as stored: a head rounded into a float32 column joins
    the float64 value it was given. Where the chunk has a space, in the space's dtypes too, as
    ``concat_episode`` compares (a float32 tail of a float64 head in a float32 Box joins).
    """
    fitted, space = chunk.obs[0], chunk.spaces[0]
    if fitted.dtype.names is not None:  # nested: leaf by leaf (episodes.replay.nested)
        return records_equal(fitted, stored) or (
            space is not None and equal_in_space(unpack(chunk.border), unpack(stored), space)
        )
    if fitted.shape == stored.shape:
        if fitted.dtype.kind in "fc" and stored.dtype.kind in "fc":  # a complex one's parts
            if arrays_equal(fitted, stored):
                return True
        elif np.array_equal(fitted, stored):
            return True
    return space is not None and equal_in_space(chunk.border, stored, space)


def plan_add(
    chunks: list[Chunk],
    known: Mapping[str, tuple[int, bool, int, np.ndarray]],
    order: Iterator[str],
    evicted: Container[str],
    num_timesteps: int,
    capacity: int,
    on_evicted: str = "raise",
) -> Plan:
    """Checks the chunks against the stored episodes and simulates eviction.

    Args:
        chunks: The chunks, in add order.
        known: Stored episode id -> ``(t_end, done, length, latest observation)`` (read
            lazily per id).
        order: The stored ids, oldest first.
        evicted: Ids evicted before.
        num_timesteps: Steps stored now.
        capacity: The buffer's capacity in steps.
        on_evicted: ``"raise"``, ``"drop"`` or ``"restart"`` (a new episode; without steps,
            dropped): what a chunk of an episode in ``evicted`` does (``adding.ON_EVICTED``).

    Raises:
        EvictedEpisodeError: A chunk continues an episode evicted by an earlier add (with
            ``on_evicted="raise"``).
        ValueError: A chunk continues a finished episode, leaves a gap in time, or starts
            with an observation other than the one its episode's stored part ends with.

    Example:
        >>> ep = SingleAgentEpisode("b", observations=[2.0, 3.0], actions=[0], rewards=[1.0],
        ...                         t_started=2, len_lookback_buffer=0)
        >>> last = np.array(2.0, np.float32)
        >>> plan = plan_add([prepare(ep)], {"b": (2, False, 2, last)}, iter(["b"]), set(), 2, 10)
        >>> plan.steps[0][0]
        'chunk'
        >>> plan_add([prepare(ep)], {"b": (2, True, 2, last)}, iter(["b"]), set(), 2, 10)
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: episode 'b' is already done; cannot append a chunk (the buffer joins ...
    """
    plan = Plan()
    state: dict[str, _Known] = {}
    gone: dict[str, _Known] = {}  # evicted by this add: later chunks are checked, then dropped
    # This add's new episodes, oldest first: they are evicted only after every stored one, so
    # a victim among them is always the front one (a deque: no scan, no shift per eviction).
    newer: deque[str] = deque()
    existing_left = len(known)
    for chunk in chunks:
        entry = state.get(chunk.id_)
        if entry is None and chunk.id_ in known and chunk.id_ not in gone:
            entry = state[chunk.id_] = _Known(*known[chunk.id_], False)
        if chunk.id_ in evicted and entry is None and chunk.id_ not in gone:
            if on_evicted == "raise":
                raise EvictedEpisodeError(_EVICTED.format(chunk.id_), chunk.id_)
            if on_evicted == "drop" or not chunk.n:  # its episode's earlier steps are gone
                gone[chunk.id_] = _Known(chunk.t0, False, 0, chunk.obs[0])  # it joins itself
            # else "restart": a new episode under the id, as if the buffer never held it
        if chunk.id_ in gone:
            # Its episode was stored when this add began and an earlier chunk of it evicted the
            # episode: the chunk goes with it, as it would had it come first (a vector env's
            # chunks arrive in no particular order), checked as it would have been there.
            _continue(gone[chunk.id_], chunk)
            plan.steps.append(("drop", chunk))
            continue
        if entry is None and not chunk.n:  # an end of an episode this buffer never began
            continue
        if entry is None:  # a new episode: nothing to continue, nothing to compare
            entry = state[chunk.id_] = _Known(
                chunk.t0 + chunk.n, chunk.terminated or chunk.truncated, chunk.n, chunk.obs[-1]
            )
            newer.append(chunk.id_)
        else:
            _continue(entry, chunk)
        num_timesteps += chunk.n
        plan.steps.append(("chunk", chunk))
        # RLlib's rule: after each chunk, evict the oldest while over capacity, keeping one.
        while num_timesteps > capacity and existing_left + len(newer) > 1:
            stored, victim = _next_victim(order, gone, newer)
            if stored:
                existing_left -= 1
            else:
                newer.popleft()
            vic = state.get(victim) or _Known(*known[victim], False)
            num_timesteps -= vic.length
            gone[victim] = vic
            plan.steps.append(("evict", victim))
    return plan


_EVICTED = (
    "chunk of episode {!r} continues an episode this buffer has evicted (its earlier steps are "
    "gone): add(..., on_evicted='drop') skips such chunks, on_evicted='restart' stores them as "
    "a new episode, or give the buffer a capacity that holds every running episode (about "
    "num_envs x episode length)"
)


def _continue(entry: _Known, chunk: Chunk) -> None:
    """Checks that ``chunk`` continues the episode ``entry`` describes, then extends it."""
    if entry.done:
        raise ValueError(done_refusal(chunk.id_))
    if chunk.t0 != entry.t_end:
        held = "an earlier chunk of this add takes it" if entry.added else "the buffer holds it"
        raise ValueError(gap_refusal(chunk.id_, chunk.t0, held, entry.t_end))
    if not _same_border(chunk, entry.last_obs):
        # RLlib's concat_episode refuses this too: the stored step before the border would
        # otherwise get a next observation its chunk never saw.
        raise ValueError(
            f"chunk of episode {short_repr(chunk.id_)} starts at t={chunk.t0} with an observation "
            "that differs from the one the buffer holds for that step"
        )
    entry.t_end = chunk.t0 + chunk.n
    entry.done = chunk.terminated or chunk.truncated
    entry.length += chunk.n
    entry.last_obs = chunk.obs[-1]
    entry.added = True


def _next_victim(
    order: Iterator[str], gone: Mapping[str, _Known], newer: deque[str]
) -> tuple[bool, str]:
    """The oldest episode left, and whether it was stored before this add (else it is new).

    ``order`` is shared across calls, so each stored id is looked at once per add.
    """
    for id_ in order:
        if id_ not in gone:
            return True, id_
    return False, newer[0]

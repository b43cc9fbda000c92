"""Vectorized n-step returns over linked slots, and the walks that sequences are built from."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from episodes.io.nstep import discount_weights
from episodes.replay.nested import _nest, _nesting, _offsets, put_rows, take_rows
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable

__all__ = [
    "NStepResult",
    "gathers_leaves",
    "n_step_returns",
    "nest",
    "next_leaves",
    "next_observations",
    "take_leaves",
    "walk",
]

# Records whose leaves hold this many bytes on average (images) are sampled leaf by leaf, each
# gathered from its field (one copy); smaller ones as raw bytes, then copied out by
# ``nested.unpack``, which costs less for them (one gather for every leaf). The crossover
# measured with 256 transitions and 32 x 65 sequences: 150-250 bytes a leaf.
LEAF_GATHER_BYTES = 256


@dataclass
class NStepResult:
    """Per sampled slot: the discounted reward sum and where the window ended.

    Attributes:
        rewards: ``sum_{k<m} gamma^k r_{t+k+1}`` over the ``m`` steps taken (float64).
        steps: ``m``, the steps taken: ``n``, or fewer where the stored episode ended first.
        last: The slot of the window's last step (its next observation is the bootstrap one).
        terminated: The window ended in a terminal state (bootstrap value 0).
        truncated: The window ended at the last step of a truncated episode.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 4.0], terminated=True, len_lookback_buffer=0))
        >>> res = n_step_returns(buf._store, buf._table, np.array([0, 1]), np.array([3, 1]), 0.5)
        >>> res.rewards.tolist(), res.steps.tolist(), res.terminated.tolist()
        ([3.0, 4.0], [2, 1], [True, True])
    """

    rewards: np.ndarray
    steps: np.ndarray
    last: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


def n_step_returns(
    store: StepStore, table: EpisodeTable, slots: np.ndarray, n: np.ndarray, gamma: float
) -> NStepResult:
    """Walks ``n[i]`` steps from each slot (stopping at the episode's stored end) in bulk.

    A window stops early at a termination (nothing follows), at the last step of a truncated
    episode (bootstrapped from the true final observation) and at the last stored step of an
    ongoing episode (bootstrapped from its latest observation); each is a shorter horizon with
    discount ``gamma^m``.

    Example:
        >>> store, table = StepStore(), EpisodeTable()
        >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
        >>> store.reserve(3)
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> slots = store.append(rows, {}, [{}] * 3, ep_row=row, t0=0, prev_slot=-1)
        >>> res = n_step_returns(store, table, np.array([0, 2]), np.array([2, 2]), 0.5)
        >>> res.rewards.tolist(), res.steps.tolist(), res.last.tolist()
        ([1.5, 1.0], [2, 1], [1, 2])
    """
    last = slots
    rewards = store.rewards[slots].astype(np.float64)
    steps = np.ones(len(slots), np.int64)
    width = int(n.max(initial=1))
    same_n = width == int(n.min(initial=1))
    # numpy's powers, not Python's (they differ in the last bit): the sums equal the datasets'.
    # Made as far as the windows reach (doubling), as n may be a Monte-Carlo horizon; none
    # for 1-step windows.
    asked, weights = 0, np.empty(0)
    for k in range(1, width):
        nxt = store.nxt[last]
        go = nxt >= 0  # once a window stops at its episode's stored end it stays stopped
        if not same_n:
            go &= k < n
        if k % 8 == 0 and not go.any():
            break  # every window stopped: a huge n (Monte-Carlo returns) costs episode lengths
        last = np.where(go, nxt, last)
        if k >= asked == len(weights):  # not cut by a weight of 0: make more
            asked = min(width, max(64, 2 * asked))
            weights = _few_weights(gamma, asked) if asked <= 64 else discount_weights(gamma, asked)
        weight = weights[k] if k < len(weights) else 0.0
        if weight:  # a stopped window adds 0, not 0 * its last reward (NaN for an inf reward)
            # In float64: a weight below float32's range would be 0 there (0 * inf is NaN).
            # Sums past float64's range are inf, inf - inf NaN, as a sum in Python gives:
            # no warning (an error under -W error).
            with np.errstate(over="ignore", invalid="ignore"):
                rewards += weight * np.where(go, store.rewards[last], 0.0).astype(np.float64)
        steps += go
    at_end = store.nxt[last] < 0
    rows = store.ep[last]
    return NStepResult(
        rewards=rewards,
        steps=steps,
        last=last,
        terminated=at_end & table.terminated[rows],
        truncated=at_end & table.truncated[rows],
    )


def next_observations(store: StepStore, table: EpisodeTable, slots: np.ndarray) -> np.ndarray:
    """The observation after each slot's step: the next slot's, or the episode's latest one.

    Example:
        >>> store, table = StepStore(), EpisodeTable()
        >>> row = table.open("a", t_begin=0, final_obs=np.full((1, 1), 9.0), final_info={})
        >>> store.reserve(2)
        >>> rows = {"obs": np.array([[0.0], [1.0]]), "actions": np.zeros(2), "rewards": np.ones(2)}
        >>> _ = store.append(rows, {}, [{}] * 2, ep_row=row, t0=0, prev_slot=-1)
        >>> next_observations(store, table, np.array([0, 1]))[:, 0].tolist()
        [1.0, 9.0]
    """
    assert store.obs is not None and table.final_obs is not None
    nxt = store.nxt[slots]
    out = take_rows(store.obs.data, np.maximum(nxt, 0))
    ends = nxt < 0
    if ends.any():
        put_rows(out, ends, take_rows(table.final_obs.data, store.ep[slots[ends]]))
    return out


def gathers_leaves(store: StepStore, table: EpisodeTable) -> bool:
    """Whether the store's observations are records sampled leaf by leaf (:func:`take_leaves`).

    Example:
        >>> store, table = StepStore(), EpisodeTable()
        >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
        >>> store.reserve(1)
        >>> rows = {"obs": np.zeros((1, 1)), "actions": np.zeros(1), "rewards": np.ones(1)}
        >>> _ = store.append(rows, {}, [{}], ep_row=row, t0=0, prev_slot=-1)
        >>> gathers_leaves(store, table)
        False
    """
    assert store.obs is not None and table.final_obs is not None
    dtype = store.obs.data.dtype
    if dtype.names is None or table.final_obs.data.dtype != dtype:
        return False
    return dtype.itemsize >= LEAF_GATHER_BYTES * len(_offsets(dtype))


def take_leaves(data: np.ndarray, index: Any) -> list[np.ndarray]:
    """The leaves of records ``data[index]``, each gathered straight from its field.

    One new contiguous array per leaf, in field order: the arrays ``nested.unpack`` copies
    out of ``nested.take_rows``'s records, with one copy instead of two (:func:`nest` nests
    them).

    Example:
        >>> from episodes.replay.nested import nested_rows
        >>> rows = nested_rows({"a": np.arange(3.0), "b": (np.arange(3),)}, "obs", 3, True)
        >>> nest(rows.dtype, take_leaves(rows, np.array([2, 0])))
        {'a': array([2., 0.]), 'b': (array([2, 0]),)}
    """
    return [data.getfield(leaf, offset)[index] for _, offset, leaf in _offsets(data.dtype)]


def nest(dtype: np.dtype[Any], leaves: list[np.ndarray]) -> Any:
    """Leaves in :func:`take_leaves` order, nested as records of ``dtype`` are (see there)."""
    return _nest(_nesting(dtype), leaves)


def next_leaves(store: StepStore, table: EpisodeTable, slots: np.ndarray) -> list[np.ndarray]:
    """:func:`next_observations` as :func:`take_leaves` gives records (see there).

    Example:
        >>> from episodes.replay.nested import nested_rows
        >>> store, table = StepStore(), EpisodeTable()
        >>> obs = nested_rows({"a": np.arange(3.0)}, "obs", 3, True)
        >>> row = table.open("a", t_begin=0, final_obs=obs[2:], final_info={})
        >>> store.reserve(2)
        >>> rows = {"obs": obs[:2], "actions": np.zeros(2), "rewards": np.ones(2)}
        >>> _ = store.append(rows, {}, [{}] * 2, ep_row=row, t0=0, prev_slot=-1)
        >>> next_leaves(store, table, np.array([1, 0]))
        [array([2., 1.])]
    """
    assert store.obs is not None and table.final_obs is not None
    nxt = store.nxt[slots]
    leaves = take_leaves(store.obs.data, np.maximum(nxt, 0))
    ends = nxt < 0
    if ends.any():
        finals = take_leaves(table.final_obs.data, store.ep[slots[ends]])
        for leaf, final in zip(leaves, finals):
            leaf[ends] = final
    return leaves


def walk(
    store: StepStore, starts: np.ndarray, length: int, *, backward: bool = False
) -> np.ndarray:
    """``[B, length]`` slots reached by following the episode links from each start.

    Forward walks begin at the start itself; backward walks end just before it (so they hold
    the ``length`` steps preceding it, oldest first). Positions past the episode's stored
    range are -1. Rows whose steps are adjacent slots (the usual case) take one check; the
    rest follow the links one vectorized step at a time, until every one of them has left its
    episode.

    Example:
        >>> store = StepStore(); store.reserve(3)
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> _ = store.append(rows, {}, [{}] * 3, ep_row=0, t0=0, prev_slot=-1)
        >>> walk(store, np.array([1]), 3).tolist(), walk(store, np.array([1]), 2, backward=True)
        ([[1, 2, -1]], array([[-1,  0]]))
    """
    step = -1 if backward else 1
    offsets = np.arange(length) * step - (1 if backward else 0)
    out = starts[:, None] + offsets
    far = out[:, -1]
    near = np.clip(far, 0, max(store.end - 1, 0))
    # Adjacent slots hold adjacent steps of one episode iff the far end does (slot order is
    # time order within an episode).
    ok = (far == near) & (store.ep[near] == store.ep[starts]) & store.live[near]
    ok &= store.t[near] - store.t[starts] == far - starts
    slow = np.flatnonzero(~ok)
    if len(slow):
        link = store.prv if backward else store.nxt
        cur = starts[slow] if not backward else store.prv[starts[slow]]
        for k in range(length):
            if k % 8 == 0 and not (cur >= 0).any():
                # Every walk left its episode: the rest is padding, however long the asked
                # length (a lookback far beyond what is stored costs the stored steps only).
                out[slow, k:] = -1
                break
            out[slow, k] = cur
            cur = np.where(cur >= 0, link[np.maximum(cur, 0)], -1)
    if backward:
        out = out[:, ::-1]
    return out


@lru_cache(maxsize=256)
def _few_weights(gamma: float, count: int) -> np.ndarray:
    """``discount_weights`` of a usual horizon, made once per ``(gamma, count)``: read-only."""
    weights = discount_weights(gamma, count)
    weights.flags.writeable = False
    return weights

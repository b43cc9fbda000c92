"""Returns-to-go and env timesteps of a sequence batch: a Decision Transformer's inputs.

A return-conditioned sequence model (Decision Transformer, trajectory transformer) reads,
beside each step's observation and action, the return from that step to its episode's end
and the step's env time. A sequence batch holds its window's rewards only: the rewards after
the window live in the buffer. :func:`sequence_returns_to_go` reads each row's return from its
last real step to its episode's end once (an n-step return whose horizon reaches the end, as
``get_transitions`` sums it, kept in float64) and runs it back through the row's own rewards,
so a batch walks ``B`` items to their episodes' ends rather than every cell; the timesteps are
``episode_steps`` of the real cells.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.replay import EpisodeReplayBuffer
    >>> buf = EpisodeReplayBuffer(100, seed=0)
    >>> buf.add(SingleAgentEpisode("a", observations=[0, 1, 2, 3, 4], actions=[0] * 4,
    ...                            rewards=[1.0] * 4, terminated=True, t_started=10,
    ...                            len_lookback_buffer=0))
    >>> rtg, t = sequence_returns_to_go(buf, buf.sample(1, batch_length_T=4))
    >>> rtg.tolist(), t.tolist()  # to the episode's end, at its env times
    ([[4.0, 3.0, 2.0, 1.0]], [[10, 11, 12, 13]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.arguments import discount_factor
from episodes.io.nstep import discount_weights, discounted_sum
from episodes.replay import sampling
from episodes.replay.nstep import n_step_returns

__all__ = ["sequence_returns_to_go"]

_HOW = "sample(B, batch_length_T=K) (pad and lookback either way)"


def _host(value: Any, name: str) -> np.ndarray:
    """A batch column as a numpy array: torch tensors (any device) are copied to the host."""
    if not isinstance(value, np.ndarray) and hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.ndim != 2:
        raise ValueError(
            f"batch[{name!r}] has shape {array.shape}, not [B, K] sequences: "
            f"sequence_returns_to_go takes a batch of {_HOW}"
        )
    return array


def sequence_returns_to_go(
    buffer: Any, batch: Any, *, gamma: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Each real cell's return-to-go (to its episode's end) and env time, ``[B, K]`` each.

    ``returns_to_go[b, j]`` is ``sum(gamma**i * r[t + i])`` over the steps from the cell's
    step ``t`` to the last stored step of its episode, not only to the window's end (a running
    episode's return so far, its newest stored step being its last); undiscounted with the
    default ``gamma=1.0``. ``timesteps[b, j]`` is the step's env time in its episode
    (``t_started`` included: absolute across the pieces an episode was added in). Padded
    cells (``mask`` False: past an episode's end with ``pad=True``, or before its first
    stored step in a lookback) hold 0 in both. Sums are float64, of the rewards as the
    buffer stores them (float32); a row's own rewards are added to what follows them one
    step at a time, so with rewards a float sums exactly (integers, halves) the values are
    exact.

    Args:
        buffer: The replay buffer the batch was sampled from (its items must still be
            stored: a row whose episode was evicted since is a ``KeyError``).
        batch: A sequence batch, ``buffer.sample(B, batch_length_T=K)`` with any ``pad``,
            ``lookback`` and ``device`` (torch columns are read on the host); it needs
            ``indices`` and ``rewards`` (one number per step).
        gamma: Discount of the returns-to-go, in ``[0, 1]``.

    Returns:
        ``(returns_to_go, timesteps)``: float64 and int64 numpy arrays of the batch's
        ``[B, K]`` shape.

    Raises:
        ValueError: ``batch`` is no sequence batch (no ``indices`` or ``rewards``, or
            columns not ``[B, K]``), a multi-objective batch (rewards not one number per
            step), or ``gamma`` outside ``[0, 1]``.
        KeyError: Items no longer stored (evicted since the batch was sampled).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(100, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0, 1, 2, 3], actions=[0] * 3,
        ...                            rewards=[1.0, 2.0, 4.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> batch = buf.sample(64, batch_length_T=2, pad=True)  # every step starts a window
        >>> rtg, t = sequence_returns_to_go(buf, batch)
        >>> sorted({(int(t[b, 0]), tuple(rtg[b].tolist())) for b in range(64)})  # 0 where padded
        [(0, (7.0, 6.0)), (1, (6.0, 4.0)), (2, (4.0, 0.0))]
    """
    gamma = discount_factor(gamma)
    if not isinstance(batch, dict) or "indices" not in batch or "rewards" not in batch:
        raise ValueError(f"batch needs 'indices' and 'rewards' columns: a batch of {_HOW}")
    indices = _host(batch["indices"], "indices").astype(np.int64, copy=False)
    raw = batch["rewards"]
    shape = tuple(raw.shape)
    if shape != indices.shape:
        raise ValueError(
            f"batch['rewards'] has shape {shape}, not one reward per step of the "
            f"{indices.shape} indices (a multi-objective batch): sequence_returns_to_go "
            "sums one number per step"
        )
    rewards = _host(raw, "rewards").astype(np.float64)
    real = indices >= 0
    returns_to_go = np.zeros(indices.shape, np.float64)
    timesteps = np.zeros(indices.shape, np.int64)
    rows = np.flatnonzero(real.any(axis=1))
    if not len(rows):
        return returns_to_go, timesteps
    _, timesteps[real] = buffer.episode_steps(indices[real])
    width = indices.shape[1]
    # A row's real cells are one run of consecutive steps; its last one reads the rest.
    last = width - 1 - np.argmax(real[rows, ::-1], axis=1)
    last_items = indices[rows, last]
    _, t_end, _ = buffer.episode_bounds(last_items)
    left = t_end - timesteps[rows, last]
    tail = _tails(buffer, last_items, left, gamma)
    ahead = np.zeros(len(rows), np.float64)
    for j in range(width - 1, -1, -1):
        here = real[rows, j]
        # gamma 0 leaves what follows out (0 * inf is NaN), as discount_weights' sums do.
        after = gamma * ahead if gamma else 0.0
        ahead = np.where(last == j, tail, rewards[rows, j] + after)
        returns_to_go[rows, j] = np.where(here, ahead, 0.0)
    return returns_to_go, timesteps


def _tails(buffer: Any, items: np.ndarray, left: np.ndarray, gamma: float) -> np.ndarray:
    """Each item's discounted return over its ``left`` steps to its episode's stored end.

    Summed in step order in float64, as ``n_step_returns`` sums (which ``get_transitions``
    casts to float32). An item whose steps left sit in adjacent slots (an episode added in one
    piece, the usual case) is one slice of the rewards; the others walk their episode's links,
    one round per step of the longest.
    """
    store = buffer._store
    slots = sampling.slots_of(store, items)
    ends = slots + left - 1
    rows = store.ep[slots]
    # An episode's slots rise with its time: if the slot ``left - 1`` on holds its step
    # ``left - 1`` later, the ``left`` steps fill the ``left`` slots between.
    inside = ends < len(store.ep)
    adjacent = inside.copy()
    adjacent[inside] = (
        (store.ep[ends[inside]] == rows[inside])
        & (store.t[ends[inside]] == store.t[slots[inside]] + left[inside] - 1)
        & store.live[ends[inside]]
    )
    out = np.zeros(len(items), np.float64)
    weights = discount_weights(gamma, int(left.max(initial=1)))
    for i in np.flatnonzero(adjacent):
        out[i] = discounted_sum(store.rewards[slots[i] : ends[i] + 1].astype(np.float64), weights)
    walk = ~adjacent
    if walk.any():
        out[walk] = n_step_returns(store, buffer._table, slots[walk], left[walk], gamma).rewards
    return out

"""Prioritized draws of sequence starts, and the importance weights of prioritized items.

A prioritized buffer draws a sequence's first (non-lookback) step ``i`` with probability
``p_i^alpha / sum_j p_j^alpha`` over the steps that may start one (``pad=False``: ``T`` steps
left in their episode; ``pad=True``: every stored step), then gathers the rows exactly as the
uniform buffer does (:func:`episodes.replay.sequences.sequence_batch`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from episodes.replay.sampling import _MAX_ROUNDS
from episodes.replay.sequences import no_start_error, sequence_batch, start_filter
from episodes.replay.store import StepStore
from episodes.replay.sum_tree import SumTree
from episodes.replay.table import EpisodeTable

__all__ = ["draw_prioritized_starts", "importance_weights", "prioritized_sequences"]

# A start drawn from the tree (a uniform, a search down its levels, the fit test) costs about
# this many listed ones (a live flag, the fit test, a leaf and its running sum; measured
# 130-600 ns against 4-13 ns at 100k-1M steps): the rounds stop, and the starts are listed,
# once they would cost more than that pass.
_DRAW_COST = 32


def importance_weights(leaves: np.ndarray, least: float, beta: float) -> np.ndarray:
    """``(leaf / least) ** -beta`` as float32: PER's ``(N P(i))^-beta`` over its maximum.

    ``leaves`` are the drawn items' ``p ** alpha`` and ``least`` the smallest stored one
    (the min-tree's): the ``N`` and the sum of all leaves cancel in the ratio. A ratio that
    overflows float64 (leaves ``1e-300`` and ``1e10``) is taken in log space, so its power
    comes out as the float32 it is (``1e-31`` for ``beta=0.1``), not 0.

    Example:
        >>> importance_weights(np.array([1.0, 4.0]), 1.0, 0.5).tolist()
        [1.0, 0.5]
        >>> importance_weights(np.array([1.0, 4.0]), 1.0, 0.0).tolist()
        [1.0, 1.0]
    """
    if not beta:
        return np.ones(len(leaves), np.float32)
    # A weight below float32's range is 0, also where the user made underflow an error.
    with np.errstate(over="ignore", under="ignore"):
        ratio = leaves / least
        if len(ratio) and ratio.max() == np.inf:
            ratio = np.log(leaves)
            ratio -= math.log(least)
            ratio *= -beta
            return np.exp(ratio, out=ratio).astype(np.float32)
        return np.power(ratio, -beta, out=ratio).astype(np.float32)


def draw_prioritized_starts(
    store: StepStore,
    table: EpisodeTable,
    tree: SumTree,
    rng: np.random.Generator,
    size: int,
    length: int,
    pad: bool,
) -> np.ndarray:
    """``size`` start slots, each drawn with probability ``leaf / sum of the valid leaves``.

    With ``pad`` every stored step may start a sequence: one search of the tree. Without it,
    masses are drawn from the whole tree in rounds and the starts without ``length`` steps
    left dropped (rejection sampling: the kept ones follow the leaves restricted to the valid
    starts), each round sized by the share kept so far (four times the last while none
    was). Once the rounds would cost more than one pass listing the valid starts (a drawn
    start costs about ``_DRAW_COST`` listed ones), or blind rounds (none kept yet) a quarter
    of that, the valid starts are listed with their leaves and the rest drawn from their
    running sum, exactly: the uniform path's rule
    (:func:`episodes.replay.sampling.draw_flagged`) at a tree draw's cost, so a sample costs
    at most about two passes over the store, whatever share of it may start a sequence.

    Raises:
        EmptyBufferError: No stored episode holds ``length`` steps (and ``pad`` is off).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import PrioritizedEpisodeReplayBuffer
        >>> buf = PrioritizedEpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], len_lookback_buffer=0))
        >>> buf.update_priorities([1.0, 3.0, 100.0], [0, 1, 2])  # step 2 cannot start one
        >>> starts = draw_prioritized_starts(buf._store, buf._table, buf._tree,
        ...                                  np.random.default_rng(0), 1000, 2, pad=False)
        >>> round(float((starts == 1).mean()), 1)  # 3 / (1 + 3)
        0.8
    """
    if pad:  # every stored step may start a sequence: the tree's own draw
        masses = rng.random(size)
        masses *= tree.total
        return tree.find(masses)
    fits = start_filter(store, table, length)
    picked: list[np.ndarray] = []
    have = drawn = 0
    end, rate = store.end, 1.0  # the tree draws live steps only
    for _ in range(_MAX_ROUNDS):
        want = int((size - have) / rate * 1.2) + 16
        blind = drawn and not have
        if (drawn + want) * _DRAW_COST > (end // 4 if blind else end):
            break
        drawn += want
        masses = rng.random(want)
        masses *= tree.total
        draw = tree.find(masses)
        draw = draw[fits(draw)]
        picked.append(draw)
        have += len(draw)
        if have >= size:
            return np.concatenate(picked)[:size]
        rate = have / drawn if have else rate * 0.25
    candidates = np.flatnonzero(store.live[:end])
    candidates = candidates[fits(candidates)]
    if not len(candidates):
        raise no_start_error(length)
    running = np.cumsum(tree.leaves(candidates))
    masses = rng.random(size - have)
    masses *= running[-1]
    found = np.searchsorted(running, masses, "right")
    np.minimum(found, len(candidates) - 1, out=found)  # a mass rounded onto the total
    return np.concatenate([*picked, candidates[found]])


def prioritized_sequences(
    store: StepStore,
    table: EpisodeTable,
    tree: SumTree,
    rng: np.random.Generator,
    size: int,
    length: int,
    lookback: int,
    pad: bool,
    beta: float,
    include_infos: bool,
    include_extra_model_outputs: bool,
) -> tuple[dict[str, Any], np.ndarray]:
    """A :func:`~episodes.replay.sequences.sequence_batch` of prioritized starts, weighted.

    The batch gets ``weights`` (``[B]`` float32, one per sequence): the importance weights
    of the starts' leaves over the smallest stored leaf (:func:`importance_weights`).

    Returns:
        The batch, and the start slots (for ``update_priorities``).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import PrioritizedEpisodeReplayBuffer
        >>> buf = PrioritizedEpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], len_lookback_buffer=0))
        >>> buf.update_priorities([1.0, 4.0], [0, 1])
        >>> batch, starts = prioritized_sequences(buf._store, buf._table, buf._tree,
        ...     np.random.default_rng(0), 3, 2, 0, False, 1.0, False, False)
        >>> batch["indices"][:, 0].tolist(), batch["weights"].tolist()
        ([1, 1, 0], [0.25, 0.25, 1.0])
    """
    starts = draw_prioritized_starts(store, table, tree, rng, size, length, pad)
    batch = sequence_batch(
        store,
        table,
        starts,
        length,
        lookback,
        include_infos,
        include_extra_model_outputs,
        reserved=("weights",),
    )
    batch["weights"] = importance_weights(tree.leaves(starts), tree.min, beta)
    return batch, starts

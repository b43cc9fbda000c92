"""Pure bootstrap arithmetic for episodes that end by truncation.

A truncated (time-limit) episode did not reach a terminal state: its last step should be
credited with the discounted value of the state it was cut off in. Because an episode keeps its
final observation, that value is known exactly, ``V(s_T)``, so the converter folds it into the
reward of the last step and marks the step done:

    r'_T = r_T + gamma * V(s_T)        (truncated)
    r'_T = r_T                         (terminated: the value of a terminal state is 0)

An episode both terminated and truncated (a time limit that coincides with a terminal state)
is terminated: its final value is 0, as RLlib's ``1 - terminateds`` gate has it.

GAE over ``r'`` with ``done_T = 1`` then gives exactly the advantages and returns of GAE with a
true next value at the border. rsl_rl's approximation ``r_T + gamma * V(s_{T-1})`` uses the
value of the state *before* the last action instead (see docs/deviations.md).

Example:
    >>> import numpy as np
    >>> bootstrap_truncated_rewards(np.array([1.0, 1.0]), np.array([False, True]),
    ...                             np.array([0.0, 5.0]), gamma=0.9).tolist()
    [1.0, 5.5]
"""

from __future__ import annotations

import numpy as np

from episodes.indexing import discount_factor
from episodes.shapes import same_but_trailing_ones


def bootstrap_truncated_rewards(
    rewards: np.ndarray, truncated: np.ndarray, final_values: np.ndarray, gamma: float
) -> np.ndarray:
    """Returns ``rewards + gamma * final_values`` where ``truncated``, else ``rewards``.

    Args:
        rewards: Rewards of any shape.
        truncated: Bool mask of the same shape (up to a trailing unit dimension, as below):
            True on the last step of a truncated episode.
        final_values: ``V(s_T)`` of each truncated step's final observation (ignored
            elsewhere), shaped alike.
        gamma: Discount factor.

    Returns:
        A new array with the rewards' shape and dtype, or float64 for integer or bool rewards (a
        bonus of 4.5 would otherwise be truncated).

    Raises:
        ValueError: ``gamma`` is not a real number in ``[0, 1]``, or ``truncated`` or
            ``final_values`` is not shaped like ``rewards`` (only a trailing unit dimension may
            differ, ``[T, N]`` against ``[T, N, 1]``, as for
            :func:`~episodes.rollout.compute_gae`): broadcasting would mix steps.

    Example:
        >>> bootstrap_truncated_rewards(np.zeros(3, np.float32), np.array([0, 0, 1], bool),
        ...                             np.full(3, 2.0), 0.5).tolist()
        [0.0, 0.0, 1.0]
        >>> bootstrap_truncated_rewards(np.array([1, 1]), np.array([0, 1], bool),
        ...                             np.full(2, 5.0), 0.9).tolist()
        [1.0, 5.5]
        >>> bootstrap_truncated_rewards(np.zeros(3), np.array([True]), np.full(3, 2.0), 0.5)
        Traceback (most recent call last):
        ...
        ValueError: truncated has shape (1,), expected (3,)
    """
    gamma = discount_factor(gamma)  # the check every n-step computation makes
    rewards = np.asarray(rewards)
    truncated = _shaped_like(np.asarray(truncated), "truncated", rewards.shape)
    values = _shaped_like(np.asarray(final_values, np.float64), "final_values", rewards.shape)
    bonus = np.where(truncated, gamma * values, 0.0)
    dtype = rewards.dtype if rewards.dtype.kind in "fc" else np.dtype(np.float64)
    return (rewards + bonus).astype(dtype, copy=False)


def _shaped_like(x: np.ndarray, name: str, like: tuple[int, ...]) -> np.ndarray:
    # Only a trailing unit dimension may differ: broadcasting a [T] mask against [T, 1]
    # rewards would give [T, T], and a [1] mask would bootstrap every step.
    if x.shape != like:
        if not same_but_trailing_ones(x.shape, like):
            raise ValueError(f"{name} has shape {x.shape}, expected {like}")
        x = x.reshape(like)
    return x

"""The fast path for several runners' samples laid side by side (a gathered group sample).

A sequence of chunks may offer ``side_by_side()``: the runners' own samples, in the order their
sub-envs are numbered in it (the first sample's envs first). When every part is a
:class:`~episodes.runner.SampledChunks` whose fast path applies, the converter reads each
part's columns from its blocks (see :mod:`episodes.converter.from_blocks`) and joins them
along the env axis, instead of building every chunk. An ``obs_fn`` acts row by row (so the
documentation requires), so it is applied to each part's columns on their own. Parts whose
observations, actions or extra outputs differ in nesting, per-step shape or kind are refused
with the general path's error (:func:`~episodes.converter.alike.check_alike_envs`), before
``value_fn`` is called. Any part whose fast path does not apply, or parts of different
lengths, send the whole sequence down the general path, which gives the same storage or the
error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.converter.alike import check_alike_envs, env_label
from episodes.converter.columns import ColumnKeys, ObsFn, TimeMajorColumns, extra_keys_for
from episodes.converter.from_blocks import (
    LazyGroups,
    ValueFn,
    block_bootstrap,
    env_bounds,
    fast_value_fn,
    flat_observations,
    host_block_columns,
)
from episodes.episode import SingleAgentEpisode
from episodes.runner import SampledChunks
from episodes.structs import flatten, map_leaves, unflatten

__all__ = ["side_by_side_columns", "side_by_side_groups", "side_by_side_parts"]


def side_by_side_parts(episodes: Any) -> list[SampledChunks] | None:
    """The parts a sequence offers through ``side_by_side()``, if all are runner samples.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> sample = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
        >>> class Gathered(list):
        ...     def side_by_side(self):
        ...         return [sample]
        >>> [p is sample for p in side_by_side_parts(Gathered(sample))], side_by_side_parts([])
        ([True], None)
    """
    offer = getattr(episodes, "side_by_side", None)
    if not callable(offer):
        return None
    parts = list(offer())
    if not parts or not all(
        isinstance(p, SampledChunks) and len(p) and p.recording.device is None for p in parts
    ):
        return None  # torch-device recordings take the general path when side by side
    return parts


def _join(items: list[Any]) -> Any:
    """``[T, N_r, ...]`` structs (same structure) joined along the env axis."""
    leaves = [flatten(item) for item in items]
    structure = leaves[0][1]
    joined = [
        np.concatenate([np.asarray(parts[0][j]) for parts in leaves], axis=1)
        for j in range(len(leaves[0][0]))
    ]
    return unflatten(structure, joined)


def side_by_side_columns(
    parts: list[SampledChunks],
    keys: ColumnKeys,
    *,
    value_fn: ValueFn | None,
    gamma: float,
    training_type: str,
    obs_fn: ObsFn | None,
) -> tuple[TimeMajorColumns, np.ndarray, np.ndarray] | None:
    """Columns, bootstrapped float64 rewards and last values of the parts, joined; or None.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.converter import ColumnKeys
        >>> from episodes.runner import EnvRunner
        >>> def runner(seed):
        ...     env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        ...     zeros = lambda obs: np.zeros(len(obs))
        ...     policy = lambda obs: (zeros(obs).astype(np.int64),
        ...                           {"vf_preds": zeros(obs), "action_logp": zeros(obs)})
        ...     return EnvRunner(env, policy, seed=seed)
        >>> parts = [runner(0).sample(4), runner(1).sample(4)]
        >>> cols, rewards, last = side_by_side_columns(
        ...     parts, ColumnKeys(values="vf_preds", log_probs="action_logp"),
        ...     value_fn=lambda obs: np.zeros(len(obs)), gamma=0.9, training_type="rl",
        ...     obs_fn=None)
        >>> cols.observations.shape, rewards.shape, last.shape
        ((4, 4, 4), (4, 4), (4, 1))
    """
    laid = []
    for part in parts:
        applies, part_value_fn = fast_value_fn(part, keys, value_fn, training_type)
        # obs_fn acts row by row (documented), so each part's rows may take it on their own.
        one = host_block_columns(part, keys, training_type, obs_fn) if applies else None
        if one is None:
            return None
        laid.append((*one, part_value_fn))
    if len({cols.rewards.shape[0] for cols, _, _ in laid}) != 1:
        return None  # the general path refuses envs of other lengths
    _check_alike_parts(parts, keys, training_type)  # as the general path: before any value
    if len({_layout(cols.observations) for cols, _, _ in laid}) != 1:
        return None  # alike, but of other dtypes: the general path joins them as numpy does
    for cols, _, _ in laid:
        flat_observations(cols.observations)  # a Tuple space's reach no value_fn
    pieces = [
        (cols, *block_bootstrap(part, cols, rewards, fn, gamma, training_type, obs_fn))
        for part, (cols, rewards, fn) in zip(parts, laid)
    ]
    columns = [cols for cols, _, _ in pieces]
    joined = TimeMajorColumns(
        observations=_join([c.observations for c in columns]),
        actions=_join([c.actions for c in columns]),
        rewards=np.concatenate([c.rewards for c in columns], axis=1),
        dones=np.concatenate([c.dones for c in columns], axis=1),
        truncated=np.concatenate([c.truncated for c in columns], axis=1),
        extras={
            key: np.concatenate([np.asarray(c.extras[key]) for c in columns], axis=1)
            for key in columns[0].extras
        },
        mask=_joined_mask(columns),
    )
    rewards = np.concatenate([r for _, r, _ in pieces], axis=1)
    last_values = np.concatenate([v for _, _, v in pieces], axis=0)
    return joined, rewards, last_values


def _check_alike_parts(parts: list[SampledChunks], keys: ColumnKeys, training_type: str) -> None:
    """The general path's cross-env refusal, on each part's first env against part 0's.

    A part's envs are one runner's, alike; env ``offset(r)`` is part ``r``'s first. Read from
    the blocks' one-row examples, observations before ``obs_fn``: nothing is gathered, and a
    chunk is built only to name an env in the refusal.
    """
    labels = _LazyLabels(parts)
    # (the field as the refusal names it, its blocks' name, its declared space: None, kinds
    # not compared), in the general path's order.
    fields: list[tuple[str, str, str | None]] = [
        ("observations", "observations", "observation_space"),
        ("actions", "actions", "action_space"),
    ]
    fields += [
        (f"extra output {k!r}", "extra:" + k, None) for k in extra_keys_for(keys, training_type)
    ]
    for field, name, space in fields:
        rows = [map_leaves(lambda leaf: leaf[:, 0], part.example(name)) for part in parts]
        spaces = None if space is None else [getattr(part, space) for part in parts]
        check_alike_envs(rows, field, labels, spaces)


class _LazyLabels(Sequence[str]):
    """Part ``r``'s first env named as the general path names it, when a refusal asks."""

    def __init__(self, parts: list[SampledChunks]):
        self._parts = parts
        self._offsets = np.cumsum([0] + [part.num_envs for part in parts[:-1]])

    def __len__(self) -> int:
        return len(self._parts)

    def __getitem__(self, r: Any) -> Any:
        part = self._parts[r]
        return env_label(int(self._offsets[r]), LazyGroups(part)[0])


def _layout(observations: Any) -> str:
    """What joining along the env axis needs alike: the nesting, each leaf's dtype and row shape."""
    leaves, _ = flatten(observations)
    skeleton = map_leaves(lambda _: None, observations)
    return repr((skeleton, [(np.asarray(x).dtype.str, np.shape(x)[2:]) for x in leaves]))


def _joined_mask(columns: list[TimeMajorColumns]) -> np.ndarray | None:
    """The parts' masks joined along the env axis (a part without one: all True), or None."""
    if all(c.mask is None for c in columns):
        return None
    return np.concatenate(
        [np.ones(c.dones.shape, bool) if c.mask is None else c.mask for c in columns], axis=1
    )


def side_by_side_groups(
    episodes: Sequence[SingleAgentEpisode], parts: list[SampledChunks]
) -> LazyGroups:
    """Per-env chunk lists of a side-by-side sequence, read through it when one is read.

    Env ``offset(r) + i`` is part ``r``'s env ``i``; in ``episodes`` part ``r``'s chunks follow
    those of the parts before it, so its own ``__getitem__`` (which may renumber the chunks)
    hands them out.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> def sample(seed):
        ...     env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        ...     policy = RandomPolicy(env.action_space, seed=seed)
        ...     return EnvRunner(env, policy, seed=seed).sample(20)
        >>> parts = [sample(0), sample(1)]
        >>> groups = side_by_side_groups([c for p in parts for c in p], parts)
        >>> len(groups), [len(g) for g in groups], [sum(len(c) for c in g) for g in groups]
        (4, [2, 1, 1, 1], [20, 20, 20, 20])
    """
    offsets = np.cumsum([0] + [len(part) for part in parts[:-1]])
    bounds = [env_bounds(part)[:-1] + offset for part, offset in zip(parts, offsets)]
    return LazyGroups(episodes, np.concatenate([*bounds, [len(episodes)]]))

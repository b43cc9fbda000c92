"""The fast path for several runners' samples laid side by side (a gathered group sample).

A sequence of chunks may offer ``side_by_side()``: the runners' own samples, in the order their
sub-envs are numbered in it (the first sample's envs first). When every part is a
:class:`~episodes.runner.SampledChunks` whose fast path applies, the converter reads each
part's columns from its blocks (see :mod:`episodes.converter.from_blocks`) and joins them
along the env axis, instead of building every chunk. Parts recorded on one torch device are
read and joined there (:mod:`episodes.converter.from_device_blocks`, one ``value_fn`` call per
part); host and device parts together, or parts on two devices, take the general path. An
``obs_fn`` acts row by row (so the documentation requires), so it is applied to each part's
columns on their own. Parts whose
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
import torch

from episodes.connectors.joining import lossless_ints
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
from episodes.converter.from_device_blocks import device_block_columns
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
    if not parts or not all(isinstance(p, SampledChunks) and len(p) for p in parts):
        return None
    if len({_recorded_on(p) for p in parts}) != 1:
        return None  # host and device recordings, or two devices: the general path joins them
    return parts


def _recorded_on(part: SampledChunks) -> str | None:
    """The torch device a part's blocks live on (None: host blocks)."""
    blocks = part.recording.device
    return None if blocks is None else str(torch.device(blocks.device))


def _concat(items: list[Any]) -> Any:
    """Arrays, or tensors on one device, joined along the env axis (axis 1)."""
    if isinstance(items[0], torch.Tensor):
        return torch.cat([torch.as_tensor(x, device=items[0].device) for x in items], dim=1)
    return np.concatenate(lossless_ints([np.asarray(x) for x in items]), axis=1)


def _join(items: list[Any]) -> Any:
    """``[T, N_r, ...]`` structs (same structure) joined along the env axis."""
    leaves = [flatten(item) for item in items]
    structure = leaves[0][1]
    joined = [_concat([parts[0][j] for parts in leaves]) for j in range(len(leaves[0][0]))]
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
    if parts[0].recording.device is not None:
        return _device_columns(parts, keys, value_fn, gamma, training_type, obs_fn)
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
    if len({_layouts(cols) for cols, _, _ in laid}) != 1:
        return None  # alike, but of other dtypes: the general path joins (or refuses) them
    for cols, _, _ in laid:
        flat_observations(cols.observations)  # a Tuple space's reach no value_fn
    pieces = [
        (cols, *block_bootstrap(part, cols, rewards, fn, gamma, training_type, obs_fn))
        for part, (cols, rewards, fn) in zip(parts, laid)
    ]
    return _joined(pieces)


def _joined(pieces: list[tuple[TimeMajorColumns, Any, Any]]) -> tuple[TimeMajorColumns, Any, Any]:
    """The parts' columns, bootstrapped rewards and last values joined along the env axis."""
    columns = [cols for cols, _, _ in pieces]
    joined = TimeMajorColumns(
        observations=_join([c.observations for c in columns]),
        actions=_join([c.actions for c in columns]),
        rewards=_concat([c.rewards for c in columns]),
        dones=_concat([c.dones for c in columns]),
        truncated=_concat([c.truncated for c in columns]),
        extras={key: _concat([c.extras[key] for c in columns]) for key in columns[0].extras},
        mask=_joined_mask(columns),
    )
    rewards = _concat([r for _, r, _ in pieces])
    last_values = _concat([v.T for _, _, v in pieces]).T
    return joined, rewards, last_values


def _device_columns(
    parts: list[SampledChunks],
    keys: ColumnKeys,
    value_fn: ValueFn | None,
    gamma: float,
    training_type: str,
    obs_fn: ObsFn | None,
) -> tuple[TimeMajorColumns, Any, Any] | None:
    """:func:`side_by_side_columns` of parts recorded on one torch device, kept there.

    Each part is read as one runner's sample is (views or one gather per field, one
    ``value_fn`` call), and the parts are joined with ``torch.cat``: no chunk is built and
    nothing is copied to the host but the chunk tables' small index arrays.
    """
    fns = []
    for part in parts:
        applies, part_value_fn = fast_value_fn(part, keys, value_fn, training_type)
        if not applies:
            return None
        fns.append(part_value_fn)
    if len({part.recording.num_steps for part in parts}) != 1:
        return None  # the general path refuses envs of other lengths
    _check_alike_parts(parts, keys, training_type)  # as the general path: before any value
    names = ["observations", "actions"]
    names += ["extra:" + key for key in extra_keys_for(keys, training_type)]
    for name in names:  # torch.cat promotes otherwise than numpy (and not uints at all)
        if len({_device_layout(part.example(name)) for part in parts}) != 1:
            return None  # alike, but of other dtypes: the general path joins them as numpy does
    pieces = []
    for part, fn in zip(parts, fns):
        one = device_block_columns(
            part, keys, value_fn=fn, gamma=gamma, training_type=training_type, obs_fn=obs_fn
        )
        if one is None:
            return None
        pieces.append(one)
    return _joined(pieces)


def _device_layout(example: Any) -> str:
    """:func:`_layout` of a device field's ``[1, N, ...]`` example, read without a sync."""
    leaves, _ = flatten(example)
    skeleton = map_leaves(lambda _: None, example)
    return repr((skeleton, [(str(x.dtype), tuple(x.shape[2:])) for x in leaves]))


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
        rows = [map_leaves(_host_row, part.example(name)) for part in parts]
        spaces = None if space is None else [getattr(part, space) for part in parts]
        check_alike_envs(rows, field, labels, spaces)


def _host_row(leaf: Any) -> Any:
    """Env 0's row ``[1, ...]`` of an example leaf; of a tensor, a zeroed numpy stand-in.

    The alike checks read dtypes and shapes only, so a device row need not be copied (which
    would wait for the device), and a numpy one names them as the general path does.
    """
    if isinstance(leaf, torch.Tensor):
        return torch.zeros((1, *leaf.shape[2:]), dtype=leaf.dtype, device="cpu").numpy()
    return leaf[:, 0]


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


def _layouts(cols: TimeMajorColumns) -> tuple[str, ...]:
    """:func:`_layout` of every field joined along the env axis, extra outputs by key."""
    extras = [f"{key}={_layout(cols.extras[key])}" for key in sorted(cols.extras)]
    return (_layout(cols.observations), _layout(cols.actions), *extras)


def _joined_mask(columns: list[TimeMajorColumns]) -> Any:
    """The parts' masks joined along the env axis (a part without one: all True), or None."""
    if all(c.mask is None for c in columns):
        return None
    masks = [c.mask for c in columns if c.mask is not None]
    if isinstance(masks[0], torch.Tensor):
        device = masks[0].device
        return torch.cat(
            [
                torch.ones(c.dones.shape, dtype=torch.bool, device=device)
                if c.mask is None
                else torch.as_tensor(c.mask, device=device)
                for c in columns
            ],
            dim=1,
        )
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

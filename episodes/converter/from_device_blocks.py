"""The converter's fast path for blocks on a torch device: columns and bootstrap stay there.

When the env yields torch tensors, the runner's blocks live on the env's device (see
:mod:`episodes.runner.device_recorder`). The ``[T, N, ...]`` columns are views of them (or one
gather on the device when the sub-envs' windows differ), the truncation bootstrap is one
batched ``value_fn`` call on device observations, and the arithmetic is the host path's, in
float64 on the device, so both give the same storage. Nothing waits for the device except
copying the small host index arrays of the chunk table to it.

Example:
    >>> import torch
    >>> from episodes.converter import ColumnKeys
    >>> from episodes.runner import EnvRunner
    >>> from episodes.envs.torch_cartpole import TorchCartPole
    >>> env = TorchCartPole(2, device="cpu")
    >>> def policy(obs):
    ...     zeros = torch.zeros(len(obs))
    ...     return zeros.long(), {"vf_preds": zeros, "action_logp": zeros}
    >>> chunks = EnvRunner(env, policy, seed=0).sample(4)
    >>> cols, rewards, last = device_block_columns(
    ...     chunks, ColumnKeys(), value_fn=lambda o: o[:, 0], gamma=0.9)
    >>> cols.rewards.shape, rewards.dtype, chunks.built()
    (torch.Size([4, 2]), torch.float64, [])
"""

from __future__ import annotations

from typing import Any

import torch

from episodes.converter.columns import (
    ColumnKeys,
    ObsFn,
    TimeMajorColumns,
    extra_keys_for,
)
from episodes.converter.from_blocks import (
    LazyExtras,
    ValueFn,
    flat_observations,
    mask_dead_cells,
    raw_columns,
)
from episodes.converter.inputs import real_value_tensor
from episodes.converter.observation_batch import transform_batch
from episodes.runner import SampledChunks


def device_block_columns(
    chunks: SampledChunks,
    keys: ColumnKeys,
    *,
    value_fn: ValueFn | None,
    gamma: float,
    training_type: str = "rl",
    obs_fn: ObsFn | None = None,
) -> tuple[TimeMajorColumns, torch.Tensor, torch.Tensor] | None:
    """Columns, bootstrapped float64 rewards and ``[N, 1]`` last values, all on the device.

    ``value_fn`` and ``obs_fn`` get torch tensors on the env's device; extra outputs are read
    from the blocks when the storage asks for them. Returns None when an extra key is missing
    (the caller takes the general path).

    Example:
        >>> from episodes.envs.torch_cartpole import TorchCartPole
        >>> from episodes.runner import EnvRunner
        >>> def policy(obs):
        ...     zeros = torch.zeros(len(obs))
        ...     return zeros.long(), {"vf_preds": zeros, "action_logp": zeros}
        >>> chunks = EnvRunner(TorchCartPole(2, device="cpu"), policy, seed=0).sample(3)
        >>> _, _, last = device_block_columns(chunks, ColumnKeys(), gamma=0.9,
        ...                                   value_fn=lambda obs: torch.full((len(obs),), 2.0))
        >>> last.tolist(), last.device.type  # both envs still running: V(last obs) each
        ([[2.0], [2.0]], 'cpu')
        >>> keys = ColumnKeys(distribution=("logits",))  # not recorded: the general path
        >>> device_block_columns(chunks, keys, value_fn=None, gamma=0.9) is None
        True
    """
    extra_keys = extra_keys_for(keys, training_type)
    raw = chunks.time_major(extra_keys, lazy_extras=True)
    if raw is None:
        return None
    raw["extras"] = LazyExtras(chunks, extra_keys)
    cols = raw_columns(raw, raw["observations"], obs_fn)
    flat_observations(cols.observations)  # before the value call, as on the host
    recorded_rewards: torch.Tensor = cols.rewards  # type: ignore[assignment]
    rewards = mask_dead_cells(chunks, cols, recorded_rewards.to(torch.float64))
    last_values = torch.zeros((rewards.shape[1], 1), dtype=torch.float64, device=rewards.device)
    if training_type != "rl":
        return cols, rewards, last_values
    assert value_fn is not None
    steps, envs, ongoing, needs_value = chunks.bootstrap_observations()
    count = len(steps) + len(ongoing)
    if count == 0:
        return cols, rewards, last_values

    def index(positions: Any) -> torch.Tensor:
        return torch.as_tensor(positions, device=rewards.device)

    values = value_fn(transform_batch(needs_value, obs_fn, rows=count))
    # Checked by dtype and size only: nothing waits for the device.
    values = real_value_tensor(values, count, "value_fn returned", rewards.device)
    last_values[index(ongoing), 0] = values[len(steps) :]
    if len(steps):
        final_values = torch.zeros_like(rewards)
        final_values[index(steps), index(envs)] = values[: len(steps)]
        truncated: torch.Tensor = cols.truncated  # type: ignore[assignment]
        bonus = torch.where(truncated, gamma * final_values, 0.0)
        rewards = rewards + bonus
    return cols, rewards, last_values

"""Split time-major rollout data into zero-padded trajectories and back.

Rollout tensors are ``[T, N, ...]`` (time, env). A trajectory is a run of steps of one env that
ends at a done, or at the last step ``T - 1`` (which always counts as an end). Trajectories are
numbered env-major: all trajectories of env 0 in time order, then env 1, and so on. Padded
tensors are ``[T, num_traj, ...]``: the time axis keeps its full length ``T`` (so that
:func:`unpad_trajectories` can recover ``N`` from the mask), which matches rsl_rl.

Everything is vectorised: one host synchronisation to learn ``num_traj`` and one scatter per
tensor, no per-trajectory Python loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

import torch

from .leaves import data_tensor
from .select import signed_view

__all__ = [
    "TrajectoryLayout",
    "pad_with_layout",
    "split_and_pad_trajectories",
    "trajectory_layout",
    "unpad_trajectories",
]

_T = TypeVar("_T", torch.Tensor, Mapping)


def _same_items(items: tuple[Any, ...], other: object) -> bool:
    """``==`` of the rollout's named tuples of tensors: a tensor equals only itself.

    A tuple's own ``==`` asks each pair of items for one bool, which torch refuses for
    tensors of more than one value. Here tensors compare by identity (as ``Rollout`` and
    rsl_rl's plain classes do: their values are never compared) and other items (ints) by
    value, so a tuple of the very same items is equal, as tuples are, and the tuple's hash
    (a tensor's is its identity's) stays consistent with it.
    """
    if not isinstance(other, tuple):
        return NotImplemented
    return len(items) == len(other) and all(
        a is b or not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)) and a == b
        for a, b in zip(items, other)
    )


def _other_items(items: tuple[Any, ...], other: object) -> bool:
    same = _same_items(items, other)
    return same if same is NotImplemented else not same


class TrajectoryLayout(NamedTuple):
    """Where each step of a ``[T, N]`` rollout goes in the padded ``[T, num_traj]`` layout.

    Attributes:
        num_steps: ``T``.
        num_envs: ``N``.
        num_traj: number of trajectories (a Python int).
        masks: ``[T, num_traj]`` bool, True on valid (non-padding) steps.
        dest: ``[T * N]`` long; for the time-major flat step ``t * N + n`` its flat index
            ``tau * num_traj + j`` in the padded layout.
        start_time: ``[num_traj]`` long, the time step at which each trajectory starts.
        start_env: ``[num_traj]`` long, the env of each trajectory.
        traj_offsets: ``[N + 1]`` long, trajectories of env ``n`` are
            ``traj_offsets[n]:traj_offsets[n + 1]``.

    A layout is a tuple (it unpacks and indexes as one) whose ``==`` compares the tensors it
    holds by identity, never their values: one from the same dones again is another layout
    (``False``), one holding the very same tensors, a ``_replace()`` copy or a plain tuple
    of its items, is equal, and the hash follows that. A tuple's own ``==`` would raise
    torch's "Boolean value of Tensor ... is ambiguous". Compare the fields themselves (with
    ``torch.equal``) to compare values.

    Example:
        >>> lay = trajectory_layout(torch.tensor([[0, 0], [1, 0], [0, 0]]))  # env 0 done at t=1
        >>> lay.num_traj, lay.traj_offsets.tolist(), lay.masks.tolist()
        (3, [0, 2, 3], [[True, True, True], [True, False, True], [False, False, True]])
        >>> again = trajectory_layout(torch.tensor([[0, 0], [1, 0], [0, 0]]))
        >>> lay == again, lay == lay._replace(), torch.equal(lay.dest, again.dest)
        (False, True, True)
    """

    num_steps: int
    num_envs: int
    num_traj: int
    masks: torch.Tensor
    dest: torch.Tensor
    start_time: torch.Tensor
    start_env: torch.Tensor
    traj_offsets: torch.Tensor

    def __eq__(self, other: object) -> bool:
        return _same_items(self, other)

    def __ne__(self, other: object) -> bool:
        return _other_items(self, other)


def trajectory_layout(dones: torch.Tensor) -> TrajectoryLayout:
    """Compute the trajectory layout of ``[T, N]`` or ``[T, N, 1]`` done flags.

    Args:
        dones: episode-end flags (any dtype; nonzero means done).

    Returns:
        The :class:`TrajectoryLayout`. This performs exactly one host synchronisation.

    Raises:
        TypeError: ``dones`` is not a tensor.
        ValueError: a tensor of another shape, or one without data or not dense (meta,
            sparse, nested).

    Example:
        >>> lay = trajectory_layout(torch.tensor([[0, 0], [1, 0], [0, 1]]))
        >>> lay.num_traj, lay.start_time.tolist(), lay.start_env.tolist()
        (3, [0, 2, 0], [0, 0, 1])
    """
    data_tensor(dones, "dones")
    if dones.dim() == 3 and dones.shape[-1] == 1:
        dones = dones.squeeze(-1)
    if dones.dim() != 2:
        raise ValueError(f"dones must be [T, N] or [T, N, 1], got {tuple(dones.shape)}")
    num_steps, num_envs = dones.shape
    device = dones.device
    first = torch.empty(num_envs, num_steps, dtype=torch.bool, device=device)  # env-major
    first[:, :1] = True  # not [:, 0]: T may be 0 (no trajectories)
    first[:, 1:] = dones[:-1].t() != 0
    first_flat = first.reshape(-1)
    starts = torch.nonzero(first_flat).squeeze(1)  # the single host sync
    num_traj = int(starts.numel())
    traj_index = torch.cumsum(first_flat, 0) - 1
    flat_pos = torch.arange(num_envs * num_steps, device=device)
    time_in_traj = flat_pos - starts[traj_index]
    # new_full fills on the device; new_tensor of a list would copy from the host (a wait).
    lengths = torch.diff(starts, append=starts.new_full((1,), num_envs * num_steps))
    masks = lengths.unsqueeze(0) > torch.arange(num_steps, device=device).unsqueeze(1)
    dest_env_major = time_in_traj * num_traj + traj_index
    dest = dest_env_major.view(num_envs, num_steps).t().reshape(-1)
    traj_offsets = torch.zeros(num_envs + 1, dtype=torch.long, device=device)
    torch.cumsum(first.sum(dim=1), 0, out=traj_offsets[1:])
    return TrajectoryLayout(
        num_steps=num_steps,
        num_envs=num_envs,
        num_traj=num_traj,
        masks=masks,
        dest=dest,
        start_time=starts % num_steps,
        start_env=torch.div(starts, num_steps, rounding_mode="floor"),
        traj_offsets=traj_offsets,
    )


def pad_with_layout(tensor: _T, layout: TrajectoryLayout) -> _T:
    """Scatter ``[T, N, ...]`` data (or a nested dict of it) into ``[T, num_traj, ...]``.

    Args:
        tensor: a tensor or a (nested) mapping of tensors, each ``[T, N, ...]``.
        layout: the layout from :func:`trajectory_layout` for the same ``T`` and ``N``.

    Returns:
        Zero-padded trajectories with the structure of ``tensor``; dtypes are preserved.

    Raises:
        TypeError: a leaf that is not a tensor, or a ``layout`` that is not a
            :class:`TrajectoryLayout`.
        ValueError: a leaf that is not ``[T, N, ...]``, or has no data or is not dense.

    Example:
        >>> lay = trajectory_layout(torch.tensor([[0], [1], [0]]))
        >>> pad_with_layout(torch.tensor([[1], [2], [3]]), lay).tolist()
        [[1, 3], [2, 0], [0, 0]]
    """
    if not isinstance(layout, TrajectoryLayout):
        raise TypeError(f"layout must be a TrajectoryLayout, got {type(layout).__name__}")
    if isinstance(tensor, Mapping):
        return {k: pad_with_layout(v, layout) for k, v in tensor.items()}
    data_tensor(tensor, "tensor")
    t, n = layout.num_steps, layout.num_envs
    if tuple(tensor.shape[:2]) != (t, n):
        raise ValueError(f"expected a [{t}, {n}, ...] tensor, got {tuple(tensor.shape)}")
    feat = tensor.shape[2:]
    bits = signed_view(tensor)  # uint16-64 as int16-64: torch has no index_copy_ for them
    out = torch.zeros(t * layout.num_traj, *feat, dtype=bits.dtype, device=tensor.device)
    out.index_copy_(0, layout.dest, bits.reshape(t * n, *feat))
    if bits.dtype != tensor.dtype:
        out = out.view(tensor.dtype)
    return out.view(t, layout.num_traj, *feat)


def split_and_pad_trajectories(tensor: _T, dones: torch.Tensor) -> tuple[_T, torch.Tensor]:
    """Split ``[T, N, ...]`` data at dones into zero-padded trajectories.

    Same semantics as rsl_rl's function of the same name: env-major trajectory order, the last
    step of each env ends a trajectory, padding to the full length ``T``.

    Args:
        tensor: a tensor or a (nested) mapping of tensors, each ``[T, N, ...]``.
        dones: ``[T, N]`` or ``[T, N, 1]`` episode-end flags.

    Returns:
        ``(padded, masks)``: ``padded`` is ``[T, num_traj, ...]`` (same structure and dtypes as
        ``tensor``) and ``masks`` is ``[T, num_traj]`` bool.

    Example:
        >>> x = torch.arange(6.0).view(3, 2)  # [T=3, N=2]
        >>> padded, masks = split_and_pad_trajectories(x, torch.tensor([[0, 0], [1, 0], [0, 0]]))
        >>> padded.tolist()
        [[0.0, 4.0, 1.0], [2.0, 0.0, 3.0], [0.0, 0.0, 5.0]]
        >>> masks.sum(0).tolist()
        [2, 1, 3]
    """
    layout = trajectory_layout(dones)
    return pad_with_layout(tensor, layout), layout.masks


def unpad_trajectories(trajectories: _T, masks: torch.Tensor) -> _T:
    """Invert :func:`split_and_pad_trajectories`: ``[T, num_traj, ...]`` -> ``[T, N, ...]``.

    Args:
        trajectories: padded tensor (or nested mapping of them), ``[T, num_traj, ...]``.
        masks: ``[T, num_traj]`` bool masks returned with the padded data.

    Returns:
        Time-major data ``[T, N, ...]`` (a transposed view, like rsl_rl).

    Example:
        >>> x = torch.arange(6.0).view(3, 2)
        >>> padded, masks = split_and_pad_trajectories(x, torch.tensor([[0, 0], [1, 0], [0, 0]]))
        >>> torch.equal(unpad_trajectories(padded, masks), x)
        True
    """
    if isinstance(trajectories, Mapping):
        return {k: unpad_trajectories(v, masks) for k, v in trajectories.items()}
    data_tensor(trajectories, "trajectories")
    data_tensor(masks, "masks")
    num_steps = trajectories.shape[0]
    if masks.shape != trajectories.shape[:2]:
        raise ValueError(
            f"masks {tuple(masks.shape)} do not match trajectories {tuple(trajectories.shape)}"
        )
    if masks.dtype != torch.bool:  # ints would index rows, not select them (wrong at T=1)
        raise TypeError(
            f"masks must be bool, as split_and_pad_trajectories returns them, got {masks.dtype}"
        )
    valid = trajectories.transpose(0, 1)[masks.transpose(0, 1)]  # env-major valid steps
    return valid.view(-1, num_steps, *trajectories.shape[2:]).transpose(0, 1)

"""Generalised advantage estimation (GAE) as pure tensor functions.

The backward recursion ``A_t = delta_t + c_t * A_{t+1}`` (with ``c_t = gamma * lam * (1 - done_t)``)
is a first-order linear scan. For short horizons it is evaluated with one fused in-place
``addcmul`` per step over preallocated views; for long horizons with a log-step (Hillis-Steele)
scan that needs ``O(log T)`` vectorised operations. Neither path synchronises with the host, so
on a GPU the whole computation is queued without waiting.

The scan adds up windows of deltas that the recursion never forms, so it can overflow where
the recursion stays finite. float16 and bfloat16 data are worked in float32, deltas included
(formed as rsl_rl forms them from its float32 dones): float16's deltas (at most 65504) then
stay finite, and both keep float32's precision until the advantages are stored. float32 (and
bfloat16, of the same range) keeps float32 (results equal to the loop's up to rounding): only
deltas whose partial sums pass 3.4e38 (cancelling ones near that size) become ``inf`` there.
Store such data as float64.
"""

from __future__ import annotations

import math

import torch

from episodes.indexing import discount_factor
from episodes.shapes import same_but_trailing_ones

from .leaves import data_tensor

__all__ = ["bootstrap_time_outs", "compute_gae"]

#: The per-step loop pays a fixed dispatch cost per step; the log-step scan touches all T * N
#: elements ``ceil(log2 T)`` times. This many elements per step cost about one dispatch.
_ELEMENTS_PER_DISPATCH = 512


def _as_time_major(x: torch.Tensor, name: str, like: torch.Size) -> torch.Tensor:
    # Only a trailing unit dimension may differ ([T, N] against [T, N, 1]): reshaping any
    # tensor with the right count would take a [N, T] tensor as [T, N] and mix envs and steps.
    if x.shape != like:
        if not same_but_trailing_ones(x.shape, like):
            raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(like)}")
        x = x.reshape(like)
    return x


def _loop_scan(delta: torch.Tensor, coef: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """Sequential backward scan into ``adv``: one fused ``addcmul`` per step."""
    d, c, a = delta.unbind(0), coef.unbind(0), adv.unbind(0)  # views, made in one call each
    a[-1].copy_(d[-1])
    for t in range(len(d) - 2, -1, -1):
        torch.addcmul(d[t], c[t], a[t + 1], out=a[t])
    return adv


def _log_scan(delta: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """Hillis-Steele backward scan in ``ceil(log2 T)`` rounds with ping-pong buffers.

    Invariant after the round with offset ``d``:
    ``b_t = sum_{k<2d} (prod_{i<k} c_{t+i}) delta_{t+k}`` (terms past the end vanish because
    ``A_T = 0``), and ``a_t`` is the product of the ``2d`` coefficients starting at ``t`` (only
    kept where a later round reads it).
    """
    num_steps = delta.shape[0]
    b, b_next = delta.clone(), torch.empty_like(delta)
    a, a_next = coef.clone(), torch.empty_like(coef)
    d = 1
    while d < num_steps:
        keep = num_steps - d
        torch.addcmul(b[:keep], a[:keep], b[d:], out=b_next[:keep])
        b_next[keep:].copy_(b[keep:])
        keep_a = num_steps - 2 * d  # later rounds only read the products at t < T - 2d
        if keep_a > 0:
            torch.mul(a[:keep_a], a[d : d + keep_a], out=a_next[:keep_a])
            a, a_next = a_next, a
        b, b_next = b_next, b
        d *= 2
    return b


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    out: torch.Tensor | None = None,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Compute GAE advantages for time-major rollout data.

    ``delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t`` with ``V_T = last_values`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``. Returns are ``A + V``.

    With ``valid``, a cell where it is False holds no transition and is never read: whatever
    its reward and value (NaN and inf included), it is taken as a reward and value of 0 that
    ends its episode, and its advantage is 0. A valid cell right before one should be done
    (the converter's are): otherwise it bootstraps from that 0.

    The inputs are read detached, as rsl_rl computes GAE without grad: the advantages carry
    no graph (``requires_grad`` False) even where the values or last values require grad. A
    differentiable lambda-return (one that backpropagates into the critic) is not this
    function's: compute it with ordinary tensor operations.

    Args:
        rewards: ``[T, N]`` or ``[T, N, 1]`` floating tensor.
        values: value estimates shaped like ``rewards`` (a trailing unit dimension may be
            missing or extra).
        dones: episode ends (bool, integer or float), shaped like ``values``.
        last_values: ``[N]`` or ``[N, 1]`` values of the state after the last step.
        gamma: discount factor.
        lam: GAE lambda.
        out: optional tensor (any strides) shaped like ``rewards`` to write the advantages into.
        valid: optional bool tensor shaped like ``rewards`` (a trailing unit dimension may
            differ), False on cells holding no transition (``RolloutStorage.valid``).

    Returns:
        The advantages shaped and typed like ``rewards``: ``out`` if given, else a new tensor;
        without grad.

    Raises:
        TypeError: a tensor argument that is not a tensor (a list, a numpy array, None), or
            ``rewards`` that are not floating point.
        ValueError: ``gamma`` or ``lam`` is not a real number in ``[0, 1]``, a tensor's shape
            does not match ``rewards``, a tensor without data or not dense (meta, sparse,
            nested), complex values, dones, last values or mask, or an ``out`` on another
            device or of a dtype that cannot hold ``rewards``' (ints for floats). Nothing is
            written then.

    Example:
        >>> r = torch.ones(3, 2, 1)
        >>> v = torch.zeros(3, 2, 1)
        >>> d = torch.zeros(3, 2, 1, dtype=torch.bool)
        >>> compute_gae(r, v, d, torch.zeros(2, 1), gamma=1.0, lam=1.0)[:, 0, 0]
        tensor([3., 2., 1.])
        >>> valid = torch.tensor([[True, True], [False, True], [True, True]])  # (1, 0): empty
        >>> v[1, 0] = float("nan")  # a value no transition reads
        >>> d[0, 0] = d[1, 0] = True
        >>> compute_gae(r, v, d, torch.zeros(2, 1), 1.0, 1.0, valid=valid)[:, 0, 0]
        tensor([1., 0., 1.])
    """
    gamma, lam = discount_factor(gamma), _unit_interval(lam, "lam")
    # Checked before anything is computed: compute_returns writes the storage only after
    # this returns. A complex value would lose its imaginary part with only a warning.
    data_tensor(rewards, "rewards")
    for name, arg in (("values", values), ("dones", dones), ("last_values", last_values)):
        data_tensor(arg, name, real=True)
    if valid is not None:
        data_tensor(valid, "valid", real=True)
    if rewards.dim() < 2:
        raise ValueError(f"rewards must be [T, N] or [T, N, 1], got {tuple(rewards.shape)}")
    if not rewards.is_floating_point():
        raise TypeError(f"rewards must be floating point, got {rewards.dtype}")
    shape = rewards.shape
    # Returns are data: a last value straight from the critic must not drag its graph in
    # (the in-place scans refuse it).
    rewards = rewards.detach()
    # Half-precision data is worked in float32 (as rsl_rl's float() of its dones promotes it):
    # a delta formed in float16 or bfloat16 would round r - V before gamma * V' joins it.
    work = torch.float32 if rewards.element_size() < 4 else rewards.dtype
    values = _as_time_major(values.detach(), "values", shape).to(work)
    dones = _as_time_major(dones, "dones", shape)
    last_values = _as_time_major(last_values.detach(), "last_values", shape[1:]).to(work)
    if out is None:
        out = torch.empty_like(rewards, memory_format=torch.contiguous_format)
    elif data_tensor(out, "out").shape != shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    elif out.device != rewards.device or not torch.can_cast(rewards.dtype, out.dtype):
        # The scan writes out step by step: torch would refuse it after the last step's row
        # (or store the advantages truncated to ints).
        raise ValueError(
            f"out must hold {rewards.dtype} values on {rewards.device}, got {out.dtype} on "
            f"{out.device}"
        )
    num_steps = shape[0]
    if num_steps == 0:
        return out

    not_done = torch.empty(shape, dtype=work, device=rewards.device)
    empty = None
    if valid is None:
        torch.logical_not(dones, out=not_done)  # 1.0 where the episode continues
    else:
        held = _as_time_major(valid, "valid", shape).to(torch.bool)
        torch.gt(held, dones.to(torch.bool), out=not_done)  # an empty cell continues nothing
        # Selected away, not multiplied by 0: 0 * NaN (a diverged state's value) is NaN.
        empty = torch.logical_not(held)
        values = values.masked_fill(empty, 0.0)
    # delta = (r - V) + gamma * V' * (1 - done), V' being the values one step on and
    # last_values after the last step: two in-place passes, no concatenated copy of V'.
    delta = torch.sub(rewards.to(work), values)
    delta[:-1].addcmul_(values[1:], not_done[:-1], value=gamma)
    delta[-1].addcmul_(last_values, not_done[-1], value=gamma)
    if empty is not None:
        delta.masked_fill_(empty, 0.0)  # its reward, and gamma * 0 * an inf V' or last value
    coef = not_done.mul_(gamma * lam)
    num_envs = delta[0].numel()
    rounds = max(1, math.ceil(math.log2(num_steps))) if num_steps > 1 else 0
    if rounds * num_envs > _ELEMENTS_PER_DISPATCH * num_steps:
        if delta.dtype == out.dtype:
            return _loop_scan(delta, coef, out)
        # Half-precision storage: the recursion runs in float32 too (rounded once, stored).
        return out.copy_(_loop_scan(delta, coef, torch.empty_like(delta)))
    # The scan's windows sum deltas the recursion never adds up: with cancelling deltas near
    # float16's 65504 a window is inf where every advantage is finite. Half-precision data is
    # scanned in float32 (above), which holds them and rounds once, at the end.
    return out.copy_(_log_scan(delta, coef))


def _unit_interval(value: float, name: str) -> float:
    """``value`` as a float in ``[0, 1]`` (NaN refused), else a ``ValueError`` naming it."""
    try:
        return discount_factor(value)
    except ValueError:
        raise ValueError(f"{name} must be a float in [0, 1], got {value!r}") from None


def bootstrap_time_outs(
    rewards: torch.Tensor,
    values: torch.Tensor,
    time_outs: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Apply rsl_rl's time-out bootstrap ``rewards + gamma * values * time_outs``.

    This approximates the value of the true next state of a truncated episode by the value of
    the current state. The exact form (with the real next value) lives in the converter layer.

    Args:
        rewards: ``[N]``, ``[N, 1]`` or ``[T, N(, 1)]`` rewards.
        values: value estimates shaped like ``rewards`` (up to a trailing unit dimension).
        time_outs: truncation flags (bool/int/float) shaped like ``values``.
        gamma: discount factor.

    Returns:
        A **new** tensor shaped and typed like ``rewards`` (integer rewards give a floating
        result); the input is not modified.

    Raises:
        TypeError: an argument that is not a tensor.
        ValueError: complex numbers, a tensor without data or not dense, shapes that differ
            by more than a trailing unit dimension, or a ``gamma`` that is no float in
            ``[0, 1]`` (NaN, a string), as everywhere a discount is taken.

    Example:
        >>> bootstrap_time_outs(torch.zeros(2), torch.ones(2, 1), torch.tensor([True, False]), 0.5)
        tensor([0.5000, 0.0000])
    """
    gamma = discount_factor(gamma)
    for name, arg in (("rewards", rewards), ("values", values), ("time_outs", time_outs)):
        data_tensor(arg, name, real=True)
    # The rewards' dtype, as rsl_rl's in-place sum keeps it; integer rewards would truncate
    # the bootstrapped values, so those give a floating result.
    dtype = rewards.dtype
    if not dtype.is_floating_point:
        dtype = torch.promote_types(torch.get_default_dtype(), values.dtype)
    values = _as_time_major(values, "values", rewards.shape).to(dtype)
    time_outs = _as_time_major(time_outs, "time_outs", rewards.shape).to(dtype)
    return rewards.to(dtype) + gamma * (values * time_outs)

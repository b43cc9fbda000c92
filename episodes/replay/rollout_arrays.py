"""Batched rollouts given as arrays, read and checked: what ``add_rollouts`` stores.

A model-based learner rolls its model for ``B`` start states at once, so its rollouts come as
arrays: observations ``[B, H + 1, ...]``, actions ``[B, H, ...]``, rewards ``[B, H]``. Here
they are checked (each refusal names its argument) and cut into the rows each rollout keeps:
a rollout stops at its first termination or truncation, or after ``lengths[i]`` steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from episodes.replay.columns import as_rows
from episodes.replay.nested import nested_rows
from episodes.replay.quick_rows import rewards_as_float32
from episodes.structs import short_repr

__all__ = ["Rollouts", "read_rollouts"]


@dataclass
class Rollouts:
    """``B`` rollouts cut to their lengths: the ``N = n.sum()`` kept steps, rollout by rollout.

    Example:
        >>> r = read_rollouts(np.zeros((2, 3, 1)), np.zeros((2, 2)), np.ones((2, 2)),
        ...                   terminated=np.array([[True, False], [False, False]]))
        >>> r.n.tolist(), r.obs.shape, r.last_obs.shape, r.terminated.tolist()
        ([1, 2], (3, 1), (2, 1), [True, False])
    """

    n: np.ndarray  # steps kept per rollout (int64, each 1 .. H)
    obs: np.ndarray  # o_t of every kept step
    actions: np.ndarray
    rewards: np.ndarray  # float32, as the buffer stores them
    extras: dict[str, np.ndarray]
    last_obs: np.ndarray  # o_n of each rollout: its latest observation
    terminated: np.ndarray  # per rollout, the flag of its last kept step
    truncated: np.ndarray


def read_rollouts(
    observations: Any,
    actions: Any,
    rewards: Any,
    *,
    terminated: Any = None,
    truncated: Any = None,
    lengths: Any = None,
    extra_model_outputs: Mapping[str, Any] | None = None,
) -> Rollouts:
    """Checks the arrays of ``B`` rollouts of up to ``H`` steps and keeps each one's steps.

    A rollout keeps its steps up to its first ``terminated`` or ``truncated`` step, and at
    most ``lengths[i]``; its episode ends terminated or truncated as that last step says.

    Raises:
        TypeError: Values that are not numeric arrays (observations, actions and extras may
            nest them in dicts and tuples), flags that are not bools, lengths not ints, an
            extra key that is not a str.
        ValueError: Shapes that do not match (``[B, H + 1, ...]`` observations, ``[B, H]``
            rewards and flags, ``[B, H, ...]`` for the rest, ``H >= 1``; a scalar has no
            shape to match), lengths outside ``1 .. H``, rewards that float32 cannot hold.

    Example:
        >>> read_rollouts(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 2)))
        Traceback (most recent call last):
        ...
        ValueError: actions: expected shape [B, H, ...] = [2, 2, ...] (B from observations \
[B, H + 1, ...]), got (2, 3)
    """
    obs = _block(observations, "observations")
    if obs.ndim < 2 or obs.shape[1] < 2:
        raise ValueError(
            f"observations: expected shape [B, H + 1, ...] with H >= 1, got {obs.shape}"
        )
    b, h = obs.shape[0], obs.shape[1] - 1
    acts = _shaped(_block(actions, "actions"), "actions", b, h)
    if extra_model_outputs is not None and not isinstance(extra_model_outputs, Mapping):
        raise TypeError(
            "extra_model_outputs: expected a dict of str -> [B, H, ...] arrays, got "
            f"{short_repr(extra_model_outputs)}"
        )
    extras = {}
    for key, values in (extra_model_outputs or {}).items():
        if not isinstance(key, str):  # one column per key, named by it
            raise TypeError(f"extra_model_outputs key {key!r} must be a str")
        what = f"extra_model_outputs[{key!r}]"
        extras[key] = _shaped(_block(values, what), what, b, h)
    rew = _plain(rewards, "rewards")
    if rew.shape != (b, h):  # one float per step: no trailing axes, unlike the others
        raise ValueError(
            f"rewards: expected shape [B, H] = [{b}, {h}] (B from observations "
            f"[B, H + 1, ...]), got {rew.shape}"
        )
    term, trunc = _flags(terminated, "terminated", b, h), _flags(truncated, "truncated", b, h)
    n = _lengths(lengths, b, h)
    stop = term | trunc
    ends = np.where(stop.any(1), stop.argmax(1) + 1, h)
    n = np.minimum(ends, n)
    keep = np.arange(h) < n[:, None]
    each, last = np.arange(b), n - 1
    flat = rew[keep]
    return Rollouts(
        n=n,
        obs=obs[:, :h][keep],
        actions=acts[keep],
        rewards=rewards_as_float32(flat) if len(flat) else flat.astype(np.float32),
        extras={key: values[keep] for key, values in extras.items()},
        last_obs=obs[each, n],
        terminated=term[each, last],
        truncated=trunc[each, last],
    )


def _plain(values: Any, what: str) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.names is not None:
        # as_rows takes records for the buffer's own nested rows; given here, they are no
        # rollout's layout, and as_rows would word its refusal for those rows.
        valid = "a numeric [B, H] array, one reward per step"
        if what != "rewards":
            valid = "a numeric array, or a dict or tuple of them nested as the space (give a "
            valid += "record array's fields as a dict, {name: values[name] for name in "
            valid += "values.dtype.names})"
        raise TypeError(
            f"{what}: expected {valid}, got a record array of shape {values.shape} and dtype "
            f"{values.dtype}"
        )
    try:
        return as_rows(values, what)
    except (TypeError, ValueError) as error:
        if _numeric_scalar(values):  # numeric, but no rows: the caller's shape check says so
            return np.asarray(values)
        message = str(error)
        raise type(error)(message if message.startswith(what) else f"{what}: {message}") from None


def _numeric_scalar(values: Any) -> bool:
    if getattr(values, "ndim", None) != 0 and not isinstance(values, (int, float, complex)):
        return False
    try:
        return np.asarray(values).dtype.kind in "biufc"
    except (TypeError, ValueError, RuntimeError):  # torch's, for a tensor that requires grad
        return False


def _block(values: Any, what: str) -> np.ndarray:
    """``values`` as one numeric array; dicts and tuples of arrays as one of records."""
    if not isinstance(values, (dict, tuple)):
        return _plain(values, what)
    leaves: list[np.ndarray] = []
    flat = _flattened(values, what, leaves)
    lead = leaves[0].shape[:2] if leaves else ()
    if not leaves or any(leaf.shape[:2] != lead or leaf.ndim < 2 for leaf in leaves):
        shapes = [leaf.shape for leaf in leaves]
        raise ValueError(f"{what}: every leaf needs the same leading [B, T] shape, got {shapes}")
    rows = nested_rows(flat, what, lead[0] * lead[1], finalized=True)
    return rows.reshape(lead)


def _flattened(node: Any, what: str, leaves: list[np.ndarray]) -> Any:
    """``node`` with each leaf's two leading axes joined (``nested_rows`` takes columns)."""
    if isinstance(node, dict):
        return {key: _flattened(value, what, leaves) for key, value in node.items()}
    if isinstance(node, tuple):
        return tuple(_flattened(value, what, leaves) for value in node)
    leaf = _plain(node, what)
    leaves.append(leaf)
    return leaf.reshape(-1, *leaf.shape[2:]) if leaf.ndim >= 2 else leaf


def _shaped(rows: np.ndarray, what: str, b: int, h: int) -> np.ndarray:
    if rows.shape[:2] != (b, h) or rows.ndim < 2:
        raise ValueError(
            f"{what}: expected shape [B, H, ...] = [{b}, {h}, ...] (B from observations "
            f"[B, H + 1, ...]), got {rows.shape}"
        )
    return rows


def _flags(values: Any, what: str, b: int, h: int) -> np.ndarray:
    if values is None:
        return np.zeros((b, h), bool)
    flags = np.asarray(values)
    if flags.dtype != bool:
        raise TypeError(f"{what}: expected bools of shape [B, H] = [{b}, {h}], got {flags.dtype}")
    if flags.shape != (b, h):
        raise ValueError(f"{what}: expected shape [B, H] = [{b}, {h}], got {flags.shape}")
    return flags


def _lengths(values: Any, b: int, h: int) -> np.ndarray:
    if values is None:
        return np.full(b, h, np.int64)
    given = np.asarray(values)
    if given.dtype.kind not in "iu" or given.dtype == bool:
        raise TypeError(f"lengths: expected ints 1 .. H = {h}, got dtype {given.dtype}")
    if given.shape != (b,):
        raise ValueError(f"lengths: expected shape [B] = [{b}], got {given.shape}")
    bad = (given < 1) | (given > h)
    if bad.any():
        at = int(bad.argmax())
        raise ValueError(
            f"lengths: each must be in 1 .. H = {h}, got {short_repr(given[at].item())} at {at}"
        )
    return given.astype(np.int64)

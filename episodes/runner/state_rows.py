"""A recurrent policy's state across steps: fresh entries for started sub-envs, kept as data."""

from __future__ import annotations

from typing import Any

import numpy as np
import tree

from episodes.runner.infos import is_tensor
from episodes.structs import flatten, unflatten

__all__ = ["detached", "out_of_inference", "with_fresh_rows", "where_started", "with_rows"]


def with_fresh_rows(state: Any, fresh: Any, mask: Any, axis: int) -> Any:
    """``state`` with the entries of the sub-envs ``mask`` marks taken from ``fresh``.

    Leaf by leaf, in the structure of ``state`` (``fresh`` may nest in other containers with the
    same leaves, a namedtuple for a tuple). Tensor leaves are picked by :func:`where_started`
    (torch has no row write for uint16/32/64; under a device mask, on the device: no sync);
    numpy leaves by the mask's rows on the host (one copy of a device mask per call).

    Example:
        >>> state = np.zeros((3, 2))
        >>> with_fresh_rows(state, np.ones((3, 2)), np.array([False, True, False]), 0).tolist()
        [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    """
    olds, structure = flatten(state)
    news = flatten(fresh)[0]
    on_device = is_tensor(mask)
    rows: list[int] | None = None
    out = []
    for old, new in zip(olds, news):
        if is_tensor(old):
            out.append(where_started(old, new, mask, axis))
            continue
        if rows is None:
            host = mask.detach().cpu().numpy() if on_device else mask
            rows = [int(i) for i in np.flatnonzero(host)]
        out.append(with_rows(old, new, rows, axis))
    return unflatten(structure, out)


def with_rows(old: Any, new: Any, rows: list[int], axis: int) -> np.ndarray:
    """A copy of numpy ``old`` with entries ``rows`` along ``axis`` taken from ``new``.

    Copied first: the policy may still hold (or have logged) the state it returned.

    Example:
        >>> with_rows(np.zeros((2, 3)), np.ones((2, 3)), [2], axis=-1).tolist()
        [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    """
    out = np.array(old, copy=True)
    if not rows:
        return out
    if is_tensor(new):
        new = new.detach().cpu().numpy()
    where = (slice(None),) * (axis % out.ndim) + (rows,)  # -1 too
    out[where] = new[where]
    return out


def where_started(old: Any, new: Any, mask: Any, axis: int) -> Any:
    """A new state tensor with the started envs' entries (a bool tensor or array) from ``new``.

    In ``old``'s dtype, as the host's row writes cast: ``where`` would promote (a float16
    state would come back float32), so the policy gets the state dtype it returned.

    Example:
        >>> import torch
        >>> old = torch.zeros(2, 3, dtype=torch.float16)
        >>> out = where_started(old, torch.ones(2, 3), np.array([True, False, True]), 1)
        >>> out.tolist(), out.dtype
        ([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]], torch.float16)
    """
    if not is_tensor(mask):
        import torch  # loaded already: old is a tensor

        mask = torch.as_tensor(mask, dtype=torch.bool)
    if not is_tensor(new):
        new = old.new_tensor(np.asarray(new))
    elif new.device != old.device or new.dtype != old.dtype:
        new = new.to(device=old.device, dtype=old.dtype)
    if mask.device != old.device:
        mask = mask.to(old.device)
    shape = [1] * old.dim()
    shape[axis] = -1
    return new.where(mask.reshape(shape), old)


def detached(state: Any) -> Any:
    """The state with every torch tensor leaf detached (numpy leaves as they are).

    Kept as data: a state carrying the policy's autograd graph would chain every step's graph
    (and observations) to the next, across calls, without bound.

    Example:
        >>> import torch
        >>> detached({"h": torch.ones(2, requires_grad=True), "c": np.zeros(2)})["h"].requires_grad
        False
    """
    if getattr(state, "requires_grad", False):  # the usual single tensor, no tree walk
        return state.detach()
    if hasattr(state, "detach") or isinstance(state, np.ndarray):
        return state
    return tree.map_structure(
        lambda leaf: leaf.detach() if getattr(leaf, "requires_grad", False) else leaf, state
    )


def out_of_inference(value: Any) -> Any:
    """``value`` with its inference tensors copied into normal ones, outside inference mode.

    As it is inside inference mode, and where no leaf is an inference tensor (the usual case:
    checked without importing torch). Observations and states kept from a call made under
    ``torch.inference_mode`` could not be used by a policy run with grad (inference tensors
    cannot be saved for backward).

    Example:
        >>> import torch
        >>> with torch.inference_mode():
        ...     made = torch.ones(2)
        >>> out_of_inference((made,))[0].is_inference(), out_of_inference(np.zeros(1)).tolist()
        (False, [0.0])
    """
    leaves = [] if value is None else flatten(value)[0]
    if not any(map(is_tensor, leaves)):
        return value
    import torch

    def made_inside(leaf: Any) -> bool:
        return isinstance(leaf, torch.Tensor) and leaf.is_inference()

    if torch.is_inference_mode_enabled() or not any(map(made_inside, leaves)):
        return value
    return tree.map_structure(lambda leaf: leaf.clone() if made_inside(leaf) else leaf, value)

"""Refusals of columns no batch or storage can hold; no torch needed, so the batch path has none.

``episodes_to_batch`` and the rollout converter refuse alike: an extra output that is not one
array of real numbers per step (where ``ColumnKeys`` names it for a storage field), and an
``obs_fn`` result whose leaves lost the leading axes they were given.

Example:
    >>> storable_extra("logits", [np.array([0.1, 0.2]), np.array([0.9, 0.8])]).shape
    (2, 2)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from episodes.structs import flatten

__all__ = ["check_storable_extra", "checked_obs_fn_output", "storable_extra"]


#: numpy dtype kinds of real numbers (bool, int, uint, float): what a storage field holds.
_REAL_KINDS = "biuf"
_UNREAL_KINDS = {"U": "strings", "S": "bytes", "O": "Python objects", "c": "complex numbers"}


def check_storable_extra(key: str, rows: Any) -> None:
    """Refuses an extra output a storage field cannot hold: it needs one real-number array.

    Every extra output ``ColumnKeys`` names for a rollout (values, log-probs, distribution
    parameters, teacher actions, hidden states) fills one tensor, so its steps must be one
    array of bools, ints or floats: not a dict or tuple of arrays (a structured output),
    strings, objects or complex numbers. ``rows`` are its steps, numpy or torch, with any
    leading axes: a chunk's rows, or a runner block's ``[1, N, ...]`` example. It looks at
    the structure and dtype only (never at the steps), so the fast and general paths refuse
    alike, before anything is written.

    Raises:
        ValueError: Naming ``key`` and what its steps are.

    Example:
        >>> check_storable_extra("logits", np.zeros((3, 2), np.float32))  # fine
        >>> check_storable_extra("dist", {"mean": np.zeros((3, 2)), "std": np.ones((3, 2))})
        Traceback (most recent call last):
        ...
        ValueError: extra output 'dist' holds a dict (keys ['mean', 'std']) per step, but ...
        >>> check_storable_extra("label", np.array(["a", "b"]))
        Traceback (most recent call last):
        ...
        ValueError: extra output 'label' holds strings (<U1) per step, but ...
    """
    if isinstance(rows, Mapping):
        what = f"a dict (keys {sorted(map(str, rows))})"
    elif isinstance(rows, tuple):
        what = f"a tuple of {len(rows)} part{'' if len(rows) == 1 else 's'}"
    else:
        dtype = getattr(rows, "dtype", None)
        if dtype is None:  # a list is taken as one array, as the runner takes it
            dtype = np.asarray(rows).dtype
        torch = sys.modules.get("torch")  # a torch dtype means torch is loaded: never import it
        if torch is not None and isinstance(dtype, torch.dtype):  # real unless complex
            kind = "c" if dtype.is_complex else "f"
        else:
            kind = np.dtype(dtype).kind
        if kind in _REAL_KINDS:
            return
        what = f"{_UNREAL_KINDS.get(kind, 'values')} ({dtype})"
    raise ValueError(
        f"extra output {key!r} holds {what} per step, but the storage takes one array of real "
        "numbers (bool, int or float) per step for each output ColumnKeys names: record it "
        "as one such array, or name another output"
    )


def storable_extra(key: str, rows: Any, steps: int | None = None) -> np.ndarray:
    """A chunk's ``rows`` of extra output ``key`` as one ``[T, ...]`` array, or refused.

    A step recorded as a Python list is one array, as the runner takes it (``[0.1, 0.9]``
    per step gives ``[T, 2]``, as ``np.array([0.1, 0.9])`` per step does). Batched, such
    steps come as a list of per-position columns (one ``[T, ...]`` array per list entry, in
    list mode and numpy'd alike): they are stacked back along axis 1, once per position,
    never per step. Steps of empty lists only (``[[], []]``) batch to no column at all:
    given the chunk's ``steps``, they are float64 zeros ``[T, 2, 0]``, as ``np.array`` types
    them per step (and as ``[]`` per step gives ``[T, 0]``). Anything else is refused as
    :func:`check_storable_extra` refuses it.

    Raises:
        ValueError: Naming ``key``: what :func:`check_storable_extra` refuses, lists whose
            entries differ in shape from step to step or entry to entry, and steps of empty
            lists only where ``steps`` is None.

    Example:
        >>> storable_extra("logits", [np.array([0.1, 0.2]), np.array([0.9, 0.8])]).tolist()
        [[0.1, 0.9], [0.2, 0.8]]
        >>> storable_extra("logits", [[], []], steps=3).shape
        (3, 2, 0)
    """
    if isinstance(rows, list):
        if steps is not None and rows and _no_leaves(rows):  # np.array's shape, T steps
            return np.zeros((steps, *np.shape(rows)))
        rows = _positions_joined(key, rows)
    check_storable_extra(key, rows)
    return np.asarray(rows)


def _no_leaves(value: Any) -> bool:
    """Whether ``value`` is a list of lists, nested to any depth, holding nothing else."""
    return value.__class__ is list and all(map(_no_leaves, value))


def _positions_joined(key: str, positions: list[Any]) -> Any:
    """Per-position ``[T, ...]`` columns (lists nest) stacked into one ``[T, W, ...]`` array."""
    parts = [_positions_joined(key, p) if isinstance(p, list) else p for p in positions]
    for part in parts:
        if isinstance(part, (Mapping, tuple)):
            check_storable_extra(key, part)  # refused: named as a dict or tuple per step
    if not parts:
        raise ValueError(
            f"extra output {key!r} holds empty lists per step, but the storage takes one "
            "array of real numbers (bool, int or float) per step with at least one number"
        )
    arrays = [np.asarray(part) for part in parts]
    try:
        return np.stack(arrays, axis=1)
    except ValueError:
        shapes = sorted({a.shape[1:] for a in arrays})
        raise ValueError(
            f"extra output {key!r} holds lists whose entries are of different shapes "
            f"({', '.join(map(str, shapes))} per step), but the storage takes one array of "
            "real numbers per step: record each step as one array"
        ) from None


def checked_obs_fn_output(observations: Any, lead: tuple[int, ...]) -> Any:
    """``obs_fn``'s result, once every leaf is known to keep the leading axes it was given.

    ``obs_fn`` must act row by row: a leaf with other leading axes (a row dropped, the time
    and env axes swapped) would misalign the observations with every other field, or be
    refused by the storage only after a given one was cleared.

    Raises:
        ValueError: Naming the leaf's shape and the leading axes it needed.

    Example:
        >>> checked_obs_fn_output(np.zeros((3, 2, 4)), (3, 2)).shape
        (3, 2, 4)
        >>> checked_obs_fn_output({"a": np.zeros((2, 2))}, (3, 2))
        Traceback (most recent call last):
        ...
        ValueError: obs_fn returned a leaf of shape (2, 2): it must keep the leading axes ...
    """
    for leaf in flatten(observations)[0]:
        shape = tuple(getattr(leaf, "shape", ()))
        if shape[: len(lead)] != lead:
            raise ValueError(
                f"obs_fn returned a leaf of shape {shape}: it must keep the leading axes "
                f"{lead} it was given (act row by row)"
            )
    return observations

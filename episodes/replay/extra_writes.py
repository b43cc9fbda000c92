"""Rewriting stored extra model outputs by item index (a reanalyse pass, as EfficientZero's).

A learner that re-runs its search on old positions replaces their stored search policies and
root values. The new values are checked whole (key, indices, row shape and dtype kind, values
the column's dtype holds) before one scatter writes them, so a refusal changes nothing. Items
evicted since they were sampled are skipped, as ``update_priorities`` skips them: their rows
are gone, and a learner running behind its actors meets them routinely.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from episodes.replay.columns import as_rows
from episodes.replay.integers import int_array
from episodes.replay.item_slots import find_slots
from episodes.replay.nested import nested_rows, put_rows, take_rows, unpack
from episodes.replay.sampling import slots_of
from episodes.replay.store import StepStore

__all__ = [
    "host_values",
    "issued_indices",
    "read_extras",
    "read_rows",
    "write_extras",
    "write_rows",
]


def host_values(values: Any) -> Any:
    """``values`` with every torch tensor (leaves of dicts and tuples too) as a numpy array.

    Tensors are detached and moved to the CPU; bfloat16 ones, which numpy lacks, become
    float32, which holds each of their values.

    Example:
        >>> host_values({"v": [1.0, 2.0], "p": (np.zeros(2),)})["p"][0].shape
        (2,)
    """
    if isinstance(values, dict):
        return {key: host_values(value) for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(host_values(value) for value in values)
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor (no import)
        values = values.detach().cpu()
        if str(values.dtype) == "torch.bfloat16":
            values = values.float()
        return values.numpy()
    return values


def _leaf_rows(values: Any, what: str) -> Any:
    # A leaf given as a list is its rows here (a numpy'd episode's list would be list items).
    if isinstance(values, dict):
        return {key: _leaf_rows(value, f"{what}[{key!r}]") for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_leaf_rows(value, f"{what}[{i}]") for i, value in enumerate(values))
    return as_rows(values, what)


def _leaf_counts(leaves: Any, what: str) -> Iterator[tuple[str, int]]:
    """Each leaf's name (as ``_leaf_rows`` names it) and rows; 0-d leaves are left out."""
    if isinstance(leaves, dict):
        for key, leaf in leaves.items():
            yield from _leaf_counts(leaf, f"{what}[{key!r}]")
    elif isinstance(leaves, tuple):
        for i, leaf in enumerate(leaves):
            yield from _leaf_counts(leaf, f"{what}[{i}]")
    elif leaves.ndim:
        yield what, len(leaves)


def _rows(values: Any, what: str, count: int, nested: bool) -> np.ndarray:
    values = host_values(values)
    # A flat column's rows as a tuple, or a list of tuples, are rows as numpy reads them: only
    # a nested column has Tuple leaves to read them as.
    if isinstance(values, dict) or (nested and isinstance(values, tuple)):  # per-leaf rows
        leaves = _leaf_rows(values, what)
        counts = dict(_leaf_counts(leaves, what))
        if len(set(counts.values())) > 1:  # leaves disagree: name one unlike the indices
            name, rows = next((k, n) for k, n in counts.items() if n != count)
            raise ValueError(
                f"{name}: {rows} rows for {count} indices (one row per index in every leaf)"
            )
        # every leaf alike: a count unlike the indices' is refused by the caller
        count = next(iter(counts.values()), count)
        return nested_rows(leaves, what, count, finalized=True)
    if isinstance(values, list) and values:
        if isinstance(values[0], dict) or (nested and isinstance(values[0], tuple)):
            return nested_rows(values, what, len(values), finalized=False)  # one item a row
    return as_rows(values, what)


def _column(store: StepStore, key: Any) -> Any:
    column = store.extras.get(key) if isinstance(key, str) else None
    if column is None:
        raise KeyError(
            f"{key!r} is no stored extra model output; the buffer's are {sorted(store.extras)}"
        )
    return column


def read_extras(store: StepStore, key: Any, indices: Any) -> Any:
    """The stored extra-output column ``key`` at the items ``indices`` (a copy).

    Raises:
        KeyError: ``key`` is no stored extra-output column, or indices not stored (evicted or
            never issued), as ``get_transitions`` refuses them.
        ValueError: Indices that are not integers, or not one index or a 1-d sequence.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> store.reserve(3)
        >>> _ = store.append(rows, {"v": np.arange(3.0)}, [{}] * 3, ep_row=0, t0=0,
        ...                  prev_slot=-1)
        >>> read_extras(store, "v", [2, 0]).tolist()
        [2.0, 0.0]
    """
    return read_rows(store, _column(store, key).data, indices)


def read_rows(store: StepStore, data: np.ndarray, indices: Any) -> Any:
    """Rows of the step column ``data`` (extras, rewards) at the items ``indices`` (a copy).

    Raises:
        KeyError: Indices not stored (evicted or never issued).
        ValueError: Indices that are not integers, or not one index or a 1-d sequence.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((2, 1)), "actions": np.zeros(2), "rewards": np.ones(2)}
        >>> store.reserve(2)
        >>> _ = store.append(rows, {}, [{}] * 2, ep_row=0, t0=0, prev_slot=-1)
        >>> read_rows(store, store.rewards, 1).tolist()
        [1.0]
    """
    idx = np.atleast_1d(int_array(host_values(indices), "indices", KeyError))
    if idx.ndim != 1:
        raise ValueError(f"indices must be one index or a 1-d sequence, got shape {idx.shape}")
    return unpack(take_rows(data, slots_of(store, idx)))


def write_extras(store: StepStore, key: Any, values: Any, indices: Any) -> int:
    """Writes ``values`` into extra-output column ``key`` at the items ``indices``.

    Returns:
        The number of items written (evicted ones are skipped).

    Raises:
        KeyError: ``key`` is no stored extra-output column (the message lists them).
        ValueError: Indices that are not integers, not 1-d, or never issued by the buffer
            (-1, a sequence batch's padding, too); values whose count differs from the
            indices', whose row shape or dtype kind differ from the column's, or that its
            dtype cannot hold. Nothing is written then.
        TypeError: Values that are not numeric.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((3, 1)), "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> store.reserve(3)
        >>> _ = store.append(rows, {"v": np.zeros(3, np.float32)}, [{}] * 3, ep_row=0, t0=0,
        ...                  prev_slot=-1)
        >>> write_extras(store, "v", [5.0, 7.0], [2, 0])
        2
        >>> store.extras["v"].data[:3].tolist()
        [7.0, 0.0, 5.0]
    """
    column = _column(store, key)
    what = f"extra_model_outputs[{key!r}]"
    idx = issued_indices(store, indices)
    rows = _rows(values, what, len(idx), column.data.dtype.names is not None)
    fit = functools.partial(column.fit, what=what)
    return write_rows(store, column.data, rows, idx, what, column.describe(), fit)


def issued_indices(store: StepStore, indices: Any) -> np.ndarray:
    """``indices`` as a 1-d int64 array of item indices the buffer issued (live or evicted).

    Raises:
        ValueError: Indices that are not integers, not 1-d, or never issued (-1, a sequence
            batch's padding, too).

    Example:
        >>> issued_indices(StepStore(), [])
        array([], dtype=int64)
        >>> issued_indices(StepStore(), [0])
        Traceback (most recent call last):
        ...
        ValueError: indices the buffer never issued (use a batch's 'indices'): [0]
    """
    idx = int_array(host_values(indices), "indices")
    if idx.ndim != 1:
        one = " (one item: indices [i], values one row in a list)" * (idx.ndim == 0)
        raise ValueError(f"indices must be a 1-d sequence, got shape {idx.shape}{one}")
    if idx.size and (idx.min() < 0 or idx.max() >= store.next_uid):
        pad = "-1 is a sequence batch's padding, where its mask is False: pass indices[mask]"
        hint = pad if -1 in idx else "use a batch's 'indices'"
        raise ValueError(f"indices the buffer never issued ({hint}): {idx[:5].tolist()}")
    return idx


def write_rows(
    store: StepStore,
    data: np.ndarray,
    rows: np.ndarray,
    idx: np.ndarray,
    what: str,
    layout: str,
    fit: Callable[[np.ndarray], np.ndarray],
) -> int:
    """Writes ``rows``, one per index, into the step column ``data`` at the items ``idx``.

    The one write path of :func:`write_extras` and the rewards' (``reward_writes``): the rows
    are counted against the indices and ``fit`` into the column (it raises for rows it
    refuses) before one scatter writes them, so a refusal changes nothing. Items evicted
    since they were issued are skipped; a repeated index keeps its last row. ``idx`` comes
    from :func:`issued_indices`; ``layout`` describes the column's rows for the count error.

    Returns:
        The number of items written.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((2, 1)), "actions": np.zeros(2), "rewards": np.ones(2)}
        >>> store.reserve(2)
        >>> _ = store.append(rows, {}, [{}] * 2, ep_row=0, t0=0, prev_slot=-1)
        >>> write_rows(store, store.rewards, np.array([3.0, 4.0]), np.array([1, 1]),
        ...            "rewards", "float32 scalars", lambda r: r.astype(np.float32))
        2
        >>> store.rewards[:2].tolist()
        [1.0, 4.0]
    """
    if len(rows) != len(idx):
        raise ValueError(
            f"{what}: {len(rows)} values for {len(idx)} indices (one row per index, each of "
            f"the column's {layout})"
        )
    if not len(idx):  # nothing to write: [] has no row shape to check
        return 0
    rows = fit(rows)
    slots, found = find_slots(store.uid[: store.end], store.live[: store.end], idx)
    if not found.all():  # evicted since they were sampled: nothing of theirs is stored
        slots, rows = slots[found], rows[found]
    put_rows(data, slots, rows)  # one scatter; a repeated index keeps its last value
    return len(slots)

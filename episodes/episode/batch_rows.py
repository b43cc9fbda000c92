"""``SampleBatch[start:stop]``: the columns of some of a batch's rows, as RLlib slices them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["sliced_columns"]


def sliced_columns(columns: Mapping[str, Any], rows: slice, count: int) -> dict[str, Any]:
    """The rows ``rows`` of a batch of ``count`` rows: each column's rows, by key.

    As RLlib's ``SampleBatch`` slice: arrays are sliced as views (writing into one writes into
    the batch), a nested column leaf by leaf (a numpy'd Tuple column's list of leaf arrays too),
    a list of rows (``infos``) into a new list of the same items, and a column without rows (a
    number) is kept. With ``seq_lens`` the bounds must fall between sequences (RLlib would
    round them down to a sequence's start): ``seq_lens`` and ``state_in_*`` keep the sequences
    of those rows, and a step other than 1 is refused. Bounds are read as a list reads them
    (negative from the end, clamped; ``[0:0]`` is empty, where RLlib gives every row), and so
    is a step without ``seq_lens`` (RLlib ignores a step).

    Raises:
        ValueError: With ``seq_lens``, a bound inside a sequence, or a step other than 1.

    Example:
        >>> obs = np.arange(4)
        >>> cols = sliced_columns({"obs": obs, "infos": [{}, {}, {}, {"i": 3}]}, slice(-2, None), 4)
        >>> cols["obs"], cols["infos"], np.shares_memory(cols["obs"], obs)
        (array([2, 3]), [{}, {'i': 3}], True)
        >>> sliced_columns({"obs": obs, "seq_lens": np.array([1, 3])}, slice(1, 4), 4)["seq_lens"]
        array([3])
    """
    start, stop, step = rows.indices(count)
    seq_lens, seqs = columns.get("seq_lens"), None
    if seq_lens is not None and len(seq_lens):
        if step != 1:
            raise ValueError(f"a SampleBatch with seq_lens is sliced with a step of 1, not {step}")
        bounds = np.concatenate([[0], np.cumsum(seq_lens)])
        stop = max(start, stop)
        first, last = np.searchsorted(bounds, [start, stop], side="right") - 1
        if bounds[first] != start or bounds[last] != stop:
            raise ValueError(
                f"SampleBatch rows {start}:{stop} cut a sequence: with seq_lens the bounds must be "
                f"sequence starts {bounds.tolist()}"
            )
        seqs = slice(int(first), int(last))
    row_slice = slice(start, None if stop < 0 else stop, step)  # -1: past row 0, stepping back
    out = {}
    for key, value in columns.items():
        if key == "infos":  # rows of anything: never read as nested leaves
            out[key] = value[row_slice] if isinstance(value, (list, np.ndarray)) else value
        elif seqs is not None and (key == "seq_lens" or str(key).startswith("state_in_")):
            out[key] = _sliced(value, seqs)
        else:
            out[key] = _sliced(value, row_slice)
    return out


def _sliced(value: Any, rows: slice) -> Any:
    """``value[rows]`` leaf by leaf; a list of leaf arrays is nested, any other a list of rows."""
    if isinstance(value, dict):
        new = copy.copy(value)  # a dict subclass stays one
        new.update((key, _sliced(part, rows)) for key, part in value.items())
        return new
    if isinstance(value, tuple) or (isinstance(value, list) and value and _leaves(value)):
        parts = [_sliced(part, rows) for part in value]
        return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    if not hasattr(value, "__getitem__") or isinstance(value, (str, bytes)):
        return value  # a number, None: no rows
    return value if getattr(value, "ndim", 1) == 0 else value[rows]


def _leaves(value: Any) -> bool:
    """Whether ``value`` nests arrays of rows only (a numpy'd Tuple or Dict part), no rows."""
    if isinstance(value, np.ndarray):
        return value.ndim > 0
    if isinstance(value, dict):
        return all(_leaves(part) for part in value.values())
    return isinstance(value, (list, tuple)) and all(_leaves(part) for part in value)

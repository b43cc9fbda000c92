"""Joining per-episode rows with numpy, refusing joins that would turn numbers into text.

``np.concatenate`` promotes number rows beside string rows to strings (``0`` becomes
``'0'``) and decodes bytes beside strings: the rows of one episode would change kind with the
episodes next to them. :func:`join_leaves` is that concatenation with such joins refused;
promotion among numbers (ints beside floats give floats) and object columns, whose items
keep their values, are joined as numpy joins them, except that ints never become floats
beside ints: uint64 rows beside signed ones (which numpy joins as float64, rounding them and
turning an int column into floats) are joined as int64 where they fit, else refused
(:func:`lossless_ints`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TextJoinError", "join_leaves", "lossless_ints", "text_join_pair"]

_INT64_MAX = np.iinfo(np.int64).max
_UINT64 = np.dtype(np.uint64)
_NUMPY = (np.ndarray, np.generic)  # arrays and numpy scalars: their dtype is numpy's


class TextJoinError(ValueError):
    """Leaves that numpy would join as text: ``text`` and ``odd`` are their positions.

    Example:
        >>> err = TextJoinError(1, 0, [np.dtype("int64"), np.dtype("<U1")])
        >>> (err.text, err.odd), str(err).split(":")[0]
        ((1, 0), 'rows of dtypes <U1 and int64 do not join')
    """

    def __init__(self, text: int, odd: int, dtypes: list[np.dtype[Any]]):
        self.text, self.odd = text, odd
        self.dtypes = (dtypes[text], dtypes[odd])
        what = "strings" if dtypes[text].kind == "U" else "bytes"
        #: Why they do not join, without the dtypes' naming (callers name the rows' owners).
        self.why = f"numpy would turn the {dtypes[odd]} rows into {what}"
        super().__init__(f"rows of dtypes {dtypes[text]} and {dtypes[odd]} do not join: {self.why}")
        self._given = (text, odd, list(dtypes))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from what was given (pickle, copy, another process re-raising it): the
        # default would call __init__ with the message alone.
        return (type(self), self._given, self.__dict__)  # notes and attributes set later too


def text_join_pair(leaves: list[Any]) -> tuple[int, int] | None:
    """Positions ``(text, odd)`` of a text leaf and a leaf whose rows it would turn into text.

    ``text`` is the first leaf of strings (of bytes where none holds strings: numpy decodes
    bytes beside strings), ``odd`` the first leaf with rows of another kind (numbers, bools,
    bytes beside strings); object leaves and leaves without rows are no such leaf. None where
    the leaves join without that.

    Example:
        >>> text_join_pair([np.array([1]), np.array(["a"])])
        (1, 0)
        >>> text_join_pair([np.array([1]), np.array([0.5])]) is None
        True
    """
    arrays = [np.asarray(leaf) for leaf in leaves]
    kinds = [a.dtype.kind for a in arrays]
    kind = "U" if "U" in kinds else "S"  # numpy decodes bytes beside strings
    if kind not in kinds:
        return None
    text = kinds.index(kind)
    odd = next(
        (i for i, a in enumerate(arrays) if kinds[i] not in (kind, "O") and a.ndim and len(a)),
        None,
    )
    return None if odd is None else (text, odd)


def join_leaves(leaves: list[Any]) -> np.ndarray:
    """``np.concatenate(leaves)``, refused where it would turn rows into text.

    Checked only when the joined leaf holds text (strings or bytes), so number columns cost
    nothing more. How the connectors join their columns (:func:`concat_rows`), and the rule
    for any reader joining per-episode rows. A leaf shaped ``(0,)`` beside leaves it does not
    join (``np.asarray([])``, the read of an episode of no steps without a space, next to
    ``(n, 2)`` rows) holds no rows and no row shape: it is left out of that join, so its dtype
    does not count either. Where the leaves join as they are, nothing is left out.

    Raises:
        TextJoinError: A ``ValueError`` naming both dtypes (and, in ``text``/``odd``, the
            leaves' positions).

    Example:
        >>> join_leaves([np.array([1]), np.array([0.5])]).tolist()
        [1.0, 0.5]
        >>> try:
        ...     join_leaves([np.array([1]), np.array(["a"])])
        ... except ValueError as err:
        ...     print(err.why)
        numpy would turn the int64 rows into strings
        >>> join_leaves([np.zeros((2, 2), np.float32), np.asarray([])]).shape
        (2, 2)
    """
    leaves = lossless_ints(leaves)
    try:
        joined = np.concatenate(leaves)
    except ValueError as err:
        joined = _without_empty(leaves, err)
    if joined.dtype.kind in "US":
        pair = text_join_pair(leaves)
        if pair is not None:
            raise TextJoinError(*pair, [np.asarray(leaf).dtype for leaf in leaves])
    return joined


def lossless_ints(leaves: list[Any]) -> list[Any]:
    """``leaves`` ready for numpy to join without turning ints into floats.

    Integer leaves only (no float among them), uint64 ones beside signed ones: numpy would join
    them as float64, rounding values beyond 2**53 and giving an int column floats. The uint64
    leaves are given as int64 instead where every value fits; other leaves are left as they are.

    Raises:
        ValueError: uint64 values beyond int64's range beside signed ints: no int holds both.

    Example:
        >>> [leaf.dtype.name for leaf in lossless_ints([np.array([-1]), np.array([5], np.uint64)])]
        ['int64', 'int64']
        >>> lossless_ints([np.array([-1]), np.array([2**63], np.uint64)])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: uint64 values up to 9223372036854775808 beside signed ints: ...
    """
    first = leaves[0] if leaves else None
    if not isinstance(first, _NUMPY) or first.dtype.kind not in "iub":
        return leaves  # floats join ints as floats, by design; tensors, lists: as numpy does
    dtypes = [leaf.dtype if isinstance(leaf, _NUMPY) else None for leaf in leaves]
    if _UINT64 not in dtypes or not any(d is not None and d.kind == "i" for d in dtypes):
        return leaves
    if any(d is None or d.kind not in "iub" for d in dtypes):
        return leaves
    wide = [leaf for leaf in leaves if leaf.dtype == _UINT64 and leaf.size]
    top = max((int(leaf.max()) for leaf in wide), default=0)
    if top > _INT64_MAX:
        raise ValueError(
            f"uint64 values up to {top} beside signed ints: no int dtype holds both, and "
            "float64 would round them: give their episodes one int dtype"
        )
    return [leaf.astype(np.int64) if leaf.dtype == _UINT64 else leaf for leaf in leaves]


def _without_empty(leaves: list[Any], err: ValueError) -> np.ndarray:
    """The leaves joined without those of shape ``(0,)``, or ``err`` (numpy's) as it was."""
    kept = [leaf for leaf in leaves if not _no_rows(leaf)]
    if kept and len(kept) < len(leaves):
        try:
            return np.concatenate(kept)
        except ValueError:
            pass
    raise err


def _no_rows(leaf: Any) -> bool:
    try:
        return np.shape(leaf) == (0,)
    except ValueError:  # ragged: not empty
        return False

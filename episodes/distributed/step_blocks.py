"""The check that the step columns of several chunks make one block with their values.

A read task of a format v1 dataset reads a range of chunks, which may hold several recordings,
and gives one block of their steps (Ray merges the blocks of one task all the same). A column
whose dtype is of another kind in some chunk would be promoted by numpy's concatenate (int64
next to float32 becomes float64, rounding values beyond 2**53; bools next to ints become ints),
one whose rows differ in shape fails in numpy's words: :func:`check_same_columns` refuses them
first, by name. Dtypes of one kind join with their values (int8 next to int64, as a runner
widens a column, gives int64; float32 next to float64 float64).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["JoinedTypes", "check_same_columns", "join_types", "joined_type"]


def check_same_columns(parts: list[dict[str, np.ndarray]], where: str) -> None:
    """Refuses step columns of ``parts`` (one dict per chunk) that one block cannot hold.

    The chunks' columns must have the same names, in order, the same row shapes and dtypes of
    one kind (bool, int, float, complex, string, bytes or object: those join with their values;
    signed and unsigned ints are one kind where numpy joins them as ints, so uint64 beside a
    signed int, which would become float64, is refused; other dtypes, datetimes say, must be
    the same). One comparison per chunk; ``where`` names the chunks in the message.

    Raises:
        ValueError: Naming the columns, or the column, both types and the two chunks' episodes.

    Example:
        >>> a = {"episode_id": np.array(["a"], object), "obs": np.array([2**62])}
        >>> b = {"episode_id": np.array(["b"], object), "obs": np.array([0.5], np.float32)}
        >>> wider = {"episode_id": a["episode_id"], "obs": np.array([1], np.int8)}
        >>> check_same_columns([a, wider], "chunks 0-2")  # int8 joins int64 as it is
        >>> pixels = {"episode_id": a["episode_id"], "obs": np.array([255], np.uint8)}
        >>> check_same_columns([a, pixels], "chunks 0-2")  # so does uint8
        >>> check_same_columns([a, b], "chunks 0-2")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: chunks 0-2 do not share the type of the step column 'obs': int64 rows ...
    """
    names = list(parts[0])
    joined: JoinedTypes = {}
    for part in parts:
        if list(part) != names:
            raise ValueError(
                f"{where} do not share step columns: {names} vs {list(part)} "
                "(read episodes instead)"
            )
        join_types(joined, part, where)


#: Per step column: a row-less array of the dtype its chunks join in so far, and the chunk
#: (its label) that decided it, for the message of a refusal.
JoinedTypes = dict[str, tuple[np.ndarray, str]]


def join_types(
    joined: JoinedTypes, part: dict[str, np.ndarray], where: str, label: str | None = None
) -> None:
    """Joins the column types of one chunk's ``part`` into ``joined`` (by column name).

    A column no earlier chunk had starts with this chunk's type; the rules are those of
    :func:`check_same_columns`, which does not ask for the same names. ``label`` names the
    chunk in a refusal (default: its episode).

    Raises:
        ValueError: A column of ``part`` does not join the type of that column so far, naming
            the type so far and the chunk that decided it, and this chunk's.

    Example:
        >>> joined = {}
        >>> for dtype in (np.int8, np.uint8, np.int64):
        ...     join_types(joined, {"episode_id": np.array(["a"]), "obs": np.zeros(1, dtype)}, "x")
        >>> joined["obs"][0].dtype, joined["obs"][0].shape
        (dtype('int64'), (0,))
    """
    label = _label(part) if label is None else label
    for name, column in part.items():
        have = joined.get(name)
        if have is None:
            joined[name] = (column[:0], label)
            continue
        dtype = joined_type(have[0], column)
        if dtype is None:
            raise _differ(where, name, (have[0], have[1]), (column, label))
        if dtype != have[0].dtype:
            joined[name] = (have[0].astype(dtype), label)


def joined_type(a: np.ndarray, b: np.ndarray) -> np.dtype[Any] | None:
    """The dtype that holds the rows of columns ``a`` and ``b`` as they are, or None.

    Example:
        >>> joined_type(np.zeros(1, np.int8), np.zeros(1, np.uint8))
        dtype('int16')
        >>> joined_type(np.zeros(1, np.int64), np.zeros(1, np.uint64)) is None  # float64
        True
    """
    if _column_type(a) != _column_type(b):
        return None
    dtype = np.result_type(a.dtype, b.dtype)
    return None if a.dtype.kind in "iu" and dtype.kind not in "iu" else dtype


def _differ(
    where: str, name: str, a: tuple[np.ndarray, str], b: tuple[np.ndarray, str]
) -> ValueError:
    described = [f"{c.dtype} rows of shape {c.shape[1:]} in {label}" for c, label in (a, b)]
    return ValueError(
        f"{where} do not share the type of the step column {name!r}: "
        f"{described[0]}, {described[1]}; one block would change "
        "the values (int64 next to float32 becomes float64) or fail: read episodes instead"
    )


def _column_type(column: np.ndarray) -> tuple[Any, tuple[int, ...]]:
    kind = "i" if column.dtype.kind == "u" else column.dtype.kind  # see check_same_columns
    return (kind if kind in "biufcUSO" else column.dtype), column.shape[1:]


def _label(part: dict[str, np.ndarray]) -> str:
    return f"episode {str(part['episode_id'][0])!r}"

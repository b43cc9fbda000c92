"""Exact episode returns, for comparing a return that a float cannot hold.

A manifest stores a piece's return as a float (``format.piece_return``), ``null`` where it is
not finite, as when int rewards go beyond float range. :func:`exact_return` sums such pieces
without overflowing, and :func:`exact_returns` sums a dataset's episodes so, for
``filter_dataset`` to compare their returns with its bounds exactly.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> exact_return(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[2**1100],
    ...                                 len_lookback_buffer=0)) > 1e308
    True
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Collection
from fractions import Fraction
from typing import Any

import numpy as np

from episodes.io.reader import read_episodes
from episodes.io.values import id_key

__all__ = ["exact_return", "exact_returns"]


def exact_return(episode: Any, plus: Fraction | float = 0) -> Fraction | float:
    """``plus`` and a piece's return, summed exactly: where floats would overflow, no error.

    A float sum of the piece's rewards is taken exactly (as a fraction); int rewards beyond
    float range (why a manifest holds no return for the piece) are summed one by one, ints as
    ints and floats as fractions. A NaN or infinite term makes the result that float (NaN
    for inf - inf). Sum an episode's pieces by passing each result on as ``plus``; compare
    the result with a number as it is (Python compares fractions and floats exactly).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> big = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0],
        ...                          rewards=[2**1100, 1], len_lookback_buffer=0)
        >>> exact_return(big) == 2**1100 + 1, exact_return(big, plus=-(2**1100))
        (True, Fraction(1, 1))
        >>> exact_return(big, plus=float("-inf"))
        -inf
    """
    special = plus if isinstance(plus, float) and not math.isfinite(plus) else 0.0
    exact = Fraction(0) if special else Fraction(plus)
    try:
        # A float sum past float max is inf, inf - inf NaN: both handled below, quietly.
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(episode.get_return())
    except (TypeError, ValueError):  # rewards with no return (piece_return's NaN): no bound
        return math.nan
    else:
        # get_return is +-inf where int rewards go beyond float range: those are summed
        # one by one (and so are float rewards whose float sum overflows).
        terms = [total] if math.isfinite(total) else list(episode.rewards.get())
    for term in terms:
        if isinstance(term, numbers.Integral):  # bools and numpy ints too
            exact += int(term)
            continue
        try:
            number = float(term)
        except (TypeError, ValueError):  # a complex reward among huge ints: no return
            return math.nan
        if math.isfinite(number):
            exact += Fraction(number)
        else:
            special += number
    return special if special else exact


def exact_returns(
    path: str | os.PathLike[str], ids: Collection[Any], stop: int | None = None
) -> dict[str, Fraction | float]:
    """Per id key (``values.id_key``) of ``ids``: that episode's :func:`exact_return`.

    Streams the pieces of ``ids`` only (the others are not read): an episode's return is
    summed over its pieces (disjoint steps). With ``stop``, only the pieces before it
    (manifest order): those a caller judged.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0],
        ...                                rewards=[2**1100], len_lookback_buffer=0))
        >>> exact_returns(path, ["a"]) == {id_key("a"): 2**1100}
        True
    """
    returns: dict[str, Fraction | float] = {}
    for piece in read_episodes(path, ids=ids, stop=stop):  # stop: the pieces a caller judged
        key = id_key(piece.id_)
        returns[key] = exact_return(piece, plus=returns.get(key, 0))
    return returns

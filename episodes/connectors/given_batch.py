"""The check every shipped connector makes of the batch it is given.

Example:
    >>> check_batch(None, "FrameStack")  # a new batch, as ConnectorPipeline starts from
    {}
"""

from __future__ import annotations

import reprlib
from collections.abc import MutableMapping
from typing import Any, cast

from episodes.connectors.base import Batch

__all__ = ["check_batch"]


def check_batch(batch: Any, who: str) -> Batch:
    """The batch a connector writes its columns into: ``batch`` itself, or ``{}`` for None.

    A connector adds columns by assigning keys, so anything but a mutable mapping (a list, a
    string, a read-only ``MappingProxyType``) failed on the first assignment with numpy's or
    Python's words, naming neither the connector nor the argument; None is a new batch, as
    ``ConnectorPipeline`` takes it. ``who`` is the connector the batch was given to.

    Raises:
        TypeError: ``batch`` is neither None nor a mutable mapping; the message names ``who``,
            the value and its type. Nothing is read before it.

    Example:
        >>> batch = {"obs": 1}
        >>> check_batch(batch, "FrameStack") is batch
        True
        >>> check_batch([], "FrameStack")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: FrameStack: batch must be a dict (a mutable mapping ...) or None, got [] (list)
    """
    if batch is None:
        return {}
    if not isinstance(batch, MutableMapping):
        raise TypeError(
            f"{who}: batch must be a dict (a mutable mapping of column names) or None, got "
            f"{reprlib.repr(batch)} ({type(batch).__name__})"
        )
    return cast(Batch, batch)  # a dict, or a mapping of the caller's that takes item writes

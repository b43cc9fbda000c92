"""Column plans whose items come out in native byte order, as the torch datasets give them.

torch, and a ``DataLoader``'s collation, take no big-endian array: a leaf stored so (a wrapped
``>f4`` array, a dataset written elsewhere) is handed out as a native copy, values unchanged.
"""

from __future__ import annotations

from typing import Any

from episodes.buffer.plain_arrays import native_leaves


class _NativeColumn:
    """A column plan whose items come out in native byte order (torch takes no other)."""

    __slots__ = ("_column",)

    def __init__(self, column: Any):
        self._column = column

    def take(self, start: int, stop: int | None = None, *, copy: bool = False) -> Any:
        return native_leaves(self._column.take(start, stop, copy=copy))


def _native(column: Any) -> Any:
    """``column`` itself where every stored leaf is native (one dtype check per leaf)."""
    if all(view.dtype.isnative for view in column.views):
        return column
    return _NativeColumn(column)

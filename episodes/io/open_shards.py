"""How many shards a :class:`~episodes.io.Dataset` keeps open: ``max_open_shards``.

Reopening a shard costs its index check and its data file's footer (about 0.3-0.4 ms for a
shard of two pieces), and a torch dataset's column plans of its pieces, made again. A shuffled
pass over more shards than stay open reopens one on most reads: over the 1,000 shards a
``RunnerGroup(write_to=...)`` run writes (one per sample and runner), 64 open made a random
item 45x slower. ``"auto"`` (the default) keeps open what is cheap to keep:

* an uncompressed Arrow shard is a memory map holding one file descriptor, so up to a quarter
  of the soft ``RLIMIT_NOFILE`` of them (as many as :func:`~episodes.io.leaf_maps.map_limit`
  allows leaf maps; at least :data:`HELD_SHARDS`), and beyond the :data:`HELD_SHARDS` most
  recently used only while those open are estimated to hold at most :data:`MAX_OPEN_BYTES`:
  each its index (as the manifest lists its size; its cached plans grow with it) and
  :data:`SHARD_OVERHEAD` (pyarrow's reader and schema, the last batches fetched), and while
  the shards every ``"auto"`` dataset of the process holds open stay within that quarter
  (:func:`open_in_process`): several datasets read at once share it, each keeping its
  :data:`HELD_SHARDS` most recently used whatever the others hold;
* a Parquet shard is held decoded in memory, its whole size, and a compressed Arrow shard
  keeps its last batches decompressed: at most :data:`HELD_SHARDS` of these are open.

An int ``n`` keeps at most ``n`` shards open, of any kind, as before ``"auto"``.

Example:
    >>> limits = OpenLimits(2)
    >>> limits.count, limits.held_max
    (2, 2)
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Union

from episodes.errors import IntegerTypeError
from episodes.indexing import whole_number
from episodes.io.leaf_maps import map_limit

__all__ = [
    "AUTO",
    "HELD_SHARDS",
    "MAX_OPEN_BYTES",
    "MaxOpen",
    "OpenLimits",
    "SHARD_OVERHEAD",
    "check_max_open",
    "holds_data",
    "open_in_process",
]

AUTO = "auto"
#: What ``max_open_shards`` takes: ``"auto"`` or an int >= 1.
MaxOpen = Union[int, str]  # noqa: UP007 - a runtime alias on 3.10
#: Shards holding their data in memory (Parquet, compressed Arrow) kept open by ``"auto"``.
HELD_SHARDS = 64
#: What the open shards may hold (estimated) once more than ``HELD_SHARDS`` are open.
MAX_OPEN_BYTES = 128 << 20
#: An open shard's memory besides its index: 29 KB resident for an Arrow shard of two pieces
#: just opened, 44 KB once reads of both cached their views and plans.
SHARD_OVERHEAD = 48 << 10
# Shards open under "auto" in this process, all datasets together: one cell, shared.
_OPEN_AUTO = [0]


def open_in_process() -> int:
    """Shards the ``"auto"`` datasets of this process hold open now, all of them together.

    Example:
        >>> open_in_process() >= 0
        True
    """
    return _OPEN_AUTO[0]


def _forget(own: list[int], process: list[int]) -> None:
    # A dataset dropped with shards open (no close()): its maps go with it, and its count.
    process[0] -= own[0]
    own[0] = 0


def check_max_open(value: Any) -> MaxOpen:
    """``value`` if it is ``"auto"`` or an int >= 1, else the ``ValueError`` naming it.

    Example:
        >>> check_max_open("auto"), check_max_open(3)
        ('auto', 3)
    """
    if isinstance(value, str):
        if value == AUTO:
            return AUTO
        # Both a TypeError and a ValueError, as whole_number refuses other types.
        raise IntegerTypeError(f"max_open_shards must be 'auto' or an int >= 1, got {value!r}")
    return whole_number(value, "max_open_shards", 1)


def holds_data(shard: Any) -> bool:
    """Whether an open shard keeps data in memory: Parquet, or compressed Arrow batches.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> holds_data(NS(entry=NS(data_format="arrow"), index={"data": {"compression": None}}))
        False
    """
    data = shard.index.get("data") or {}
    return bool(shard.entry.data_format != "arrow" or data.get("compression") is not None)


class OpenLimits:
    """The bounds on a dataset's open shards, and what those open now hold.

    Args:
        max_open_shards: ``"auto"`` or an int >= 1 (see the module).

    Example:
        >>> limits = OpenLimits("auto")
        >>> limits.held_max, limits.count >= limits.held_max
        (64, True)
    """

    def __init__(self, max_open_shards: MaxOpen):
        self.setting = check_max_open(max_open_shards)
        if isinstance(self.setting, int):
            self.count = self.held_max = self.setting
            self.bytes_max: float = float("inf")
        else:  # read in each process that opens the dataset (a DataLoader worker too)
            self.count = max(HELD_SHARDS, map_limit())
            self.held_max = HELD_SHARDS
            self.bytes_max = MAX_OPEN_BYTES
        self.held = 0
        self.bytes = 0  # estimated, of the shards open
        # This dataset's part of open_in_process(), given back if it is dropped unclosed.
        self._own, self._process = [0], _OPEN_AUTO
        if self.setting == AUTO:
            weakref.finalize(self, _forget, self._own, self._process)

    def fresh(self) -> OpenLimits:
        """The same bounds with nothing open (for a pickled dataset, whose shards are not).

        Example:
            >>> OpenLimits(3).fresh().count
            3
        """
        return OpenLimits(self.setting)

    def opened(self, shard: Any) -> None:
        """Counts ``shard`` as open."""
        self.held += holds_data(shard)
        self.bytes += shard.entry.index_size + SHARD_OVERHEAD
        if self.setting == AUTO:
            self._own[0] += 1
            self._process[0] += 1

    def closed(self, shard: Any) -> None:
        """Counts ``shard`` as closed."""
        self.held -= holds_data(shard)
        self.bytes -= shard.entry.index_size + SHARD_OVERHEAD
        if self.setting == AUTO:
            self._own[0] -= 1
            self._process[0] -= 1

    def victim(self, open_shards: OrderedDict[int, Any]) -> int | None:
        """The shard to close next (the least recently used one over a bound), or None.

        The shard used last (``open_shards``' last) is never the victim.

        Example:
            >>> from types import SimpleNamespace as NS
            >>> shard = NS(entry=NS(data_format="parquet", index_size=10), index={})
            >>> limits = OpenLimits("auto")
            >>> for _ in range(65):
            ...     limits.opened(shard)
            >>> limits.victim(OrderedDict((s, shard) for s in range(65)))
            0
        """
        if len(open_shards) <= 1:
            return None
        if len(open_shards) > self.count:
            return next(iter(open_shards))
        if self.held > self.held_max:
            return next(s for s, shard in open_shards.items() if holds_data(shard))
        if len(open_shards) > HELD_SHARDS and (
            self.bytes > self.bytes_max or self._process[0] > self.count
        ):
            return next(iter(open_shards))
        return None

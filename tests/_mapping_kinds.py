"""A mapping of the user's own that is no dict, for the tests of how such items are refused."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class ReadOnlyMapping(Mapping):  # type: ignore[type-arg]
    """A read-only mapping, nothing more."""

    def __init__(self, **groups: Any):
        self._groups = groups

    def __getitem__(self, key: str) -> Any:
        return self._groups[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

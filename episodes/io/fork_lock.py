"""A lock for per-process caches that a forked child gets afresh.

A fork while another thread of the parent held a ``threading.Lock`` leaves the child's copy
held forever, and the child's first use of the cache hangs (DataLoader workers and Ray
workers are forked). The caches of :mod:`episodes.io.kept_manifests` and
:mod:`episodes.io.shard_index` hold one of these instead.

Example:
    >>> lock = ForkLock()
    >>> with lock:
    ...     lock.locked()
    True
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ["ForkLock"]


class ForkLock:
    """A ``threading.Lock`` replaced by a fresh one in a forked child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            renew = weakref.WeakMethod(self._renew)  # the registry must not keep it alive

            def after_fork() -> None:
                method = renew()
                if method is not None:
                    method()

            os.register_at_fork(after_in_child=after_fork)

    def _renew(self) -> None:
        self._lock = threading.Lock()

    def locked(self) -> bool:
        """Whether some thread holds it now.

        Example:
            >>> ForkLock().locked()
            False
        """
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)

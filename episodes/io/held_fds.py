"""Raw descriptors a writer holds, closed if the writer is collected without ``close()``.

A writer keeps its lock and manifest open as plain descriptors. A Python file dropped unclosed
is closed (with a ``ResourceWarning``) when it is collected; so are these: otherwise every
writer dropped on an error path would keep two descriptors, and its lock, until the process
ends (a v1 dataset stays locked against the process's own later writers).
"""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref

__all__ = ["HeldFds"]


def _close_left(fds: list[int], what: str) -> None:
    if not fds:
        return
    left = list(fds)
    fds.clear()
    for fd in left:  # closing a descriptor also drops its flock
        with contextlib.suppress(OSError):
            os.close(fd)
    # After closing: a warning turned into an error must not keep them open. Level 3 skips
    # this function and weakref.finalize's __call__: the line that dropped the owner.
    warnings.warn(f"unclosed {what}: call close() or use a with block", ResourceWarning, 3)


class HeldFds:
    """The descriptors ``owner`` holds; those still held when it is collected are closed.

    Example:
        >>> import gc, tempfile, warnings
        >>> class Owner:
        ...     pass
        >>> owner, path = Owner(), tempfile.mkstemp()[1]
        >>> held = HeldFds(owner, "owner")
        >>> fd = held.add(os.open(path, os.O_RDONLY))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     del owner; _ = gc.collect()
        >>> [str(w.message) for w in caught], held.count
        (['unclosed owner: call close() or use a with block'], 0)
    """

    def __init__(self, owner: object, what: str) -> None:
        self._fds: list[int] = []
        # Not at exit: the system closes every descriptor then, with no warning due.
        weakref.finalize(owner, _close_left, self._fds, what).atexit = False

    @property
    def count(self) -> int:
        """How many descriptors are held."""
        return len(self._fds)

    def add(self, fd: int) -> int:
        """Holds ``fd`` (returned, for assignment)."""
        self._fds.append(fd)
        return fd

    def forget(self, fd: int | None) -> None:
        """Stops holding ``fd``, before its owner closes it (None: nothing)."""
        if fd is not None and fd in self._fds:
            self._fds.remove(fd)

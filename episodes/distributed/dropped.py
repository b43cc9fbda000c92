"""Letting go of a Ray reference whose outcome the group does not read.

Ray prints "Unhandled error" and the remote traceback on the caller's stderr for every failed
task whose result nobody read before the reference went away. The group lets go of some on
purpose: the acknowledgement of a weights broadcast that a newer broadcast overwrote (or that
a replacement actor was handed while a newer broadcast followed), the request of an actor it
replaces. Their errors are known or no longer matter; :func:`drop` reads each result once it
arrives, without waiting for it.

Example:
    >>> drop(None)  # nothing to let go of
"""

from __future__ import annotations

from typing import Any

__all__ = ["drop"]


def drop(ref: Any) -> None:
    """Lets go of ``ref`` (a Ray ``ObjectRef`` or None); its result is read when it arrives.

    Never waits: Ray reads the result in its own thread and drops it (an error included,
    which Ray then does not report as unhandled).

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... def fails():
        ...     raise ValueError("not read")
        >>> drop(fails.remote())  # no "Unhandled error" on stderr
    """
    if ref is not None:
        ref.future()  # a callback reads the result; nobody keeps the future

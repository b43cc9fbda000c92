"""Letting go of a Ray reference whose outcome the group does not read.

Ray prints "Unhandled error" and the remote traceback on the caller's stderr for every failed
task whose result nobody read before the reference went away. The group lets go of some on
purpose: the acknowledgement of a weights broadcast that a newer broadcast overwrote (or that
a replacement actor was handed while a newer broadcast followed), the request of an actor it
replaces. Their errors are known or no longer matter; :func:`drop` reads each result once it
arrives, without waiting for it. ``ray.get`` of a list stops at the first error it meets,
leaving the others' unread: :func:`get_all` drops them.

Example:
    >>> drop(None)  # nothing to let go of
"""

from __future__ import annotations

from typing import Any

__all__ = ["drop", "get_all"]


def drop(ref: Any) -> None:
    """Lets go of ``ref`` (a Ray ``ObjectRef`` or None); its result is read when it arrives.

    Never waits: Ray reads the result in its own thread and drops it (an error included,
    which Ray then does not report as unhandled). Anything else (None, or a stand-in without
    ``future``, as tests' fake Rays hand out) is left alone.

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... def fails():
        ...     raise ValueError("not read")
        >>> drop(fails.remote())  # no "Unhandled error" on stderr
    """
    future = getattr(ref, "future", None)
    if future is not None:
        future()  # a callback reads the result; nobody keeps the future


def get_all(ray: Any, refs: list[Any], timeout: float | None = None) -> list[Any]:
    """``ray.get(refs, timeout=timeout)``, letting go of every reference (:func:`drop`) on error.

    ``ray.get`` of a list raises the first error it meets (or its timeout) and leaves the other
    results unread: a second failed task would be reported as an "Unhandled error" once its
    reference went away, the error raised being only the first.

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... def fails(i):
        ...     raise ValueError(f"task {i}")
        >>> try:
        ...     get_all(ray, [fails.remote(i) for i in range(3)])
        ... except ValueError:
        ...     print("raised")  # the others' errors are read, none reported unhandled
        raised
    """
    try:
        return list(ray.get(refs, timeout=timeout))
    except BaseException:
        for ref in refs:
            drop(ref)
        raise

"""A ``RunnerGroup.sample(..., timeout_s=...)`` deadline: a request not back by then is lost.

Kept apart from :mod:`episodes.distributed.group` to keep the group small. A request too slow
for the deadline fails as a crashed runner's does (a ``TimeoutError`` in place of Ray's error):
the group records a :class:`~episodes.distributed.LostSample`, kills the actor (a runner stuck in
an env step or a deadlocked policy never answers) and starts a fresh one.

Example:
    >>> Deadline(None).left() is None  # no deadline: every wait as long as it takes
    True
    >>> Deadline(0).left()
    0.0
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from episodes.distributed.slots import Slot, stuck_replacements

__all__ = ["Deadline", "stuck_before"]


class Deadline:
    """The moment ``timeout_s`` seconds from now (None: no deadline).

    Args:
        timeout_s: Seconds from now (a checked ``timeout_s``: None or a float >= 0).

    Example:
        >>> deadline = Deadline(60.0)
        >>> 0 < deadline.left() <= 60.0
        True
    """

    def __init__(self, timeout_s: float | None):
        self.timeout_s = timeout_s
        self.at = None if timeout_s is None else time.monotonic() + timeout_s

    def left(self) -> float | None:
        """Seconds until the deadline (0.0 once passed; None: no deadline).

        Example:
            >>> Deadline(0).left(), Deadline(None).left()
            (0.0, None)
        """
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def get(self, ray: Any, ref: Any) -> Any:
        """``ray.get(ref)``, waiting no longer than the deadline.

        Raises:
            TimeoutError: ``ref`` is not ready by the deadline (one already done is returned,
                however late).

        Example:
            >>> import ray
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> Deadline(0).get(ray, ray.put(3))  # done: no wait needed
            3
            >>> @ray.remote(num_cpus=0)
            ... def late():
            ...     time.sleep(0.5)
            >>> ref = late.remote()
            >>> Deadline(0).get(ray, ref)
            Traceback (most recent call last):
            ...
            TimeoutError: no reply within sample's timeout_s=0 s: counted as lost
            >>> ray.get(ref)  # no deadline
        """
        if self.at is None:
            return ray.get(ref)
        try:
            return ray.get(ref, timeout=self.left())
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"no reply within sample's timeout_s={self.timeout_s} s: counted as lost"
            ) from None


def stuck_before(
    ray: Any, slots: Sequence[Slot], start_timeout_s: float | None, deadline: Deadline
) -> list[Slot]:
    """The replacement actors among ``slots`` stuck in their start (``stuck_replacements``).

    Their wait ends at ``start_timeout_s`` or at the deadline, whichever comes first. When the
    deadline comes first none counts as stuck: a replacement not started by then makes its
    request too slow, which the group loses (and restarts) as any other slow request.

    Example:
        >>> stuck_before(None, [Slot(index=0, generation=0, handle=None, num_envs=1)], 300.0,
        ...              Deadline(1.0))
        []
    """
    left = deadline.left()
    if left is None or (start_timeout_s is not None and start_timeout_s <= left):
        return stuck_replacements(ray, slots, start_timeout_s)
    stuck_replacements(ray, slots, left)  # forgets the started ones' first calls
    return []

"""A warning, once per runner, when next-step carry-over makes the data handed out old.

In next-step mode every call hands out exactly ``num_steps`` transitions per sub-env, and a
reset step records none, so sub-envs that reset less often than others record transitions a
later call hands out. With sub-envs alike the backlog grows like the square root of the calls;
with sub-envs whose episodes end at different rates (a per-env exploration rate, per-env task
variants) it grows linearly, and so do the memory the blocks hold, each call's cost and the
age of what is handed out (at 3,000 calls of 16 steps, transitions 158 calls old). On-policy
training then learns from an old policy's data. ``window="vector_steps"`` hands out what each
vector step recorded instead: nothing is carried.

The recorder counts the rows waiting (``BatchedRecorder.waiting``) and ``EnvRunner.sample``
warns as the last thing it does, once the call is complete, pointing at the line that called
``sample``: a filter that turns the warning into an error (``-W error``) raises it from a
runner that stays usable (the next call goes on; the raising call's chunks are not handed out).

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_backlog(carried=20 * 16, num_steps=16, warned=False)
    True
    >>> len(seen), seen[0].category.__name__
    (1, 'RuntimeWarning')
"""

from __future__ import annotations

import warnings

__all__ = ["BACKLOG_CALLS", "MIN_BACKLOG", "backlog_due", "warn_backlog"]

#: Calls' worth of rows a sub-env may carry before the runner warns.
BACKLOG_CALLS = 16
#: Rows a sub-env may carry in any case: at a few steps per call, sub-envs alike drift apart
#: that far by chance alone over a long run (like the square root of the calls).
MIN_BACKLOG = 256


def backlog_due(carried: int, num_steps: int) -> bool:
    """Whether ``carried`` rows waiting in a sub-env exceed the bound (and call for the warning).

    Example:
        >>> backlog_due(256, 1), backlog_due(257, 1), backlog_due(16 * 64 + 1, 64)
        (False, True, True)
    """
    return carried > max(BACKLOG_CALLS * num_steps, MIN_BACKLOG)


def warn_backlog(*, carried: int, num_steps: int, warned: bool, stacklevel: int = 2) -> bool:
    """Warns (once: ``warned`` says whether it did) when ``carried`` rows exceed the bound.

    Args:
        carried: The most rows a sub-env holds that a later call hands out.
        num_steps: The call's ``num_steps``.
        warned: Whether the runner warned before (then nothing is said).
        stacklevel: As ``warnings.warn``'s, seen from the caller: 1 names the line calling
            ``warn_backlog``, 2 (the default) the line that called that caller.

    Returns:
        Whether the runner has warned now or before.

    Example:
        >>> warn_backlog(carried=10, num_steps=8, warned=False)
        False
    """
    if warned or not backlog_due(carried, num_steps):
        return warned
    warnings.warn(
        f"EnvRunner (next-step autoreset): a sub-env holds {carried} transitions recorded by "
        f"earlier calls, more than {BACKLOG_CALLS} calls' worth of {num_steps}: its episodes "
        "ended less often than others', so what a call hands out is that old (where sub-envs "
        "end episodes at different rates it grows with every call, and so do the memory held "
        "and each call's cost). window='vector_steps' carries nothing over; this is said "
        "once per runner",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )
    return True

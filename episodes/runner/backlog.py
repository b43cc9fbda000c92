"""A warning, once per runner, when next-step carry-over makes the data handed out old.

In next-step mode every call hands out exactly ``num_steps`` transitions per sub-env, and a
reset step records none, so sub-envs that reset less often than others record transitions a
later call hands out. With sub-envs alike the backlog grows like the square root of the calls;
with sub-envs whose episodes end at different rates (a per-env exploration rate, per-env task
variants) it grows linearly, and so do the memory the blocks hold, each call's cost and the
age of what is handed out (at 3,000 calls of 16 steps, transitions 158 calls old). On-policy
training then learns from an old policy's data. ``window="vector_steps"`` hands out what each
vector step recorded instead: nothing is carried.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_backlog(carried=20 * 8, num_steps=8, warned=False)
    True
    >>> len(seen), seen[0].category.__name__
    (1, 'RuntimeWarning')
"""

from __future__ import annotations

import warnings

__all__ = ["BACKLOG_CALLS", "warn_backlog"]

#: Calls' worth of rows a sub-env may carry before the runner warns.
BACKLOG_CALLS = 16


def warn_backlog(*, carried: int, num_steps: int, warned: bool) -> bool:
    """Warns (once: ``warned`` says whether it did) when ``carried`` rows exceed the bound.

    Returns:
        Whether the runner has warned now or before.

    Example:
        >>> warn_backlog(carried=10, num_steps=8, warned=False)
        False
    """
    if warned or carried <= BACKLOG_CALLS * max(num_steps, 1):
        return warned
    warnings.warn(
        f"EnvRunner (next-step autoreset): a sub-env holds {carried} transitions recorded by "
        f"earlier calls, more than {BACKLOG_CALLS} calls' worth of {num_steps}: its episodes "
        "end less often than others', so what a call hands out grows ever older (and the "
        "memory held and each call's cost grow with it). window='vector_steps' carries "
        "nothing over; this is said once per runner",
        RuntimeWarning,
        stacklevel=4,
    )
    return True

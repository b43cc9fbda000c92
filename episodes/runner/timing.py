"""When the runner recorded each observation row: the chunks' ``start_time`` and ``last_step_time``.

:class:`~episodes.episode.SingleAgentEpisode` reads ``time.perf_counter`` when it records its
reset observation (``start_time``) and after every step (``last_step_time``); a successor of
``cut`` has no clock until its first step, whose time becomes its ``start_time`` too. The runner
reads the same clock once per vector step instead of once per sub-env: ``times[r + 1]`` is when
the observations of step row ``r`` were recorded, ``times[0]`` when the first reset's were. It is
a host array even for blocks on a torch device (a device step is timed when it is queued: the
clock never waits for the device). A chunk's two times are then lookups, for every chunk of a
call at once (:func:`chunk_times`), and they are those its steps recorded one by one would have:

* a chunk that starts its episode (``t_started == 0``) starts at its reset observation's time;
* a chunk that continues one (the next call's chunk, as ``cut`` leaves it) starts at its first
  step's time;
* either ends at its last step's time.

So ``concat_episode`` of an episode's consecutive chunks spans its reset to its last step, and
``get_duration_s()`` of a chunk of two or more steps is positive.

Example:
    >>> times = new_times(4)
    >>> times[:4] = [10.0, 11.0, 12.0, 13.0]  # the reset, then steps 0, 1 and 2
    >>> first, stop, t_started = np.array([0, 1]), np.array([1, 3]), np.array([0, 3])
    >>> start, last = chunk_times(times, first, stop, t_started)
    >>> start.tolist(), last.tolist()  # a 1-step new episode, a 2-step continuation
    ([10.0, 12.0], [11.0, 13.0])
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["chunk_times", "new_times", "now", "resized_times", "shifted_times"]

#: The clock of :class:`~episodes.episode.SingleAgentEpisode`'s ``start_time`` and
#: ``last_step_time``.
now = time.perf_counter


def new_times(step_rows: int) -> np.ndarray:
    """The times of ``step_rows + 1`` observation rows, NaN (no time) until written.

    Example:
        >>> new_times(2).tolist()
        [nan, nan, nan]
    """
    return np.full(step_rows + 1, np.nan)


def resized_times(times: np.ndarray, step_rows: int) -> np.ndarray:
    """The times of blocks grown (or cut) to ``step_rows`` step rows, the first rows kept.

    Example:
        >>> resized_times(np.array([1.0, 2.0]), 2).tolist()
        [1.0, 2.0, nan]
    """
    out = new_times(step_rows)
    keep = min(len(out), len(times))
    out[:keep] = times[:keep]
    return out


def shifted_times(times: np.ndarray, first: int, stop: int, step_rows: int) -> np.ndarray:
    """The times of blocks of ``step_rows`` step rows starting with step rows ``first:stop``.

    Like the observations, one row more than the step rows is carried: ``first:stop + 1``.

    Example:
        >>> shifted_times(np.array([1.0, 2.0, 3.0, 4.0]), 2, 3, 2).tolist()
        [3.0, 4.0, nan]
    """
    out = new_times(step_rows)
    out[: stop - first + 1] = times[first : stop + 1]
    return out


def chunk_times(
    times: np.ndarray | None, first: np.ndarray, stop: np.ndarray, t_started: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk's ``start_time`` and ``last_step_time`` (NaN: none), by the module's rules.

    ``first``/``stop`` are the chunks' step rows, ``t_started`` their episode's age at
    ``first`` (0: the chunk holds the episode's reset observation, in row ``first``).

    Example:
        >>> times = np.array([0.0, 1.0, 2.0])
        >>> [t.tolist() for t in chunk_times(times, np.array([1]), np.array([2]), np.array([5]))]
        [[2.0], [2.0]]
    """
    if times is None:  # blocks made without times
        nothing = np.full(len(first), np.nan)
        return nothing, nothing.copy()
    continues = (t_started != 0).astype(first.dtype)
    return times[first + continues], times[stop]

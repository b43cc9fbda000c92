"""The writers' check of an encoded episode's clocks: JSON stores no NaN or infinity.

A clock is a ``time.perf_counter`` reading; ``from_state`` and ``from_fields`` refuse one that
is not finite, but an episode can still get one by other ways (``ep._start_time = nan``, an
unpickled state), and the writers must refuse it at ``write`` before anything is written or
buffered: a shard's index or a chunk's ``meta.json`` holding it could not be committed.
"""

from __future__ import annotations

import math
from typing import Any

from episodes.io.errors import UnstorableValueError

__all__ = ["check_clocks"]

CLOCK_KEYS = ("start_time", "last_step_time")


def check_clocks(meta: dict[str, Any], id_: Any) -> None:
    """Raises if an encoded episode's ``meta`` holds a clock that is not a finite number.

    Raises:
        UnstorableValueError: ``start_time`` or ``last_step_time`` is NaN or infinite; the
            message names the field and the episode.

    Example:
        >>> check_clocks({"start_time": 1.5, "last_step_time": None}, "a")
        >>> check_clocks({"start_time": float("nan"), "last_step_time": None}, "a")
        Traceback (most recent call last):
        ...
        episodes.io.errors.UnstorableValueError: episode 'a': start_time is nan, ...
    """
    for key in CLOCK_KEYS:
        value = meta.get(key)
        if value is not None and not math.isfinite(value):
            raise UnstorableValueError(
                f"episode {id_!r}: {key} is {value!r}, which no dataset stores (JSON has no "
                "NaN or infinity); a clock must be a finite number or None"
            )

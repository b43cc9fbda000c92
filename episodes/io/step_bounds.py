"""A piece's step bound (``Dataset.steps``' ``start``/``stop``) as an int in its steps."""

from __future__ import annotations

from episodes.indexing import as_int

__all__ = ["step_bound"]


def step_bound(bound: int | None, what: str, length: int, default: int) -> int:
    """``bound`` as an int in ``length`` steps (negative: from the end), None ``default``.

    Example:
        >>> step_bound(-1, "stop", 5, 5), step_bound(None, "start", 5, 0)
        (4, 0)
    """
    if bound is None:
        return default
    value = as_int(bound, what=f"{what} step")  # True is no step 1, nor 1.0: as for episodes
    return value + length if value < 0 else value

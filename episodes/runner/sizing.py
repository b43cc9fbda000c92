"""A call's blocks too big to allocate: a ``ValueError`` naming ``num_steps``.

A ``sample(num_steps)`` allocates every field's block for about ``num_steps`` rows before the
env steps. A ``num_steps`` no memory holds (``2**40``, or ``2**70``, beyond what numpy or torch
can even describe) would fail in their words (numpy's ``MemoryError`` or "Maximum allowed
dimension exceeded", torch's "can't allocate memory" or an overflow) without naming the
argument that asked for it.

Example:
    >>> import numpy as np
    >>> with allocating(2**70):  # doctest: +ELLIPSIS
    ...     np.empty((2**70, 2))
    Traceback (most recent call last):
    ValueError: num_steps=1180591620717411303424: too many steps for one call, whose blocks ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from episodes.errors import too_big_to_allocate

__all__ = ["allocating"]


@contextmanager
def allocating(num_steps: int) -> Iterator[None]:
    """Turns the errors of an allocation too big for ``num_steps`` into a ``ValueError``.

    Wraps a recorder's ``begin`` (before the env steps, so the runner is left as it was).

    Raises:
        ValueError: The blocks could not be allocated (``MemoryError``, or numpy's and torch's
            errors for sizes they cannot hold); the message names ``num_steps``.

    Example:
        >>> with allocating(10):
        ...     pass
    """
    try:
        yield
    except (MemoryError, OverflowError, ValueError, RuntimeError, TypeError) as err:
        if not too_big_to_allocate(err):
            raise
        raise ValueError(
            f"num_steps={num_steps}: too many steps for one call, whose blocks (every field, "
            f"about num_steps rows) cannot be allocated ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); sample fewer steps per call"
        ) from err

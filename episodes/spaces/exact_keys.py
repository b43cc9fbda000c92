"""A hashable key of a space's exact contents, for telling equal copies apart from ``==``.

Gymnasium's ``==`` on a ``Box`` calls ``np.allclose`` on both bounds (tens of microseconds).
Episodes unpickled one by one each carry their own copy of the same space, and a conversion
asks whether they agree once per copy: a key that is the same exactly where the contents are
the same bit for bit answers that in a dict lookup. Equal keys imply ``a == b``; different
keys imply nothing (``-0.0`` and ``0.0`` bounds differ here but are equal to ``==``), so
callers ask ``==`` then. Only gymnasium's own classes get a key: a subclass may define its own
``==``.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import singledispatch
from typing import Any

import numpy as np
from gymnasium import spaces as gs

__all__ = ["exact_key"]


def exact_key(space: Any) -> Hashable | None:
    """A key equal for two spaces whose contents are the same bit for bit, else None.

    None for spaces this cannot vouch for: other classes (subclasses included), a Box whose
    bounds hold NaN (``np.allclose`` finds NaN unequal to itself), and composites holding such
    a part. Keys of two spaces that are equal imply the spaces compare equal with ``==``.

    Example:
        >>> a = gs.Box(-1.0, 1.0, (3,), np.float32)
        >>> exact_key(a) == exact_key(gs.Box(-1.0, 1.0, (3,), np.float32))
        True
        >>> exact_key(a) == exact_key(gs.Box(-1.0, 2.0, (3,), np.float32))
        False
        >>> odd = gs.Box(0.0, 1.0, (1,))
        >>> odd.low[0] = np.nan  # gymnasium refuses a NaN bound when made, not afterwards
        >>> exact_key(odd) is None, exact_key(gs.Sequence(gs.Discrete(2))) is None
        (True, True)
    """
    if type(space) not in _KEYED:
        return None
    return _key(space)


@singledispatch
def _key(space: Any) -> Hashable | None:
    return None


@_key.register
def _(space: gs.Box) -> Hashable | None:
    low, high = np.asarray(space.low), np.asarray(space.high)
    if low.dtype.kind in "fc" and (np.isnan(low).any() or np.isnan(high).any()):
        return None
    return ("Box", space.shape, space.dtype, low.dtype, low.tobytes(), high.dtype, high.tobytes())


@_key.register
def _(space: gs.Discrete) -> Hashable | None:
    return ("Discrete", int(space.n), int(space.start), space.dtype)


@_key.register
def _(space: gs.MultiDiscrete) -> Hashable | None:
    nvec, start = np.asarray(space.nvec), np.asarray(space.start)
    return ("MultiDiscrete", space.shape, space.dtype, nvec.dtype, nvec.tobytes(), start.tobytes())


@_key.register
def _(space: gs.MultiBinary) -> Hashable | None:
    n = space.n  # an int, or a tuple of ints: gymnasium's == tells 3 from (3,)
    if isinstance(n, tuple):
        return ("MultiBinary", tuple(int(side) for side in n))
    return ("MultiBinary", "int", int(n)) if isinstance(n, (int, np.integer)) else None


@_key.register
def _(space: gs.Text) -> Hashable | None:
    return ("Text", space.min_length, space.max_length, space.character_set)


@_key.register
def _(space: gs.Dict) -> Hashable | None:
    # In the parts' order: spaces equal in another order get other keys (then ``==`` decides).
    parts = tuple((name, exact_key(part)) for name, part in space.spaces.items())
    if any(key is None for _, key in parts):
        return None
    return ("Dict", parts)


@_key.register
def _(space: gs.Tuple) -> Hashable | None:
    parts = tuple(exact_key(part) for part in space.spaces)
    return None if any(key is None for key in parts) else ("Tuple", parts)


_KEYED = frozenset(
    {gs.Box, gs.Discrete, gs.MultiDiscrete, gs.MultiBinary, gs.Text, gs.Dict, gs.Tuple}
)

"""The seed checks every seeded object shares: the runner, its policy, the replay buffers, a group.

The base rule: a seed is None or an int >= 0 (numpy ints taken). A float, a bool or a string is
refused, not truncated: ``seed=1.5`` or ``seed=True`` would otherwise run quietly as seed 1, and
a negative seed would fail later inside gymnasium or numpy. Each consumer also takes the other
forms its library takes, every int in them checked by the same rule: one seed per sub-env
(:func:`check_env_seed`), a list or dict of seeds for a Tuple or Dict space
(:func:`check_space_seed`), and what ``np.random.default_rng`` takes (:func:`check_rng_seed`).

Example:
    >>> check_seed(7), check_seed(None), check_env_seed([1, 2], 2)
    (7, None, [1, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from episodes.indexing import whole_number

__all__ = ["check_env_seed", "check_rng_seed", "check_seed", "check_space_seed"]

_BASE = "seed must be None or an int >= 0"
_NUMPY_FORMS = (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)


def check_seed(seed: Any) -> int | None:
    """``seed`` as a seed: None, or an int >= 0 (numpy ints taken, returned as ``int``).

    Raises:
        ValueError: Anything else (a float, a bool, a string, a negative int).

    Example:
        >>> import numpy as np
        >>> check_seed(None), check_seed(np.int64(3))
        (None, 3)
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, got -1
        >>> check_seed(True)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, got True
    """
    return _leaf(seed, seed, _BASE, none_ok=True)


def check_env_seed(seed: Any, num_envs: int) -> int | list[int | None] | None:
    """``seed`` as a vector env's reset seed: :func:`check_seed`'s, or one per sub-env.

    One per sub-env is a list or tuple of ``num_envs`` seeds, each None or an int >= 0 (as
    ``VectorEnv.reset`` takes); it comes back as a list of ``int`` and None.

    Raises:
        ValueError: Anything else (a float, a bool, a negative int, a list of another length
            or holding one of those).

    Example:
        >>> import numpy as np
        >>> check_env_seed(3, 2), check_env_seed((np.int64(4), None), 2)
        (3, [4, None])
        >>> check_env_seed([1, 2, 3], 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, or a list of 2 of those ... got [1, 2, 3]
    """
    message = f"{_BASE}, or a list of {num_envs} of those (one per sub-env)"
    if isinstance(seed, (list, tuple)):
        if len(seed) != num_envs:  # VectorEnv.reset would refuse it only at the first sample
            raise ValueError(f"{message}, got {seed!r}")
        return [_leaf(one, seed, message, none_ok=True) for one in seed]
    return _leaf(seed, seed, message, none_ok=True)


def check_space_seed(seed: Any) -> Any:
    """``seed`` as ``gymnasium.Space.seed`` takes it: :func:`check_seed`'s, or nested seeds.

    A Tuple space also takes a list or tuple of seeds, one per subspace, a Dict space a dict
    of them by key, nested as the space is; every seed in them is None or an int >= 0, numpy
    ints given back as ``int`` (gymnasium refuses them). Whether the nesting fits the space is
    for ``Space.seed`` to say.

    Raises:
        ValueError: A float, a bool, a string or a negative int, at any depth.

    Example:
        >>> import numpy as np
        >>> check_space_seed({"a": np.int64(1), "b": [2, None]})
        {'a': 1, 'b': [2, None]}
        >>> check_space_seed({"a": 1.5})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, or a list / tuple / dict ... got {'a': 1.5}
    """
    message = f"{_BASE}, or a list / tuple / dict of those (for Tuple / Dict spaces)"

    def nested(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: nested(one) for key, one in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(nested(one) for one in value)
        return _leaf(value, seed, message, none_ok=True)

    return nested(seed)


def check_rng_seed(seed: Any) -> Any:
    """``seed`` as ``np.random.default_rng`` takes it: :func:`check_seed`'s, or numpy's forms.

    Also taken, as they are: a list, tuple or 1-d array of ints >= 0, and a numpy
    ``SeedSequence``, ``BitGenerator`` or ``Generator`` (a ``Generator`` is used itself, not
    copied).

    Raises:
        ValueError: Anything else (a float, a bool, a string, a negative int, a list holding
            one of those).

    Example:
        >>> import numpy as np
        >>> check_rng_seed([1, np.int64(2)]), type(check_rng_seed(np.random.SeedSequence(0)))
        ([1, 2], <class 'numpy.random.bit_generator.SeedSequence'>)
        >>> check_rng_seed([1, -2])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, a list of ints >= 0, ... got [1, -2]
    """
    if isinstance(seed, _NUMPY_FORMS):
        return seed
    message = f"{_BASE}, a list of ints >= 0, or a numpy SeedSequence, BitGenerator or Generator"
    if isinstance(seed, (list, tuple)) or (isinstance(seed, np.ndarray) and seed.ndim == 1):
        return [_leaf(one, seed, message, none_ok=False) for one in seed]
    return _leaf(seed, seed, message, none_ok=True)


def _leaf(value: Any, seed: Any, message: str, *, none_ok: bool) -> int | None:
    """``value`` (a part of ``seed``) as None or an int >= 0, else ``message`` naming ``seed``."""
    if value is None and none_ok:
        return None
    try:
        return whole_number(value, "seed", 0)
    except ValueError:
        raise ValueError(f"{message}, got {seed!r}") from None

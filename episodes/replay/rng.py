"""The sampling generator of a replay buffer: one its state and saves can restore.

A buffer's state and saves hold ``rng.bit_generator.state``, and
:func:`episodes.replay.state.generator_from_state` rebuilds the generator from the bit
generator class that state names, looked up among numpy's own (``np.random.PCG64`` and the
others). A generator over any other bit generator (a subclass of one of numpy's, a third
party's) would sample, but its state would not restore and its saves would not load: it is
refused where it is given, before the buffer exists.

Example:
    >>> type(sampling_generator(0).bit_generator).__name__
    'PCG64'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.seeds import check_rng_seed

__all__ = ["checked_generator", "numpy_bit_generators", "sampling_generator"]


def numpy_bit_generators() -> list[str]:
    """The names of numpy's own bit generator classes (those a state can name).

    Example:
        >>> "PCG64" in numpy_bit_generators(), "BitGenerator" in numpy_bit_generators()
        (True, False)
    """
    return sorted(
        name
        for name, kind in vars(np.random).items()
        if isinstance(kind, type)
        and issubclass(kind, np.random.BitGenerator)
        and kind is not np.random.BitGenerator
    )


def sampling_generator(seed: Any) -> np.random.Generator:
    """``np.random.default_rng(seed)`` (a ``Generator`` used itself), refused unless restorable.

    Raises:
        ValueError: A seed ``check_rng_seed`` refuses.
        TypeError: A ``Generator`` or ``BitGenerator`` whose bit generator is not one of
            numpy's own classes (see :func:`checked_generator`).

    Example:
        >>> class Mine(np.random.PCG64):
        ...     pass
        >>> sampling_generator(Mine(1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: seed: a generator over the bit generator class Mine (a subclass of PCG64): ...
    """
    return checked_generator(np.random.default_rng(check_rng_seed(seed)), "seed")


def checked_generator(rng: Any, what: str) -> np.random.Generator:
    """``rng``, refused unless a numpy ``Generator`` over one of numpy's own bit generators.

    Raises:
        TypeError: Anything else, naming ``what``, the bit generator's class and the
            supported ones.

    Example:
        >>> rng = np.random.Generator(np.random.MT19937(0))
        >>> checked_generator(rng, "rng") is rng
        True
    """
    bits = getattr(rng, "bit_generator", None) if isinstance(rng, np.random.Generator) else None
    kind = type(bits)
    if bits is not None and getattr(np.random, kind.__name__, None) is kind:
        return rng
    if bits is None:
        got = f"no numpy Generator but a {type(rng).__name__}"
    else:
        bases = [base.__name__ for base in kind.__mro__[1:] if base.__module__.startswith("numpy")]
        got = f"a generator over the bit generator class {kind.__name__}" + (
            f" (a subclass of {bases[0]})" if bases else ""
        )
    raise TypeError(
        f"{what}: {got}: a replay buffer's state and saves restore its generator by the bit "
        f"generator's name, so only numpy's own are supported ({', '.join(numpy_bit_generators())}"
        "); seed it with one of those, e.g. np.random.Generator(np.random.PCG64(seed))"
    )

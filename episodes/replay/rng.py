"""The sampling generator of a replay buffer: one its state and saves can restore.

A buffer's state and saves hold ``rng.bit_generator.state``, and
:func:`generator_from_state` rebuilds the generator from the bit generator class that state
names, looked up among numpy's own (``np.random.PCG64`` and the others). A generator over any
other bit generator (a subclass of one of numpy's, a third party's) would sample, but its state
would not restore and its saves would not load: it is refused where it is given, before the
buffer exists.

numpy's state setters check little: an MT19937 ``pos`` of ``10**6`` or a Philox ``buffer_pos``
below 0 is taken, and the next draw reads outside the generator's arrays (garbage, or a
segmentation fault). Every field of a state is therefore checked against what the bit
generator's own states hold before numpy sees it.

Example:
    >>> type(sampling_generator(0).bit_generator).__name__
    'PCG64'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.seeds import check_rng_seed

__all__ = [
    "checked_generator",
    "generator_from_state",
    "numpy_bit_generators",
    "sampling_generator",
]


def numpy_bit_generators() -> list[str]:
    """The names of numpy's own bit generator classes (those a state can name).

    Example:
        >>> "PCG64" in numpy_bit_generators(), "BitGenerator" in numpy_bit_generators()
        (True, False)
    """
    # Those whose states are checked (all of numpy's own today): a state of another one could
    # not be restored safely, so a buffer refuses a generator over it where it is given.
    return sorted(
        name
        for name, kind in vars(np.random).items()
        if isinstance(kind, type)
        and issubclass(kind, np.random.BitGenerator)
        and kind is not np.random.BitGenerator
        and name in _STATE_FIELDS
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
    if (
        bits is not None
        and getattr(np.random, kind.__name__, None) is kind
        and kind.__name__ in _STATE_FIELDS
    ):
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


def generator_from_state(state: Any) -> np.random.Generator:
    """A generator in ``state`` (a ``bit_generator.state``), of the bit generator it names.

    The buffer's generator may be any numpy bit generator (``seed=Generator(MT19937(0))``):
    a PCG64 would refuse an MT19937 state. Only numpy's bit generator classes are looked up
    by name; arrays of the state may come as lists (a state read back from JSON). Every field
    is checked first (its type, length and range: those the bit generator's states hold), as
    numpy takes positions that make the next draw read out of bounds.

    Raises:
        ValueError: No dict, a name that is no numpy bit generator, or a state numpy refuses
            or would take but cannot use (the message names the field).

    Example:
        >>> rng = np.random.Generator(np.random.MT19937(0)); _ = rng.random()
        >>> again = generator_from_state(rng.bit_generator.state)
        >>> type(again.bit_generator).__name__, again.random() == rng.random()
        ('MT19937', True)
        >>> state = rng.bit_generator.state; state["state"]["pos"] = 10**6
        >>> generator_from_state(state)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: a MT19937 state ...: state['pos'] must be an int in 0 .. 624, got 1000000
        >>> state["state"]["pos"], state["state"]["key"] = 0, [0] * 624
        >>> generator_from_state(state)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: a MT19937 state numpy cannot use: its 19937 state bits are all zero ...
    """
    name = state.get("bit_generator") if isinstance(state, dict) else None
    kind = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise ValueError(f"the generator state names no numpy bit generator: {name!r}")
    if name not in _STATE_FIELDS:  # a bit generator of a later numpy: its fields are unknown
        raise ValueError(f"a {name} state cannot be checked, so it is not restored")
    try:
        _check_fields(state, _STATE_FIELDS[name], "")
    except ValueError as err:
        raise ValueError(f"a {name} state numpy refuses or cannot use: {err}") from None
    if name == "MT19937" and _mt_degenerate(state["state"]["key"]):
        # No seeding reaches it: such a generator draws only zeros, and a bounded draw that
        # rejects 0 would wait for another value forever.
        raise ValueError(
            "a MT19937 state numpy cannot use: its 19937 state bits are all zero (the top bit "
            "of key[0] and every other key word), so it would draw nothing but zeros"
        )
    rng = np.random.Generator(kind())
    try:
        rng.bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise ValueError(f"a {name} state numpy refuses ({err})") from None
    return rng


# A field's rule: (low, high) for an int in low .. high - 1, (count, bits) in a list for
# ``count`` unsigned ints of ``bits`` bits, a dict for a nested dict. Read off numpy's states.
_FLAGS: dict[str, Any] = {"has_uint32": (0, 2), "uinteger": (0, 2**32)}
_PCG = {"state": {"state": (0, 2**128), "inc": (1, 2**128)}, **_FLAGS}
_STATE_FIELDS: dict[str, dict[str, Any]] = {
    "MT19937": {"state": {"key": [(624, 32)], "pos": (0, 625)}},
    "PCG64": _PCG,
    "PCG64DXSM": _PCG,
    "Philox": {
        "state": {"counter": [(4, 64)], "key": [(2, 64)]},
        "buffer": [(4, 64)],
        "buffer_pos": (0, 5),
        **_FLAGS,
    },
    "SFC64": {"state": {"state": [(4, 64)]}, **_FLAGS},
}


def _mt_degenerate(key: Any) -> bool:
    """Whether an MT19937 key holds the all-zero state (key[0]'s low 31 bits are not state)."""
    words = np.asarray(key, dtype=np.uint64)
    return not (int(words[0]) & 0x80000000) and not words[1:].any()


def _check_fields(state: Any, fields: dict[str, Any], where: str) -> None:
    """Refuses ``state`` unless each field of ``fields`` is there and follows its rule."""
    if not isinstance(state, dict):
        raise ValueError(f"{where or 'the state'} must be a dict, got {type(state).__name__}")
    for key, rule in fields.items():
        name = f"{where}[{key!r}]" if where else key
        if key not in state:
            raise ValueError(f"{name} is missing")
        value = state[key]
        if isinstance(rule, dict):
            _check_fields(value, rule, name)
        elif isinstance(rule, list):
            _check_uints(value, name, *rule[0])
        else:
            _check_int(value, name, *rule)
            if key == "inc" and not int(value) % 2:  # numpy makes every increment odd
                raise ValueError(f"{name} must be odd, got {value}")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_int(value: Any, name: str, low: int, high: int) -> None:
    if not _is_int(value) or not low <= int(value) < high:
        raise ValueError(f"{name} must be an int in {low} .. {high - 1}, got {value!r:.80}")


def _check_uints(value: Any, name: str, count: int, bits: int) -> None:
    """``count`` ints in ``0 .. 2**bits - 1``: an integer array, or a list of ints (JSON's)."""
    if isinstance(value, np.ndarray):
        good = value.dtype.kind in "iu" and value.shape == (count,)
        low, high = (int(value.min()), int(value.max())) if good else (0, 0)
    elif isinstance(value, (list, tuple)):  # Python ints: uint64 values do not fit int64
        good = len(value) == count and all(map(_is_int, value))
        low, high = (int(min(value)), int(max(value))) if good else (0, 0)
    else:
        good, low, high = False, 0, 0
    if not good or low < 0 or high >= 2**bits:
        raise ValueError(
            f"{name} must be {count} ints in 0 .. 2**{bits} - 1 (an array or list), got "
            f"{value!r:.80}"
        )

"""Filler items: placeholders shaped like a space's items, used to pad out-of-range reads."""

from __future__ import annotations

import math
import numbers
from functools import singledispatch
from typing import Any

import numpy as np
from gymnasium import spaces as gs

from episodes.indexing import as_int
from episodes.structs import flatten, is_nested, map_leaves

__all__ = ["filler_batch", "filler_item", "filler_leaf", "refuse_cut_fill", "text_dtype"]


def text_dtype(width: int) -> np.dtype[Any]:
    """The string dtype of ``width`` characters; a ``TypeError`` where numpy has none.

    numpy 2 refuses a string dtype wider than its item sizes go; numpy 1 returned one whose
    item size had wrapped around (``<U10**9`` took -294967296 bytes an item).

    Example:
        >>> text_dtype(3)
        dtype('<U3')
        >>> text_dtype(10**9)
        Traceback (most recent call last):
        TypeError: numpy has no strings 1000000000 characters wide
    """
    try:
        dtype = np.dtype(f"<U{width}")
    except TypeError:
        dtype = None
    if dtype is None or dtype.itemsize != 4 * width:
        raise TypeError(f"numpy has no strings {width} characters wide")
    return dtype


def filler_item(space: gs.Space[Any] | None, fill: Any, *, one_hot_discrete: bool = False) -> Any:
    """Build one item of ``space``'s structure whose every leaf is ``fill``.

    Leaves take the shape and dtype of their space: ``Box``/``MultiBinary``/``MultiDiscrete``
    give ``np.full(shape, fill, dtype)``, ``Discrete`` a 0-dim array of its dtype. With
    ``one_hot_discrete`` a ``Discrete``/``MultiDiscrete`` leaf is instead an all-zero
    ("zero-hot") float32 vector of its one-hot length. Those number leaves take only a number
    or bool that their dtype keeps (not ``"1"``, None, NaN into ints or a complex number): else
    ``ValueError``. A ``Text`` leaf is ``fill``, which must be a string (a number would be a
    string in a numpy'd column and a number in a list one); a batch of them is as wide as
    ``max_length`` or ``fill``, whichever is longer.
    A space of one's own with a ``shape`` and a number ``dtype`` fills as a ``Box`` of them.
    Leaves of other spaces (``Sequence``, ``Graph``, ``OneOf``) are ``fill`` itself. ``Dict``
    gives a dict, ``Tuple`` a tuple.

    Args:
        space: The space of one item, or ``None``.
        fill: The fill value, e.g. ``0`` or ``np.nan``.
        one_hot_discrete: Whether discrete leaves are filled as zero-hot vectors.

    Returns:
        The filler item; ``fill`` itself when ``space`` is ``None``.

    Example:
        >>> import gymnasium as gym
        >>> sp = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "k": gym.spaces.Discrete(3)})
        >>> filler_item(sp, 0)
        {'k': array(0), 'pos': array([0., 0.], dtype=float32)}
        >>> filler_item(sp, 0, one_hot_discrete=True)["k"]
        array([0., 0., 0.], dtype=float32)
        >>> filler_item(sp, "1")
        Traceback (most recent call last):
        ValueError: fill='1' cannot fill a leaf of dtype int64 (not a number: <U1)
    """
    if space is None:
        return fill
    return _fill(space, fill, (), one_hot_discrete)


def filler_batch(
    space: gs.Space[Any] | None, fill: Any, n: int, *, one_hot_discrete: bool = False
) -> Any:
    """Build ``n`` filler items stacked leaf-wise along a new axis 0.

    The result equals batching ``n`` copies of :func:`filler_item`, built directly with one
    ``np.full`` per leaf (shape ``(n, *leaf_shape)``). Without a space that is ``fill`` stacked
    leaf by leaf, as :func:`~episodes.spaces.batch` stacks copies of it: a dict, tuple or list
    ``fill`` gives a dict, tuple or list of arrays, each leaf keeping its own numpy dtype.

    Args:
        space: The space of one item, or ``None`` (then ``fill`` is the item).
        fill: The fill value.
        n: How many items.
        one_hot_discrete: Whether discrete leaves are filled as zero-hot vectors.

    Returns:
        The batched filler structure.

    Raises:
        TypeError: ``n`` is no int (a bool, a float; numpy ints are taken).
        ValueError: ``n`` is negative.
        MemoryError: No array holds ``n`` such items.

    Example:
        >>> import gymnasium as gym
        >>> filler_batch(gym.spaces.Discrete(4), -1, 2)
        array([-1, -1])
        >>> filler_batch(gym.spaces.MultiDiscrete([2, 3]), 0, 1, one_hot_discrete=True)
        array([[0., 0., 0., 0., 0.]], dtype=float32)
        >>> filler_batch(None, {"h": np.zeros(2, np.float32), "c": np.int64(0)}, 2)["h"].shape
        (2, 2)
    """
    n = as_int(n, what="n")  # a bool or float count is the caller's bug, not the fill's
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if space is None:
        return _repeat(fill, (n,))
    return _fill(space, fill, (n,), one_hot_discrete)


def filler_leaf(shape: tuple[int, ...], fill: Any, dtype: Any) -> np.ndarray:
    """``np.full(shape, fill, dtype)`` by the rules of a filler leaf of that dtype.

    A number the dtype would change (NaN or 2.7 into ints, 2 into bools, 1e40 into float32)
    or anything but a number or bool is a ``ValueError``, as for the leaves of
    :func:`filler_item`; a finalized column's fillers take its own dtypes through this.

    Example:
        >>> filler_leaf((2,), 0.0, np.int64)
        array([0, 0])
        >>> filler_leaf((), 0.5, np.int64)
        Traceback (most recent call last):
        ValueError: fill=0.5 cannot fill a leaf of dtype int64 (the value changes in that dtype)
    """
    return _full((), tuple(shape), fill, np.dtype(dtype))


def _repeat(fill: Any, lead: tuple[int, ...]) -> Any:
    """``fill`` repeated along ``lead``, leaf by leaf: a dict fill is a dict of arrays."""
    if is_nested(fill):
        return map_leaves(lambda leaf: _repeat_leaf(leaf, lead), fill)
    return _repeat_leaf(fill, lead)


def _repeat_leaf(fill: Any, lead: tuple[int, ...]) -> np.ndarray:
    if 0 not in lead:
        _refuse_cut_text(fill)
    leaf = np.asarray(fill)
    shape = lead + leaf.shape
    _check_size(shape, leaf.dtype)
    return np.array(np.broadcast_to(leaf, shape))


def refuse_cut_fill(filler: Any) -> None:
    r"""Refuses a filler item with a text leaf ending in NUL, which numpy's strings would cut.

    A numpy'd read that stacks fillers (an index list, a slice) would read ``"x\x00"`` back as
    ``"x"``; :func:`filler_batch` refuses such a ``fill`` itself, and a read that stacks
    :func:`filler_item`'s items checks them with this first. A read of one filler (an int
    index) returns it whole, as list mode does.

    Raises:
        ValueError: A leaf is a string or bytes ending in NUL.

    Example:
        >>> refuse_cut_fill({"t": "ab", "n": np.zeros(2)})
        >>> refuse_cut_fill(("x\x00", 0))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: fill='x\x00' ends in NUL, which numpy's fixed-width strings drop: ...
    """
    for leaf in flatten(filler)[0]:
        _refuse_cut_text(leaf)


def _refuse_cut_text(fill: Any) -> None:
    r"""Refuses a string (bytes) ``fill`` ending in NUL, which numpy's strings would cut.

    A numpy'd read stacks its fillers into a fixed-width string array, which drops trailing
    NULs (``"x\x00"`` would read ``"x"``), as a numpy column refuses to store such a value.
    """
    if isinstance(fill, (str, bytes)) and fill[-1:] in ("\x00", b"\x00"):
        raise ValueError(
            f"fill={fill!r} ends in NUL, which numpy's fixed-width strings drop: a numpy'd "
            "read cannot pad with it (read the column in list mode, or give another fill)"
        )


# The most bytes one array may hold; numpy refuses more with a ValueError ("array is too big").
_MAX_BYTES = int(np.iinfo(np.intp).max)


def _check_size(shape: tuple[int, ...], dtype: Any) -> None:
    """Raise a ``MemoryError`` where no array of ``shape`` and ``dtype`` can exist.

    numpy's own error there is a ``ValueError``, which a fill check would report as a bad fill.
    A string dtype wider than numpy's strings (a ``Text(10**9)`` leaf) holds no item at all.
    """
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        raise MemoryError(f"no array holds items of dtype {dtype!r} (too wide)") from None
    if math.prod(shape) * itemsize > _MAX_BYTES:
        raise MemoryError(
            f"fillers of shape {shape} (the lead axes, then one item's) and dtype "
            f"{np.dtype(dtype)} do not fit in one array"
        )


def _full(
    lead: tuple[int, ...], item: tuple[int, ...], fill: Any, dtype: np.dtype[Any]
) -> np.ndarray:
    """``np.full(lead + item)``, refusing a number the dtype would change, as the columns do.

    NaN or 2.7 into ints, -1 into uint8, 1e40 into float32; anything but numbers and bools
    (numpy would parse "1" or "nan" into a number, and drop the imaginary part of 1+2j); and a
    fill that is not shaped like one item (or broadcasts to one): ``np.full`` would spread it
    over the items instead. A plain number's verdict is remembered (:func:`_verdict_key`); the
    array is built afresh on every call, so no two callers share one.
    """
    try:
        key = _verdict_key(fill, item, dtype)
        if key is None or key not in _VERDICTS:
            fill = _plain_number(fill)
            _check_fill(item, fill, dtype)
            if key is not None:
                if len(_VERDICTS) >= _MAX_VERDICTS:
                    _VERDICTS.clear()
                _VERDICTS[key] = True
        _check_size(lead + item, dtype)  # a MemoryError: the fill is fine
        return np.full(lead + item, fill, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as err:
        raise ValueError(f"fill={fill!r} cannot fill a leaf of dtype {dtype} ({err})") from err


# Plain number types whose every value checks alike for equal values (0.0 and -0.0 too, and
# every NaN): a fill of these is checked once per (type, value, item shape, dtype).
_PLAIN = frozenset((int, float, bool, np.float64, np.float32, np.int64, np.int32, np.bool_))
_VERDICTS: dict[tuple[Any, ...], bool] = {}  # only fills found fine; refusals are re-checked
_MAX_VERDICTS = 512
_NAN = object()  # the key of every NaN, which equals no other NaN


def _verdict_key(fill: Any, item: tuple[int, ...], dtype: Any) -> tuple[Any, ...] | None:
    """The key of ``fill``'s remembered verdict for the leaf, or None: not remembered."""
    kind = fill.__class__
    if kind not in _PLAIN:
        return None
    return (kind, fill if fill == fill else _NAN, item, dtype)


def _check_fill(item: tuple[int, ...], fill: Any, dtype: np.dtype[Any]) -> None:
    """Refuses ``fill`` for a leaf of shape ``item`` and ``dtype`` (see :func:`_full`)."""
    given = np.asarray(fill)
    kind = np.dtype(dtype).kind
    # Before any cast: numpy parses strings. An int beyond 64 bits is an object to numpy,
    # but a number (np.full refuses it for ints; a float leaf holds it, if in range).
    if given.dtype.kind not in "iufb" + "c" * (kind == "c") and not isinstance(fill, int):
        raise ValueError(f"not a number: {given.dtype}")
    if given.dtype.kind == "O" and kind == "f":
        given = np.asarray(float(fill))
    if given.ndim > len(item) or np.broadcast_shapes(given.shape, item) != item:
        raise ValueError(f"its shape {given.shape} does not fit an item of shape {item}")
    if given.dtype.kind in "iufcb" and kind in "iub":
        with np.errstate(invalid="ignore", over="ignore"):
            cast = given.astype(dtype)
        if not np.array_equal(cast, given):
            raise ValueError("the value changes in that dtype")
    elif given.dtype.kind in "iuf" and kind == "f":
        with np.errstate(over="ignore"):
            overflows = np.isfinite(given) & ~np.isfinite(given.astype(dtype))
        if overflows.any():  # 1e40 into float32 would pad with inf
            raise ValueError("the value is beyond the dtype's range")


def _plain_number(fill: Any) -> Any:
    """A real number numpy keeps as an object (``Decimal``, ``Fraction``) as an int or float.

    An int where its value is whole (exactly, however large), else the nearest float; the
    caller then refuses what the leaf's dtype would change, as for any other number.
    """
    if not isinstance(fill, numbers.Number) or isinstance(fill, (int, float, np.generic)):
        return fill
    if isinstance(fill, numbers.Complex) and not isinstance(fill, numbers.Real):
        return fill  # a complex number: refused unless the leaf is complex
    real: Any = fill  # Decimal is no numbers.Real, yet converts
    value = float(real)
    return int(real) if value.is_integer() and real == int(real) else value


@singledispatch
def _fill(space: gs.Space[Any], fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    # A space of its own with a fixed shape and a number dtype fills as a Box of them would.
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is not None and isinstance(dtype, np.dtype) and dtype.kind in "biufc":
        return _full(lead, tuple(shape), fill, dtype)
    # Spaces without a fixed leaf shape (Sequence, Graph, OneOf): the item is ``fill``.
    return fill if not lead else _repeat(fill, lead)


@_fill.register
def _(space: gs.Text, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    if not isinstance(fill, str) and (not lead or 0 not in lead):  # zero fillers hold no value
        raise ValueError(f"fill={fill!r} cannot fill a Text leaf: give a string")
    if not lead:
        return fill
    if 0 not in lead:
        _refuse_cut_text(fill)
    # As wide as the fill too: a longer fill is kept whole, as in list mode and index lists.
    width = max(space.max_length, len(fill) if isinstance(fill, str) else 0, 1)
    try:
        dtype = text_dtype(width)
    except TypeError:
        raise MemoryError(f"no array holds items of dtype '<U{width}' (too wide)") from None
    _check_size(lead, dtype)
    return np.full(lead, fill, dtype=dtype)


@_fill.register
def _(space: gs.Box, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    return _full(lead, space.shape, fill, dtype=space.dtype)


@_fill.register
def _(space: gs.MultiBinary, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    return _full(lead, space.shape, fill, dtype=space.dtype)


@_fill.register
def _(space: gs.Discrete, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    if one_hot:
        return _zero_hot(lead + (int(space.n),))
    return _full(lead, (), fill, dtype=space.dtype)


@_fill.register
def _(space: gs.MultiDiscrete, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    if one_hot:
        return _zero_hot(lead + (int(space.nvec.sum()),))
    return _full(lead, space.nvec.shape, fill, dtype=space.dtype)


@_fill.register
def _(space: gs.Dict, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    return {key: _fill(sub, fill, lead, one_hot) for key, sub in space.spaces.items()}


@_fill.register
def _(space: gs.Tuple, fill: Any, lead: tuple[int, ...], one_hot: bool) -> Any:
    return tuple(_fill(sub, fill, lead, one_hot) for sub in space.spaces)


def _zero_hot(shape: tuple[int, ...]) -> np.ndarray:
    _check_size(shape, np.float32)
    return np.zeros(shape, dtype=np.float32)

"""How a written field meets the storage's tensors: paired leaf by leaf, copied or taken.

A field (observations, distribution parameters, ...) is stored as one tensor per leaf, named
by its path. A write pairs the given value with those names, then copies each leaf's rows, or,
when asked to share, takes a whole ``[T, N, ...]`` leaf as the tensor itself. A taken tensor is
the caller's memory, so it is never written: the next write into it takes a copy first.

What a storage keeps is made as normal tensors, inside ``torch.inference_mode`` too
(:func:`~episodes.rollout.specs.normal_tensors`), and an inference tensor is copied, never
taken: a storage filled under inference mode is written and trained on outside it.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from episodes.indexing import whole_number

# Kept importable from here, where it began; the converter's torch-free path shares it.
from episodes.shapes import same_but_trailing_ones as same_but_trailing_ones

from .specs import normal_tensors

__all__ = [
    "block_leaves",
    "block_length",
    "block_rows",
    "can_take",
    "check_int_range",
    "checked_rows",
    "copy_rows",
    "data_tensor",
    "hidden_writes",
    "paired",
    "put_leaf",
    "same_but_trailing_ones",
]


def paired(names: Any, value: Any, label: str) -> Iterator[tuple[str, Any]]:
    """``(tensor name, leaf)`` pairs of a field's name tree and a value of the same structure.

    A mapping's keys are read with ``keys()``, not by iterating it: iterating a TensorDict
    (rsl_rl's observations) yields its batch rows.

    Raises:
        KeyError: A mapping whose keys differ from the field's.
        TypeError: a value without a length for a tuple of names (a bare number).
        ValueError: a value of another length than the tuple of names.

    Example:
        >>> list(paired({"a": "obs/a", "b": "obs/b"}, {"b": 2, "a": 1}, "obs"))
        [('obs/a', 1), ('obs/b', 2)]
        >>> list(paired(("d/0", "d/1"), (3, 4), "d")), list(paired("x", 5, "x"))
        ([('d/0', 3), ('d/1', 4)], [('x', 5)])
    """
    if isinstance(names, Mapping):
        if not isinstance(value, Mapping) or set(value.keys()) != set(names):
            got = sorted(value.keys()) if isinstance(value, Mapping) else type(value).__name__
            raise KeyError(f"{label}: expected keys {sorted(names)}, got {got}")
        for k in names:
            yield from paired(names[k], value[k], f"{label}[{k!r}]")
    elif isinstance(names, tuple):
        if not hasattr(value, "__len__"):  # len(5) would say only "no len()"
            raise TypeError(f"{label}: expected {len(names)} tensors, got {type(value).__name__}")
        if len(value) != len(names):
            raise ValueError(f"{label}: expected {len(names)} tensors, got {len(value)}")
        yield from zip(names, value, strict=True)
    else:
        yield names, value


def can_take(dst: torch.Tensor, src: Any) -> bool:
    """Whether ``src`` can stand in for ``dst`` as it is (its steps and envs, dtype, device).

    An inference tensor (made under ``torch.inference_mode``) is never taken: a loss outside
    inference mode could not use the storage's field.

    Example:
        >>> dst = torch.zeros(3, 2, 1)
        >>> can_take(dst, torch.ones(3, 2)), can_take(dst, torch.ones(3, 2).double())
        (True, False)
        >>> can_take(dst, torch.ones(2, 3).T)  # not contiguous
        False
        >>> with torch.inference_mode():
        ...     can_take(dst, torch.ones(3, 2))
        False
    """
    return (
        isinstance(src, torch.Tensor)
        and src.dtype == dst.dtype
        and src.device == dst.device
        and not src.requires_grad
        and src.shape[:2] == dst.shape[:2]
        and same_but_trailing_ones(src.shape, dst.shape)
        and src.is_contiguous()
        and not src.is_inference()
    )


def data_tensor(value: Any, label: str, *, real: bool = False) -> torch.Tensor:
    """``value`` once known to be a dense tensor holding data (a copy or a scan can read it).

    A shape and a dtype say nothing of that: a tensor on the ``meta`` device has both and no
    data, and a sparse, nested or quantized one cannot be copied into (or reshaped like) a
    dense one. torch refuses them only part-way through a write, after other fields were
    written. ``real`` refuses complex numbers too (a cast to a real dtype drops their
    imaginary part with nothing but a warning).

    Raises:
        TypeError: ``value`` is not a tensor (a list, a numpy array, None).
        ValueError: a tensor without data, a layout other than dense, or complex numbers
            where ``real``; the message names ``label``.

    Example:
        >>> data_tensor(torch.ones(2), "dones").shape
        torch.Size([2])
        >>> data_tensor(torch.ones(2, device="meta"), "dones")
        Traceback (most recent call last):
        ...
        ValueError: dones: a tensor on the meta device holds no data: give a dense tensor ...
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{label}: expected a torch.Tensor, got {type(value).__name__}")
    # One cheap test for the usual tensor; the others only name what is wrong.
    if value.layout is torch.strided and not (
        value.is_meta or value.is_nested or value.is_quantized
    ):
        if real and value.is_complex():
            raise ValueError(f"{label}: expected real numbers, got {value.dtype}")
        return value
    if value.is_meta:
        what = "a tensor on the meta device holds no data"
    elif value.is_nested:
        what = "a nested tensor has no single shape"
    elif value.is_quantized:
        what = f"a quantized tensor ({value.dtype}) cannot be copied into a plain one"
    else:
        what = f"a {value.layout} tensor cannot be copied into a dense one"
    raise ValueError(f"{label}: {what}: give a dense tensor with data (strided, not meta)")


def checked_rows(dst: torch.Tensor, src: Any, label: str) -> torch.Tensor:
    """Returns ``dst`` once ``src`` is known to fit it (:func:`copy_rows` will not refuse it).

    ``src`` fits when ``dst``'s dtype can hold its values (``torch.can_cast``): a narrower
    float dtype is rounded into (float64 into float32), but floats into an int field (0.7
    stored as 0) or ints into a bool one are refused, and so are integers beyond a narrower
    int field's range (:func:`check_int_range`: 300 would be stored as 44 in uint8). A bool
    field takes any real numbers as flags, nonzero meaning True: dones come as int64, uint8
    or floats.

    Raises:
        TypeError: ``src`` is not a tensor.
        ValueError: a tensor a copy cannot read (:func:`data_tensor`: on the meta device,
            sparse, nested, quantized), its shape differs from ``dst``'s by more than trailing
            1s, or ``dst``'s dtype cannot hold its values.

    Example:
        >>> checked_rows(torch.zeros(2, 1), torch.ones(2), "rewards").shape
        torch.Size([2, 1])
        >>> checked_rows(torch.zeros(2, 1), [1.0, 2.0], "rewards")
        Traceback (most recent call last):
        ...
        TypeError: rewards: expected a torch.Tensor, got list
        >>> checked_rows(torch.zeros(2, dtype=torch.int64), torch.tensor([0.7, 1.0]), "a")
        Traceback (most recent call last):
        ...
        ValueError: a: a torch.int64 field cannot hold torch.float32 values without loss
    """
    # Checked here, not left to the copy: torch refuses a data-less or sparse source only
    # once the write has begun, and the fields copied before it would stay written.
    data_tensor(src, label)
    # The same rule as the converter's and CircularBuffer.append's: a cast that changes the
    # values' kind loses them silently (0.7 -> 0, 300.5 -> 44 in uint8). Narrower floats are
    # the storage's precision; narrower ints are range-checked last, as that may wait.
    if src.dtype != dst.dtype and not torch.can_cast(src.dtype, dst.dtype):
        flags = dst.dtype == torch.bool and not src.is_complex()  # nonzero is True
        if not flags:
            raise ValueError(
                f"{label}: a {dst.dtype} field cannot hold {src.dtype} values without loss"
            )
    if src.shape != dst.shape and not same_but_trailing_ones(src.shape, dst.shape):
        raise ValueError(
            f"{label}: a value of shape {tuple(src.shape)} does not fit rows of shape "
            f"{tuple(dst.shape)}"
        )
    if src.dtype != dst.dtype:
        check_int_range(src, dst.dtype, label)
    return dst


@functools.cache
def _may_wrap(src: torch.dtype, dst: torch.dtype) -> bool:
    """Whether integers of ``src`` may lie outside the range of the integer ``dst``."""
    if any(d.is_floating_point or d.is_complex or d == torch.bool for d in (src, dst)):
        return False
    have, held = torch.iinfo(src), torch.iinfo(dst)
    return have.min < held.min or have.max > held.max


def check_int_range(src: torch.Tensor, dtype: torch.dtype, label: str) -> None:
    """Refuses integers that a cast into the narrower integer ``dtype`` would wrap.

    ``copy_`` wraps them without a word (300 is stored as 44 in uint8, -1 as 255). Only an
    int ``src`` whose dtype's range ``dtype``'s does not hold is read (its minimum and
    maximum); the same dtype, a wider one and every other pair cost nothing. Reading a CPU
    tensor is free; on an accelerator it waits for the device once: store the data's own
    dtype (or a wider one) to avoid that.

    Raises:
        ValueError: a value outside ``dtype``'s range; the message names ``label``.

    Example:
        >>> check_int_range(torch.tensor([0, 255]), torch.uint8, "obs")  # fits: nothing
        >>> check_int_range(torch.tensor([300, -1]), torch.uint8, "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: values in [-1, 300] do not fit a torch.uint8 field ([0, 255]): the ...
    """
    if src.dtype == dtype or not _may_wrap(src.dtype, dtype) or src.numel() == 0:
        return
    # torch has no min or max for uint16-64 yet: read them as int64 (exact below 2**63).
    values = src.to(torch.int64) if src.dtype in _UNSIGNED_WIDE else src
    lo, hi = torch.stack(torch.aminmax(values.detach())).tolist()  # one wait, at most
    held = torch.iinfo(dtype)
    if src.dtype == getattr(torch, "uint64", None) and lo < 0:
        shown = "values beyond 2**63 - 1"  # wrapped by the int64 read
    elif held.min <= lo and hi <= held.max:
        return
    else:
        shown = f"values in [{lo}, {hi}]"
    raise ValueError(
        f"{label}: {shown} do not fit a {dtype} field ([{held.min}, {held.max}]): the cast "
        f"would wrap them; store them as {src.dtype}, or convert them first"
    )


_UNSIGNED_WIDE = {getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)}


def copy_rows(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copies ``src`` into ``dst``, reshaped when only the trailing 1s differ.

    Example:
        >>> dst = torch.zeros(2, 1)
        >>> copy_rows(dst, torch.tensor([1.0, 2.0])); dst.flatten().tolist()
        [1.0, 2.0]
    """
    # Rewards and log-probs arrive as [N] for [N, 1] rows: reshape only when the shapes differ,
    # and only by trailing 1s: a [3, 2] batch of [2, 3] rows has the right size but is wrong.
    if src.shape != dst.shape:
        if not same_but_trailing_ones(src.shape, dst.shape):
            raise ValueError(
                f"a block of shape {tuple(src.shape)} does not fit rows of shape {tuple(dst.shape)}"
            )
        src = src.reshape(dst.shape)
    if dst.dtype == torch.bool and src.is_neg():  # torch negates as it copies: no bool kernel
        src = src.resolve_neg()
    # A storage holds data, not graphs: a copy of a tensor that requires grad would tie every
    # later read (returns, mini-batches) to the policy's old graph.
    dst.copy_(src.detach())


def put_leaf(
    tensors: dict[str, torch.Tensor],
    shared: set[str],
    name: str,
    rows: slice | int,
    value: Any,
    *,
    share: bool,
) -> bool:
    """Writes ``value`` into rows ``rows`` of ``tensors[name]``, or takes it (``share``).

    ``share`` means: take ``value`` as the tensor when :func:`can_take` allows (the caller
    asks only for writes of every row). ``shared`` names the taken tensors; writing into one
    of them replaces it with a copy first. Returns True when ``tensors[name]`` was replaced.

    Example:
        >>> tensors, shared = {"r": torch.zeros(2, 1)}, set()
        >>> mine = torch.ones(2, 1)
        >>> put_leaf(tensors, shared, "r", slice(0, 2), mine, share=True), shared
        (True, {'r'})
        >>> put_leaf(tensors, shared, "r", 0, torch.tensor([5.0]), share=False), shared
        (True, set())
        >>> mine.flatten().tolist(), tensors["r"].flatten().tolist()  # the taken one is unchanged
        ([1.0, 1.0], [5.0, 1.0])
    """
    dst = tensors[name]
    if value is dst:  # filled in place already (gathered straight into the storage)
        return False
    if share and can_take(dst, value):
        tensors[name] = value.view(dst.shape)
        shared.add(name)
        return True
    replaced = name in shared
    if replaced:  # the caller's memory is never written: take a copy first
        whole = rows == slice(0, len(dst))
        with normal_tensors():
            dst = tensors[name] = torch.empty_like(dst) if whole else dst.clone()
        shared.discard(name)
    copy_rows(dst[rows], value)
    return replaced


def block_leaves(value: Any) -> Iterator[Any]:
    """The arrays of a (nested) block, skipping ``None`` parts (a critic without a state).

    Example:
        >>> import torch
        >>> block = {"a": torch.zeros(2), "h": (None, torch.zeros(3))}
        >>> [tuple(x.shape) for x in block_leaves(block)]
        [(2,), (3,)]
    """
    if value is None:
        return
    if isinstance(value, Mapping):
        for key in value.keys():  # not iter(value): a TensorDict's iteration is its rows
            yield from block_leaves(value[key])
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from block_leaves(item)
    else:
        yield value


#: The fields whose blocks may nest; every other field's block is one tensor.
_NESTED_FIELDS = frozenset(
    {"observations", "privileged_observations", "distribution_params", "hidden_states"}
)


def block_length(fields: Mapping[str, Any]) -> int:
    """The leading length every leaf of ``fields`` shares (the ``k`` of a block write).

    Every leaf counts (dict observations, both parts of a hidden-state pair, an LSTM's h and
    c): a shorter one would be broadcast over the block's rows.

    Raises:
        TypeError: a leaf that is not a tensor (the message names its field).
        ValueError: a leaf without a shape or data (:func:`data_tensor`), or leaves of
            different lengths.

    Example:
        >>> pair = (torch.zeros(4, 1, 2, 3), None)  # an actor's state, a critic without one
        >>> block_length({"rewards": torch.zeros(4, 2), "hidden_states": pair})
        4
    """
    for name, value in fields.items():
        # Only these nest (dict observations, distribution parameters, hidden-state pairs):
        # any other field's list or tuple is a mistake, named as such (None: not written).
        if name not in _NESTED_FIELDS and not isinstance(value, (torch.Tensor, type(None))):
            raise TypeError(f"{name}: blocks must be torch tensors, got {type(value).__name__}")
    named = [(name, leaf) for name, value in fields.items() for leaf in block_leaves(value)]
    for name, leaf in named:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(f"{name}: blocks must be torch tensors, got {type(leaf).__name__}")
        data_tensor(leaf, name)  # a nested tensor has no shape[0] to read
    leaves = [leaf for _, leaf in named]
    if not leaves:
        raise ValueError("no blocks given: name at least one field")
    for leaf in leaves:
        if leaf.dim() == 0:
            raise ValueError("a block is [k, num_envs, ...]: got a 0-d tensor")
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) != 1:
        raise ValueError(f"all blocks must have the same leading length, got {sorted(lengths)}")
    return lengths.pop()


def hidden_writes(
    saved: list[torch.Tensor] | None,
    state: Any,
    allocate: Callable[[tuple[Any, ...]], list[torch.Tensor] | None],
    which: str,
    one_step: bool,
) -> tuple[list[torch.Tensor], list[Any]]:
    """A hidden state's saved tensors and its components, paired for writing.

    ``saved`` is None until the first state is seen; then ``allocate`` makes the tensors from
    one example component per component (a step's, or a data-less one shaped as a block's
    step, so an empty block serves too). Nothing is stored here: the caller keeps the tensors
    once every field of the write is checked.

    Raises:
        ValueError: a state with another number of components (an LSTM pair for a GRU).

    Example:
        >>> lstm = (torch.ones(1, 3, 4),) * 2
        >>> hidden_writes([torch.zeros(2, 1, 3, 4)], lstm, None, "actor", one_step=True)
        Traceback (most recent call last):
        ...
        ValueError: actor hidden state has 2 components, expected 1
    """
    comps: list[Any] = list(state) if isinstance(state, (tuple, list)) else [state]
    if saved is None:
        # Each part sized by itself: an LSTM with proj_size has h and c of other sizes.
        # A block's step as a shape on the meta device: an empty block has no step to read.
        saved = allocate(tuple(c if one_step else _step_of(c) for c in comps))
        assert saved is not None
    if len(comps) != len(saved):
        raise ValueError(f"{which} hidden state has {len(comps)} components, expected {len(saved)}")
    return saved, comps


def _step_of(block: torch.Tensor) -> torch.Tensor:
    """One step of a ``[k, ...]`` block as a data-less tensor: its shape and dtype only."""
    return torch.empty(block.shape[1:], dtype=block.dtype, device="meta")


def block_rows(start: Any, fields: Mapping[str, Any], allowed: set[str], steps: int) -> slice:
    """The rows ``start:start + k`` a ``write_block`` of ``fields`` writes into ``steps``.

    ``start`` is read first, as a Python int (numpy and torch integers are taken): the
    storage's ``step`` becomes ``start + k``, and a numpy ``step`` would make the next
    ``add_transition`` take its one row for a block. Then the fields' names, and ``k``
    (:func:`block_length`).

    Raises:
        TypeError: a ``start`` that is no integer (a bool, a float, a string), or a block
            that is not a tensor.
        ValueError: a negative ``start``, a name outside ``allowed``, or blocks of different
            lengths (see :func:`block_length`).
        OverflowError: ``start + k > steps``.

    Example:
        >>> block_rows(np.int64(1), {"rewards": torch.zeros(2, 4)}, {"rewards"}, 3)
        slice(1, 3, None)
        >>> block_rows(1.0, {"rewards": torch.zeros(2, 4)}, {"rewards"}, 3)
        Traceback (most recent call last):
        ...
        TypeError: start must be an int, got float (1.0)
    """
    boolean = isinstance(start, (bool, np.bool_)) or (
        isinstance(start, torch.Tensor) and start.dtype == torch.bool
    )
    try:
        first = None if boolean else operator.index(start)
    except TypeError:
        first = None
    if first is None:
        raise TypeError(f"start must be an int, got {type(start).__name__} ({start!r})")
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}; accepted: {sorted(allowed)}")
    k = block_length(fields)
    whole_number(first, "start", 0)
    if first + k > steps:
        raise OverflowError(f"block [{first}, {first + k}) exceeds the {steps} steps")
    return slice(first, first + k)

"""Row selection that moves small rows as single wide elements."""

from __future__ import annotations

import math

import torch

__all__ = ["select_rows", "signed_view"]

# torch (2.13 on the CPU) has no index_select, index_copy_ or masked_fill kernel for these
# unsigned dtypes: such ops run on a view of the same bits as the signed int of equal width.
_SIGNED = {
    getattr(torch, u): getattr(torch, s)
    for u, s in (("uint16", "int16"), ("uint32", "int32"), ("uint64", "int64"))
    if hasattr(torch, u)
}

# A row of this many bytes moves as one element of this dtype: torch's index_select copies
# multi-element rows with a loop per row, single elements in a plain loop (at 4096 x 24 rows
# of 4 float32 about 1.5x, of 2 float32 about 2x faster). Integer and complex types only copy
# bits: no value is read as a float and canonicalised.
_WIDE = {2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.complex128}
# Below this many selected rows the views and checks (a few microseconds) cost more than the
# copy saves: index_select as it is.
_MIN_ROWS = 8192


def select_rows(
    source: torch.Tensor, index: torch.Tensor, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.index_select(source, 0, index)``, each row moved as one element where it can.

    A row of one element goes through a 1-D view (selecting ``[M, 1]`` rows costs several
    times more than selecting from ``[M]``). On the CPU, rows of 2, 4, 8 or 16 bytes (a
    CartPole observation, a pair of logits) are reinterpreted as one ``int16`` / ``int32`` /
    ``int64`` / ``complex128`` element each for the copy: the same bits come out. Other rows,
    non-contiguous tensors, tensors whose memory is not aligned to the wide type (a view of
    a numpy array at an odd address), tensors that require grad and selections of fewer than
    8192 rows (where the views cost more than they save) take ``index_select`` as it is.
    ``uint16`` / ``uint32`` / ``uint64`` rows (which torch's CPU ``index_select`` lacks) move
    as the signed int of the same width: the same bits.

    Args:
        source: ``[M, ...]`` rows.
        index: 1-D integer positions in ``[0, M)``.
        out: Optional ``[len(index), ...]`` tensor of ``source``'s dtype to write into.

    Returns:
        The selected rows (``out`` when given).

    Raises:
        TypeError: ``source`` or ``index`` is not a tensor.

    Example:
        >>> src = torch.arange(12.0).view(6, 2)
        >>> select_rows(src, torch.tensor([5, 0, 5])).tolist()
        [[10.0, 11.0], [0.0, 1.0], [10.0, 11.0]]
        >>> out = torch.empty(2, 2)
        >>> select_rows(src, torch.tensor([1, 2]), out=out) is out, out.tolist()
        (True, [[2.0, 3.0], [4.0, 5.0]])
    """
    if not isinstance(source, torch.Tensor) or not isinstance(index, torch.Tensor):
        # Not left to the views below: a list has no .dim() (AttributeError).
        got = f"{type(source).__name__} and {type(index).__name__}"
        raise TypeError(f"source and index must be torch tensors, got {got}")
    if source.dtype in _SIGNED:
        if out is None:
            return _select(signed_view(source), index, None).view(source.dtype)
        # Else torch's own error (another dtype) or resize (another shape: of out, not a view).
        if out.dtype == source.dtype and out.shape == (len(index), *source.shape[1:]):
            _select(signed_view(source), index, signed_view(out))
            return out
    return _select(source, index, out)


def signed_view(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or for a ``uint16`` / ``uint32`` / ``uint64`` one its signed-int bits.

    The view is ``int16`` / ``int32`` / ``int64``: torch lacks some kernels for these unsigned
    dtypes (``index_select``, ``index_copy_``, ``masked_fill`` on the CPU), and moving or
    zeroing elements of the view gives the same bits. View the result back with
    ``.view(tensor.dtype)``. Other dtypes cost one dict lookup.

    Example:
        >>> signed_view(torch.tensor([65535], dtype=torch.uint16)).tolist()
        [-1]
        >>> x = torch.zeros(2)
        >>> signed_view(x) is x
        True
    """
    signed = _SIGNED.get(tensor.dtype)
    return tensor if signed is None else tensor.view(signed)


def _select(source: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """:func:`select_rows` for a dtype torch has the kernels of."""
    if len(index) < _MIN_ROWS:
        if out is None:
            return source.index_select(0, index)
        return torch.index_select(source, 0, index, out=out)
    flat = _one_per_row(source)
    if out is None:
        if flat is None:
            return source.index_select(0, index)
        picked = flat.index_select(0, index)
        if picked.dtype != source.dtype:  # a dtype view, even to the same dtype, has no grad
            picked = picked.view(source.dtype)
        return picked.view(len(index), *source.shape[1:])
    # Rows moved as wide items only between tensors of one dtype and row shape, as index_select
    # would check (else its own error, or the resize it makes).
    target = (
        _one_per_row(out)
        if out.dtype == source.dtype and out.shape[1:] == source.shape[1:]
        else None
    )
    if flat is None or target is None or target.dtype != flat.dtype:
        return torch.index_select(source, 0, index, out=out)
    torch.index_select(flat, 0, index, out=target)
    return out


def _one_per_row(tensor: torch.Tensor) -> torch.Tensor | None:
    """A 1-D view of ``tensor`` holding each row as one element, or None."""
    if tensor.dim() < 1 or not tensor.is_contiguous():
        return None
    rows, width = tensor.shape[0], math.prod(tensor.shape[1:])
    if width == 1:
        return tensor.view(rows)
    nbytes = tensor.element_size() * width
    wide = _WIDE.get(nbytes)
    # A view starting mid-element of the wide type cannot be reinterpreted (torch refuses
    # it), and memory not aligned to it cannot be read as it: its complex128 copy loop faults
    # (SIGSEGV) on memory numpy, a memmap or torch.frombuffer placed at an odd address.
    if (
        wide is None
        or tensor.device.type != "cpu"
        or tensor.requires_grad  # a dtype view would cut the graph
        or tensor.storage_offset() * tensor.element_size() % nbytes
        or tensor.data_ptr() % nbytes
    ):
        return None
    return tensor.view(rows, width).view(wide).view(rows)

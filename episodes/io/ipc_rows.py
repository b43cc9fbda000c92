"""The row count of every record batch of an Arrow IPC file, read from its metadata alone.

pyarrow gives a batch's row count only by reading the batch (for zstd, decompressing it), and
a file's total only. A shard's pieces are located by their first rows, so a reader needs where
every batch starts: this reads the file's footer (where each batch's message is) and each
message's header (its ``RecordBatch.length``), the flatbuffers Arrow writes
(``File.fbs``, ``Message.fbs``), for all batches at once with numpy gathers. No batch body is
read; each message header is one small read (a page of a memory map).

Anything laid out other than as Arrow's writers lay it out (a legacy message prefix, an offset
outside the file, a message that is no record batch) gives None, and the caller falls back on
reading the batches through pyarrow, which checks them and names the damage.

Example:
    >>> import pyarrow as pa
    >>> sink = pa.BufferOutputStream()
    >>> batch = pa.record_batch({"x": list(range(6))})
    >>> with pa.ipc.new_file(sink, batch.schema) as out:
    ...     for a, n in ((0, 0), (0, 2), (2, 4)):
    ...         out.write_batch(batch.slice(a, n))
    >>> batch_rows(np.frombuffer(sink.getvalue(), np.uint8)).tolist()
    [0, 2, 4]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["batch_rows"]

_TAIL = 10  # int32 footer length + b"ARROW1"
_BLOCK = 24  # struct Block {offset: long; metaDataLength: int; (pad); bodyLength: long}
_RECORD_BATCH = 3  # MessageHeader.RecordBatch


class _Malformed(Exception):
    """The metadata is not laid out as expected (caught inside this module)."""


def batch_rows(data: np.ndarray, count: int | None = None) -> np.ndarray | None:
    """Row counts (int64) of an IPC file's record batches in footer order, or None.

    Args:
        data: The whole file's bytes (uint8; a view of its memory map reads no batch body).
        count: The number of batches the file must list (None: any).

    Example:
        >>> batch_rows(np.frombuffer(b"not an Arrow file", np.uint8)) is None
        True
    """
    try:
        return _rows(data, count)
    except _Malformed:
        return None


def _rows(data: np.ndarray, count: int | None) -> np.ndarray:
    size = len(data)
    if size < 8 + _TAIL or bytes(data[size - 6 :]) != b"ARROW1":
        raise _Malformed
    footer_size = int(_get(data, np.array([size - _TAIL]), "<i4")[0])
    start = size - _TAIL - footer_size
    if footer_size <= 0 or start < 8:
        raise _Malformed
    footer = _root(data, np.array([start]))
    vector = _reference(data, footer, 3)  # Footer.recordBatches
    n = int(_get(data, vector, "<u4")[0])
    if (count is not None and n != count) or n > size // _BLOCK:
        raise _Malformed
    blocks = vector[0] + 4 + _BLOCK * np.arange(n, dtype=np.int64)
    offsets = _get(data, blocks, "<i8")
    meta_sizes = _get(data, blocks + 8, "<i4")
    # A message: 0xFFFFFFFF (continuation), its flatbuffer's size, the flatbuffer.
    if n and (_get(data, offsets, "<i4") != -1).any():
        raise _Malformed  # the pre-1.0 prefix, or no message there
    sizes = _get(data, offsets + 4, "<i4")
    if ((sizes <= 0) | (sizes + 8 > meta_sizes)).any():
        raise _Malformed
    message = _root(data, offsets + 8)
    kinds = _scalar(data, message, 1, "u1", 0)  # Message.header_type
    if (kinds != _RECORD_BATCH).any():
        raise _Malformed
    header = _reference(data, message, 2)  # Message.header
    rows = _scalar(data, header, 0, "<i8", 0)  # RecordBatch.length
    if (rows < 0).any():
        raise _Malformed
    return rows


def _get(data: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian values of ``dtype`` at byte positions ``at`` (bounds checked)."""
    width = np.dtype(dtype).itemsize
    at = np.asarray(at, np.int64)
    if at.size and (at.min() < 0 or at.max() > len(data) - width):
        raise _Malformed
    if not (at % width).any():  # flatbuffers align their scalars: one lookup in a typed view
        out: np.ndarray = data[: len(data) // width * width].view(dtype)[at // width]
        return out
    return data[at[:, None] + np.arange(width)].view(dtype).reshape(-1)


def _root(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The root table of the flatbuffers starting at ``starts``."""
    return starts + _get(data, starts, "<u4").astype(np.int64)


def _field(data: np.ndarray, tables: np.ndarray, index: int) -> tuple[np.ndarray, np.ndarray]:
    """``(present, position)`` of field ``index`` of each table (its vtable's entry)."""
    vtables = tables - _get(data, tables, "<i4").astype(np.int64)
    vsizes = _get(data, vtables, "<u2").astype(np.int64)
    tsizes = _get(data, vtables + 2, "<u2").astype(np.int64)
    slot = 4 + 2 * index
    has_slot = vsizes >= slot + 2
    offsets = np.where(has_slot, _get(data, np.where(has_slot, vtables + slot, vtables), "<u2"), 0)
    offsets = offsets.astype(np.int64)
    if ((offsets > 0) & (offsets >= tsizes)).any():  # past the table's own bytes
        raise _Malformed
    return offsets > 0, tables + offsets


def _scalar(data: np.ndarray, tables: np.ndarray, index: int, dtype: str, default: int) -> Any:
    present, at = _field(data, tables, index)
    values = np.full(len(tables), default, np.int64)
    if present.any():
        values[present] = _get(data, at[present], dtype)
    return values


def _reference(data: np.ndarray, tables: np.ndarray, index: int) -> np.ndarray:
    """Where field ``index`` (a table or vector, required) of each table points."""
    present, at = _field(data, tables, index)
    if not present.all():
        raise _Malformed
    return at + _get(data, at, "<u4").astype(np.int64)

"""The shard budget's count of the plain episodes ``saved_shards`` batches.

``DatasetWriter`` ends a shard once its episodes' ``nbytes`` (``encode_rows``: every column's
Arrow ``nbytes`` and an allowance for the index entry) reach ``shard_bytes``. The batched
save counts the same bytes from a shard's first writer-encoded episode, so that its shards end
where the writer's do; ``saved_shards._same`` checks the count against the writer's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from episodes.replay.saved_shards import _Stored, _Template

__all__: list[str] = []

_ALLOWANCE = 8 << 10  # encode_rows' bytes per buffered episode, towards the shard budget


def _row_bytes(stored: _Stored, k: int, end: int, template: _Template) -> np.ndarray:
    """Bytes that episodes ``k .. end - 1`` add to a shard's budget, as ``encode_rows`` counts.

    Its ``nbytes``: each column's Arrow ``nbytes`` (see :func:`_bytes_model`), the episode
    id's text once a row, and the writer's allowance for the index entry.
    """
    assert template.bytes is not None
    per_row, bitmaps = template.bytes
    r = stored.n[k:end] + 1
    texts = [
        len(i.encode("utf-8") if type(i) is str else json.dumps(e).encode("utf-8"))
        for i, e in zip(stored.table.ids[stored.rows[k:end]], stored.ids[k:end], strict=True)
    ]
    sizes = r * (per_row + np.array(texts, np.int64)) + _ALLOWANCE
    for bits in bitmaps:  # a bitmap's bytes: its bits rounded up to whole bytes
        sizes += (r * bits + 7) // 8
    return sizes


def _bytes_model(columns: dict[str, pa.Array]) -> tuple[int, list[int]]:
    """The writer's columns' ``nbytes`` per row: whole bytes a row and bitmaps' bits a row.

    Arrow counts a column's buffers: bitmaps (validity, bools) in bytes rounded up, a value
    of fixed width its width, a text its offset's width and the bytes it spans (the episode
    id's counted apart; ``{}`` infos 2, null blobs none); a struct counts its fields only.
    ``_same`` checks the sum against the writer's own count (else all is written its way).
    """
    per_row, bitmaps = 0, []

    def walk(kind: pa.DataType, buffers: list[Any], width: int) -> None:
        nonlocal per_row
        validity = buffers.pop(0)  # a struct's own is not counted (Arrow 26 counts fields)
        if validity is not None and not pa.types.is_struct(kind):
            bitmaps.append(width)
        if pa.types.is_fixed_size_list(kind):
            walk(kind.value_type, buffers, width * kind.list_size)
        elif pa.types.is_struct(kind):
            for field in kind:
                walk(field.type, buffers, width)
        elif pa.types.is_null(kind):  # a zero-size leaf's column: no buffer, no bytes
            pass
        elif pa.types.is_boolean(kind):
            buffers.pop(0)
            bitmaps.append(width)
        elif kind.num_buffers == 3:  # a text: its offsets (its bytes are counted apart)
            per_row += width * (8 if kind in (pa.large_string(), pa.large_binary()) else 4)
            del buffers[:2]
        else:  # values of a fixed width in bits, whole bytes
            per_row += width * kind.bit_width // 8
            buffers.pop(0)

    for key, column in columns.items():
        walk(column.type, column.buffers(), 1)
        if key == "infos":
            per_row += 2
    return per_row, bitmaps

"""How a copy (``merge``, ``split``, ``filter_dataset``) stores its shards: as its sources do.

A copy keeps the data format (``"arrow"`` or ``"parquet"``) and the compression (``None`` or
``"zstd"``) every shard of its sources has; where they differ, it writes uncompressed Arrow.
A format v1 source (its chunks hold ``.npy`` files) counts as uncompressed Arrow; a source
without shards has no say. ``"same"`` (the default of the copies) asks for this; any other
value is the writer's, as :class:`~episodes.io.DatasetWriter` takes it. No pyarrow.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path, data_format="parquet", compression="zstd") as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
    >>> copy_storage([path], "same", "same")
    {'data_format': 'parquet', 'compression': 'zstd'}
    >>> copy_storage([path], "arrow", "same")
    {'data_format': 'arrow', 'compression': 'zstd'}
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from episodes.io.format import MAX_JSON_BYTES, load_json_file
from episodes.io.shards import INDEX_SUFFIX, is_v2, read_v2_manifest, shard_file

__all__ = ["SAME", "copy_storage"]

#: Keep the sources' data format (or compression): see the module.
SAME = "same"
_FORMATS = ("arrow", "parquet")
_COMPRESSIONS = (None, "zstd")
_MIXED = object()  # the sources' shards differ


def copy_storage(
    sources: Sequence[str | os.PathLike[str]], data_format: Any, compression: Any
) -> dict[str, Any]:
    """The ``data_format`` and ``compression`` a copy of ``sources`` writes (writer kwargs).

    Raises:
        ValueError: ``data_format`` is not ``"same"``, ``"arrow"`` or ``"parquet"``, or
            ``compression`` not ``"same"``, ``None`` or ``"zstd"`` (checked before anything
            is read).

    Example:
        >>> copy_storage([], "same", "same")  # no source says anything: the writer's default
        {'data_format': 'arrow', 'compression': None}
        >>> copy_storage([], "feather", None)
        Traceback (most recent call last):
        ...
        ValueError: data_format must be 'same', 'arrow' or 'parquet', not 'feather'
    """
    if not isinstance(data_format, str) or data_format not in (SAME, *_FORMATS):
        raise ValueError(f"data_format must be 'same', 'arrow' or 'parquet', not {data_format!r}")
    if compression not in (SAME, *_COMPRESSIONS):
        raise ValueError(f"compression must be 'same', None or 'zstd', not {compression!r}")
    fmt, comp = data_format, compression
    if SAME in (fmt, comp):
        found_fmt, found_comp = _sources_storage(sources, need_compression=comp == SAME)
        fmt = found_fmt if fmt == SAME else fmt
        comp = found_comp if comp == SAME else comp
    return {"data_format": fmt, "compression": comp}


def _sources_storage(
    sources: Sequence[str | os.PathLike[str]], *, need_compression: bool
) -> tuple[str, str | None]:
    """The format and compression all shards of ``sources`` share (else Arrow, None)."""
    formats: set[Any] = set()
    compressions: set[Any] = set()
    for src in sources:
        root = Path(src)
        if not is_v2(root):  # v1 (or no dataset: the copy then says what it is)
            formats.add("arrow")
            compressions.add(None)
            continue
        _, entries, _, _ = read_v2_manifest(root)
        formats.update(e.data_format for e in entries)
        if not need_compression:
            continue
        for entry in entries:
            if len(compressions) > 1:
                break  # mixed already: no more indexes read
            index = load_json_file(
                shard_file(root, entry.name, INDEX_SUFFIX), "shard index", MAX_JSON_BYTES
            )
            data = index.get("data") if isinstance(index, dict) else None
            found = data.get("compression") if isinstance(data, dict) else _MIXED
            compressions.add(found if found in _COMPRESSIONS else _MIXED)
    fmt = formats.pop() if len(formats) == 1 else "arrow"
    comp = compressions.pop() if len(compressions) == 1 else None
    return fmt, (comp if comp in _COMPRESSIONS else None)

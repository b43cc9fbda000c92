"""Minari's Arrow files: one record batch per episode on export, whole episodes on import.

Minari (0.5) writes each episode as ``data/<n>/part-0.arrow`` (``n + 1`` rows: the last
action, reward and flags are padding) through ``pyarrow.dataset.write_dataset``, which cuts it
into record batches of 32,768 rows; its reader pairs episode numbers with the record batches of
one scan of all files, which also cuts a batch longer than 131,072 rows. An episode cut in two
comes back short and the episodes after it get its later rows. So the export rewrites each
episode's file as one record batch (and ``EpisodeBuffers`` refuses an episode longer than
``MAX_MINARI_STEPS``, which Minari's reader cuts whatever the file); the import reads every
episode's files whole (Minari's own files too) and checks its steps against the episode's
``metadata.json`` and the dataset's total.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> episode = Path(tempfile.mkdtemp()) / "0"
    >>> episode.mkdir()
    >>> table = pa.table({"rewards": np.arange(70_000.0)})
    >>> with pa.ipc.new_file(episode / "part-0.arrow", table.schema) as out:
    ...     out.write_table(table, max_chunksize=32_768)  # as Minari's writer cuts it
    >>> one_batch_per_episode(episode.parent, 1)
    >>> pa.ipc.open_file(episode / "part-0.arrow").num_record_batches
    1
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc

from episodes.io.errors import DatasetError
from episodes.io.format import read_regular_file
from episodes.io.minari_checks import ColumnTypes, extension_unsafe
from episodes.io.stored_schema import (
    ipc_file_extension,
    parquet_file_extension,
    parquet_read_options,
)

__all__ = ["minari_episode_data", "one_batch_per_episode", "reading"]

# Files a pyarrow dataset (so Minari's reader) skips in an episode's directory.
_IGNORED = ("_", ".", "metadata.json")
MAX_EPISODE_METADATA_BYTES = 1 << 20


@contextlib.contextmanager
def reading(data_dir: Path) -> Iterator[None]:
    """Reading errors of a Minari dataset (pyarrow's, minari's...) as a ``DatasetError``.

    Ours, and running out of memory, stay as they are.
    """
    try:
        yield
    except (DatasetError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - minari raises many types for a bad dataset
        raise DatasetError(
            f"cannot read Minari dataset {data_dir}: {type(err).__name__}: {err}"
        ) from err


def _data_files(episode_dir: Path) -> list[Path]:
    return sorted(
        p for p in episode_dir.iterdir() if p.is_file() and not p.name.startswith(_IGNORED)
    )


def one_batch_per_episode(data_dir: Path, episodes: int) -> None:
    """Rewrites the Arrow files of episodes ``0..episodes-1`` as one record batch each.

    Each episode directory ends up holding its rows in ``part-0.arrow``, written under a
    name pyarrow skips and renamed into place.
    """
    for n in range(episodes):
        episode_dir = data_dir / str(n)
        files = _data_files(episode_dir)
        if len(files) == 1 and pa.ipc.open_file(files[0]).num_record_batches == 1:
            continue
        table = pa.concat_tables([pa.ipc.open_file(f).read_all() for f in files])
        table = table.combine_chunks()
        temporary = episode_dir / ".part-0.arrow.tmp"
        with pa.ipc.new_file(temporary, table.schema) as out:
            for batch in table.to_batches():  # one: the columns are one chunk each
                out.write_batch(batch)
        os.replace(temporary, episode_dir / "part-0.arrow")
        for f in files:
            if f.name != "part-0.arrow":
                f.unlink()


def _whole_batch(episode_dir: Path, data_format: str, types: ColumnTypes) -> pa.RecordBatch:
    """An episode's rows, all its files and record batches joined, as one record batch.

    Each file's schema is checked (``types``) before its rows are read.
    """
    # Each file read directly: a pyarrow dataset per episode cost 60% more on small episodes.
    tables = [_read_file(path, data_format, types) for path in _data_files(episode_dir)]
    if not tables:
        raise DatasetError(f"Minari episode {episode_dir} holds no data file")
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    columns = [column.combine_chunks() for column in table.columns]
    return pa.RecordBatch.from_arrays(columns, schema=table.schema)


def _read_file(path: Path, data_format: str, types: ColumnTypes, rows: bool = True) -> pa.Table:
    """The file's rows, read once its schema passed ``types`` (``rows=False``: none of them)."""
    episode = path.parent
    where = f"cannot read Minari dataset {episode.parent}: episode {episode.name}, {path.name}"
    # Before pyarrow builds the schema: building an extension type runs registered code.
    if data_format == "parquet":
        with pa.OSFile(str(path)) as source:
            found = parquet_file_extension(source, source.size())
    else:
        with pa.memory_map(str(path)) as mapped:  # only the footer's pages are read
            found = ipc_file_extension(mapped.read_buffer())
    if found is not None:
        raise extension_unsafe(found, where)
    if data_format == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(str(path), **parquet_read_options())
        types.check(parquet.schema_arrow, where)
        return parquet.read() if rows else parquet.schema_arrow.empty_table()
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        types.check(reader.schema, where)
        return reader.read_all() if rows else reader.schema.empty_table()


def _episode_steps(storage: Any, data_dir: Path, n: int, arrow: bool) -> int:
    """The steps episode ``n``'s metadata records (``total_steps``)."""
    where = f"Minari dataset {data_dir}: episode {n}"
    if arrow:  # read as our other metadata: a regular file of bounded size
        path = data_dir / str(n) / "metadata.json"
        raw = read_regular_file(path, "Minari episode metadata", MAX_EPISODE_METADATA_BYTES)
        try:
            meta = json.loads(raw)
        except ValueError as err:
            raise DatasetError(f"{where} has a metadata.json that is not JSON: {err}") from err
    else:
        meta = next(iter(storage.get_episode_metadata([n])))
    steps = meta.get("total_steps") if isinstance(meta, dict) else None
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise DatasetError(f"{where}: its metadata records no total_steps (an int >= 0)")
    return int(steps)


def minari_episode_data(source: Any, data_dir: Path, jpeg_encoding: bool) -> Iterator[Any]:
    """Each episode of the Minari dataset ``source`` as Minari's episode data, whole.

    Arrow and Parquet episodes are read from their directory as one batch (as Minari's
    reader reads an episode of one batch); others (HDF5) through Minari's reader. Every
    episode's steps are checked against its metadata and, at the end, their sum against the
    dataset's ``total_steps``.

    Every file's schema is checked before its rows are read (:class:`ColumnTypes`), so no
    value is converted through a type whose code the file chose.

    Raises:
        UnsafeDataError: A file holding an Arrow extension type, naming the file and column.
        DatasetError: An episode whose steps are not those its metadata records, naming it,
            steps that do not add up to the dataset's total, or a column of another type than
            the spaces imply, naming the file and column.
    """
    storage = source.storage
    data_format = str(getattr(storage, "FORMAT", ""))
    decode: Any = None
    if data_format in ("arrow", "parquet"):
        with contextlib.suppress(ImportError):  # another minari layout: its reader, checked
            from minari.dataset._storages.arrow_storage import _decode_info, _decode_space

            decode = (_decode_space, _decode_info)
    indices = [int(i) for i in source.episode_indices]
    types = ColumnTypes(source.observation_space, source.action_space, jpeg_encoding=jpeg_encoding)
    if decode is None and data_format in ("arrow", "parquet"):  # Minari's reader: files first
        for n in indices:
            for path in _data_files(data_dir / str(n)):
                _read_file(path, data_format, types, rows=False)
    whole = iter(source.iterate_episodes()) if decode is None else None
    total = 0
    for n in indices:
        where = f"Minari dataset {data_dir}: episode {n}"
        if whole is not None:
            data = next(whole, None)
            if data is None:
                raise DatasetError(f"{where} is missing")
        else:
            batch = _whole_batch(data_dir / str(n), data_format, types)
            data = _decoded(source, batch, n, where, decode, jpeg_encoding)
        steps = len(np.asarray(data.rewards).reshape(-1))
        recorded = _episode_steps(storage, data_dir, n, data_format in ("arrow", "parquet"))
        if steps != recorded:
            raise DatasetError(
                f"{where} holds {steps} steps where its metadata records {recorded}; "
                "refused rather than read wrong"
            )
        total += steps
        yield data
    if total != storage.total_steps:
        raise DatasetError(
            f"Minari dataset {data_dir}: its episodes hold {total} steps where its metadata "
            f"records {storage.total_steps}; refused rather than read wrong"
        )


def _decoded(
    source: Any, batch: pa.RecordBatch, n: int, where: str, decode: Any, jpeg: bool
) -> Any:
    """Minari's reading of one episode's batch (its ``ArrowStorage.get_episodes``)."""
    decode_space, decode_info = decode
    if batch.num_rows < 2:  # Minari's reader fails on the other column types of its file
        raise DatasetError(
            f"cannot read {where}: it has no steps (Minari writes such an episode with "
            "columns of other types, which its own reader refuses)"
        )
    return SimpleNamespace(
        id=n,
        observations=decode_space(
            source.observation_space, batch["observations"], jpeg_encoding=jpeg
        ),
        actions=decode_space(source.action_space, batch["actions"][:-1], jpeg_encoding=jpeg),
        rewards=np.asarray(batch["rewards"])[:-1],
        terminations=np.asarray(batch["terminations"])[:-1],
        truncations=np.asarray(batch["truncations"])[:-1],
        infos=decode_info(batch["infos"]) if "infos" in batch.schema.names else {},
    )

"""Datasets written by :mod:`episodes.io` as Ray Data pipelines, and back.

Reading: an :class:`EpisodeDatasource` makes one read task per shard of a format v2 dataset
(per range of chunks of a v1 dataset), each opening the dataset with ``episodes.io`` in its own
worker and yielding one block: a table of steps (see :func:`~episodes.distributed.rows.
step_columns`) or of episode rows (see :func:`~episodes.distributed.rows.episode_row`).

Writing: every write task of an :class:`EpisodeDatasink` first turns every row of its blocks
into its episode, then appends them with its own ``episodes.io.DatasetWriter`` (the format's
concurrent writers: the first to write creates the dataset, atomically), committing them when
the task ends. So a bad row keeps its whole task's rows out (tasks that ran before it keep
theirs), and rows without an ``episode`` column (or a target of episodes, without
``append``) are refused before the target is touched.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from episodes.buffer.plain_arrays import native_array
from episodes.distributed.continuations import (
    Continuation,
    manifest_layout,
    read_continuations,
)
from episodes.distributed.require import require_ray
from episodes.distributed.rows import (
    episode_from_row,
    episode_row,
    nstep_columns,
    step_columns,
)
from episodes.distributed.step_blocks import check_same_columns
from episodes.distributed.step_types import dataset_step_types
from episodes.distributed.targets import refuse_write_target
from episodes.indexing import as_flag, discount_factor, whole_number

ray = require_ray()
from ray.data import Datasink, Datasource, ReadTask  # noqa: E402
from ray.data.block import BlockAccessor, BlockMetadata  # noqa: E402

__all__ = [
    "EpisodeDatasink",
    "EpisodeDatasource",
    "read_episodes",
    "read_steps",
    "read_transitions",
    "write_episodes",
]

KINDS = ("steps", "transitions", "episodes")


def _ranges(path: str, parallelism: int) -> list[tuple[int, int]]:
    """``[start, stop)`` chunk ranges: one per v2 shard, or ``parallelism`` even v1 ranges."""
    return manifest_layout(path, parallelism)[0]


def _read_block(
    path: str,
    start: int,
    stop: int,
    kind: str,
    n_step: int = 1,
    gamma: float = 0.99,
    ends: np.ndarray | None = None,
    types: dict[str, np.dtype[Any]] | None = None,
    follows: dict[int, Continuation] | None = None,
) -> Iterator[Any]:
    """One block of chunks ``[start, stop)``.

    ``ends`` (per chunk) and ``follows`` (the chunks' continuations): what
    :func:`~episodes.distributed.continuations.manifest_layout` gives for them.

    ``types`` (of :func:`~episodes.distributed.step_types.dataset_step_types`): the dtypes
    every block of the dataset gives its step columns, so that Ray Data can gather them.
    """
    from episodes import io

    # Episode rows carry each chunk as stored (what ``episodes.io.read_episodes`` gives: a
    # list-mode chunk stays one, ragged ones included); step columns need numpy'd chunks.
    numpy = None if kind == "episodes" else True
    episodes = list(io.read_episodes(path, start=start, stop=stop, numpy=numpy))
    if kind == "episodes":
        rows = [episode_row(ep) for ep in episodes]
        batch = {key: _column([row[key] for row in rows]) for key in rows[0]}
        yield BlockAccessor.batch_to_block(batch)
        return
    if ends is None:
        _, every, follows = manifest_layout(path, 1, n_step if kind == "transitions" else 1)
        ends = every[start:stop]
    # A chunk followed by a chunk without steps that ended the episode ends with its last step.
    flags = [(bool(a), bool(b)) for a, b in ends]
    if kind == "transitions":  # horizons reach into the pieces continuing a chunk
        afters = read_continuations(path, start, episodes, follows or {})
        pieces = zip(episodes, flags, afters, strict=True)
        parts = [nstep_columns(e, n_step, gamma, ends=f, after=a) for e, f, a in pieces if len(e)]
    else:
        parts = [step_columns(ep, ends=end) for ep, end in zip(episodes, flags) if len(ep)]
    if not parts:
        return
    check_same_columns(parts, f"chunks {start}-{stop} of {path}")
    # Episode ids as a plain string column, taken from one string per chunk. Not an Arrow
    # dictionary column: Ray Data can neither sort one nor group it across blocks.
    ids = pa.array([str(part["episode_id"][0]) for part in parts], pa.string())
    lengths = [len(part["t"]) for part in parts]
    codes = np.repeat(np.arange(len(parts), dtype=np.int64), lengths)
    types = types or {}
    batch = {
        name: np.concatenate([part[name] for part in parts]).astype(
            types.get(name, parts[0][name].dtype), copy=False
        )
        for name in parts[0]
        if name != "episode_id"
    }
    table = _numeric_block(batch)
    yield table.add_column(0, "episode_id", ids.take(pa.array(codes)))


def _numeric_block(batch: dict[str, np.ndarray]) -> Any:
    """The Arrow table Ray Data makes of numeric numpy columns, without its type inference.

    ``BlockAccessor.batch_to_block`` asks Arrow to infer each column's type from its values,
    which walks every row of a multi-dimensional column (about a tenth of a second per
    million-step block); the types of numpy columns are known: plain Arrow arrays for 1-d
    columns (numbers are not copied), Ray's tensor extension for the others, as Ray builds.
    A column stored big-endian (``>f4``) is made native first: Arrow would refuse it, or
    read its bytes as native numbers.
    """
    batch = {name: native_array(a) for name, a in batch.items()}
    if not all(a.dtype.kind in "biuf" for a in batch.values()):
        return BlockAccessor.batch_to_block(batch)
    from ray.data.extensions import ArrowTensorArray

    columns = [
        ArrowTensorArray.from_numpy(a) if a.ndim > 1 else pa.array(a) for a in batch.values()
    ]
    return pa.Table.from_arrays(columns, names=list(batch))


def _column(values: list[Any]) -> np.ndarray:
    # Strings stay objects: a numpy string array would cut an id's trailing NUL.
    if all(isinstance(v, (int, float, bool)) for v in values):
        return np.asarray(values)
    out = np.empty(len(values), dtype=object)  # episodes stay Python objects
    out[:] = values
    return out


class EpisodeDatasource(Datasource):
    """A dataset of :mod:`episodes.io` as a Ray Data source of steps or of episode rows.

    Args:
        path: The dataset directory (format v1 or v2).
        kind: ``"steps"`` (one row per step), ``"transitions"`` (one ``n_step`` transition per
            step, see :func:`~episodes.distributed.rows.nstep_columns`) or ``"episodes"`` (one
            row per chunk).
        n_step: Steps per transition (``"transitions"`` only).
        gamma: Discount of the n-step rewards (``"transitions"`` only).

    Raises:
        ValueError: An unknown ``kind``, or ``n_step < 1``.
        episodes.io.DatasetError: The path is not a readable dataset.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> source = EpisodeDatasource(path, "transitions", n_step=2, gamma=0.5)
        >>> source.kind, source.n_step, source.info.num_steps
        ('transitions', 2, 2)
        >>> [block["reward"].to_pylist() for task in source.get_read_tasks(1) for block in task()]
        [[2.0, 2.0]]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        kind: str = "steps",
        *,
        n_step: int = 1,
        gamma: float = 0.99,
    ):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        n_step = whole_number(n_step, "n_step", 1)
        from episodes import io

        self.n_step = int(n_step)
        self.gamma = discount_factor(gamma)
        self.path = os.fspath(Path(path).resolve())
        self.kind = kind
        self.info = io.dataset_info(self.path)

    def estimate_inmemory_data_size(self) -> int | None:
        """The bytes of the dataset's committed files.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
            ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> from episodes.io import dataset_info
            >>> size = EpisodeDatasource(path).estimate_inmemory_data_size()
            >>> size > 0, size == dataset_info(path).nbytes
            (True, True)
        """
        return int(self.info.nbytes)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any = None,
    ) -> list[ReadTask]:
        """One task per shard (v2) or per range of chunks (v1); see the module docstring.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path, shard_bytes=1) as w:  # one chunk per shard
            ...     for name in "ab":
            ...         w.write(SingleAgentEpisode(name, observations=[0, 1, 2], actions=[1, 0],
            ...                                    rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> tasks = EpisodeDatasource(path).get_read_tasks(parallelism=8)
            >>> [[block.num_rows for block in task()] for task in tasks]  # run here, not on Ray
            [[2], [2]]
        """
        # The chunks' end flags are read here once, not by every task from the whole manifest.
        n_step = self.n_step if self.kind == "transitions" else 1
        ranges, ends, follows = manifest_layout(self.path, parallelism, n_step)
        types = None
        if self.kind != "episodes":  # one type per step column in every block, or a refusal
            types = dataset_step_types(self.path, f"chunks 0-{len(ends)} of {self.path}")
        total = max(1, self.info.num_chunks)
        tasks = []
        for start, stop in ranges:
            share = (stop - start) / total
            rows = (stop - start) if self.kind == "episodes" else None
            metadata = BlockMetadata(
                num_rows=rows,
                size_bytes=int(self.info.nbytes * share),
                input_files=(self.path,),  # the dataset read: a write back into it is refused
                exec_stats=None,
            )
            read = functools.partial(
                _read_block,
                self.path,
                start,
                stop,
                self.kind,
                self.n_step,
                self.gamma,
                None if self.kind == "episodes" else ends[start:stop].copy(),
                types,
                {i: follows[i] for i in range(start, stop) if i in follows},
            )
            tasks.append(ReadTask(read, metadata, per_task_row_limit=per_task_row_limit))
        return tasks


@functools.cache
def _read_datasource_options() -> frozenset[str]:
    # Ray passes unknown ``**read_args`` only to legacy datasources, so ours would drop them
    # silently: ``read_steps(path, n_step=3)`` would read 1-step rows.
    params = inspect.signature(ray.data.read_datasource).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in named and p.name != "datasource")


def _check_read_args(read_args: dict[str, Any], reader: str) -> None:
    unknown = sorted(set(read_args) - _read_datasource_options())
    if not unknown:
        return
    hint = ""
    if reader != "read_transitions" and {"n_step", "gamma"} & set(unknown):
        hint = " (n-step rows: read_transitions(path, n_step=..., gamma=...))"
    raise TypeError(
        f"{reader}() got unknown arguments {unknown}: not {reader}'s, and Ray would ignore "
        f"them; it takes ray.data.read_datasource's {sorted(_read_datasource_options())}{hint}"
    )


def _read(source: EpisodeDatasource, read_args: dict[str, Any]) -> Any:
    if source.info.version >= 2 and "override_num_blocks" not in read_args:
        # One block per read task: Ray's default asks for 200 blocks and slices every shard's
        # block into dozens, each stored apart (0.75 of 2 s reading 1M steps in 4 shards).
        read_args = {**read_args, "override_num_blocks": max(1, len(_ranges(source.path, 1)))}
    return ray.data.read_datasource(source, **read_args)


def read_steps(path: str | os.PathLike[str], **read_args: Any) -> Any:
    """A ``ray.data.Dataset`` of the dataset's steps (one read task and block per shard).

    ``terminated``/``truncated`` mark the step that ended the episode, also where a later
    stored chunk without steps, starting at its ``t``, ended it (read from the manifest, as
    ``episodes.io.load_episode`` joins the chunks); the same holds for :func:`read_transitions`.

    Args:
        path: The dataset directory.
        **read_args: Further ``ray.data.read_datasource`` arguments (``override_num_blocks``
            to have Ray split the shards' blocks further).

    Raises:
        TypeError: A name in ``read_args`` that ``ray.data.read_datasource`` does not take
            (Ray would ignore it silently; ``n_step``/``gamma`` belong to
            :func:`read_transitions`).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> rows = read_steps(path).take_all()
        >>> [(r["episode_id"], r["t"], r["obs"], r["reward"], r["next_obs"]) for r in rows]
        [('a', 0, 0, 1.0, 1), ('a', 1, 1, 2.0, 2)]
    """
    _check_read_args(read_args, "read_steps")
    return _read(EpisodeDatasource(path, "steps"), read_args)


def read_transitions(
    path: str | os.PathLike[str], *, n_step: int = 1, gamma: float = 0.99, **read_args: Any
) -> Any:
    """A ``ray.data.Dataset`` of ``n_step`` transitions, one per step (one task per shard).

    Columns: those of :func:`read_steps`, with ``reward`` the discounted n-step sum,
    ``next_obs`` the observation ``n_steps`` later, plus ``discount`` (``gamma**n_steps``) and
    ``n_steps`` (see :func:`~episodes.distributed.rows.nstep_columns`; shorter only where the
    episode's stored steps end: horizons reach across the pieces that continue one another,
    as in ``TransitionDataset``; see :mod:`~episodes.distributed.continuations`).

    Raises:
        TypeError: A name in ``read_args`` that ``ray.data.read_datasource`` does not take
            (a typo such as ``n_steps=3`` is refused, not ignored).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> rows = read_transitions(path, n_step=2, gamma=0.5).take_all()
        >>> [(r["t"], r["reward"], r["next_obs"], r["discount"], r["n_steps"]) for r in rows]
        [(0, 2.0, 2, 0.25, 2), (1, 2.0, 2, 0.5, 1)]
    """
    _check_read_args(read_args, "read_transitions")
    source = EpisodeDatasource(path, "transitions", n_step=n_step, gamma=gamma)
    return _read(source, read_args)


def read_episodes(path: str | os.PathLike[str], **read_args: Any) -> Any:
    """A ``ray.data.Dataset`` with one row per stored chunk (the ``episode`` column holds it).

    Each chunk comes as stored, as ``episodes.io.read_episodes(path)`` gives it (a list-mode
    chunk stays one).

    Args:
        path: The dataset directory.
        **read_args: Further ``ray.data.read_datasource`` arguments.

    Raises:
        TypeError: A name in ``read_args`` that ``ray.data.read_datasource`` does not take.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> rows = read_episodes(path).take_all()
        >>> [(r["id"], r["length"], r["return"], r["episode"].get_actions()) for r in rows]
        [('a', 2, 3.0, [1, 0])]
        >>> rows[0]["episode"].is_numpy  # each chunk as stored: this one in list mode
        False
    """
    _check_read_args(read_args, "read_episodes")
    return _read(EpisodeDatasource(path, "episodes"), read_args)


class EpisodeDatasink(Datasink[int]):
    """Writes a Ray dataset of episode rows into one format v2 dataset.

    Args:
        path: The dataset directory (created by the first task that writes; a write of no
            rows leaves an empty dataset). Refused as ``write_episodes`` refuses it.
        metadata: An ``episodes.io.DatasetMetadata`` used when the dataset is created.
        append: Add to a dataset that holds episodes.
        sources: The datasets the written rows are read from (refused as ``path``).
        **writer_options: Further ``episodes.io.DatasetWriter`` arguments.

    Example:
        >>> import tempfile
        >>> import pandas as pd
        >>> import ray
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.distributed import episode_row
        >>> from episodes.io import dataset_info
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> rows = [episode_row(SingleAgentEpisode(name, observations=[0, 1], actions=[1],
        ...                                         rewards=[1.0], len_lookback_buffer=0))
        ...         for name in "abc"]
        >>> sink = EpisodeDatasink(tempfile.mkdtemp())
        >>> ray.data.from_pandas(pd.DataFrame(rows)).write_datasink(sink)
        >>> sink.num_written, dataset_info(sink.path).num_episodes
        (3, 3)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        metadata: Any = None,
        *,
        append: bool = False,
        sources: Iterable[str] = (),
        **writer_options: Any,
    ):
        self.path = os.fspath(Path(path).resolve())
        self.metadata = metadata
        self.append = as_flag(append, "append")
        self.sources = tuple(sources)
        self.writer_options = writer_options
        self.num_written = 0

    def on_write_start(self, schema: Any = None) -> None:
        """Refuses rows without an ``episode`` column; creates nothing (the tasks do).

        Ray Data calls it with the schema of the first rows to write when it knows it (None
        when the write runs in the tasks that make the rows: they check each row). An existing
        dataset is cleaned of dead writers' leftovers here, once, if no other writer holds it;
        the write tasks then open their writers without looking (``clean=False``), where each
        would list ``shards/``, so that a write of N blocks cost N times the dataset's shards.

        Raises:
            TypeError: ``schema`` names no ``episode`` column.
            episodes.io.DatasetError: A target that ``write_episodes`` refuses.

        Example:
            >>> import os, tempfile
            >>> import pyarrow as pa
            >>> sink = EpisodeDatasink(tempfile.mkdtemp() + "/new")
            >>> sink.on_write_start(pa.schema([("episode", pa.binary())]))
            >>> os.path.exists(sink.path)  # the first task that writes creates it
            False
            >>> sink.on_write_start(pa.schema([("obs", pa.float32())]))  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            TypeError: write_episodes needs rows of episodes (an 'episode' column, ...['obs']
        """
        _check_schema(schema)
        refuse_write_target(self.path, self.metadata, append=self.append, sources=self.sources)
        from episodes.io import DatasetWriter
        from episodes.io.format import MANIFEST_FILE

        clean = as_flag(self.writer_options.get("clean", True), "clean")  # as the writer does
        exists = os.path.exists(os.path.join(self.path, MANIFEST_FILE))
        if exists and clean:
            DatasetWriter(self.path, metadata=self.metadata, **self.writer_options).close()

    def write(self, blocks: Iterable[Any], ctx: Any) -> int:
        """Appends the episodes of this task's blocks; returns how many.

        Every row of every block is turned into its episode before the first is written: a
        row that is not an episode row raises with nothing of this task appended.

        Raises:
            TypeError: A row without a ``SingleAgentEpisode`` in its ``episode`` column.

        Example:
            >>> import tempfile
            >>> import pandas as pd
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import dataset_info
            >>> sink = EpisodeDatasink(tempfile.mkdtemp())
            >>> block = pd.DataFrame({"episode": [SingleAgentEpisode(
            ...     "a", observations=[0, 1], actions=[1], rewards=[1.0], len_lookback_buffer=0)]})
            >>> sink.write([block, block], ctx=None)  # a Ray block per item: two chunks
            2
            >>> dataset_info(sink.path).num_steps
            2
        """
        from episodes.io import DatasetWriter

        episodes: list[Any] = []
        for block in blocks:
            rows: Iterable[Any] = BlockAccessor.for_block(block).iter_rows(public_row_format=True)
            episodes.extend(episode_from_row(row) for row in rows)
        if not episodes:
            return 0
        # Created here if need be (atomically: tasks may race), so that a write whose every
        # task is refused leaves no new dataset behind.
        # clean=False: the sink removed dead writers' leftovers once, in on_write_start.
        options = {**self.writer_options, "clean": False}
        with DatasetWriter(self.path, metadata=self.metadata, **options) as writer:
            for episode in episodes:
                writer.write(episode)
        return len(episodes)

    def on_write_complete(self, write_result: Any) -> None:
        """Keeps the total count (``num_written``); creates the dataset if no row came.

        A Ray dataset without rows (one read from an empty dataset) starts no task that
        writes, and still makes an empty dataset here.

        Example:
            >>> import tempfile
            >>> from ray.data.datasource import WriteResult
            >>> from episodes.io import dataset_info
            >>> sink = EpisodeDatasink("unused")
            >>> sink.on_write_complete(WriteResult(num_rows=5, size_bytes=0, write_returns=[2, 3]))
            >>> sink.num_written  # the write tasks' counts, summed
            5
            >>> sink = EpisodeDatasink(tempfile.mkdtemp())
            >>> sink.on_write_complete(WriteResult(num_rows=0, size_bytes=0, write_returns=[]))
            >>> sink.num_written, dataset_info(sink.path).num_chunks  # no block: empty, readable
            (0, 0)
        """
        from episodes.io import DatasetWriter

        self.num_written = int(sum(write_result.write_returns))
        if self.num_written == 0:
            DatasetWriter(self.path, metadata=self.metadata, **self.writer_options).close()


def write_episodes(
    dataset: Any,
    path: str | os.PathLike[str],
    *,
    metadata: Any = None,
    append: bool = False,
    **writer_options: Any,
) -> int:
    """Writes a Ray dataset of episode rows (an ``episode`` column) as one format v2 dataset.

    Args:
        dataset: A ``ray.data.Dataset`` whose rows carry ``SingleAgentEpisode`` objects in an
            ``episode`` column (what :func:`read_episodes` gives, or ``episode_row`` makes).
        path: The target directory: new or an empty dataset (one holding episodes only with
            ``append``; not one ``dataset`` reads: unseen through a union or ``materialize``).
        metadata: The new dataset's ``episodes.io.DatasetMetadata`` (into an existing dataset:
            None, or the metadata it stores).
        append: Add to a dataset that holds episodes (comparing no env ids or spaces).
        **writer_options: Further ``episodes.io.DatasetWriter`` arguments.

    Returns:
        The number of episodes (chunks) written.

    Raises:
        TypeError: ``dataset`` is not a ``ray.data.Dataset`` or its rows have no ``episode``
            column (the target is left untouched), or a row holds no ``SingleAgentEpisode``
            there (raised by its write task, as Ray's ``RayTaskError`` that is also a
            ``TypeError``): nothing of that task's rows is written, but write tasks that
            finished before it keep what they appended (with one task, as for a dataset of
            one block, the target is left untouched: not even created).
        episodes.io.DatasetError: Before anything is written: ``path`` holds episodes and not
            ``append``, ``dataset`` reads it (``input_files()`` says so), or it stores
            other metadata than ``metadata``. Write to a new directory (``episodes merge``).
        ray.exceptions.RayError: A write task's process died (out of memory, a lost node).
            Such a task is not retried, as a retry would append again the chunks it had
            committed: the target keeps what every task committed before, the dead one's
            committed shards included, so write the copy again into a new directory.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> from episodes.io import dataset_info
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> copy = tempfile.mkdtemp()
        >>> write_episodes(read_episodes(path), copy)
        1
        >>> dataset_info(copy).num_steps, dataset_info(copy).episodes[0].id_
        (2, 'a')
    """
    if not isinstance(dataset, ray.data.Dataset):
        raise TypeError(
            f"write_episodes needs a ray.data.Dataset of episode rows (as read_episodes "
            f"gives), got {type(dataset).__name__}"
        )
    _check_schema(dataset.schema(fetch_if_missing=False))  # None: not known without reading
    sources = dataset.input_files()  # the datasets it reads (through maps and filters too)
    sink = EpisodeDatasink(path, metadata, append=append, sources=sources, **writer_options)
    refuse_write_target(path, metadata, append=append, sources=sources)  # and as it starts
    # Ray retries a task whose process died from its start, and a retry would append again
    # what the first attempt had committed: such a write fails instead.
    dataset.write_datasink(sink, ray_remote_args={"max_retries": 0})
    return sink.num_written


def _check_schema(schema: Any) -> None:
    """Refuses a schema (Arrow's, or Ray Data's) without an ``episode`` column; None passes."""
    names = getattr(schema, "names", None)
    if names is not None and "episode" not in names:
        raise TypeError(
            "write_episodes needs rows of episodes (an 'episode' column, as read_episodes or "
            f"episode_row gives), got columns {list(names)}"
        )

"""Map-style torch datasets over a v2 dataset: transitions, n-step transitions, sequences.

Items are read on demand from memory-mapped shards (a few open at a time), so a dataset
larger than RAM loads with ``DataLoader(..., shuffle=True, num_workers=k)`` in bounded
memory: each worker opens its own memory maps (nothing large is pickled to the workers). A
compressed shard's record batches are decompressed memory, not a map: the plans a dataset
keeps hold at most ``max_cached_bytes`` of them alive. Every piece that gives items must
record the same extra model outputs (checked as pieces are read: a ``DatasetError`` naming
two that differ), or a batch holding two of them could not be collated. Each column is
given in one dtype and shape over the whole dataset, joined when the dataset is made from
each shard's index (:mod:`episodes.io.item_types`): int32 actions beside int64 ones come
out int64, float32 observations beside float64 ones float64 (values kept); a mix no dtype
holds with its values (other kinds, shapes or nestings) is a ``DatasetError`` then, but for
rewards: bools, ints and floats together come out float64, as n-step sums do.
Importing this module imports torch; ``episodes.io`` does not import it.

Items go over an episode's pieces (a runner's episode is written one chunk, one piece, at a
time): the pieces of one id that continue one another, each starting at the ``t`` where the
one before it (in time order) stopped, without that one having ended the episode, are one run
of steps, read as the episode written whole would be (:mod:`episodes.io.piece_windows`; the
manifest decides, no data is read). Pieces of an id that do not continue one another (steps
left out, a piece or steps stored twice, steps after the episode's end) are separate runs: no
window or n-step horizon crosses them, and each gives the items it holds (``episodes
validate`` reports them). Runs come in the order their first piece was written, each run's
items in time order, so a dataset of whole episodes counts as before.

Only columns stored as arrays can be sampled (numpy episodes, and list episodes whose items
share one structure); a JSON-stored column raises :class:`~episodes.io.DatasetError`. Items
are in native byte order: a leaf stored big-endian (``>f4``, which torch and the
``DataLoader``'s collation refuse) comes out as a native copy.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
    ...                                rewards=[1.0, 1.0], terminated=True,
    ...                                len_lookback_buffer=0))
    >>> data = TransitionDataset(path, n_step=2, gamma=0.5)
    >>> item = data[0]
    >>> len(data), float(item["rewards"]), float(item["next_obs"]), item["terminated"]
    (2, 1.5, 2.0, True)
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections import OrderedDict
from typing import Any, TypeVar

import numpy as np

from episodes.indexing import as_flag, discount_factor, whole_number
from episodes.io.arrow_leaves import leaf_from_arrow
from episodes.io.errors import CorruptDatasetError, DatasetError
from episodes.io.item_steps import RunHeads, item_index, item_indices
from episodes.io.item_types import (
    CastColumn,
    ItemTypes,
    column_types,
    dataset_item_types,
    joined_rewards,
    joined_types,
    types_differ,
)
from episodes.io.native_columns import _native
from episodes.io.nstep import discount_weights, discounted_sum, summable_rewards
from episodes.io.open_shards import AUTO, MaxOpen
from episodes.io.piece_windows import PieceRuns, joined_steps, piece_runs
from episodes.io.pinned import pinned_bytes
from episodes.io.returns_to_go import RunReturns, run_returns
from episodes.io.shard_codec import EXTRAS, column_of
from episodes.io.shard_columns import plan_columns
from episodes.io.shard_reader import Dataset
from episodes.io.torch_needed import needed_torch
from episodes.io.v2_read import v2_dataset
from episodes.io.values import decode_value
from episodes.io.window_padding import padded_window

__all__ = ["NoWindowsWarning", "SequenceDataset", "TransitionDataset"]
_torch: Any = needed_torch("episodes.io.torch_data", "read datasets with load_episodes or Dataset")

# Column plans kept per process (about 1.7 KB each for CartPole pieces). A shuffled pass
# draws every piece again and again, so the cache must hold the pieces it cycles through:
# at 4096, with the shards' own caches bounded, a 9.6k-piece dataset read 2.3x slower. The
# plans are made here, not through a shard's own cache (``Shard.columns``, up to 4096 per open
# shard): that one kept them a second time, 64 shards' worth beside these.
_PLAN_CACHE = 16384
# Bytes the cached plans may pin outside the shards' memory maps (a compressed shard's
# decompressed batches): without this bound a shuffled pass over a zstd dataset kept every
# piece it drew decompressed, in every worker (855 MB for a 4 MB dataset of Atari frames).
MAX_CACHED_BYTES = 256 << 20

_Data = TypeVar("_Data", bound="_EpisodeData")


class NoWindowsWarning(UserWarning):
    """A :class:`SequenceDataset` holds steps but no item: ``length`` exceeds every run.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0],
        ...                                rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     data = SequenceDataset(path, length=3)
        >>> len(data), caught[0].category.__name__, "is 2" in str(caught[0].message)
        (0, 'NoWindowsWarning', True)
    """


class _EpisodeData(_torch.utils.data.Dataset[dict[str, Any]]):
    """Shared machinery: a reader opened lazily per process and an index of sample counts."""

    _closed = False  # set by close() (a class default: a pickle of an older build lacks it)
    _heads: RunHeads | None = None  # episode_steps's, made in each process at its first call

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_open_shards: MaxOpen = AUTO,
        max_cached_bytes: int = MAX_CACHED_BYTES,
    ):
        self._max_open = max_open_shards
        self.max_cached_bytes = whole_number(max_cached_bytes, "max_cached_bytes", 0)
        reader = v2_dataset(path, type(self).__name__, max_open_shards=max_open_shards)
        # Absolute (the reader's root): items are read lazily, in workers and after a chdir.
        self._path = str(reader.root)
        # The runs of steps items lie in: an episode's pieces that continue one another.
        self._runs = piece_runs(reader.summaries)
        counts = self._counts(self._runs.lengths)
        self._ends = np.cumsum(counts)
        # One dtype and shape per column over the pieces that give items, from the shards'
        # indexes (no data read): a batch never holds items of two types.
        gives = np.zeros(len(reader.summaries), bool)
        gives[self._runs.pieces] = np.repeat(counts > 0, np.diff(self._runs.bounds))
        self._types = dataset_item_types(reader, gives, self._rewards_as)
        self._extras: tuple[int, list[str]] | None = None  # the first piece read: its keys
        # The shards these counts come from: a reader opened later must find them first.
        self._shards = (len(reader.shards), _shards_digest(reader))
        self._reader: Dataset | None = None
        # Per episode: its shard, column plans, and bytes pinned outside the shard's map (sum:
        # _pinned). Plans view the map: a closed shard's go, or max_open_shards bounds nothing.
        self._plans: OrderedDict[int, tuple[Any, dict[str, Any], int]] = OrderedDict()
        self._evictions = self._pinned = 0

    def _counts(self, lengths: np.ndarray) -> np.ndarray:
        """Items per run of ``lengths`` steps."""
        raise NotImplementedError

    def _rewards_as(self, types: ItemTypes) -> ItemTypes:
        """The types of the rewards an item holds, from the stored rewards' types."""
        return types

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def close(self) -> None:
        """Closes this process's reader (its shards' files and maps); later items raise.

        Idempotent; a ``with`` block closes it too. Items already read are copies and stay;
        reading one afterwards, here or in a ``DataLoader`` worker started later, is a
        ``DatasetError`` (make a new dataset to read again).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
            ...                                len_lookback_buffer=0))
            >>> with TransitionDataset(path) as data:
            ...     item = data[0]
            >>> item["obs"].tolist(), len(data)
            (0, 1)
            >>> data[0]  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            episodes.io.errors.DatasetError: this TransitionDataset of ... is closed: make a new one
        """
        self._closed, self._heads = True, None
        reader, self._reader = self._reader, None
        self._plans.clear()
        self._pinned = 0
        if reader is not None:
            reader.close()

    def __enter__(self: _Data) -> _Data:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            name = type(self).__name__
            raise DatasetError(f"this {name} of {self._path} is closed: make a new one")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = state["_heads"] = None  # each worker opens its own memory maps
        state["_plans"], state["_evictions"], state["_pinned"] = OrderedDict(), 0, 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A pickle of a build before the shard check and the byte bound lacks their fields.
        defaults = {
            "_shards": None,
            "max_cached_bytes": MAX_CACHED_BYTES,
            "_pinned": 0,
            "_extras": None,
            "_types": None,
        }
        if "_runs" not in state:  # a build before runs: items inside each piece, as counted
            state = {**state, "_runs": PieceRuns.separate(state["lengths"], state["flags"])}
        self.__dict__.update({**defaults, **state, "_plans": OrderedDict()})

    def _locate(self, index: int) -> tuple[int, int]:
        index = item_index(index, len(self))  # True is no item 1 (nor 1.0)
        run = int(np.searchsorted(self._ends, index, side="right"))
        start = int(self._ends[run - 1]) if run else 0
        return run, index - start

    def episode_steps(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """The episode ids and env times of item indices, as the replay buffers' method.

        ``(ids, t)``, one each per index in order: decoded ids (an object array) and the int64
        env times of a transition's ``obs`` or a window's first step. ``indices``: one or a 1-d
        list, array or tensor, each taken as ``data[i]`` takes one (its ``TypeError`` and
        ``IndexError``; another shape a ``ValueError``). No shard read (the manifest, once).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode(("a", 1), observations=[0, 1, 2], actions=[0, 0],
            ...                                rewards=[1.0, 1.0], t_started=7,
            ...                                len_lookback_buffer=0))
            >>> ids, t = TransitionDataset(path).episode_steps([1, -2])
            >>> ids.tolist(), t.tolist()
            ([('a', 1), ('a', 1)], [8, 7])
        """
        self._check_open()
        items = item_indices(indices, len(self))
        if self._heads is None:  # each run's first piece, from this process's manifest read
            self._heads = RunHeads(self._open().summaries, self._runs)
        return self._heads.steps(self._ends, items)

    def _open(self) -> Dataset:
        if self._reader is None:
            self._check_open()  # close() dropped the plans: every read after it comes here
            self._reader = self._open_reader()
        return self._reader

    def _plan(self, i: int) -> dict[str, Any]:
        cached = self._plans.get(i)
        if cached is not None:
            self._plans.move_to_end(i)
            return cached[1]
        reader = self._open()
        shard, j = reader.locate(i)
        if reader.evictions != self._evictions:
            self._evictions = reader.evictions
            alive = {id(s) for s in reader.open_shards()}
            for k in [k for k, (s, _, _) in self._plans.items() if id(s) not in alive]:
                self._pinned -= self._plans.pop(k)[2]
        # This cache alone holds the plan, and its views: the shard's own view cache would
        # keep decompressed batches past this cache's byte bound.
        columns = plan_columns(_UncachedViews(shard), j)
        if EXTRAS in columns:  # a batch holding both would fail in default_collate (KeyError)
            keys = sorted(columns[EXTRAS])
            if self._extras is None:
                self._extras = (i, keys)
            elif keys != self._extras[1]:
                _refuse_extras(reader, self._extras, (i, keys))
        missing = [n for n in ("observations", "actions", "rewards") if n not in columns]
        if missing or EXTRAS not in columns:
            raise CorruptDatasetError(
                f"{shard.where} episode {j}: columns {missing or [EXTRAS]} are missing"
            )
        needed = [columns[name] for name in ("observations", "actions", "rewards")]
        pairs = [*zip(("observations", "actions", "rewards"), needed, strict=True)]
        pairs += [(f"{EXTRAS}/{key}", column) for key, column in columns[EXTRAS].items()]
        as_json = [name for name, column in pairs if not column.stored]
        if as_json:
            raise DatasetError(
                f"{shard.where} episode {j}: {', '.join(as_json)} stored as JSON (mixed or "
                "unstructured items), which a torch dataset cannot batch; store numpy episodes "
                "(episode.to_numpy())"
            )
        kept = [*needed, *columns[EXTRAS].values()]
        pinned = pinned_bytes(shard, [view for column in kept for view in column.views])
        plan = {name: _native(columns[name]) for name in ("observations", "actions", "rewards")}
        plan[EXTRAS] = {key: _native(column) for key, column in columns[EXTRAS].items()}
        self._cast(i, plan, columns, reader)
        self._plans[i] = (shard, plan, pinned)
        self._pinned += pinned
        while len(self._plans) > 1 and (
            len(self._plans) > _PLAN_CACHE or self._pinned > self.max_cached_bytes
        ):  # the least recently used go; the plan just made stays
            self._pinned -= self._plans.popitem(last=False)[1][2]
        return plan

    def _cast(self, i: int, plan: dict[str, Any], columns: dict[str, Any], reader: Dataset) -> None:
        """Makes ``plan``'s columns give the dataset's joined types (a DatasetError if not)."""
        places = [(plan, columns, name, name) for name in ("observations", "actions", "rewards")]
        places += [(plan[EXTRAS], columns[EXTRAS], k, f"{EXTRAS}/{k}") for k in plan[EXTRAS]]
        for holder, stored, key, name in places:
            want = (self._types or {}).get(name)
            if want is None:  # no piece read when the dataset was made has the column
                continue
            have = column_types(stored[key])
            have = self._rewards_as(have) if name == "rewards" else have
            if have != want[0]:
                join = joined_rewards if name == "rewards" else joined_types
                if join(want[0], have) != want[0]:
                    raise types_differ(reader, name, (want[1], want[0]), (i, have))
                holder[key] = CastColumn(holder[key], want[0], have)

    def _open_reader(self) -> Dataset:
        """This process's reader, of the dataset counted (or one it was appended to)."""
        reader = Dataset(self._path, max_open_shards=self._max_open)
        if self._shards is None:  # unpickled from a build before the check: nothing to compare
            return reader
        count, digest = self._shards
        if _shards_digest(reader, count) != digest:
            raise CorruptDatasetError(
                f"{self._path} is no longer the dataset this {type(self).__name__} was made from "
                "(its shards were replaced or removed): make a new one"
            )
        return reader


def _refuse_extras(reader: Dataset, *pieces: tuple[int, list[str]]) -> None:
    (a, a_keys), (b, b_keys) = pieces
    ids = [decode_value(reader.summaries[k].id_, blob=None, where="manifest id") for k in (a, b)]
    raise DatasetError(
        f"{reader.root}: pieces {a} (episode {ids[0]!r}) and {b} (episode {ids[1]!r}) hold "
        f"other extra_model_outputs keys ({a_keys} and {b_keys}): a DataLoader batch cannot "
        "hold both; filter or split the dataset, or read episodes instead"
    )


def _shards_digest(reader: Dataset, count: int | None = None) -> str:
    """A digest of the first ``count`` shards' names and index hashes (all: None)."""
    shards = reader.shards[:count]
    if count is not None and len(shards) < count:
        return ""
    return hashlib.sha256(
        "".join(f"{s.name}:{s.index_sha256}\n" for s in shards).encode()
    ).hexdigest()


class _UncachedViews:
    """A shard whose leaf views are made afresh, as ``Shard.view`` makes them, not cached."""

    __slots__ = ("_shard",)

    def __init__(self, shard: Any):
        self._shard = shard

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)

    def view(self, info: dict[str, Any], k: int) -> np.ndarray:
        shard = self._shard
        column = column_of(shard.parts[k], info["path"], shard.where)
        full = {**info, "count": len(column)}
        return leaf_from_arrow(column, full, 0, len(column), nulls_ok=True, where=shard.where)


class TransitionDataset(_EpisodeData):
    """One item per step: ``obs``, ``actions``, ``rewards``, ``next_obs``, flags, extras.

    With ``n_step > 1``, ``rewards`` is the discounted sum (float64) of up to ``n_step`` rewards
    (per component for vector rewards: shape ``(c,)`` rewards give shape ``(c,)``; complex
    rewards are a ``TypeError``, as for ``get_return``), ``next_obs`` the observation after
    them, and ``n`` how many were summed (fewer only where the episode's stored steps end: an
    episode written in pieces that continue one another sums across them, see the module).
    ``terminated``/``truncated`` say whether that ``next_obs`` ends the episode that way.

    Args:
        path: A v2 dataset.
        n_step: Steps per transition.
        gamma: Discount for n-step returns.
        max_open_shards: Shards open at once per process: ``"auto"``, as many as are cheap to
            keep (:mod:`episodes.io.open_shards`: every shard of a dataset of many small
            uncompressed ones), or an int >= 1, as for :class:`~episodes.io.Dataset`.
        max_cached_bytes: Bytes of decompressed data (a compressed shard's batches) that the
            cached column plans may keep alive per process; the least recently used go first.
            Uncompressed shards' plans view their memory map and do not count.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode(observations=[0, 1, 2], actions=[5, 6],
        ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> data = TransitionDataset(path)
        >>> [(int(d["obs"]), int(d["actions"]), int(d["next_obs"])) for d in data]
        [(0, 5, 1), (1, 6, 2)]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        max_open_shards: MaxOpen = AUTO,
        max_cached_bytes: int = MAX_CACHED_BYTES,
    ):
        # Checked here, not at the first item inside a DataLoader worker.
        self.n_step = whole_number(n_step, "n_step", 1)
        self.gamma = discount_factor(gamma)
        super().__init__(path, max_open_shards=max_open_shards, max_cached_bytes=max_cached_bytes)

    def _counts(self, lengths: np.ndarray) -> np.ndarray:
        return lengths

    def _rewards_as(self, types: ItemTypes) -> ItemTypes:
        if self.n_step == 1:  # the stored reward
            return types
        # n-step sums are float64 (summable_rewards); complex ones are refused when read
        leaves = tuple((np.dtype(np.float64) if d.kind in "biuf" else d, s) for d, s in types[1])
        return types[0], leaves

    def __getitem__(self, index: int) -> dict[str, Any]:
        run, t = self._locate(index)
        runs = self._runs
        length = int(runs.lengths[run])
        k = min(self.n_step, length - t)
        spans = runs.spans(run, t, t + k)
        first = self._plan(spans[0][0])
        last = first if len(spans) == 1 else self._plan(spans[-1][0])
        start = spans[0][1]
        if self.n_step == 1:  # the stored reward; n-step sums are float64 at every t
            reward = first["rewards"].take(start, copy=True)
        else:  # per component for vector rewards; terms of weight 0 are left out
            plans = [first] if len(spans) == 1 else [self._plan(i) for i, _, _ in spans]
            parts = [p["rewards"].take(a, b) for p, (_, a, b) in zip(plans, spans, strict=True)]
            chunk = joined_steps([summable_rewards(part) for part in parts])
            reward = discounted_sum(chunk, discount_weights(self.gamma, k))
        ends = t + k == length
        return {
            "obs": first["observations"].take(start, copy=True),
            "actions": first["actions"].take(start, copy=True),
            "rewards": reward,
            "next_obs": last["observations"].take(spans[-1][2], copy=True),
            "terminated": bool(ends and runs.terminated[run]),
            "truncated": bool(ends and runs.truncated[run]),
            "n": k,
            EXTRAS: {key: col.take(start, copy=True) for key, col in first[EXTRAS].items()},
        }


class SequenceDataset(_EpisodeData):
    """One item per window of ``length`` consecutive steps of an episode.

    A window may span pieces of the episode that continue one another, never pieces that do
    not (see the module); an episode (run) shorter than ``length`` gives no items (none giving
    one, steps held: a :class:`NoWindowsWarning` naming the longest run). Items hold
    ``obs`` (``length + 1`` observations: each step's and the last next one), ``actions``,
    ``rewards``, extras (``length`` each), and ``terminated``/``truncated`` (bool arrays, true
    at a window's last step if it ends the episode that way). With ``pad=True`` (a recurrent
    or transformer policy's windows, as the replay buffers' ``pad=True``) every step starts a
    window, one past its run's end or a short run's is filled up with zeros, and items add
    ``mask`` (True at the real steps; :func:`~episodes.io.window_padding.padded_window`).
    ``returns_to_go=gamma`` adds ``returns_to_go``, ``timesteps``: :mod:`episodes.io.returns_to_go`.
    ``max_open_shards`` and ``max_cached_bytes`` are :class:`TransitionDataset`'s.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 0, 0],
        ...             rewards=[1.0, 2.0, 3.0], terminated=True, len_lookback_buffer=0))
        >>> data = SequenceDataset(path, length=2)
        >>> len(data), data[1]["obs"].tolist(), data[1]["terminated"].tolist()
        (2, [1, 2, 3], [False, True])
        >>> item = SequenceDataset(path, length=2, pad=True)[2]
        >>> item["obs"].tolist(), item["mask"].tolist(), item["terminated"].tolist()
        ([2, 3, 0], [True, False], [True, False])
    """

    pad = False  # a class default: a pickle of a build before ``pad`` lacks it
    _to_go: RunReturns | None = None  # likewise

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        length: int,
        pad: bool = False,
        returns_to_go: float | None = None,
        max_open_shards: MaxOpen = AUTO,
        max_cached_bytes: int = MAX_CACHED_BYTES,
    ):
        self.length, self.pad = whole_number(length, "length", 1), as_flag(pad, "pad")
        super().__init__(path, max_open_shards=max_open_shards, max_cached_bytes=max_cached_bytes)
        self._to_go = run_returns(returns_to_go, self._types)
        longest = int(self._runs.lengths.max()) if len(self._runs.lengths) else 0
        if len(self) == 0 and longest > 0:  # else the first sign is DataLoader's num_samples=0
            warnings.warn(
                f"SequenceDataset of {self._path} holds no window of length={self.length}: its "
                f"longest run of steps is {longest} (an episode, or its pieces that continue "
                "one another)",
                NoWindowsWarning,
                stacklevel=2,
            )

    def _counts(self, lengths: np.ndarray) -> np.ndarray:
        return lengths if self.pad else np.maximum(lengths - self.length + 1, 0)

    def __getitem__(self, index: int) -> dict[str, Any]:
        run, t = self._locate(index)
        item, steps = self._window(run, t)
        item |= self._to_go.window(self, run, t, steps) if self._to_go else {}  # padded too
        return padded_window(item, self.length, steps) if self.pad else item

    def _window(self, run: int, t: int) -> tuple[dict[str, Any], int]:
        """Run ``run``'s steps from ``t``: ``length`` of them, or (``pad``) those left."""
        runs = self._runs
        steps = min(self.length, int(runs.lengths[run]) - t)
        ends = np.zeros(steps, dtype=bool)
        ends[-1] = t + steps == int(runs.lengths[run])
        spans = runs.spans(run, t, t + steps)
        if len(spans) == 1:  # inside one piece: views copied once
            ((i, a, b),) = spans
            plan = self._plan(i)
            return {
                "obs": plan["observations"].take(a, b + 1, copy=True),
                "actions": plan["actions"].take(a, b, copy=True),
                "rewards": plan["rewards"].take(a, b, copy=True),
                "terminated": ends & runs.terminated[run],
                "truncated": ends & runs.truncated[run],
                EXTRAS: {key: col.take(a, b, copy=True) for key, col in plan[EXTRAS].items()},
            }, steps
        plans = [self._plan(i) for i, _, _ in spans]

        def window(name: str, key: str | None = None, more: int = 0) -> Any:
            """Each piece's items of its own steps (``more``: past the window's last), joined."""
            parts = []
            for k, (plan, (_, a, b)) in enumerate(zip(plans, spans, strict=True)):
                column = plan[name] if key is None else plan[name][key]
                parts.append(column.take(a, b + (more if k == len(spans) - 1 else 0)))
            return joined_steps(parts)  # a copy of the views taken

        return {  # the observations: each step's and the window's last next one
            "obs": window("observations", more=1),
            "actions": window("actions"),
            "rewards": window("rewards"),
            "terminated": ends & runs.terminated[run],
            "truncated": ends & runs.truncated[run],
            EXTRAS: {key: window(EXTRAS, key) for key in plans[0][EXTRAS]},
        }, steps

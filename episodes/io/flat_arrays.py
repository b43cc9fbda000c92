"""A v2 dataset as one dict of flat arrays, one row per transition (D4RL's layout).

Offline-RL tools (D4RL's loaders, d3rlpy, CORL) take ``observations``, ``actions``,
``rewards``, ``next_observations``, ``terminals`` and ``timeouts``: row ``k`` is one step.
:func:`flat_transitions` builds them from the manifest and each piece's steps. Rows come
episode by episode, in the order each episode's first piece was written, each episode's pieces
joined in time order (the runs of :mod:`episodes.io.piece_windows`, as the torch datasets
give their items), so a reader that splits trajectories at ``terminals | timeouts`` finds each
episode whole. Where rows are placed is decided from the manifest alone; the pieces are then
read in manifest order, each shard once, each piece written straight into its rows.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[1, 0],
    ...                                rewards=[1.0, 0.5], terminated=True,
    ...                                len_lookback_buffer=0).to_numpy())
    >>> flat = flat_transitions(path)
    >>> flat["next_observations"].tolist(), flat["terminals"].tolist()
    ([1.0, 2.0], [False, True])
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tree

from episodes.io.errors import DatasetError
from episodes.io.item_types import ItemTypes, joined_rewards, joined_types, types_differ
from episodes.io.piece_windows import piece_runs
from episodes.io.shard_codec import EXTRAS
from episodes.io.shard_reader import Dataset
from episodes.io.v2_read import v2_dataset
from episodes.io.values import decode_value

__all__ = ["FLAT_KEYS", "flat_transitions"]

#: The keys of :func:`flat_transitions`'s dict, in D4RL's names (``extra_model_outputs`` too
#: where asked for).
FLAT_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")
_NUMBERS = "biufc"  # the dtype kinds a flat array holds: bools and numbers


def flat_transitions(
    path: str | os.PathLike[str], *, done_only: bool = False, extra_model_outputs: bool = False
) -> dict[str, Any]:
    """The transitions of a v2 dataset as flat arrays, one row per step, D4RL's names.

    Row ``k`` holds a step: ``observations`` (the one it started from), ``actions``,
    ``rewards``, ``next_observations`` (the one it led to: at an episode's last step, the
    episode's own last observation), ``terminals`` and ``timeouts`` (bools, true at most at an
    episode's last step). ``terminals`` is the episode's ``terminated``; ``timeouts`` is true
    at the last step of every other episode: truncated ones, and ones the recording stopped in
    (both flags false), since a TD target bootstraps there as after a truncation, and since a
    reader splitting trajectories at ``terminals | timeouts`` must not run such an episode into
    the next one. Episodes come in the order their first piece was written, each whole, its
    pieces joined in time order; pieces of an id that do not continue one another (steps
    missing or stored twice, which ``episodes validate`` reports) end a run of rows there, as
    an episode the recording stopped in does.

    A Dict or Tuple observation gives a dict or tuple of arrays; a Discrete one an int array.
    Each leaf is in one dtype over the dataset (float32 beside float64 gives float64, as the
    torch datasets join them; rewards of ints and floats give float64). Infos are left out
    (they are values of any kind; read them with ``read_episodes``). Memory: the arrays made,
    plus the one shard being read.

    Args:
        path: A format v2 dataset directory.
        done_only: Only episodes that ended (terminated or truncated): those the recording
            stopped in are left out.
        extra_model_outputs: Add ``extra_model_outputs``, a dict of one array per key (every
            piece must record the same keys).

    Returns:
        A dict of numpy arrays (nested dicts or tuples for Dict or Tuple observations), the
        keys of :data:`FLAT_KEYS`, and ``extra_model_outputs`` where asked. Without a
        transition, a column no piece types is an empty float64 array.

    Raises:
        DatasetError: (a subclass) the dataset cannot be read, is a v1 one
            (``UnsupportedVersionError``: convert it with ``episodes migrate``), or a column
            holds no numeric arrays (a Text, Sequence, Graph or OneOf space, items of varying
            layout), pieces hold a column in types no one array holds with their values, or,
            with ``extra_model_outputs``, pieces record different keys.
        TypeError: ``done_only`` or ``extra_model_outputs`` is not a bool.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> obs = [{"pos": np.float32([x, -x])} for x in range(4)]
        >>> with DatasetWriter(path) as w:  # "a" in two pieces; "b" cut by the recording
        ...     w.write(SingleAgentEpisode("a", observations=obs[:2], actions=[0],
        ...                                rewards=[1.0], len_lookback_buffer=0).to_numpy())
        ...     w.write(SingleAgentEpisode("b", observations=obs[:2], actions=[1],
        ...                                rewards=[0.5], len_lookback_buffer=0).to_numpy())
        ...     w.write(SingleAgentEpisode("a", observations=obs[1:], actions=[1, 0],
        ...                                rewards=[2.0, 3.0], terminated=True, t_started=1,
        ...                                len_lookback_buffer=0).to_numpy())
        >>> flat = flat_transitions(path)
        >>> flat["rewards"].tolist(), flat["next_observations"]["pos"][:, 0].tolist()
        ([1.0, 2.0, 3.0, 0.5], [1.0, 2.0, 3.0, 1.0])
        >>> flat["terminals"].tolist(), flat["timeouts"].tolist()
        ([False, False, True, False], [False, False, False, True])
        >>> flat_transitions(path, done_only=True)["actions"].tolist()
        [0, 1, 0]
    """
    for name, value in (("done_only", done_only), ("extra_model_outputs", extra_model_outputs)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__} ({value!r})")
    with v2_dataset(path, "flat_transitions", max_open_shards=1) as ds:
        return _Flat(ds, bool(done_only), bool(extra_model_outputs)).read()


class _Column:
    """One output column (a struct of arrays, ``rows`` each), typed by the first piece put.

    Later pieces whose types are wider (float64 beside float32) widen the arrays made so far
    (one copy, rare: a writer starts a new shard where column types change).
    """

    def __init__(self, name: str, rows: int, batch: Any, piece: int):
        self.name, self.piece = name, piece
        self.types = _types(batch)
        self.leaves = [np.empty((rows, *shape), dtype) for dtype, shape in self.types[1]]
        self.structure = tree.map_structure(lambda _: 0, batch)  # not the piece's views

    def put(self, reader: Dataset, at: int, batch: Any, piece: int) -> None:
        types = _types(batch)
        if types != self.types:
            join = joined_rewards if self.name == "rewards" else joined_types
            both = join(self.types, types)
            if both is None:
                raise types_differ(reader, self.name, (self.piece, self.types), (piece, types))
            if both != self.types:  # what the new piece holds needs wider arrays
                self.leaves = [a.astype(d, copy=False) for a, (d, _) in zip(self.leaves, both[1])]
                self.types, self.piece = both, piece
        leaves = [batch] if batch.__class__ is np.ndarray else tree.flatten(batch)
        for out, leaf in zip(self.leaves, leaves):
            out[at : at + len(leaf)] = leaf

    def value(self) -> Any:
        if self.types[0] == ((),):
            return self.leaves[0]
        return tree.unflatten_as(self.structure, self.leaves)


def _types(batch: Any) -> ItemTypes:
    """The item types of a batch (leaves' dtypes, native, and shapes after the first axis)."""
    if batch.__class__ is np.ndarray:  # most columns: no walk of a nesting
        dtype = batch.dtype if batch.dtype.isnative else batch.dtype.newbyteorder("=")
        return ((),), ((dtype, batch.shape[1:]),)
    pairs = tree.flatten_with_path(batch)
    leaves = tuple(
        (x.dtype if x.dtype.isnative else x.dtype.newbyteorder("="), x.shape[1:]) for _, x in pairs
    )
    return tuple(p for p, _ in pairs), leaves


class _Flat:
    """The reads of one call: rows placed from the manifest, pieces read in manifest order."""

    def __init__(self, ds: Dataset, done_only: bool, extras: bool):
        self.ds, self.extras = ds, extras
        runs = piece_runs(ds.summaries)
        count = len(runs.lengths)
        keep = runs.terminated | runs.truncated if done_only else np.ones(count, bool)
        lengths = np.where(keep, runs.lengths, 0)
        base = np.cumsum(lengths) - lengths  # rows before each run
        self.rows = int(lengths.sum())
        run_of = np.repeat(np.arange(count), np.diff(runs.bounds))
        kept = keep[run_of]
        order = np.argsort(runs.pieces[kept], kind="stable")  # manifest order: each shard once
        self.pieces = runs.pieces[kept][order]
        self.at = (base[run_of] + runs.starts)[kept][order]
        self.steps = runs.steps[kept][order]
        self.last = (base + runs.lengths - 1)[keep]
        self.terminated = runs.terminated[keep]
        # the first piece with steps, to type the columns of a dataset that gives no rows
        self.any_piece = int(runs.pieces[0]) if len(runs.pieces) else None
        self.columns: dict[str, _Column] = {}
        self.extra_keys: tuple[int, list[str]] | None = None

    def read(self) -> dict[str, Any]:
        for i, at, n in zip(self.pieces.tolist(), self.at.tolist(), self.steps.tolist()):
            steps = self.ds.steps(i, None, None)
            self._check(i, steps)
            obs = steps["observations"]  # n + 1: the last is the next one of the last step
            self._put("observations", i, at, _rows(obs, 0, n))
            self._put("next_observations", i, at, _rows(obs, 1, n + 1))
            self._put("actions", i, at, steps["actions"])
            self._put("rewards", i, at, steps["rewards"])
            for key, batch in steps[EXTRAS].items() if self.extras else ():
                self._put(f"{EXTRAS}/{key}", i, at, batch)
        if not self.rows and self.any_piece is not None:  # typed by a piece, without its rows
            steps = self.ds.steps(self.any_piece, 0, 0)
            self._check(self.any_piece, steps)
            steps["next_observations"] = steps["observations"]
            for name in FLAT_KEYS[:4]:
                self._put(name, self.any_piece, 0, _rows(steps[name], 0, 0))
        out: dict[str, Any] = {}
        for name in FLAT_KEYS[:4]:
            column = self.columns.get(name)
            out[name] = np.zeros(0) if column is None else column.value()
        terminals = np.zeros(self.rows, bool)
        timeouts = np.zeros(self.rows, bool)
        terminals[self.last] = self.terminated
        timeouts[self.last] = ~self.terminated  # truncated, or cut by the recording's end
        out["terminals"], out["timeouts"] = terminals, timeouts
        if self.extras:
            prefix = f"{EXTRAS}/"
            out[EXTRAS] = {
                name[len(prefix) :]: column.value()
                for name, column in self.columns.items()
                if name.startswith(prefix)
            }
        return out

    def _put(self, name: str, i: int, at: int, batch: Any) -> None:
        column = self.columns.get(name)
        if column is None:
            column = self.columns[name] = _Column(name, self.rows, batch, i)
        column.put(self.ds, at, batch, i)

    def _check(self, i: int, steps: dict[str, Any]) -> None:
        """Refuses a piece whose columns are no numeric arrays, or whose extra keys differ."""
        names = ["observations", "actions", "rewards"]
        names += [f"{EXTRAS}/{key}" for key in steps[EXTRAS]] if self.extras else []
        for name in names:
            batch = steps[name] if "/" not in name else steps[EXTRAS][name.split("/", 1)[1]]
            leaves = tree.flatten(batch)
            bad = next((x for x in leaves if not _numeric(x)), None)
            if bad is not None or not leaves:
                held = (
                    f"arrays of dtype {bad.dtype}"
                    if isinstance(bad, np.ndarray)
                    else "values stored one by one (not as arrays)"
                )
                raise DatasetError(
                    f"{self.ds.root}: piece {i} ({self._episode(i)}) holds {name} as {held}, "
                    "which flat arrays of numbers cannot hold (a Text, Sequence, Graph or OneOf "
                    "space, or items of varying layout): read such episodes with read_episodes "
                    "or Dataset.steps"
                )
        if self.extras:
            keys = sorted(steps[EXTRAS])
            if self.extra_keys is None:
                self.extra_keys = (i, keys)
            elif keys != self.extra_keys[1]:
                first, have = self.extra_keys
                raise DatasetError(
                    f"{self.ds.root}: pieces {first} ({self._episode(first)}) and {i} "
                    f"({self._episode(i)}) record other extra model outputs ({have} and {keys}): "
                    "every row needs each key; leave them out (extra_model_outputs=False) or "
                    "filter the dataset"
                )

    def _episode(self, i: int) -> str:
        id_ = decode_value(self.ds.summaries[i].id_, blob=None, where="manifest id")
        return f"episode {id_!r}"


def _rows(batch: Any, a: int, b: int) -> Any:
    return tree.map_structure(lambda x: x[a:b], batch)


def _numeric(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim >= 1 and x.dtype.kind in _NUMBERS

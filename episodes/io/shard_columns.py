"""Where each column of one stored episode lives in its shard, checked once, for fast slicing.

:func:`plan_columns` resolves an episode's index entry into one :class:`ColumnPlan` per column
(numpy views over the shard's record batch, the first row, lookback and size), checking every
leaf entry and row range once; step reads (``Dataset.steps``, the torch datasets) then only
slice views.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import Dataset, DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[7, 8, 9], actions=[1, 0],
    ...                                rewards=[0.5, 0.25], len_lookback_buffer=1))
    >>> shard, j = Dataset(path).locate(0)
    >>> plans = plan_columns(shard, j)
    >>> plans["observations"].take(0, 2).tolist(), plans["actions"].take(0)
    ([8, 9], np.int64(0))
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import tree

from episodes.io.arrow_leaves import check_leaf_info
from episodes.io.errors import CorruptDatasetError
from episodes.io.format import parse_json
from episodes.io.shard_codec import EXTRAS, blob_of, column_of, skeleton_of, skeleton_paths
from episodes.io.space_rows import RowPlan, row_plan
from episodes.io.values import BlobReader, decode_value
from episodes.spaces import space_from_dict

__all__ = ["ColumnPlan", "plan_columns"]


class ColumnPlan:
    """One column of one episode: ``take`` reads visible items (lookback not counted).

    Attributes:
        lookback: Items before the first visible one.
        size: Items stored, lookback included.
        views: One numpy view per leaf over the whole record batch (None for JSON columns).
        skeleton: The item structure (None for flat items).

    Example:
        >>> plan = ColumnPlan(lookback=1, size=3, base=0, views=[np.array([7, 8, 9])],
        ...                   skeleton=None)
        >>> plan.take(0, 2).tolist(), int(plan.take(1))
        ([8, 9], 9)
    """

    def __init__(
        self,
        lookback: int,
        size: int,
        base: int,
        views: list[np.ndarray] | None,
        skeleton: Any,
        json_items: Any = None,
        rows: RowPlan | None = None,
    ):
        self.lookback = lookback
        self.size = size
        self._first = base + lookback
        self.views = views
        self.skeleton = skeleton
        self._json_items = json_items
        self._rows = rows

    @property
    def stored(self) -> bool:
        """Whether the column is stored as arrays (so items are numpy views).

        Example:
            >>> json_items = lambda a, b: [{}] * (b - a)
            >>> ColumnPlan(0, 2, 0, [np.zeros(2)], None).stored, ColumnPlan(
            ...     0, 2, 0, None, None, json_items).stored
            (True, False)
        """
        return self.views is not None

    def take(self, start: int, stop: int | None = None, *, copy: bool = False) -> Any:
        """Item ``start``, or items ``[start, stop)`` batched (views unless ``copy``).

        A list-mode column's items come back as a numpy'd column holds them: where its space
        has a Box (Discrete, MultiDiscrete, MultiBinary) part, an item given as a list there
        is one array (see :mod:`episodes.io.space_rows`).

        Example:
            >>> plan = ColumnPlan(0, 2, 0, [np.array([1, 2]), np.array([3, 4])], {"a": 0, "b": 0})
            >>> {k: v.tolist() for k, v in plan.take(0, 2).items()}
            {'a': [1, 2], 'b': [3, 4]}
            >>> plan.take(0, 2, copy=True)["a"].base is None  # a copy, not a view
            True
        """
        end = start + 1 if stop is None else stop
        if not 0 <= start <= end <= self.size - self.lookback:
            raise IndexError(f"items [{start}, {end}) outside [0, {self.size - self.lookback}]")
        if self.views is None:
            items = self._json_items(self.lookback + start, self.lookback + end)
            return items[0] if stop is None else items
        a = self._first + start
        if stop is None:
            parts = [v[a] for v in self.views]
        else:
            parts = [v[a : self._first + stop] for v in self.views]
        if self._rows is not None:
            return self._rows.rows(parts, batched=stop is not None, copy=copy)
        if copy:
            parts = [np.array(p) for p in parts]
        return parts[0] if self.skeleton is None else tree.unflatten_as(self.skeleton, parts)


def plan_columns(shard: Any, j: int) -> dict[str, Any]:
    """Plans for every column of the shard's episode ``j`` (extras under their own key).

    Raises:
        CorruptDatasetError: The index entry disagrees with itself or with the data file.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import Dataset, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[1.0],
        ...             extra_model_outputs={"vf": [0.5]}, len_lookback_buffer=0))
        >>> plans = plan_columns(*Dataset(path).locate(0))
        >>> plans["extra_model_outputs"]["vf"].take(0, 1).tolist(), plans["infos"].stored
        ([0.5], False)
    """
    entry = shard.entry_of(j)
    where = f"{shard.where} episode {j}"
    meta = entry.get("meta") if isinstance(entry, dict) else None
    columns = meta.get("columns") if isinstance(meta, dict) else None
    extras = meta.get(EXTRAS) if isinstance(meta, dict) else None
    if not isinstance(columns, dict) or not isinstance(extras, list):
        raise CorruptDatasetError(f"{where}: malformed episode metadata")
    k, base = shard.part_of(j)
    context = (shard, k, base, entry, where)
    plans: dict[str, Any] = {name: _plan(context, [name], col) for name, col in columns.items()}
    plans[EXTRAS] = {}
    for pair in extras:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CorruptDatasetError(f"{where}: malformed extra_model_outputs entry")
        plans[EXTRAS][pair[0]] = _plan(context, [EXTRAS, pair[0]], pair[1])
    _check_steps(plans, meta, where)
    return plans


def _check_steps(plans: dict[str, Any], meta: Any, where: str) -> None:
    """Every column holds the piece's steps after its lookback (one more observation, info).

    An episode not reset yet (no steps) may hold no observations and infos at all.
    """
    t0, t1 = meta.get("t_started"), meta.get("t")
    if not (isinstance(t0, int) and isinstance(t1, int)) or isinstance(t0 or t1, bool) or t1 < t0:
        raise CorruptDatasetError(f"{where}: bad t_started/t {t0!r}, {t1!r}")
    steps = t1 - t0
    # An extra output may be named "observations": it holds one item per step all the same.
    columns = [(n, p, n in ("observations", "infos")) for n, p in plans.items() if n != EXTRAS]
    columns += [(f"{EXTRAS}/{n}", p, False) for n, p in plans[EXTRAS].items()]
    for name, plan, per_observation in columns:
        want = steps + per_observation
        if steps == 0 and per_observation and plan.size == 0:
            continue
        if plan.size - plan.lookback != want:
            raise CorruptDatasetError(
                f"{where} column {name}: {plan.size - plan.lookback} items after the lookback "
                f"for {steps} steps (the sizes disagree with the index)"
            )


def _plan(context: tuple[Any, ...], path: list[str], col: Any) -> ColumnPlan:
    shard, k, base, entry, where = context
    label = f"{where} column {'/'.join(path)}"
    if not isinstance(col, dict):
        raise CorruptDatasetError(f"{label}: malformed column metadata")
    lookback, size = _count(col.get("lookback"), label), _count(col.get("size"), label)
    if lookback > size:
        raise CorruptDatasetError(f"{label}: lookback {lookback} exceeds size {size}")
    part = shard.parts[k]
    if base + size > part.num_rows:
        raise CorruptDatasetError(f"{label}: rows out of range")
    if col.get("layout") == "json":
        shard_where = shard.where  # not the shard: a cached plan must not hold it (a cycle)
        texts = column_of(part, path, shard_where)
        # Checked before any text is read (as read_episodes does): a large_string without
        # nulls, so every item read is a str.
        if not pa.types.is_large_string(texts.type) or texts.slice(base, size).null_count:
            raise CorruptDatasetError(f"{where}: JSON column {'/'.join(path)} is malformed")

        def items(a: int, b: int) -> list[Any]:
            blob = _blob(part, base, entry, where, shard_where)
            return [
                decode_value(parse_json(t.encode("utf-8"), label), blob=blob, where=label)
                for t in texts.slice(base + a, b - a).to_pylist()
            ]

        return ColumnPlan(lookback, size, base, None, None, items)
    structure = col.get("structure")
    paths = skeleton_paths(structure, label)
    specs, leaves = col.get("leaves"), entry.get("leaves")
    if not isinstance(specs, list) or len(specs) != len(paths) or not isinstance(leaves, dict):
        raise CorruptDatasetError(f"{label}: leaf list does not match the item structure")
    views = []
    for spec in specs:
        name = spec.get("file") if isinstance(spec, dict) else None
        info = leaves.get(name) if isinstance(name, str) else None
        if not isinstance(info, dict):
            raise CorruptDatasetError(f"{label}: leaf {spec!r} is not in the index")
        check_leaf_info(info, label)
        if info["count"] != size:
            raise CorruptDatasetError(f"{label}: leaf holds {info['count']} items, not {size}")
        views.append(shard.view(info, k))
    skeleton = skeleton_of(structure, label) if paths != [()] else None
    rows = None
    if skeleton is not None and col.get("finalized") is False:
        # A numpy'd column's structure came from its space already; a list-mode one's came
        # from the items, where a Box row given as a list is a leaf per component.
        rows = row_plan(skeleton, _space(shard.spaces, col.get("space"), label), views)
    return ColumnPlan(lookback, size, base, views, skeleton, rows=rows)


def _space(spaces: list[Any], ref: Any, label: str) -> Any:
    """The column's space, from the shard's table (the index holds ``{"space_ref": k}``)."""
    k = ref.get("space_ref") if isinstance(ref, dict) and len(ref) == 1 else None
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(spaces):
        raise CorruptDatasetError(f"{label}: bad space reference {ref!r}")
    try:
        return space_from_dict(spaces[k])
    except ValueError as err:
        raise CorruptDatasetError(f"{label}: bad space: {err}") from None


def _count(value: Any, label: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptDatasetError(f"{label}: bad lookback/size {value!r}")
    return value


def _blob(part: Any, base: int, entry: dict[str, Any], where: str, table_where: str) -> BlobReader:
    table = entry["meta"].get("blob", [])
    data = np.zeros(0, np.uint8)
    if table:
        data = np.frombuffer(blob_of(part, base, where, table_where), np.uint8)
    return BlobReader(data, table, where)

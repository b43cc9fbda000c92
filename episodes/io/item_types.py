"""One dtype and shape per column of the items a torch dataset gives, over the whole dataset.

A dataset may hold pieces whose columns differ in type (a numpy'd float32 observation beside
a list-mode piece's float64 one, int32 actions in one shard and int64 in another: the writer
starts a new shard when column types change). ``default_collate`` would then stack each batch
in the dtype of its first item, wrapping ints and rounding floats, or fail inside a worker.
:func:`dataset_item_types` joins the types when a torch dataset is made, by the rule the Ray
readers apply to their blocks: dtypes of one kind join with their values (float32 beside
float64 gives float64, ints widen to the int that holds both, signed beside uint64 is refused
as float64 would round), other kinds, row shapes or nestings are refused.
:class:`CastColumn` gives a piece's items in the joined types.

Each shard's types are read from its index (each shard holds one column layout), from its
first piece that gives items, without reading data; a piece read later whose items do not fit
the joined types (a list-mode piece of the same shard with another space) is refused then.
Observations or actions of a Sequence, Graph or OneOf space are refused when the dataset is
made, as ``to_numpy`` refuses them: items that happen to agree (sequences of one length) would
otherwise be batched position by position, until a piece that differs.

Example:
    >>> a = item_types(np.zeros(2, np.float32))
    >>> joined = joined_types(a, item_types(np.zeros(2)))
    >>> joined[1], joined_types(a, item_types(np.zeros(3))) is None
    (((dtype('float64'), (2,)),), True)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tree

from episodes.io.arrow_leaves import check_leaf_info
from episodes.io.errors import CorruptDatasetError, DatasetError
from episodes.io.format import check_inside
from episodes.io.shard_codec import EXTRAS, skeleton_of, skeleton_paths
from episodes.io.shards import INDEX_SUFFIX, ShardEntry, shard_file
from episodes.io.space_rows import row_plan
from episodes.io.values import decode_value
from episodes.spaces import space_from_dict, unstackable_space

__all__ = [
    "CastColumn",
    "column_types",
    "dataset_item_types",
    "item_types",
    "joined_rewards",
    "joined_types",
    "types_differ",
]

#: An item's leaf paths (``tree.flatten_with_path`` order) and each leaf's dtype and shape.
ItemTypes = tuple[tuple[tuple[Any, ...], ...], tuple[tuple[np.dtype[Any], tuple[int, ...]], ...]]
#: Per column (``observations``, ``actions``, ``rewards``, ``extra_model_outputs/KEY``): the
#: joined types and the piece that decided them.
Joined = dict[str, tuple[ItemTypes, int]]
_MAX_INDEX_BYTES = 1 << 30  # Shard's bound
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_DECODE = json.JSONDecoder().raw_decode
_WS = re.compile(r"[ \t\n\r]*")
_OTHER_LAYOUT: Any = object()  # _first_entries: "parse the whole index instead"


def item_types(item: Any) -> ItemTypes:
    """The types of one item: native dtypes; strings by kind alone (a scalar's width varies).

    Example:
        >>> item_types({"a": np.zeros(2, ">f4"), "b": np.int8(1)})
        ((('a',), ('b',)), ((dtype('float32'), (2,)), (dtype('int8'), ())))
    """
    pairs = tree.flatten_with_path(item)
    arrays = [np.asarray(x) for _, x in pairs]
    return tuple(p for p, _ in pairs), tuple(_leaf(a.dtype, a.shape) for a in arrays)


def column_types(column: Any) -> ItemTypes:
    """The types of a stored column plan's items: ``item_types`` of one, from its view alone.

    Example:
        >>> from episodes.io.shard_columns import ColumnPlan
        >>> plan = ColumnPlan(0, 2, 0, [np.zeros((2, 3), ">f4")], None)
        >>> column_types(plan) == item_types(plan.take(0))
        True
    """
    if column.skeleton is None:  # items are the view's rows (no row plan without a skeleton)
        view = column.views[0]
        return ((),), (_leaf(view.dtype, view.shape[1:]),)
    return item_types(column.take(0))


def _leaf(dtype: np.dtype[Any], shape: tuple[int, ...]) -> tuple[np.dtype[Any], tuple[int, ...]]:
    if dtype.kind in "US":
        return np.dtype(dtype.kind), tuple(shape)
    return (dtype if dtype.isnative else dtype.newbyteorder("=")), tuple(shape)


def joined_types(a: ItemTypes, b: ItemTypes) -> ItemTypes | None:
    """The types that hold the items of ``a`` and ``b`` with their values, or None.

    Leaves must match in path and shape; their dtypes must be of one kind (signed and unsigned
    ints are one where an int holds both: uint64 beside a signed int is refused).

    Example:
        >>> joined_types(item_types(np.int8(1)), item_types(np.uint8(1)))[1]
        ((dtype('int16'), ()),)
        >>> joined_types(item_types(np.int64(1)), item_types(np.uint64(1))) is None
        True
    """
    if a == b:
        return a
    if a[0] != b[0]:
        return None
    leaves = []
    for (da, sa), (db, sb) in zip(a[1], b[1]):
        dtype = _joined_dtype(da, db)
        if sa != sb or dtype is None:
            return None
        leaves.append((dtype, sa))
    return a[0], tuple(leaves)


def joined_rewards(a: ItemTypes, b: ItemTypes) -> ItemTypes | None:
    """:func:`joined_types`, but real numbers of other kinds join as float64 (rewards only).

    Rewards are numbers a loss reads as floats: an env giving ``0`` a step and ``1.0`` at its
    goal records int64 rewards in the episodes that miss it and float64 in the others. They
    join as n-step sums are made, in float64 (ints beyond 2**53 round there too), and so do
    uint64 rewards beside signed ones, which no int dtype holds together.

    Example:
        >>> joined_rewards(item_types(np.int64(0)), item_types(np.float32(1)))[1]
        ((dtype('float64'), ()),)
        >>> joined_rewards(item_types(np.int64(0)), item_types(np.zeros(2))) is None
        True
    """
    both = joined_types(a, b)
    if both is not None or a[0] != b[0]:
        return both
    if any(
        sa != sb or not {da.kind, db.kind} <= set("biuf") for (da, sa), (db, sb) in zip(a[1], b[1])
    ):
        return None
    return a[0], tuple((np.dtype(np.float64), shape) for _, shape in a[1])


def _joined_dtype(a: np.dtype[Any], b: np.dtype[Any]) -> np.dtype[Any] | None:
    """The rule of ``episodes.distributed.step_blocks.joined_type`` (io may not import it)."""
    if a == b:
        return a
    kinds = {"i" if d.kind == "u" else d.kind for d in (a, b)}
    if len(kinds) != 1 or not kinds <= set("biufc"):
        return None
    dtype = np.result_type(a, b)
    return None if a.kind in "iu" and dtype.kind not in "iu" else dtype


def _describe(types: ItemTypes) -> str:
    paths, leaves = types
    if paths == ((),):
        return _words(*leaves[0])
    return "{" + ", ".join(f"{'/'.join(map(str, p))}: {_words(*x)}" for p, x in zip(*types)) + "}"


def _words(dtype: np.dtype[Any], shape: tuple[int, ...]) -> str:
    name = {"U": "str", "S": "bytes"}.get(dtype.kind, str(dtype))
    return f"{name} of shape {shape}"


def types_differ(
    reader: Any, name: str, a: tuple[int, ItemTypes], b: tuple[int, ItemTypes]
) -> DatasetError:
    """The refusal of two pieces whose items of column ``name`` no batch holds as they are.

    Example:
        >>> class Row: id_ = "ep"
        >>> class Reader: root, summaries = "/data", [Row(), Row()]
        >>> types_differ(Reader(), "actions", (0, item_types(np.int64(1))),
        ...              (1, item_types(np.float32(1))))  # doctest: +ELLIPSIS
        DatasetError("/data: pieces 0 (episode 'ep') and 1 (episode 'ep') hold actions of ...
    """
    ids = [decode_value(reader.summaries[k].id_, blob=None, where="manifest id") for k, _ in (a, b)]
    return DatasetError(
        f"{reader.root}: pieces {a[0]} (episode {ids[0]!r}) and {b[0]} (episode {ids[1]!r}) "
        f"hold {name} of types no batch holds with their values ({_describe(a[1])} and "
        f"{_describe(b[1])}; dtypes of one kind join, such as float32 and float64): "
        "convert them alike (one dtype, shape and nesting), filter or split the dataset"
    )


def dataset_item_types(
    reader: Any, gives: np.ndarray, rewards_as: Callable[[ItemTypes], ItemTypes]
) -> Joined:
    """The joined types of every column over the pieces where ``gives`` is true.

    Each shard's types come from its first such piece's index entry (``rewards_as`` maps the
    rewards' stored types to those an item holds). A shard whose index cannot be read, and a
    column that is not stored as arrays, are left out: reading them raises as before.

    Raises:
        DatasetError: Two shards' pieces hold items of a column that do not join, or a
            shard's first such piece declares a Sequence, Graph or OneOf space for its
            observations or actions (items without a fixed layout, whatever they hold).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import Dataset, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     for dtype in (np.int32, np.int64):
        ...         w.write(SingleAgentEpisode(observations=[0, 1], actions=np.zeros(1, dtype),
        ...                                    rewards=[1.0], len_lookback_buffer=0).to_numpy())
        >>> joined = dataset_item_types(Dataset(path), np.ones(2, bool), lambda t: t)
        >>> joined["actions"]
        ((((),), ((dtype('int64'), ()),)), 1)
    """
    joined: Joined = {}
    shard_of: dict[int, ShardEntry] = {}  # the pieces that decided a type: their shards
    try:  # the shards' directory inside the dataset (a symlink out of it is refused when read)
        check_inside(reader.root, reader.root / "shards")
    except DatasetError:
        return joined
    first = 0
    for shard in reader.shards:
        picks = np.flatnonzero(gives[first : first + len(shard.episodes)])
        if len(picks):
            i = first + int(picks[0])
            shard_of[i] = shard
            for name, types in _piece_types(reader.root, shard, int(picks[0])).items():
                types = rewards_as(types) if name == "rewards" else types
                have = joined.get(name)
                if have is None:
                    joined[name] = (types, i)
                    continue
                join = joined_rewards if name == "rewards" else joined_types
                both = join(have[0], types)
                if both is None:  # unless an index read unchecked was damaged: corrupt
                    for k in (have[1], i):
                        _check_intact(reader.root, shard_of[k])
                    raise types_differ(reader, name, (have[1], have[0]), (i, types))
                if both != have[0]:
                    joined[name] = (both, i)
        first += len(shard.episodes)
    return joined


def _check_intact(root: Path, shard: ShardEntry) -> None:
    """A ``CorruptDatasetError`` where the shard's index does not match its manifest checksum.

    The types were read from the index's head alone, unchecked: a refusal built on them must
    not blame the data for a damaged index.
    """
    path = shard_file(root, shard.name, INDEX_SUFFIX)
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            text = os.pread(fd, shard.index_size + 1, 0)
        finally:
            os.close(fd)
    except OSError:
        return  # unreadable: reading the shard reports it
    if hashlib.sha256(text).hexdigest() != shard.index_sha256:
        raise CorruptDatasetError(
            f"shard {shard.name}: index does not match its manifest checksum (modified or "
            "corrupted)"
        )


def _piece_types(root: Path, shard: ShardEntry, j: int) -> dict[str, ItemTypes]:
    """Per column stored as arrays, the types of the shard's piece ``j`` (none if unreadable).

    Only the index's text up to that entry is read and parsed: a shard's reader checks the
    whole index against the manifest when it opens it, and every read is checked against
    these types (:class:`CastColumn`'s users), so an index changed since gives no other values.
    """
    try:
        entry = _index_head(shard_file(root, shard.name, INDEX_SUFFIX), shard.index_size, j)
        if entry is None:
            return {}
        spaces, (meta, leaves) = entry[0], (entry[1]["meta"], entry[1]["leaves"])
        columns = [(n, meta["columns"].get(n)) for n in ("observations", "actions", "rewards")]
        columns += [(f"{EXTRAS}/{key}", column) for key, column in meta[EXTRAS]]
        where = f"shard {shard.name} episode {j}"
        types = {n: _stored(c, leaves, spaces, where) for n, c in columns}
        unlaid = next(filter(None, (_unlaid(n, c, spaces) for n, c in columns)), None)
    except (
        DatasetError,
        OSError,
        LookupError,
        TypeError,
        ValueError,
        AttributeError,
        RecursionError,
    ):
        return {}  # reading the piece raises as before
    if unlaid is not None:
        # Batched only while the pieces' items happen to agree (one length, one OneOf
        # branch), and then position by position: refused whatever the items, as to_numpy is.
        raise DatasetError(
            f"{where}: its {unlaid[0]} are the items of a {unlaid[1]} space, which have no "
            "fixed layout to batch (to_numpy refuses them too): a torch dataset cannot give "
            "them; read the episodes (read_episodes, Dataset.episode) or Dataset.steps"
        )
    return {name: found for name, found in types.items() if found is not None}


def _unlaid(name: str, column: Any, spaces: Any) -> tuple[str, str] | None:
    """``(name, kind)`` where the column's declared space holds a Sequence, Graph or OneOf."""
    given = column.get("space") if isinstance(column, dict) else None
    ref = given.get("space_ref") if isinstance(given, dict) and len(given) == 1 else None
    if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(spaces):
        return None
    kind = unstackable_space(space_from_dict(spaces[ref])) if spaces[ref] is not None else None
    return None if kind is None else (name, kind)


def _index_head(path: Path, size: int, j: int) -> tuple[Any, Any] | None:
    """The ``spaces`` and entry ``j`` of the index at ``path`` (a regular file of ``size``)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size or size > _MAX_INDEX_BYTES:
            return None
        want = 1 << 16
        while True:  # a longer head until it holds entry ``j``
            head = os.pread(fd, want, 0)
            try:  # a head cut inside a character loses it, as it is cut inside the JSON
                found = _first_entries(head.decode("utf-8", "ignore"), j)
                break
            except (ValueError, IndexError, RecursionError):
                if len(head) >= size:
                    return None
            want *= 8
        if found is _OTHER_LAYOUT:  # keys in another order (a tool's sort_keys): read it all
            whole = json.loads(os.pread(fd, size, 0))
            found = whole["spaces"], whole["episodes"][j]
        return found
    finally:
        os.close(fd)


def _first_entries(text: str, j: int) -> Any:
    """The index's ``spaces`` and entry ``j``, the text parsed up to that entry alone.

    ``_OTHER_LAYOUT`` for a layout other than the writer's (``spaces`` before ``episodes``,
    each once), which the whole text is parsed for; a ValueError or IndexError for a text that
    ends before.
    """
    i = _skip(text, 0)
    if text[i] != "{":
        return _OTHER_LAYOUT
    top: dict[str, Any] = {}
    while True:
        key, i = _DECODE(text, _skip(text, i + 1))
        i = _skip(text, i)
        if text[i] != ":":
            return _OTHER_LAYOUT
        i = _skip(text, i + 1)
        if key in top:  # a key twice: the reader keeps the last, this would the first
            return _OTHER_LAYOUT
        if key == "episodes":
            if "spaces" not in top or text[i] != "[":
                return _OTHER_LAYOUT
            for k in range(j + 1):
                if k and text[i] != ",":
                    return _OTHER_LAYOUT
                entry, i = _DECODE(text, _skip(text, i + 1))
                i = _skip(text, i)
            return top["spaces"], entry
        top[key], i = _DECODE(text, i)
        i = _skip(text, i)
        if text[i] != ",":
            return _OTHER_LAYOUT


def _skip(text: str, i: int) -> int:
    match = _WS.match(text, i)
    return i if match is None else match.end()


def _stored(column: Any, leaves: Any, spaces: Any, where: str) -> ItemTypes | None:
    """A stored column's item types from its index entry, as its column plan gives them.

    None for a JSON column (see :func:`~episodes.io.shard_columns.plan_columns`).
    """
    if not isinstance(column, dict) or column.get("layout") != "arrays":
        return None
    structure = column["structure"]
    paths = skeleton_paths(structure, where)
    specs = column["leaves"]
    if len(specs) != len(paths):
        return None
    infos = [_leaf(*check_leaf_info(leaves[spec["file"]], where)) for spec in specs]
    if paths == [()]:
        return ((),), (infos[0],)
    skeleton = skeleton_of(structure, where)
    plan = None
    if column.get("finalized") is False:  # a list-mode column: its space may make rows
        given = column.get("space")  # {"space_ref": k}, checked as shard_columns checks it
        ref = given.get("space_ref") if isinstance(given, dict) and len(given) == 1 else None
        if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(spaces):
            return None
        space = space_from_dict(spaces[ref])
        views = [np.broadcast_to(np.zeros((), d), (1, *s)) for d, s in infos]
        plan = row_plan(skeleton, space, views)
    out = infos
    if plan is not None:  # as RowPlan.rows stacks them
        out = [
            infos[p]
            if p.__class__ is int
            else _leaf(np.result_type(*[d for d, _ in infos[p[0] : p[1]]]), p[2] + infos[p[0]][1])
            for p in plan.parts
        ]
        skeleton = plan.skeleton
    if skeleton is None:
        return ((),), (out[0],)
    pairs = tree.flatten_with_path(tree.unflatten_as(skeleton, list(range(len(out)))))
    return tuple(p for p, _ in pairs), tuple(out[k] for _, k in pairs)


class CastColumn:
    """A column plan whose items come out in the joined types (``want``) of their column.

    Example:
        >>> from episodes.io.shard_columns import ColumnPlan
        >>> plan = ColumnPlan(0, 2, 0, [np.array([1, 2], np.int32)], None)
        >>> want = item_types(np.int64(0))
        >>> CastColumn(plan, want, item_types(plan.take(0))).take(0, 2).dtype
        dtype('int64')
    """

    __slots__ = ("_column", "_dtypes", "_flat")

    def __init__(self, column: Any, want: ItemTypes, have: ItemTypes):
        self._column = column
        self._dtypes = [w[0] if w[0] != h[0] else None for w, h in zip(want[1], have[1])]
        self._flat = want[0] == ((),)

    def take(self, start: int, stop: int | None = None, *, copy: bool = False) -> Any:
        """As the column's own ``take``, each leaf cast to its joined dtype."""
        item = self._column.take(start, stop, copy=copy)
        if self._flat:
            return item if self._dtypes[0] is None else item.astype(self._dtypes[0])
        leaves = [x if d is None else x.astype(d) for x, d in zip(tree.flatten(item), self._dtypes)]
        return tree.unflatten_as(item, leaves)

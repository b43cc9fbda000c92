"""Episode <-> (``meta.json`` dict, named numpy arrays).

Each column (observations, infos, actions, rewards, every extra-model-output) is written in
one of two layouts:

- ``"arrays"``: one ``.npy`` file per leaf of the item structure (time axis first). Used for
  finalized (numpy) columns, and for list columns whose items share one structure and whose
  leaves share one kind (``ndarray`` of one dtype/shape, numpy scalars of one dtype, or plain
  Python ``int``/``float``/``bool``/``complex``/``str``), so they come back as the same types.
- ``"json"``: every item JSON-encoded (see :mod:`episodes.io.values`), numpy arrays in the
  chunk's blob. Used for infos and for list columns of mixed items.

Everything is checked while encoding; unstorable data raises
:class:`UnstorableValueError` before any file is written.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[0.5])
    >>> meta, arrays = encode_episode(ep)
    >>> decode_episode(meta, arrays.__getitem__, where="example") == ep
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tree

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.columns import Columns
from episodes.episode import SingleAgentEpisode
from episodes.io.errors import CorruptDatasetError, DatasetError, UnstorableValueError
from episodes.io.format import FORMAT_NAME, FORMAT_VERSION, check_version
from episodes.io.values import (
    BlobReader,
    BlobWriter,
    check_array_dtype,
    decode_value,
    encode_value,
)
from episodes.spaces import space_from_dict, space_to_dict, unbatch
from episodes.structs import flatten

__all__ = ["BLOB_FILE", "decode_episode", "encode_episode"]

BLOB_FILE = "blob.npy"
_COLUMNS = (("observations", "obs"), ("infos", "info"), ("actions", "act"), ("rewards", "rew"))
_LEAF = "*"
_SCALAR_KINDS: dict[type, tuple[str, Any]] = {
    bool: ("bool", np.bool_),
    int: ("int", np.int64),
    float: ("float", np.float64),
    complex: ("complex", np.complex128),
    str: ("str", None),
}


# ---------------------------------------------------------------------------- structures
def _encode_structure(item: Any, where: str, depth: int = 0) -> Any:
    if depth > 64:
        raise UnstorableValueError(f"{where}: item nested deeper than 64 levels")
    if isinstance(item, dict):
        if not all(type(k) is str for k in item):
            raise UnstorableValueError(f"{where}: dict items need string keys, got {list(item)}")
        return {"dict": [[k, _encode_structure(v, where, depth + 1)] for k, v in item.items()]}
    if isinstance(item, tuple):
        if type(item) is not tuple:
            raise UnstorableValueError(
                f"{where}: {type(item).__name__} (a namedtuple or tuple subclass) cannot be "
                "stored; use a plain tuple or dict"
            )
        return {"tuple": [_encode_structure(v, where, depth + 1) for v in item]}
    if isinstance(item, list):
        return {"list": [_encode_structure(v, where, depth + 1) for v in item]}
    if not isinstance(item, (np.ndarray, np.generic, bool, int, float, complex, str)) and (
        tree.is_nested(item)
    ):
        raise UnstorableValueError(f"{where}: nested type {type(item).__name__} cannot be stored")
    return _LEAF


def _skeleton(enc: Any, where: str, depth: int = 0) -> tuple[Any, int]:
    """Rebuilds an item structure (leaves are 0) from its encoding; returns (skeleton, leaves)."""
    if depth > 64:
        raise CorruptDatasetError(f"{where}: structure nested too deeply")
    if enc == _LEAF:
        return 0, 1
    if isinstance(enc, dict) and len(enc) == 1:
        ((kind, body),) = enc.items()
        if isinstance(body, list):
            if kind == "dict":
                out: dict[str, Any] = {}
                count = 0
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                        raise CorruptDatasetError(f"{where}: malformed structure entry {pair!r}")
                    out[pair[0]], n = _skeleton(pair[1], where, depth + 1)
                    count += n
                return out, count
            if kind in ("tuple", "list"):
                parts = [_skeleton(v, where, depth + 1) for v in body]
                seq = [p for p, _ in parts]
                return (tuple(seq) if kind == "tuple" else seq), sum(n for _, n in parts)
    raise CorruptDatasetError(f"{where}: malformed item structure {enc!r}")


# ---------------------------------------------------------------------------- leaf kinds
def _leaf_kind(leaf: Any) -> tuple[Any, ...] | None:
    kind = type(leaf)
    if kind is np.ndarray:
        return ("ndarray", leaf.dtype.str, leaf.shape) if _plain(leaf.dtype) else None
    if isinstance(leaf, np.generic):
        return ("npscalar", leaf.dtype.str, ()) if _plain(leaf.dtype) else None
    if kind in _SCALAR_KINDS:
        if kind is str and leaf.endswith("\x00"):
            return None  # numpy strips trailing NULs
        return (_SCALAR_KINDS[kind][0],)
    return None


def _plain(dtype: np.dtype[Any]) -> bool:
    try:
        check_array_dtype(dtype, "")
    except UnstorableValueError:
        return False
    return True


def _stack_list(items: list[Any], where: str) -> tuple[Any, list[tuple[str, np.ndarray]]] | None:
    """Stacks a list column leaf-wise if every item has the same structure and leaf kinds."""
    if not items:
        return None
    first, structure = flatten(items[0])
    try:
        struct_enc = _encode_structure(structure, where) if structure is not None else _LEAF
    except UnstorableValueError:
        return None
    kinds = [_leaf_kind(leaf) for leaf in first]
    if not kinds or any(k is None for k in kinds):
        return None  # no leaves (empty dicts or lists) or unstackable ones: the json layout
    columns: list[list[Any]] = [[leaf] for leaf in first]
    for item in items[1:]:
        leaves, st = flatten(item)
        if len(leaves) != len(kinds) or (st is None) != (structure is None):
            return None  # a leaf among nested items (or the reverse) is no column of its kind
        if structure is not None:
            try:
                if _encode_structure(st, where) != struct_enc:
                    return None
            except UnstorableValueError:
                return None
        for j, leaf in enumerate(leaves):
            if _leaf_kind(leaf) != kinds[j]:
                return None
            columns[j].append(leaf)
    out = []
    for kind, col in zip(kinds, columns, strict=True):
        assert kind is not None
        name = kind[0]
        try:
            if name == "ndarray":
                arr = np.stack(col)
            elif name == "npscalar":
                arr = np.asarray(col, dtype=np.dtype(kind[1]))
            else:
                arr = np.asarray(col, dtype=_SCALAR_KINDS[type(col[0])][1])
        except (OverflowError, ValueError):
            return None
        out.append((name, arr))
    return struct_enc, out


def _unstack_list(kinds: list[str], arrays: list[np.ndarray], skeleton: Any) -> list[Any]:
    n = len(arrays[0]) if arrays else 0
    columns: list[list[Any]] = []
    for kind, arr in zip(kinds, arrays, strict=True):
        if kind == "ndarray":
            columns.append([arr[i, ...] for i in range(n)])
        elif kind == "npscalar":
            columns.append([arr[i] for i in range(n)])
        else:
            columns.append(arr.tolist())
    if skeleton is None:
        return columns[0]
    return [tree.unflatten_as(skeleton, [c[i] for c in columns]) for i in range(n)]


# ------------------------------------------------------------------------------- columns
def _encode_column(
    buf: InfiniteLookbackBuffer,
    prefix: str,
    arrays: dict[str, np.ndarray],
    blob: BlobWriter,
    where: str,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "lookback": buf.lookback,
        "finalized": buf.finalized,
        "space": space_to_dict(buf.space),
        "size": buf.len_incl_lookback(),
    }
    data = buf.data
    if buf.finalized:
        leaves, structure = flatten(data)
        struct_enc = _encode_structure(structure, where) if structure is not None else _LEAF
        leaf_meta = []
        for i, leaf in enumerate(leaves):
            arr = np.asarray(leaf)
            check_array_dtype(arr.dtype, f"{where} leaf {i}")
            name = f"{prefix}.{i}.npy"
            arrays[name] = arr
            leaf_meta.append({"file": name, "kind": "batched"})
        meta.update(layout="arrays", structure=struct_enc, leaves=leaf_meta)
        return meta
    stacked = _stack_list(data, where) if prefix != "info" else None
    if stacked is not None:
        struct_enc, kinded = stacked
        leaf_meta = []
        for i, (kind, arr) in enumerate(kinded):
            name = f"{prefix}.{i}.npy"
            arrays[name] = arr
            leaf_meta.append({"file": name, "kind": kind})
        meta.update(layout="arrays", structure=struct_enc, leaves=leaf_meta)
        return meta
    # Most infos are empty dicts: they encode to themselves, without the per-item walk.
    items = [
        {} if v.__class__ is dict and not v else encode_value(v, blob=blob, where=f"{where}[{i}]")
        for i, v in enumerate(data)
    ]
    meta.update(layout="json", items=items)
    return meta


def _decode_column(
    meta: Any, load: Callable[[str], np.ndarray], blob: Callable[[], BlobReader], where: str
) -> InfiniteLookbackBuffer:
    if not isinstance(meta, dict):
        raise CorruptDatasetError(f"{where}: column metadata must be an object")
    lookback, size, finalized = meta.get("lookback"), meta.get("size"), meta.get("finalized")
    if not (isinstance(lookback, int) and isinstance(size, int) and 0 <= lookback <= size):
        raise CorruptDatasetError(f"{where}: bad lookback/size {lookback!r}/{size!r}")
    if not isinstance(finalized, bool):
        raise CorruptDatasetError(f"{where}: 'finalized' must be a bool")
    space = space_from_dict(meta.get("space"))
    layout = meta.get("layout")
    if layout == "json":
        if finalized or not isinstance(meta.get("items"), list):
            raise CorruptDatasetError(f"{where}: malformed json-layout column")
        reader = blob()
        data: Any = [
            decode_value(v, blob=reader, where=f"{where}[{i}]") for i, v in enumerate(meta["items"])
        ]
    elif layout == "arrays":
        leaves = meta.get("leaves")
        skeleton, n_leaves = _skeleton(meta.get("structure"), where)
        if not isinstance(leaves, list) or len(leaves) != n_leaves or not leaves:
            raise CorruptDatasetError(f"{where}: leaf list does not match the item structure")
        kinds, arrays = [], []
        for leaf in leaves:
            if not isinstance(leaf, dict) or not isinstance(leaf.get("file"), str):
                raise CorruptDatasetError(f"{where}: malformed leaf entry {leaf!r}")
            kind = leaf.get("kind")
            allowed = ("batched",) if finalized else ("ndarray", "npscalar", *_KIND_NAMES)
            if kind not in allowed:
                raise CorruptDatasetError(f"{where}: unknown leaf kind {kind!r}")
            arr = load(leaf["file"])
            if arr.ndim == 0 or len(arr) != size:
                raise CorruptDatasetError(
                    f"{where}: {leaf['file']} holds {len(arr) if arr.ndim else 0} items, "
                    f"expected {size}"
                )
            kinds.append(kind)
            arrays.append(arr)
        is_flat = not isinstance(skeleton, (dict, list, tuple))
        if finalized:
            data = arrays[0] if is_flat else tree.unflatten_as(skeleton, arrays)
        else:
            data = _unstack_list(kinds, arrays, None if is_flat else skeleton)
    else:
        raise CorruptDatasetError(f"{where}: unknown column layout {layout!r}")
    if not finalized and len(data) != size:
        raise CorruptDatasetError(f"{where}: holds {len(data)} items, expected {size}")
    # A finalized column of list-structured items is a list of arrays: wrap it as columns so
    # it is not mistaken for a list of items.
    if finalized:
        try:
            data = Columns.from_batch(data)
        except ValueError as error:
            raise CorruptDatasetError(f"{where}: leaves of different lengths ({error})") from None
    buf = InfiniteLookbackBuffer(data, space=space)
    buf.lookback = lookback
    return buf


_KIND_NAMES = tuple(name for name, _ in _SCALAR_KINDS.values())


# ------------------------------------------------------------------------------- episodes
def encode_episode(episode: SingleAgentEpisode) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Encodes an episode as ``(meta, {file name: array})``; nothing is written.

    Raises:
        UnstorableValueError: A value cannot be stored safely (the message says where), or
            the episode is inconsistent.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> meta, arrays = encode_episode(SingleAgentEpisode("a", observations=[0]))
        >>> meta["id"], sorted(arrays)
        ('a', ['obs.0.npy'])
    """
    if not isinstance(episode, SingleAgentEpisode):
        raise UnstorableValueError(f"can only store a SingleAgentEpisode, got {type(episode)}")
    try:
        episode.validate()
    except AssertionError as err:
        raise UnstorableValueError(f"episode {episode.id_!r} is inconsistent: {err}") from err
    arrays: dict[str, np.ndarray] = {}
    blob = BlobWriter()
    columns = {
        name: _encode_column(getattr(episode, name), prefix, arrays, blob, name)
        for name, prefix in _COLUMNS
    }
    extras = []
    for i, (key, buf) in enumerate(episode.extra_model_outputs.items()):
        if type(key) is not str:
            raise UnstorableValueError(f"extra_model_outputs key {key!r} must be a str")
        where = f"extra_model_outputs[{key!r}]"
        extras.append([key, _encode_column(buf, f"extra{i}", arrays, blob, where)])
    if len(blob):
        data, table = blob.finish()
        arrays[BLOB_FILE] = data
    else:
        table = []
    meta = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        **{
            key: encode_value(getattr(episode, attr), blob=None, where=attr)
            for key, attr in (
                ("id", "id_"),
                ("agent_id", "agent_id"),
                ("module_id", "module_id"),
                ("multi_agent_episode_id", "multi_agent_episode_id"),
            )
        },
        "t_started": int(episode.t_started),
        "t": int(episode.t),
        "is_terminated": bool(episode.is_terminated),
        "is_truncated": bool(episode.is_truncated),
        "observation_space": space_to_dict(episode.observation_space),
        "action_space": space_to_dict(episode.action_space),
        "start_time": _time(episode._start_time),
        "last_step_time": _time(episode._last_step_time),
        "custom_data": encode_value(episode.custom_data, blob=None, where="custom_data"),
        "columns": columns,
        "extra_model_outputs": extras,
        "blob": table,
    }
    return meta, arrays


def _time(value: Any) -> float | None:
    return None if value is None else float(value)


def _get(meta: dict[str, Any], key: str, types: Any, where: str) -> Any:
    if key not in meta:
        raise CorruptDatasetError(f"{where}: meta.json misses {key!r}")
    value = meta[key]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        raise CorruptDatasetError(f"{where}: meta.json {key!r} has the wrong type ({value!r})")
    return value


def decode_episode(
    meta: Any,
    load: Callable[[str], np.ndarray],
    *,
    where: str,
    numpy: bool | None = None,
) -> SingleAgentEpisode:
    """Rebuilds an episode from ``meta`` and a file loader (``load(name) -> array``).

    Args:
        meta: The parsed ``meta.json``.
        load: Returns the checked array stored under a file name.
        where: Names the chunk in error messages.
        numpy: ``None`` keeps each column as stored; ``True`` numpy'd; ``False`` list mode.

    Raises:
        DatasetError: The metadata or the arrays are malformed or inconsistent.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> meta, arrays = encode_episode(SingleAgentEpisode(observations=[0]))
        >>> decode_episode(meta, arrays.__getitem__, where="x", numpy=True).is_numpy
        True
    """
    try:
        episode = _decode(meta, load, where, numpy)
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AssertionError, RecursionError) as err:
        raise CorruptDatasetError(f"{where}: cannot rebuild the episode: {err}") from err
    if numpy:
        try:
            episode.to_numpy()
        except (ValueError, TypeError, AssertionError) as err:
            raise DatasetError(f"{where}: this episode cannot be numpy'd: {err}") from err
    return episode


def _decode(
    meta: Any, load: Callable[[str], np.ndarray], where: str, numpy: bool | None
) -> SingleAgentEpisode:
    if not isinstance(meta, dict):
        raise CorruptDatasetError(f"{where}: meta.json must hold an object")
    if meta.get("format") != FORMAT_NAME:
        raise CorruptDatasetError(f"{where}: meta.json is not an {FORMAT_NAME!r} chunk")
    check_version(meta.get("version"), f"{where}/meta.json")
    table = _get(meta, "blob", list, where)
    cache: list[BlobReader] = []

    def blob() -> BlobReader:
        if not cache:
            data = load(BLOB_FILE) if table else np.zeros(0, np.uint8)
            if data.dtype != np.uint8 or data.ndim != 1:
                raise CorruptDatasetError(f"{where}: {BLOB_FILE} must be a 1-d uint8 array")
            cache.append(BlobReader(data, table, f"{where}/{BLOB_FILE}"))
        return cache[0]

    columns = _get(meta, "columns", dict, where)
    bufs = {}
    for name, _ in _COLUMNS:
        if name not in columns:
            raise CorruptDatasetError(f"{where}: column {name!r} is missing")
        bufs[name] = _decode_column(columns[name], load, blob, f"{where}/{name}")
    extras = {}
    for pair in _get(meta, "extra_model_outputs", list, where):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CorruptDatasetError(f"{where}: malformed extra_model_outputs entry")
        extras[pair[0]] = _decode_column(pair[1], load, blob, f"{where}/extra[{pair[0]!r}]")
    ids = {
        k: decode_value(meta.get(k), blob=None, where=f"{where}/{k}")
        for k in ("id", "agent_id", "module_id", "multi_agent_episode_id")
    }
    custom = decode_value(
        _get(meta, "custom_data", dict, where), blob=None, where=f"{where}/custom_data"
    )
    times = {}
    for key in ("start_time", "last_step_time"):
        value = meta.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise CorruptDatasetError(f"{where}: {key} must be a number or null")
        times[key] = value
    if numpy is False:
        for buf in (*bufs.values(), *extras.values()):
            _to_list(buf)
    t_started = _get(meta, "t_started", int, where)
    try:
        episode = SingleAgentEpisode(
            ids["id"],
            observations=bufs["observations"],
            observation_space=space_from_dict(meta.get("observation_space")),
            infos=bufs["infos"],
            actions=bufs["actions"],
            action_space=space_from_dict(meta.get("action_space")),
            rewards=bufs["rewards"],
            extra_model_outputs=extras,
            terminated=_get(meta, "is_terminated", bool, where),
            truncated=_get(meta, "is_truncated", bool, where),
            t_started=t_started,
            agent_id=ids["agent_id"],
            module_id=ids["module_id"],
            multi_agent_episode_id=ids["multi_agent_episode_id"],
        )
    except AssertionError as err:
        raise CorruptDatasetError(f"{where}: inconsistent episode: {err}") from err
    if episode.t != _get(meta, "t", int, where) or t_started < 0:
        raise CorruptDatasetError(f"{where}: t/t_started disagree with the stored rewards")
    episode.custom_data.update(custom)
    episode._start_time = times["start_time"]
    episode._last_step_time = times["last_step_time"]
    return episode


def _to_list(buf: InfiniteLookbackBuffer) -> None:
    if not buf.finalized:
        return
    lookback = buf.lookback
    items = unbatch(buf.data) if buf.len_incl_lookback() else []
    fresh = InfiniteLookbackBuffer(items, space=buf.space)
    fresh.lookback = lookback
    # Swap the storage in place so the caller's reference sees list mode.
    buf._items, buf._columns = fresh._items, None

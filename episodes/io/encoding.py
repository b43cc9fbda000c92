"""Episode <-> (``meta.json`` dict, named numpy arrays).

The episode's fields are walked through its field table (:data:`episodes.episode.FIELDS`):
ids, flags, time steps, spaces, clocks and custom data become ``meta.json`` entries, and every
column (observations, infos, actions, rewards, each extra-model-output) is encoded by
:mod:`episodes.io.column_codec`. Decoding builds the episode with
:meth:`SingleAgentEpisode.from_fields`, so a field added to the table is stored and read back
without an edit here (a chunk written before it existed reads back with the field's default).

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

import errno
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import tree

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import FIELDS, Field, SingleAgentEpisode
from episodes.io.column_codec import decode_column, encode_column, space_dict
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetIOError,
    UnstorableValueError,
)
from episodes.io.format import FORMAT_NAME, FORMAT_VERSION, check_version
from episodes.io.values import BlobReader, BlobWriter, decode_value, encode_value, plain_keys
from episodes.spaces import find_space_kind, space_from_dict
from episodes.structs import NESTED_TYPES

__all__ = ["BLOB_FILE", "decode_episode", "encode_episode", "numpy_episode", "plain_id"]

BLOB_FILE = "blob.npy"
# Where the format's names differ from the fields' (kept so old chunks stay readable).
_META_KEY = {"id_": "id"}
_FILE_PREFIX = {"observations": "obs", "infos": "info", "actions": "act", "rewards": "rew"}
_EXTRAS_PREFIX = "extra"
#: numpy=True stacks a Text space's strings ``max_length`` characters wide (4 bytes each),
#: however short they are. A stored space may cost at most this much beyond the strings' own
#: width: one number in a 2 KB meta.json would otherwise ask for gigabytes.
MAX_TEXT_PADDING = 256 << 20


def _meta_key(field: Field) -> str:
    return _META_KEY.get(field.name, field.name)


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
    if episode.t_started < 0:  # the readers refuse it: the whole dataset would not read
        raise UnstorableValueError(
            f"episode {episode.id_!r}: t_started must be >= 0, got {episode.t_started}"
        )
    arrays: dict[str, np.ndarray] = {}
    blob = BlobWriter()
    meta: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "columns": {}}
    values = episode.field_values()
    for field in FIELDS:
        value = values[field.name]
        if field.kind == "column":
            prefix = _FILE_PREFIX.get(field.name, field.name)
            if field.name != "infos":  # to_numpy() leaves infos as given too
                value = _arrays_read(value, field.name)
            meta["columns"][field.name] = encode_column(value, prefix, arrays, blob, field.name)
        elif field.kind == "columns":
            meta[field.name] = _encode_extras(field.name, value, arrays, blob)
        else:
            meta[_meta_key(field)] = _encode_scalar(field, value)
    if len(blob):
        data, meta["blob"] = blob.finish()
        arrays[BLOB_FILE] = data
    else:
        meta["blob"] = []
    return meta, arrays


def _encode_extras(
    name: str, columns: dict[str, Any], arrays: dict[str, np.ndarray], blob: BlobWriter
) -> list[list[Any]]:
    pairs = []
    for key in columns:
        if not isinstance(key, str):
            raise UnstorableValueError(f"{name} key {key!r} must be a str")
    keys = plain_keys(columns, name)
    for i, (key, buf) in enumerate(zip(keys, columns.values())):
        where = f"{name}[{key!r}]"
        buf = _arrays_read(buf, where)
        pairs.append([key, encode_column(buf, f"{_EXTRAS_PREFIX}{i}", arrays, blob, where)])
    return pairs


def _arrays_read(column: InfiniteLookbackBuffer, where: str) -> InfiniteLookbackBuffer:
    """``column``, or a copy whose array-likes are read as ``np.asarray`` reads them.

    A list-mode column may hold array-likes that are no numpy values (a JAX array, a torch
    tensor on the CPU: anything with ``__array__``), as leaves of its items too. The replay
    buffers and :meth:`~episodes.SingleAgentEpisode.to_numpy` read them through
    ``__array__``; so the writers do, and store the arrays numpy gives (one holding objects
    is refused when it is encoded, as a numpy array of objects is). ``column`` itself is
    left unchanged; one with no array-like (and a numpy column) is returned as it is.

    Raises:
        UnstorableValueError: numpy cannot read an array-like (a tensor that requires
            grad), naming ``where``, the item and the value's type.

    Example:
        >>> import torch
        >>> column = InfiniteLookbackBuffer([{"a": torch.tensor([1.0])}, {"a": np.zeros(1)}])
        >>> _arrays_read(column, "observations").data
        [{'a': array([1.], dtype=float32)}, {'a': array([0.])}]
        >>> plain = InfiniteLookbackBuffer([1, 2])
        >>> _arrays_read(plain, "actions") is plain
        True
    """
    if column.finalized:
        return column
    items = column.data
    kinds = set(map(type, items))  # a column of numbers or arrays: one pass in C
    if any(issubclass(kind, NESTED_TYPES) for kind in kinds):
        try:
            kinds = set(map(type, tree.flatten(items)))
        except (TypeError, RecursionError):  # unsortable keys, deep nesting: encoding names them
            return column
    if not any(_array_like(kind) for kind in kinds):
        return column
    read = []
    for i, item in enumerate(items):
        try:
            read.append(tree.map_structure(_as_array, item))
        except Exception as err:  # the array-like's own __array__ failed
            raise UnstorableValueError(
                f"{where}[{i}]: numpy cannot read this array-like: {type(err).__name__}: {err}"
            ) from err
    return InfiniteLookbackBuffer(read, column.lookback, column.space)


def _array_like(kind: type) -> bool:
    """Whether values of ``kind`` are array-likes numpy reads (``__array__``), no numpy value."""
    return hasattr(kind, "__array__") and not issubclass(kind, (np.ndarray, np.generic))


def _as_array(leaf: Any) -> Any:
    return np.asarray(leaf) if _array_like(type(leaf)) else leaf


def _encode_scalar(field: Field, value: Any) -> Any:
    kind = field.kind
    if kind == "flag":
        return bool(value)
    if kind == "time":
        return int(value)
    if kind == "space":
        return space_dict(value, field.name)
    if kind == "clock":
        return None if value is None else float(value)
    if kind == "id":
        value = plain_id(value)
    return encode_value(value, blob=None, where=field.name)


def plain_id(value: Any) -> Any:
    """An id as it is stored: a numpy scalar (also inside a tuple id) as the Python value.

    An id taken from an array (``np.str_``, ``np.int64``) equals and hashes as its Python
    value, so it is stored as that and reads back equal; any other value is returned as given
    (the encoder accepts or refuses it).

    Example:
        >>> plain_id((np.str_("red"), np.int64(3)))
        ('red', 3)
    """
    if isinstance(value, np.generic):
        item = value.item()
        return item if type(item) in (str, int, float, bool) else value
    if type(value) is tuple:
        return tuple(plain_id(part) for part in value)
    return value


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
        if numpy:
            numpy_episode(episode, where)
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AssertionError, RecursionError) as err:
        raise CorruptDatasetError(f"{where}: cannot rebuild the episode: {err}") from err
    except MemoryError as err:  # the system's failure, as for any read (or a file that lies)
        words = str(err) or "MemoryError"
        raise DatasetIOError(
            errno.ENOMEM, f"{where}: out of memory rebuilding the episode ({words})"
        ) from err
    return episode


def numpy_episode(episode: SingleAgentEpisode, where: str) -> SingleAgentEpisode:
    """``episode.to_numpy()`` as the readers numpy what they read: Text padding bounded first.

    ``load_episode(numpy=True)`` joins the pieces as stored and numpys the joined episode with
    this, as ``decode_episode`` numpys one piece.

    Raises:
        DatasetError: The episode cannot be numpy'd, or its Text spaces would pad its strings
            with more than ``MAX_TEXT_PADDING`` bytes (checked before anything is stacked).
        DatasetIOError: Out of memory.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1])
        >>> numpy_episode(ep, "x").get_rewards().dtype.name
        'int64'
    """
    _check_text_padding(episode, where)
    try:
        episode.to_numpy()
    except (ValueError, TypeError, AssertionError, RecursionError) as err:
        raise DatasetError(f"{where}: this episode cannot be numpy'd: {err}") from err
    except MemoryError as err:  # the system's failure, not the data's
        words = str(err) or "MemoryError"
        raise DatasetIOError(errno.ENOMEM, f"{where}: out of memory numpy'ing ({words})") from err
    return episode


def _check_text_padding(episode: SingleAgentEpisode, where: str) -> None:
    """Refuses, before any allocation, an episode whose Text spaces would pad it too much."""
    padding = 0
    for name, column in episode.named_columns().items():
        space = column.space
        if name != "infos" and not column.finalized and space is not None:
            if find_space_kind(space, (gym.spaces.Text,)):
                padding += _text_padding(space, column.data)
    if padding > MAX_TEXT_PADDING:
        raise DatasetError(
            f"{where}: this episode cannot be numpy'd: its Text spaces' max_length would pad its "
            f"strings with {padding} bytes (more than {MAX_TEXT_PADDING}); "
            "read it with numpy=False"
        )


def _text_padding(space: gym.Space[Any], items: list[Any]) -> int:
    """Bytes that stacking ``items`` in ``space`` spends on Text room the strings leave empty."""
    if isinstance(space, gym.spaces.Text):
        if not items or not all(isinstance(item, str) for item in items):
            return 0  # stacked without the space's width
        longest = max(1, *(len(item) for item in items))
        return len(items) * 4 * max(space.max_length - longest, 0)
    if isinstance(space, gym.spaces.Dict):
        return sum(
            _text_padding(sub, [x[key] for x in items if isinstance(x, Mapping) and key in x])
            for key, sub in space.spaces.items()
        )
    if isinstance(space, gym.spaces.Tuple):
        return sum(
            _text_padding(sub, [x[i] for x in items if isinstance(x, (list, tuple)) and i < len(x)])
            for i, sub in enumerate(space.spaces)
        )
    return 0


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
    as_list = numpy is False
    values: dict[str, Any] = {}
    for field, name, kind, key in _PLAN:
        if kind == "column":
            if name not in columns:
                raise CorruptDatasetError(f"{where}: column {name!r} is missing")
            values[name] = decode_column(
                columns[name], load, blob, f"{where}/{name}", as_list=as_list
            )
        elif kind == "columns":
            values[name] = _decode_extras(_get(meta, name, list, where), load, blob, where, as_list)
        elif key not in meta and kind in ("id", "custom"):
            values[name] = _missing(field, where)
        else:
            # The values most pieces hold, as _decode_scalar reads them, without its checks.
            value = meta.get(key)
            if type(value) is _FAST.get(kind) or (value is None and kind in _NONE_OK):
                values[name] = value
            else:
                values[name] = _decode_scalar(field, meta, where)
    if values["t_started"] < 0:
        raise CorruptDatasetError(f"{where}: t_started must be >= 0")
    try:
        return SingleAgentEpisode.from_fields(values)
    except ValueError as err:
        raise CorruptDatasetError(f"{where}: {err}") from err


#: Each field with its name, kind and meta key, in table order: worked out once.
_PLAN = tuple((field, field.name, field.kind, _meta_key(field)) for field in FIELDS)
#: The type of a value that ``_decode_scalar`` returns as it is, by kind (a ``clock`` float;
#: an ``id`` str, plain JSON ``decode_value`` keeps), and the kinds where None is kept.
_FAST: dict[str, type] = {"flag": bool, "time": int, "clock": float, "id": str}
_NONE_OK = ("clock", "id")


def _missing(field: Field, where: str) -> Any:
    # The ids of the first format version are all there; a field added to the table later
    # reads back as its default from chunks written before it.
    if field.name == "id_" or field.kind == "custom":
        raise CorruptDatasetError(f"{where}: meta.json misses {_meta_key(field)!r}")
    return field.default


def _decode_extras(
    pairs: list[Any],
    load: Callable[[str], np.ndarray],
    blob: Callable[[], BlobReader],
    where: str,
    as_list: bool,
) -> dict[str, Any]:
    extras = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CorruptDatasetError(f"{where}: malformed extra_model_outputs entry")
        if pair[0] in extras:  # a writer lists each key once: two columns, which one holds it?
            raise CorruptDatasetError(f"{where}: extra_model_outputs lists {pair[0]!r} twice")
        extras[pair[0]] = decode_column(
            pair[1], load, blob, f"{where}/extra[{pair[0]!r}]", as_list=as_list
        )
    return extras


def _decode_scalar(field: Field, meta: dict[str, Any], where: str) -> Any:
    key = _meta_key(field)
    kind = field.kind
    if kind == "flag":
        return _get(meta, key, bool, where)
    if kind == "time":
        return _get(meta, key, int, where)
    if kind == "space":
        return space_from_dict(meta.get(key))
    if kind == "clock":
        value = meta.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise CorruptDatasetError(f"{where}: {key} must be a number or null")
        return value
    if kind == "custom":
        return decode_value(_get(meta, key, dict, where), blob=None, where=f"{where}/{key}")
    return decode_value(meta.get(key), blob=None, where=f"{where}/{key}")

"""JSON encoding of free-form values (infos, ids, custom_data) with numpy arrays on the side.

Plain JSON values are written as they are. What JSON cannot say is written as a one-key object
whose key starts with ``__ep_``: tuples, non-finite floats, dicts with non-string keys (or
keys that look like our tags), and numpy arrays / numpy scalars, which live in a side "blob"
(one ``uint8`` array per chunk) described by an offset, a plain dtype string and a shape.
Anything else (arbitrary objects, object arrays, bytes, sets, namedtuples) is refused with
:class:`UnstorableValueError` when encoding, so a reader only ever sees plain data.

Example:
    >>> blob = BlobWriter()
    >>> enc = encode_value({"x": (1, float("inf")), "a": np.arange(3)}, blob=blob, where="info")
    >>> enc["x"]
    {'__ep_tuple__': [1, {'__ep_float__': 'inf'}]}
    >>> data, table = blob.finish()
    >>> decode_value(enc, blob=BlobReader(data, table, "blob"), where="info")["a"]
    array([0, 1, 2])
"""

from __future__ import annotations

import math
import re
import zlib
from typing import Any

import numpy as np

from episodes.io.errors import CorruptDatasetError, UnstorableValueError

__all__ = [
    "BlobReader",
    "BlobWriter",
    "SameIds",
    "check_array_dtype",
    "check_array_type",
    "check_code_points",
    "concat_piece",
    "crc32_of",
    "decode_value",
    "encode_value",
    "ends_in_nul",
    "holds_nan",
    "id_key",
    "plain_keys",
    "signless_zeros",
]

SAFE_KINDS = "biufcUSmM"
_TAG = "__ep_"
_DTYPE_STR = re.compile(r"^[<>|=][biufcUSmM][0-9]{1,6}(\[[0-9]*[a-zA-Z]{1,2}\])?$")
_MAX_DEPTH = 64
_ALIGN = 16


def check_array_dtype(dtype: np.dtype[Any], where: str) -> None:
    """Refuses dtypes that are not plain numbers, strings, bytes or datetimes.

    Raises:
        UnstorableValueError: ``dtype`` is an object, void/structured or otherwise unsafe dtype,
            or numpy 2's variable-width ``StringDType`` (the message says to convert it).

    Example:
        >>> check_array_dtype(np.dtype("float32"), "obs")
    """
    if dtype.kind == "T":  # numpy 2's StringDType (numpy 1 has no kind "T")
        raise UnstorableValueError(
            f"{where}: numpy's variable-width StringDType is not stored: convert it to a "
            "fixed-width '<U' array, which is, with np.array(values.tolist(), dtype=str)"
        )
    if dtype.hasobject or dtype.kind not in SAFE_KINDS or dtype.fields is not None:
        raise UnstorableValueError(
            f"{where}: numpy dtype {dtype} cannot be stored safely (only bool, int, uint, "
            "float, complex, str, bytes and datetime dtypes are allowed)"
        )


def check_code_points(array: np.ndarray, where: str) -> None:
    r"""Refuses a ``<U``/``>U`` array holding a code point beyond U+10FFFF.

    numpy would build such an array, but turning an item into a Python ``str`` raises
    ``SystemError``; a damaged file must raise :class:`CorruptDatasetError` instead.

    Example:
        >>> check_code_points(np.array(["ok"]), "x")
        >>> check_code_points(np.frombuffer(b"\x00\x00\x11\x00", "<U1"), "x")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: x: a string holds an invalid code point
    """
    if array.dtype.kind != "U" or array.size == 0:
        return
    codes = np.ascontiguousarray(array).view(array.dtype.byteorder.replace("|", "=") + "u4")
    if codes.max() > 0x10FFFF:
        raise CorruptDatasetError(f"{where}: a string holds an invalid code point")


def plain_keys(mapping: dict[Any, Any], where: str) -> list[Any]:
    """The keys of ``mapping`` in order, a key of a str subclass as its plain ``str``.

    A ``np.str_`` key (one taken from a numpy array of names) is a str, and the writers store
    it as one: it reads back as the plain ``str``. Other keys are kept as they are.

    Raises:
        UnstorableValueError: Two keys are one str once plain (a subclass with its own
            ``__eq__``), so one would overwrite the other when read back.

    Example:
        >>> plain_keys({np.str_("a"): 1, "b": 2, 3: 4}, "x")
        ['a', 'b', 3]
        >>> type(plain_keys({np.str_("a"): 1}, "x")[0])
        <class 'str'>
    """
    keys = list(mapping)
    if all(type(k) is str for k in keys):  # the usual dict: nothing to convert
        return keys
    # str.__str__ gives a subclass's characters as a plain str, whatever its own __str__ says.
    plain = [str.__str__(k) if isinstance(k, str) else k for k in keys]
    if len(set(plain)) != len(plain):
        raise UnstorableValueError(f"{where}: the keys {keys!r} name one str twice")
    return plain


def crc32_of(array: np.ndarray) -> int:
    """CRC-32 of an array's bytes in C order (what a ``.npy`` file stores after its header).

    Example:
        >>> crc32_of(np.zeros(0, np.uint8))
        0
    """
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return zlib.crc32(flat.data)


class BlobWriter:
    """Collects numpy arrays into one aligned byte buffer.

    Example:
        >>> blob = BlobWriter()
        >>> blob.add(np.zeros(3, np.uint8), "a"), blob.add(np.ones(2, np.int64), "b"), len(blob)
        (0, 1, 2)
    """

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._table: list[list[Any]] = []
        self._size = 0

    def add(self, array: np.ndarray, where: str) -> int:
        """Stores ``array`` and returns its index in the table.

        Example:
            >>> blob = BlobWriter()
            >>> blob.add(np.arange(4, dtype=np.int32), "x"), blob.add(np.float32(1.5), "y")
            (0, 1)
            >>> try:
            ...     blob.add(np.array([None]), "z")
            ... except UnstorableValueError:
            ...     print("refused: object dtype")
            refused: object dtype
        """
        check_array_dtype(array.dtype, where)
        if not _DTYPE_STR.match(array.dtype.str):
            raise UnstorableValueError(f"{where}: numpy dtype {array.dtype} cannot be stored")
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        pad = (-self._size) % _ALIGN
        if pad:
            self._parts.append(np.zeros(pad, np.uint8))
            self._size += pad
        self._table.append([self._size, array.dtype.str, list(array.shape)])
        self._parts.append(flat)
        self._size += flat.nbytes
        return len(self._table) - 1

    def __len__(self) -> int:
        return len(self._table)

    def finish(self) -> tuple[np.ndarray, list[list[Any]]]:
        """Returns ``(bytes as a uint8 array, table)``.

        Each array starts at a multiple of 16 bytes; the table holds offset, dtype and shape.

        Example:
            >>> blob = BlobWriter()
            >>> _ = blob.add(np.zeros(3, np.uint8), "a"), blob.add(np.zeros((2, 2), np.int16), "b")
            >>> data, table = blob.finish()
            >>> data.nbytes, [(offset, shape) for offset, _, shape in table]
            (24, [(0, [3]), (16, [2, 2])])
        """
        data = np.concatenate(self._parts) if self._parts else np.zeros(0, np.uint8)
        return data, self._table


class BlobReader:
    """Reads arrays back out of a blob, checking every table entry against the bytes.

    Example:
        >>> BlobReader(np.zeros(0, np.uint8), {}, "blob")
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: blob: blob table must be a list
    """

    def __init__(self, data: np.ndarray, table: Any, where: str):
        if not isinstance(table, list):
            raise CorruptDatasetError(f"{where}: blob table must be a list")
        self._data = data
        self._table = table
        self._where = where
        # Stored arrays never overlap, so what a reader hands out adds up to the blob's bytes at
        # most: a table whose entries (or references) repeat bytes would make copies without end.
        self._budget = data.nbytes

    def get(self, index: Any, scalar: bool) -> Any:
        """The array (or numpy scalar) number ``index``, as an independent copy.

        Example:
            >>> blob = BlobWriter()
            >>> i, j = blob.add(np.arange(6).reshape(2, 3), "a"), blob.add(np.float32(1.5), "s")
            >>> reader = BlobReader(*blob.finish(), "blob")
            >>> reader.get(i, scalar=False).tolist(), reader.get(j, scalar=True).item()
            ([[0, 1, 2], [3, 4, 5]], 1.5)
            >>> reader.get(2, scalar=False)
            Traceback (most recent call last):
            ...
            episodes.io.errors.CorruptDatasetError: blob: blob index 2 out of range
            >>> reader.get(i, scalar=False)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            episodes.io.errors.CorruptDatasetError: blob: blob entry 0 reads bytes already read ...
        """
        where = self._where
        if not isinstance(index, int) or isinstance(index, bool):
            raise CorruptDatasetError(f"{where}: blob index must be an int, got {index!r}")
        if not 0 <= index < len(self._table):
            raise CorruptDatasetError(f"{where}: blob index {index} out of range")
        entry = self._table[index]
        if not (isinstance(entry, list) and len(entry) == 3):
            raise CorruptDatasetError(f"{where}: blob entry {index} is malformed")
        offset, dtype_str, shape = entry
        if not isinstance(dtype_str, str) or not _DTYPE_STR.match(dtype_str):
            raise CorruptDatasetError(f"{where}: blob entry {index} has a bad dtype {dtype_str!r}")
        try:
            dtype = np.dtype(dtype_str)
        except TypeError as err:
            raise CorruptDatasetError(f"{where}: blob entry {index}: {err}") from err
        if dtype.hasobject or dtype.kind not in SAFE_KINDS:
            raise CorruptDatasetError(f"{where}: blob entry {index} has unsafe dtype {dtype}")
        if dtype.itemsize == 0:  # "<U0": numpy cannot view bytes as it
            raise CorruptDatasetError(f"{where}: blob entry {index} has the empty dtype {dtype}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CorruptDatasetError(f"{where}: blob entry {index} has a bad shape {shape!r}")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise CorruptDatasetError(f"{where}: blob entry {index} has a bad offset")
        count = math.prod(shape)
        if offset + count * dtype.itemsize > self._data.nbytes:
            raise CorruptDatasetError(f"{where}: blob entry {index} runs past the blob's end")
        self._budget -= count * dtype.itemsize
        if self._budget < 0:
            raise CorruptDatasetError(
                f"{where}: blob entry {index} reads bytes already read (entries overlap, or one "
                "is referenced twice): more than the blob holds"
            )
        try:  # a shape numpy refuses (more than 64 dimensions, a dimension beyond int64)
            flat = np.frombuffer(self._data, dtype=dtype, count=count, offset=offset)
            check_code_points(flat, f"{where}: blob entry {index}")
            array = flat.reshape(shape).copy()
        except (ValueError, TypeError, OverflowError) as err:
            raise CorruptDatasetError(f"{where}: blob entry {index}: {err}") from err
        if scalar:
            if shape:
                raise CorruptDatasetError(f"{where}: blob scalar {index} is not 0-d")
            return array[()]
        return array


def encode_value(value: Any, *, blob: BlobWriter | None, where: str, _depth: int = 0) -> Any:
    """Encodes ``value`` as JSON-safe data (arrays go to ``blob``; None refuses arrays).

    Raises:
        UnstorableValueError: ``value`` holds something that cannot be stored safely; the
            message names where (e.g. ``infos[3]['pos']``).

    Example:
        >>> encode_value([1, "a", None], blob=None, where="x")
        [1, 'a', None]
    """
    if _depth > _MAX_DEPTH:
        raise UnstorableValueError(f"{where}: nested deeper than {_MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        # JSON text of an int beyond Python's 4300-digit conversion limit cannot be written.
        if value.bit_length() > 14_000:
            raise UnstorableValueError(f"{where}: an int of {value.bit_length()} bits")
        return value
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UnstorableValueError(f"{where}: a str with a lone surrogate") from None
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {f"{_TAG}float__": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if kind is list:
        return [
            encode_value(v, blob=blob, where=f"{where}[{i}]", _depth=_depth + 1)
            for i, v in enumerate(value)
        ]
    if kind is tuple:
        items = [
            encode_value(v, blob=blob, where=f"{where}[{i}]", _depth=_depth + 1)
            for i, v in enumerate(value)
        ]
        return {f"{_TAG}tuple__": items}
    if isinstance(value, dict):
        if all(type(k) is str and not k.startswith(_TAG) for k in value):
            return {
                k: encode_value(v, blob=blob, where=f"{where}[{k!r}]", _depth=_depth + 1)
                for k, v in value.items()
            }
        keys = plain_keys(value, where)
        if all(type(k) is str and not k.startswith(_TAG) for k in keys):
            return {
                k: encode_value(v, blob=blob, where=f"{where}[{k!r}]", _depth=_depth + 1)
                for k, v in zip(keys, value.values())
            }
        pairs = [
            [
                encode_value(k, blob=None, where=f"{where} key {k!r}", _depth=_depth + 1),
                encode_value(v, blob=blob, where=f"{where}[{k!r}]", _depth=_depth + 1),
            ]
            for k, v in zip(keys, value.values())
        ]
        return {f"{_TAG}dict__": pairs}
    if isinstance(value, (np.ndarray, np.generic)):
        if blob is None:
            raise UnstorableValueError(
                f"{where}: numpy values are not allowed here (only JSON values: dict, list, "
                f"tuple, str, int, float, bool, None), got {type(value).__name__}"
            )
        if isinstance(value, np.ndarray):
            if type(value) is not np.ndarray:
                check_array_type(value, where)
                value = np.asarray(value)
            return {f"{_TAG}nd__": blob.add(value, where)}
        if ends_in_nul(value):
            # Reading an item back strips trailing NULs; this tag says the width is the value.
            return {f"{_TAG}npstr__": blob.add(np.asarray(value), where)}
        return {f"{_TAG}np__": blob.add(np.asarray(value), where)}
    readable = blob is not None and hasattr(kind, "__array__")  # in infos: name the way out
    raise UnstorableValueError(
        f"{where}: a value of type {kind.__module__}.{kind.__qualname__} cannot be stored safely "
        "(allowed: dict, list, tuple, str, int, float, bool, None"
        + (", numpy arrays and numpy scalars of plain dtypes)" if blob is not None else ")")
        + ("; an array-like: store np.asarray(value)" if readable else "")
    )


def decode_value(obj: Any, *, blob: BlobReader | None, where: str, _depth: int = 0) -> Any:
    """Inverse of :func:`encode_value`; malformed input raises :class:`CorruptDatasetError`.

    Example:
        >>> decode_value({"__ep_tuple__": [1, 2]}, blob=None, where="x")
        (1, 2)
    """
    if _depth > _MAX_DEPTH:
        raise CorruptDatasetError(f"{where}: nested deeper than {_MAX_DEPTH} levels")
    if obj is None or isinstance(obj, (bool, str, int, float)):
        return obj
    if isinstance(obj, list):
        return [decode_value(v, blob=blob, where=where, _depth=_depth + 1) for v in obj]
    if not isinstance(obj, dict):
        raise CorruptDatasetError(f"{where}: unexpected JSON value {obj!r}")
    tags = [k for k in obj if k.startswith(_TAG)]
    if not tags:
        return {
            k: decode_value(v, blob=blob, where=where, _depth=_depth + 1) for k, v in obj.items()
        }
    if len(obj) != 1:
        raise CorruptDatasetError(f"{where}: a tagged value must have exactly one key: {list(obj)}")
    tag, payload = tags[0], obj[tags[0]]
    if tag == f"{_TAG}tuple__" and isinstance(payload, list):
        return tuple(decode_value(v, blob=blob, where=where, _depth=_depth + 1) for v in payload)
    if tag == f"{_TAG}float__" and payload in ("nan", "inf", "-inf"):
        return float(payload)
    if tag == f"{_TAG}dict__" and isinstance(payload, list):
        out: dict[Any, Any] = {}
        for pair in payload:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise CorruptDatasetError(f"{where}: malformed dict pair {pair!r}")
            key = decode_value(pair[0], blob=None, where=where, _depth=_depth + 1)
            try:
                out[key] = decode_value(pair[1], blob=blob, where=where, _depth=_depth + 1)
            except TypeError as err:  # an unhashable key, e.g. a list
                raise CorruptDatasetError(f"{where}: unusable dict key {key!r}") from err
        return out
    if tag in (f"{_TAG}nd__", f"{_TAG}np__", f"{_TAG}npstr__"):
        if blob is None:
            raise CorruptDatasetError(f"{where}: numpy values are not allowed here")
        if tag == f"{_TAG}npstr__":
            return _full_width(blob.get(payload, scalar=False), where)
        return blob.get(payload, scalar=tag == f"{_TAG}np__")
    raise CorruptDatasetError(f"{where}: unknown or malformed tag {tag!r}")


def ends_in_nul(value: Any) -> bool:
    r"""Whether ``value`` is a numpy str/bytes scalar ending in NUL (numpy drops those NULs).

    Example:
        >>> ends_in_nul(np.str_("a\x00")), ends_in_nul(np.bytes_(b"a")), ends_in_nul("a\x00")
        (True, False, False)
    """
    if isinstance(value, np.str_):
        return value.endswith("\x00")
    return isinstance(value, np.bytes_) and value.endswith(b"\x00")


def _full_width(array: np.ndarray, where: str) -> Any:
    """The numpy str/bytes scalar filling a 0-d array's whole width, trailing NULs included."""
    if array.ndim != 0 or array.dtype.kind not in "US":
        raise CorruptDatasetError(f"{where}: a NUL-ended string is not a 0-d str/bytes entry")
    if array.dtype.kind == "S":
        return np.bytes_(array.tobytes())
    codes = array.reshape(1).view(array.dtype.byteorder.replace("|", "=") + "u4")
    return np.str_("".join(map(chr, codes.tolist())))  # code points checked by BlobReader


def check_array_type(array: np.ndarray, where: str) -> None:
    """Refuses the ndarray subclasses a plain array would change: masked arrays and matrices.

    A ``MaskedArray`` with masked entries would lose its mask (the masked values would read
    back as data; one with none masked is stored as the plain array it holds), a
    ``matrix`` its operators (``*`` multiplies matrices); other subclasses (``memmap``) are
    stored as the plain arrays they hold.

    Raises:
        UnstorableValueError: ``array`` is a ``np.ma.MaskedArray`` with masked entries, or a
            ``np.matrix``.

    Example:
        >>> check_array_type(np.zeros(2), "obs")
        >>> try:
        ...     check_array_type(np.ma.masked_array([1, 2], mask=[0, 1]), "obs")
        ... except UnstorableValueError as err:
        ...     print(str(err)[:50])
        obs: a numpy masked array cannot be stored (its ma
    """
    if isinstance(array, np.ma.MaskedArray) and np.ma.count_masked(array):
        raise UnstorableValueError(
            f"{where}: a numpy masked array cannot be stored (its mask would be lost); store "
            ".filled(...) and the mask (np.ma.getmaskarray) as two arrays"
        )
    if isinstance(array, np.matrix):
        raise UnstorableValueError(
            f"{where}: a numpy matrix cannot be stored (it would read back as an ndarray, "
            "whose * is not a matrix product); store np.asarray(...) instead"
        )


def id_key(id_: Any) -> str:
    """A string two episode ids share exactly when they are the same id, types included.

    Python's ``==`` makes ``1``, ``1.0`` and ``True`` one id; a dataset keeps them apart (they
    are stored as different JSON values), so lookups by id compare these keys. Writers refuse
    numpy ids, so a numpy scalar (``np.str_``, ``np.int64``, ``np.float64``, ``np.bool_``)
    is the Python value it holds: ``np.int64(3)`` finds the id ``3`` (not ``3.0``). Within
    a type, ids equal in Python are one id: ``0.0`` and ``-0.0`` (one hash, and
    ``concat_episode`` joins them) share a key; so do all NaNs, which equal nothing (an id
    holding a NaN is still found, and its pieces joined: see :func:`concat_piece`).

    Example:
        >>> id_key(1) == id_key(1.0), id_key(("a", 1)) == id_key(("a", 1))
        (False, True)
        >>> id_key({"b": 1, "a": 2}) == id_key({"a": 2, "b": 1})
        True
        >>> id_key(np.str_("a")) == id_key("a"), id_key(np.int64(3)) == id_key(3.0)
        (True, False)
        >>> id_key(("x", -0.0)) == id_key(("x", 0.0)), id_key(float("nan")) == id_key(-math.nan)
        (True, True)
    """
    if isinstance(id_, (np.bool_, np.integer, np.floating, np.str_)):
        id_ = id_.item()  # stored ids are never numpy values: look numpy scalars up as Python's
    if id_.__class__ is float and id_ == 0.0:
        id_ = 0.0  # -0.0 (repr'd with its sign), not a new id: -0.0 == 0.0, one hash
    if isinstance(id_, tuple):
        return "(" + ",".join(id_key(item) for item in id_) + ")"
    if isinstance(id_, list):
        return "[" + ",".join(id_key(item) for item in id_) + "]"
    if isinstance(id_, dict):
        pairs = sorted(id_key(k) + ":" + id_key(v) for k, v in id_.items())
        return "{" + ",".join(pairs) + "}"
    return f"{type(id_).__name__}:{id_!r}"


def signless_zeros(value: Any) -> Any:
    """``value`` (a JSON-like id) with every float ``-0.0`` in it made ``0.0``, which it equals.

    For what keys an id by its ``repr`` (``split``'s hash): ``-0.0`` would key apart.

    Example:
        >>> signless_zeros(("a", [-0.0, {-0.0: -0.0}], 1))
        ('a', [0.0, {0.0: 0.0}], 1)
    """
    if value.__class__ is float and value == 0.0:
        return 0.0
    if isinstance(value, (tuple, list)):
        items = [signless_zeros(item) for item in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {signless_zeros(k): signless_zeros(v) for k, v in value.items()}
    return value


class SameIds:
    """Gives the pieces of an episode whose id holds a NaN one id object (the first seen).

    Two NaNs read from two pieces are two objects, so a dict keyed by id (a replay buffer's)
    would tell the pieces apart. One object finds them as one: dicts and tuple comparisons
    check identity first (a bare NaN still fails ``==`` with itself; episodes' ``==`` and
    ``concat_episode`` take NaNs at the same places as equal). Other ids already compare
    equal and are left alone, so nothing is held for them.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> same = SameIds()
        >>> a = SingleAgentEpisode(("x", float("nan")), observations=[0])
        >>> b = SingleAgentEpisode(("x", float("nan")), observations=[0])
        >>> a.id_ == b.id_, same.of(a).id_ == same.of(b).id_
        (False, True)
    """

    def __init__(self) -> None:
        self._first: dict[str, Any] = {}

    def of(self, piece: Any) -> Any:
        """``piece``, its id replaced by the first equal one seen if the id holds a NaN.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> SameIds().of(SingleAgentEpisode("a", observations=[0])).id_
            'a'
        """
        if holds_nan(piece.id_):
            piece.id_ = self._first.setdefault(id_key(piece.id_), piece.id_)
        return piece


def holds_nan(value: Any) -> bool:
    """Whether a JSON-like value (an id) is or contains a float NaN.

    Example:
        >>> holds_nan(("a", float("nan"))), holds_nan({"k": [1.0]})
        (True, False)
    """
    if isinstance(value, float):
        return value != value
    if isinstance(value, (tuple, list)):
        return any(holds_nan(item) for item in value)
    if isinstance(value, dict):
        return any(holds_nan(k) or holds_nan(v) for k, v in value.items())
    return False


def concat_piece(episode: Any, piece: Any) -> None:
    """``episode.concat_episode(piece)`` for two pieces of one stored id (one ``id_key``).

    Ids of one ``id_key`` are equal as ``concat_episode`` compares them, which takes NaNs at
    the same places as equal (two NaNs read from two pieces are two objects): the episode
    keeps its own id.

    Raises:
        AssertionError: What ``concat_episode`` raises for pieces that do not join.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> nan = float("nan")
        >>> ep = SingleAgentEpisode(nan, observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = SingleAgentEpisode(nan, observations=[1, 2], actions=[0], rewards=[1.0],
        ...                          t_started=1, len_lookback_buffer=0)
        >>> concat_piece(ep, nxt); len(ep), ep.id_ is nan
        (2, True)
    """
    episode.concat_episode(piece)

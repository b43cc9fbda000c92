"""Extension types a file's stored schema names, found without pyarrow building the schema.

pyarrow builds a file's schema when it opens the file, and builds an extension type by calling
the deserializer the process registered under its name, with bytes from the file: Ray's
tensor type unpickles them where Ray's ``RAY_DATA_AUTOLOAD_CLOUDPICKLE_TENSOR_METADATA`` is
set. A check of the built schema (:func:`episodes.io.arrow_types.check_plain_schema`) comes
too late for that, so the stored schema is looked at first: an Arrow IPC file's footer, a
Parquet file's ``ARROW:schema`` (base64, in its footer). Where the field metadata key
``ARROW:extension:name`` appears in those bytes, the schema's flatbuffers (Arrow's
``Schema.fbs``, ``File.fbs``, ``Message.fbs``) are walked by hand to name the column; bytes
that name it but do not walk are refused all the same. Our writers never name an extension,
so the usual file costs one search of its footer's bytes.

Example:
    >>> import pyarrow as pa
    >>> field = pa.field("y", pa.int8(), metadata={b"ARROW:extension:name": b"x.pickled"})
    >>> sink = pa.BufferOutputStream()
    >>> with pa.ipc.new_file(sink, pa.schema([pa.field("x", pa.struct([field]))])):
    ...     pass
    >>> ipc_file_extension(memoryview(sink.getvalue()))
    ('x/y', 'x.pickled')
"""

from __future__ import annotations

import base64
import functools
import re
from typing import Any

from episodes.io.parquet_footer import footer_key_values, read_footer

__all__ = ["UNWALKED", "ipc_file_extension", "parquet_file_extension", "parquet_read_options"]

_KEY = b"ARROW:extension:name"
_ARROW_SCHEMA = b"ARROW:schema"
_MAX_NODES = 1 << 16  # fields walked at most: a forged schema may nest or loop
#: ``(column, extension)`` of bytes that name an extension but do not walk as a schema.
UNWALKED = ("(not found: the schema does not parse)", "(unknown)")


@functools.cache
def parquet_read_options() -> dict[str, Any]:
    """What Parquet reads pass so that a logical type builds no registered extension type.

    pyarrow 19 and later build the extension type a process registered for a Parquet logical
    type (GEOMETRY's ``geoarrow.wkb``, JSON, UUID), calling its deserializer with the file's
    bytes, even where no ``ARROW:schema`` is stored to look at first; older pyarrow builds none.

    Example:
        >>> parquet_read_options() in ({"arrow_extensions_enabled": False}, {})
        True
    """
    import inspect

    import pyarrow.parquet as pq

    known = inspect.signature(pq.read_table).parameters
    return {"arrow_extensions_enabled": False} if "arrow_extensions_enabled" in known else {}


class _Malformed(Exception):
    """The bytes are not laid out as a flatbuffer schema (caught inside this module)."""


class _Flat:
    """Bounds-checked reads of a flatbuffer's tables, vectors and strings."""

    def __init__(self, data: bytes):
        self.data = data

    def _int(self, at: int, size: int, signed: bool = False) -> int:
        if not 0 <= at <= len(self.data) - size:
            raise _Malformed
        return int.from_bytes(self.data[at : at + size], "little", signed=signed)

    def follow(self, at: int) -> int:
        """Where the offset stored at ``at`` points."""
        return at + self._int(at, 4)

    def field(self, table: int, slot: int) -> int | None:
        """Where a table's field is stored, or None where it is absent."""
        vtable = table - self._int(table, 4, signed=True)
        if 4 + 2 * slot >= self._int(vtable, 2):
            return None
        offset = self._int(vtable + 4 + 2 * slot, 2)
        return None if offset == 0 else table + offset

    def ubyte(self, at: int) -> int:
        return self._int(at, 1)

    def string(self, at: int) -> bytes:
        start = self.follow(at)
        length = self._int(start, 4)
        if start + 4 + length > len(self.data):
            raise _Malformed
        return self.data[start + 4 : start + 4 + length]

    def tables(self, at: int) -> list[int]:
        """The tables of the vector of tables whose offset is stored at ``at``."""
        start = self.follow(at)
        count = self._int(start, 4)
        if count > _MAX_NODES:
            raise _Malformed
        return [self.follow(start + 4 + 4 * k) for k in range(count)]


def _walk_schema(flat: _Flat, schema: int) -> tuple[str, str] | None:
    """The first field (depth first) whose custom metadata names an extension type.

    A forged footer may list one table many times (a field, a vector of pairs): each table is
    walked once, and all the work is bounded (``_MAX_NODES`` tables and pairs in all).
    """
    fields = flat.field(schema, 1)  # Schema.fields
    stack = [("", table) for table in reversed(flat.tables(fields))] if fields else []
    walked: set[int] = set()
    work = 0
    while stack:
        parent, table = stack.pop()
        work += 1
        if work > _MAX_NODES:
            raise _Malformed
        if table in walked:  # listed again: what it holds was looked at already
            continue
        walked.add(table)
        name_at = flat.field(table, 0)  # Field.name
        name = flat.string(name_at).decode("utf-8", "backslashreplace") if name_at else ""
        path = f"{parent}/{name}" if parent else name
        metadata = flat.field(table, 6)  # Field.custom_metadata: [KeyValue]
        pairs = flat.tables(metadata) if metadata else []
        work += len(pairs)
        if work > _MAX_NODES:
            raise _Malformed
        for pair in dict.fromkeys(pairs):  # a pair listed twice is looked at once
            key, value = flat.field(pair, 0), flat.field(pair, 1)
            if key is not None and flat.string(key) == _KEY:
                named = flat.string(value) if value is not None else b""
                return path, named.decode("utf-8", "backslashreplace")
        children = flat.field(table, 5)  # Field.children
        if children:
            stack.extend((path, child) for child in reversed(flat.tables(children)))
    return None


def _found(walk: Any) -> tuple[str, str] | None:
    """What the walk found; None where the schema walks and no field's metadata names one.

    The key's text elsewhere (a field named after it) names no extension type.
    """
    try:
        found: tuple[str, str] | None = walk()
        return found
    except _Malformed:
        return UNWALKED


def ipc_file_extension(data: Any) -> tuple[str, str] | None:
    """``(column, extension)`` of the first field an IPC file's footer marks as an extension.

    None where the footer does not name one (or there is no footer: pyarrow refuses such a
    file itself). The column is ``top/field/...``, as ``extension_in_schema`` names it.

    Example:
        >>> ipc_file_extension(b"not an Arrow file") is None
        True
    """
    view = memoryview(data).cast("B")
    if len(view) < 10 or bytes(view[-6:]) != b"ARROW1":
        return None
    length = int.from_bytes(view[-10:-6], "little", signed=True)
    if not 0 < length <= len(view) - 10:
        return None
    footer = bytes(view[len(view) - 10 - length : len(view) - 10])
    if _KEY not in footer:
        return None
    flat = _Flat(footer)

    def walk() -> tuple[str, str] | None:
        schema = flat.field(flat.follow(0), 1)  # Footer.schema
        return None if schema is None else _walk_schema(flat, flat.follow(schema))

    return _found(walk)


def parquet_file_extension(source: Any, size: int) -> tuple[str, str] | None:
    """As :func:`ipc_file_extension`, for a Parquet file read from ``source`` (left at 0).

    Parquet keeps the Arrow schema as an IPC schema message, base64, under ``ARROW:schema``
    in its footer's key-value metadata (:mod:`episodes.io.parquet_footer` reads it without
    pyarrow). Every such entry is looked at, each decoded as Arrow's reader decodes it (up to
    the first character base64 does not use) and as a strict decoder does: a name found in
    any, or bytes naming the key that do not walk, refuse the file, and so does a footer that
    does not parse while it holds the text ``ARROW:schema``.

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> sink = pa.BufferOutputStream(); pq.write_table(pa.table({"x": [1]}), sink)
        >>> data = sink.getvalue()
        >>> parquet_file_extension(pa.BufferReader(data), data.size) is None
        True
    """
    footer = read_footer(source, size)
    try:
        pairs = footer_key_values(footer)
    except ValueError:
        return UNWALKED if _ARROW_SCHEMA in footer else None
    for key, value in pairs:
        if key != _ARROW_SCHEMA:
            continue
        for message in _decodings(value):
            if _KEY not in message:
                continue
            found = _found(lambda message=message: _walk_message(message))
            if found is not None:
                return found
    return None


def _walk_message(message: bytes) -> tuple[str, str] | None:
    # The continuation marker and the length, or (before Arrow 0.15) the length alone.
    flat = _Flat(message[8:] if message[:4] == b"\xff\xff\xff\xff" else message[4:])
    root = flat.follow(0)
    kind, header = flat.field(root, 1), flat.field(root, 2)  # header_type, header
    if kind is None or flat.ubyte(kind) != 1 or header is None:  # 1: a Schema
        raise _Malformed
    return _walk_schema(flat, flat.follow(header))


_BASE64 = re.compile(rb"[A-Za-z0-9+/]*")


def _decodings(value: bytes) -> list[bytes]:
    """``value`` as readers may decode it.

    Up to the first character base64 does not use (Arrow's decoder), strictly, and as it is.
    """
    prefix = _BASE64.match(value)
    assert prefix is not None  # the pattern matches the empty string too
    head = prefix.group(0)
    head = head[: len(head) - (len(head) % 4 == 1)]  # one lone character decodes to nothing
    out = [base64.b64decode(head + b"=" * (-len(head) % 4)), value]
    try:
        out.append(base64.b64decode(value, validate=True))
    except ValueError:
        pass
    return out

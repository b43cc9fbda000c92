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
from typing import Any

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
    in its footer's key-value metadata (Thrift compact: the key, then the value's field
    header, its length as a varint, its bytes).

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> sink = pa.BufferOutputStream(); pq.write_table(pa.table({"x": [1]}), sink)
        >>> data = sink.getvalue()
        >>> parquet_file_extension(pa.BufferReader(data), data.size) is None
        True
    """
    footer = b""
    if size >= 12:
        source.seek(size - 8)
        tail = bytes(source.read(8))
        length = int.from_bytes(tail[:4], "little", signed=True)
        if tail[4:] == b"PAR1" and 0 < length <= size - 12:
            source.seek(size - 8 - length)
            footer = bytes(source.read(length))
    source.seek(0)
    for message in _arrow_schemas(footer):
        if _KEY not in message:
            continue
        # The continuation marker and the length, or (before Arrow 0.15) the length alone.
        flat = _Flat(message[8:] if message[:4] == b"\xff\xff\xff\xff" else message[4:])

        def walk(flat: _Flat = flat) -> tuple[str, str] | None:
            root = flat.follow(0)
            kind, header = flat.field(root, 1), flat.field(root, 2)  # header_type, header
            if kind is None or flat.ubyte(kind) != 1 or header is None:  # 1: a Schema
                raise _Malformed
            return _walk_schema(flat, flat.follow(header))

        return _found(walk)
    return None


def _arrow_schemas(footer: bytes) -> list[bytes]:
    """The decoded values stored under ``ARROW:schema``, wherever that text appears.

    A column's statistics may hold the text too: every place it appears is tried.
    """
    found, at = [], footer.find(_ARROW_SCHEMA)
    while at >= 0:
        try:
            encoded = _thrift_string_after(footer, at + len(_ARROW_SCHEMA))
            found.append(base64.b64decode(encoded))
        except (_Malformed, ValueError):
            pass
        at = footer.find(_ARROW_SCHEMA, at + 1)
    return found


def _thrift_string_after(data: bytes, at: int) -> bytes:
    """The binary field (type 8) that follows at ``at``: a header byte, a varint length."""
    if at >= len(data) or data[at] & 0x0F != 8:
        raise _Malformed
    at += 1
    length = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Malformed
        byte = data[at]
        at += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if at + length > len(data):
        raise _Malformed
    return data[at : at + length]

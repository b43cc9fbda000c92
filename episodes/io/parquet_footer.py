"""A Parquet file's footer key-value metadata, read with a Thrift compact parser of our own.

The footer is a Thrift compact ``FileMetaData``; its field 5 is the file's key-value metadata,
where pyarrow keeps the Arrow schema (``ARROW:schema``). pyarrow builds that schema, extension
types included, whenever it opens the file, so the metadata is read here instead: every field
the footer holds is parsed or skipped by its type, in any order and in either header form, as
a Thrift reader would, with bounded depth and work. Malformed bytes are a ``ValueError``.

Example:
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> sink = pa.BufferOutputStream()
    >>> pq.write_table(pa.table({"x": [1]}), sink)
    >>> data = sink.getvalue()
    >>> [key for key, _ in footer_key_values(read_footer(pa.BufferReader(data), data.size))]
    [b'ARROW:schema']
"""

from __future__ import annotations

from typing import Any

__all__ = ["footer_key_values", "read_footer"]

_STOP, _TRUE, _FALSE, _I8, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
_MAX_DEPTH = 64
_MAX_ITEMS = 1 << 22  # values parsed or skipped in all: a forged count cannot spin for long


def read_footer(source: Any, size: int) -> bytes:
    """The footer of a Parquet file read from ``source`` (left at its start); b"" if none.

    Example:
        >>> import pyarrow as pa
        >>> read_footer(pa.BufferReader(b"not parquet"), 11)
        b''
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
    return footer


def footer_key_values(footer: bytes) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` of every entry of the footer's key-value metadata, in order.

    Raises:
        ValueError: The footer is not a Thrift compact struct (truncated, a bad type, too
            deep or too long).

    Example:
        >>> footer_key_values(bytes(1))  # an empty struct: no metadata
        []
    """
    reader = _Reader(footer)
    pairs: list[tuple[bytes, bytes]] = []
    for field, kind in reader.fields():
        if field == 5 and kind == _LIST:
            count, item = reader.collection()
            for _ in range(count):
                if item != _STRUCT:
                    reader.skip(item, 1)
                    continue
                entry: dict[int, bytes] = {}
                for sub, sub_kind in reader.fields():
                    if sub in (1, 2) and sub_kind == _BINARY:
                        entry[sub] = reader.binary()
                    else:
                        reader.skip(sub_kind, 1)
                pairs.append((entry.get(1, b""), entry.get(2, b"")))
        else:
            reader.skip(kind, 0)
    return pairs


class _Reader:
    """Thrift compact values read from ``data``, with bounds, depth and work checked."""

    def __init__(self, data: bytes):
        self.data, self.at, self.work = data, 0, 0

    def _byte(self) -> int:
        if self.at >= len(self.data):
            raise ValueError("the Parquet footer ends inside a value")
        self.at += 1
        self.work += 1
        if self.work > _MAX_ITEMS:
            raise ValueError("the Parquet footer holds too many values")
        return self.data[self.at - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise ValueError("a varint of the Parquet footer is too long")

    def binary(self) -> bytes:
        length = self.varint()
        if length > len(self.data) - self.at:
            raise ValueError("a string of the Parquet footer runs past its end")
        self.at += length
        return self.data[self.at - length : self.at]

    def fields(self) -> Any:
        """``(field id, type)`` of each field of the struct starting here, to its stop."""
        last = 0
        while True:
            header = self._byte()
            kind = header & 0x0F
            if kind == _STOP:
                return
            delta = header >> 4
            if delta:
                last += delta
            else:  # the long form: the field id follows, zigzag encoded
                raw = self.varint()
                last = (raw >> 1) ^ -(raw & 1)
            yield last, kind

    def collection(self) -> tuple[int, int]:
        header = self._byte()
        count = header >> 4
        if count == 15:
            count = self.varint()
        return count, header & 0x0F

    def skip(self, kind: int, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise ValueError("the Parquet footer nests too deep")
        if kind in (_TRUE, _FALSE):
            return  # a struct field's bool is in its header (a list's takes a byte: below)
        if kind == _I8:
            self._byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            for _ in range(8):
                self._byte()
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            count, item = self.collection()
            for _ in range(count):
                self._skip_element(item, depth + 1)
        elif kind == _MAP:
            count = self.varint()
            if count:
                types = self._byte()
                for _ in range(count):
                    self._skip_element(types >> 4, depth + 1)
                    self._skip_element(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            for _, sub in self.fields():
                self.skip(sub, depth + 1)
        else:
            raise ValueError(f"the Parquet footer holds an unknown Thrift type {kind}")

    def _skip_element(self, kind: int, depth: int) -> None:
        """A collection's element: a bool there takes a byte of its own."""
        if kind in (_TRUE, _FALSE):
            self._byte()
        else:
            self.skip(kind, depth)

"""Fixed-size list columns in Parquet shards, stored so that every supported pyarrow reads them.

pyarrow before 26 cannot read a Parquet ``fixed_size_list`` column that holds a null (it fails
with "Expected all lists to be of size=N but index i had size=0"), and every shard has such
nulls: the last row of ``actions`` and ``rewards``, a step without some extra model output. So
a Parquet shard stores each fixed-size list as a plain ``list`` whose field carries its size in
the field metadata (``episodes.list_size``), and the reader casts it back: the values, the
nulls and the files other tools see are the same, only the declared type differs.

Example:
    >>> import pyarrow as pa
    >>> table = pa.table({"obs": pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2))})
    >>> stored = loosen_fixed_lists(table)
    >>> stored.schema.field("obs").type, stored.schema.field("obs").metadata
    (ListType(list<item: float>), {b'episodes.list_size': b'2'})
    >>> restore_fixed_lists(stored).equals(table)
    True
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

__all__ = ["LIST_SIZE_KEY", "loosen_fixed_lists", "restore_fixed_lists"]

LIST_SIZE_KEY = b"episodes.list_size"


def _walk(field: pa.Field, change: Callable[[pa.Field], pa.Field | None]) -> pa.Field:
    """``field`` rebuilt bottom-up, ``change`` given each list field first (None: no change)."""
    kind = field.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind):
        changed = change(field)
        if changed is not None:
            return changed
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        build = pa.list_ if pa.types.is_list(kind) else pa.large_list
        child = _walk(kind.value_field, change)
        return pa.field(field.name, build(child), field.nullable, field.metadata)
    if pa.types.is_struct(kind):
        children = [_walk(kind.field(i), change) for i in range(kind.num_fields)]
        return pa.field(field.name, pa.struct(children), field.nullable, field.metadata)
    return field


def _loosened(field: pa.Field) -> pa.Field | None:
    kind = field.type
    if not pa.types.is_fixed_size_list(kind):
        return None
    metadata = {**(field.metadata or {}), LIST_SIZE_KEY: str(kind.list_size).encode()}
    child = _walk(kind.value_field, _loosened)
    return pa.field(field.name, pa.list_(child), field.nullable, metadata)


def _list_size(stored: bytes) -> int:
    text = stored.decode("ascii", "replace")
    if not text.isdigit() or int(text) >= 2**31:  # Arrow's list sizes are int32
        raise ValueError(f"a list size of {text!r} in {LIST_SIZE_KEY.decode()}")
    return int(text)


def _restored(field: pa.Field) -> pa.Field | None:
    metadata = dict(field.metadata or {})
    size = metadata.pop(LIST_SIZE_KEY, None)
    if size is None or not pa.types.is_list(field.type):
        return None
    fixed = pa.list_(_walk(field.type.value_field, _restored), _list_size(size))
    return pa.field(field.name, fixed, field.nullable, metadata or None)


def _rebuilt(table: pa.Table, change: Callable[[pa.Field], pa.Field | None]) -> pa.Table:
    fields = [_walk(field, change) for field in table.schema]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema.equals(table.schema, check_metadata=True) else table.cast(schema)


def loosen_fixed_lists(table: pa.Table) -> pa.Table:
    """``table`` with every fixed-size list (at any struct depth) as a list marked with its size.

    Example:
        >>> import pyarrow as pa
        >>> loosen_fixed_lists(pa.table({"x": [1, 2]})).schema.field("x").type
        DataType(int64)
    """
    return _rebuilt(table, _loosened)


def restore_fixed_lists(table: pa.Table) -> pa.Table:
    """Undoes :func:`loosen_fixed_lists`: marked lists become fixed-size lists again.

    A marked list whose items are not all of the marked size (a damaged file) raises pyarrow's
    ``ArrowInvalid``; a size that is no number raises ``ValueError``.

    Example:
        >>> import pyarrow as pa
        >>> marked = pa.field("x", pa.list_(pa.int8()), metadata={LIST_SIZE_KEY: b"3"})
        >>> table = pa.table([pa.array([[1, 2, 3]], pa.list_(pa.int8()))], pa.schema([marked]))
        >>> restore_fixed_lists(table).schema.field("x").type
        FixedSizeListType(fixed_size_list<item: int8>[3])
    """
    return _rebuilt(table, _restored)

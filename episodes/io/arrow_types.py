"""The Arrow types a shard may hold: plain ones only, checked before any value is read.

An Arrow extension type is Python code run on a column's values: pyarrow converts an
extension column's values through whatever class the process registered under the name the
file gives (Ray Data registers ``ray.data.arrow_pickled_object``, whose values are unpickled).
Whether a name is registered depends on what the process imported, so a shard that names an
extension type anywhere in its schema (a registered one, or a field whose metadata names one
no module registered here) is refused when it is opened, before any batch is read. The
columns the reader converts to Python (a JSON column's texts, the blob) must then also have
exactly the plain type the format gives them; leaves are compared with their leaf entry's type
in :mod:`episodes.io.arrow_leaves`.

Example:
    >>> check_plain_schema(pa.schema({"x": pa.struct({"y": pa.large_string()})}), "shard s")
    >>> field = pa.field("y", pa.large_binary(), metadata={EXTENSION_NAME: b"x.pickled"})
    >>> try:
    ...     check_plain_schema(pa.schema([pa.field("x", pa.struct([field]))]), "shard s")
    ... except CorruptDatasetError as err:
    ...     print(str(err)[:59])
    shard s: column x/y has the Arrow extension type x.pickled:
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from episodes.io.errors import CorruptDatasetError

__all__ = [
    "EXTENSION_NAME",
    "check_column_type",
    "check_plain_schema",
    "extension_in_schema",
    "extension_refused",
]

#: The field metadata key under which an Arrow IPC or Parquet file names a field's extension.
EXTENSION_NAME = b"ARROW:extension:name"


def extension_in_schema(schema: pa.Schema) -> tuple[str, str] | None:
    """The first column holding or naming an Arrow extension type, as ``(column, extension)``.

    A field counts when its type is an extension type or when its metadata names one (an
    extension no module of this process registered: another process may have), so a file is
    judged the same whatever this process imported. Every child is looked at: struct, list and
    map fields, union members, a dictionary's values. The column is ``top/field/...``.

    Example:
        >>> field = pa.field("y", pa.int8(), metadata={EXTENSION_NAME: b"x.pickled"})
        >>> extension_in_schema(pa.schema([pa.field("x", pa.list_(field))]))
        ('x/y', 'x.pickled')
        >>> extension_in_schema(pa.schema({"x": pa.dictionary(pa.int8(), pa.string())})) is None
        True
    """
    stack: list[tuple[str, Any, Any]] = [(f.name, f.type, f.metadata) for f in schema]
    while stack:  # depth first, without recursion (a forged type may nest deeply)
        name, kind, metadata = stack.pop()
        if isinstance(kind, pa.BaseExtensionType):
            return name, kind.extension_name
        if metadata and EXTENSION_NAME in metadata:
            return name, metadata[EXTENSION_NAME].decode("utf-8", "backslashreplace")
        for i in range(kind.num_fields):
            child = kind.field(i)
            stack.append((f"{name}/{child.name}", child.type, child.metadata))
        if pa.types.is_dictionary(kind):
            stack.append((name, kind.value_type, None))
    return None


def check_plain_schema(schema: pa.Schema, where: str) -> None:
    """Refuses a schema that holds or names an extension type anywhere (nested fields included).

    Not cached: schemas compare equal whatever their fields' metadata, and the walk
    (:func:`extension_in_schema`) is once per opened shard.

    Raises:
        CorruptDatasetError: Naming the column (``top/field/...``) and the extension.

    Example:
        >>> check_plain_schema(pa.schema({"x": pa.list_(pa.dictionary(pa.int8(), pa.string()))}),
        ...                    "shard s")
    """
    found = extension_in_schema(schema)
    if found is not None:
        raise extension_refused(found, where)


def extension_refused(found: tuple[str, str], where: str) -> CorruptDatasetError:
    """The error for a shard's column ``found[0]`` of the extension type ``found[1]``.

    Example:
        >>> extension_refused(("x/y", "x.pickled"), "shard s")  # doctest: +ELLIPSIS
        CorruptDatasetError('shard s: column x/y has the Arrow extension type x.pickled: ...')
    """
    return CorruptDatasetError(
        f"{where}: column {found[0]} has the Arrow extension type {found[1]}: a shard "
        "holds plain Arrow types only (refused before any value is read)"
    )


def check_column_type(array: Any, expected: pa.DataType, label: str) -> None:
    """Refuses a column the reader converts to Python unless its type is exactly ``expected``.

    Example:
        >>> check_column_type(pa.array(["{}"], pa.large_string()), pa.large_string(), "x")
        >>> check_column_type(pa.array([b"{}"], pa.large_binary()), pa.string(), "c")
        Traceback (most recent call last):
        episodes.io.errors.CorruptDatasetError: c has Arrow type large_binary, expected string
    """
    if array.type != expected or isinstance(array.type, pa.BaseExtensionType):
        raise CorruptDatasetError(f"{label} has Arrow type {array.type}, expected {expected}")

"""The Arrow types of a Minari episode file, checked before any of its values is converted.

Minari's decoder turns each column into numpy or Python values (``to_numpy``, ``to_pylist``,
``np.asarray``). A column of a registered pyarrow extension type converts through that type's
Python code: Ray registers one (``ray.data.arrow_pickled_object``) that unpickles its values,
so a file could choose code to run. Each file's schema is checked first, once per distinct
schema: no extension type anywhere in it (through list, struct, map, union and dictionary
children), and the columns Minari decodes of the plain types the dataset's spaces imply.

Example:
    >>> import gymnasium as gym
    >>> columns = ColumnTypes(gym.spaces.Discrete(3), gym.spaces.Text(4), jpeg_encoding=False)
    >>> schema = pa.schema({"observations": pa.int64(), "actions": pa.string(),
    ...                     "rewards": pa.float64(), "terminations": pa.bool_(),
    ...                     "truncations": pa.bool_()})
    >>> columns.check(schema, "episode 0")
    >>> try:
    ...     columns.check(schema.set(1, pa.field("actions", pa.int64())), "episode 0")
    ... except DatasetError as err:
    ...     print(str(err).split(",")[0])
    episode 0: column 'actions' has Arrow type int64
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa

from episodes.io.arrow_types import extension_in_schema
from episodes.io.errors import DatasetError, UnsafeDataError

__all__ = ["ColumnTypes", "extension_unsafe"]

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
_SCHEMAS_KEPT = 8  # distinct schemas remembered as checked (a dataset's files share one)

TypeTest = Callable[[pa.DataType], bool]


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def _text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _numeric_list(t: pa.DataType) -> bool:
    listed = pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    return bool(listed and _numeric(t.value_type))


def _rewards(t: pa.DataType) -> bool:
    return bool(pa.types.is_floating(t) or pa.types.is_integer(t))


def _is_image(space: gym.Space[Any]) -> bool:
    """Minari's test of a Box it JPEG-encodes (one binary value per step)."""
    try:
        from minari.dataset.minari_storage import is_image_space
    except ImportError:  # pragma: no cover - another minari layout: any uint8 Box may be one
        return isinstance(space, gym.spaces.Box) and np.dtype(space.dtype) == np.uint8
    return bool(is_image_space(space))


class ColumnTypes:
    """Checks Minari episode files' schemas against the dataset's spaces, each schema once.

    Args:
        observation_space: The dataset's observation space (the ``observations`` column).
        action_space: Its action space (the ``actions`` column).
        jpeg_encoding: Whether the dataset stores image Boxes as JPEG (one binary per step).
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        jpeg_encoding: bool,
    ) -> None:
        self.spaces = {"observations": observation_space, "actions": action_space}
        self.jpeg_encoding = jpeg_encoding
        self._checked: list[pa.Schema] = []

    def check(self, schema: pa.Schema, where: str) -> None:
        """Refuses ``schema`` unless every column Minari decodes is of a plain, expected type.

        Raises:
            UnsafeDataError: An extension type anywhere in the schema, naming the column.
            DatasetError: A column missing, or of another type than its space (or Minari's
                rewards, flags and infos) implies, naming the column and the types.
        """
        if any(schema.equals(seen, check_metadata=True) for seen in self._checked):
            return
        found = extension_in_schema(schema)
        if found is not None:
            raise extension_unsafe(found, where)
        for name, space in self.spaces.items():
            self._space(space, self._column(schema, name, where), f"{where}: column {name!r}")
        for name, test, expected in (
            ("rewards", _rewards, "floats or ints"),
            ("terminations", _numeric, "bools"),
            ("truncations", _numeric, "bools"),  # (floats where Minari wrote no steps)
        ):
            self._leaf(
                self._column(schema, name, where), test, expected, f"{where}: column {name!r}"
            )
        if "infos" in schema.names:
            t = self._column(schema, "infos", where)
            self._leaf(
                t, pa.types.is_struct, "a struct of per-key columns", f"{where}: column 'infos'"
            )
        if len(self._checked) >= _SCHEMAS_KEPT:
            self._checked.pop(0)
        self._checked.append(schema)

    @staticmethod
    def _column(schema: pa.Schema, name: str, where: str) -> pa.DataType:
        index = schema.get_field_index(name)  # -1 when missing or repeated
        if index < 0:
            raise DatasetError(f"{where} has no single column {name!r} (Minari's files do)")
        return schema.field(index).type

    @staticmethod
    def _leaf(t: pa.DataType, test: TypeTest, expected: str, where: str) -> None:
        if not test(t):
            raise DatasetError(
                f"{where} has Arrow type {t}, where Minari stores {expected}; refused before "
                "any value is read"
            )

    def _space(self, space: gym.Space[Any], t: pa.DataType, where: str) -> None:
        if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
            names = (
                [str(k) for k in space.spaces]
                if isinstance(space, gym.spaces.Dict)
                else [str(i) for i in range(len(space.spaces))]
            )
            self._leaf(t, pa.types.is_struct, f"a struct of fields {names}", where)
            children = space.spaces.values() if isinstance(space, gym.spaces.Dict) else space
            for name, child in zip(names, children, strict=True):
                index = t.get_field_index(name)  # -1 when missing or repeated
                if index < 0:
                    raise DatasetError(
                        f"{where} has Arrow type {t}, without one field {name!r} its "
                        f"{type(space).__name__} space has; refused before any value is read"
                    )
                self._space(child, t.field(index).type, f"{where}[{name!r}]")
        elif isinstance(space, _ARRAY_SPACES):
            if self.jpeg_encoding and _is_image(space):
                self._leaf(t, _binary, f"JPEG bytes for the image space {space}", where)
            else:
                self._leaf(t, _numeric_list, f"numeric lists for the space {space}", where)
        elif isinstance(space, gym.spaces.Discrete):
            self._leaf(t, pa.types.is_integer, f"ints for the space {space}", where)
        elif isinstance(space, gym.spaces.Text):
            self._leaf(t, _text, f"strings for the space {space}", where)
        # Any other space: Minari reads it with to_pylist, safe once no extension type is in.


def extension_unsafe(found: tuple[str, str], where: str) -> UnsafeDataError:
    """The error for a Minari file's column ``found[0]`` of the extension type ``found[1]``.

    Example:
        >>> str(extension_unsafe(("obs", "x.pickled"), "episode 0"))[:57]
        "episode 0: column 'obs' holds the Arrow extension type 'x"
    """
    return UnsafeDataError(
        f"{where}: column {found[0]!r} holds the Arrow extension type {found[1]!r} "
        "(converting its values runs that type's code, which the file chose); "
        "refused before any value is read"
    )

"""Argument checks of the whole-dataset tools (:mod:`episodes.io.tools`), made once per call.

Two rules the tools share live here too: where a tool records its provenance in
``metadata.user`` (:func:`with_provenance`) and how ``custom_data`` values compare
(:func:`same_json_value`).

Each returns the checked value as plain Python (numpy numbers taken), so it can go into a
dataset's metadata, or raises a ``TypeError`` / ``ValueError`` naming the argument before
anything is read or written.

Example:
    >>> import numpy as np
    >>> split_args(np.float64(0.25), np.int64(3))
    (0.25, 3)
    >>> split_args(0.5, 1.5)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an int >= 0, got 1.5
"""

from __future__ import annotations

import errno
import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from episodes.indexing import as_flag
from episodes.seeds import check_seed

__all__ = [
    "filter_args",
    "holds_nan",
    "merge_sources",
    "parse_custom_data",
    "real_number",
    "resolved",
    "same_json_value",
    "split_args",
    "with_provenance",
]

PathLike = str | os.PathLike[str]


def resolved(path: PathLike) -> Path:
    """``path`` made absolute, ``..`` and symlinks resolved (``Path.resolve``, not strict).

    A symlink loop on the way is an ``OSError`` (``ELOOP``) naming ``path``, as opening it
    would be, not Python 3.11's ``RuntimeError``. The copies rename into, and compare, the
    resolved destination: ``.`` has no name to stage a copy beside.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> resolved(root / "a" / ".." / "b") == root.resolve() / "b"
        True
        >>> (root / "loop").symlink_to("loop")
        >>> try:
        ...     resolved(root / "loop" / "x")
        ... except OSError as err:
        ...     print(err.strerror, err.filename == str(root / "loop" / "x"))
        Too many levels of symbolic links True
    """
    # A strict resolve meets a loop wherever the path exists; Python 3.13's non-strict one
    # returns the looping path as it is, and 3.11's raises RuntimeError("Symlink loop ...").
    loop = OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(path))
    try:
        try:
            return Path(path).resolve(strict=True)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise loop from err
        return Path(path).resolve()  # the part that does not exist yet kept as it is
    except RuntimeError as err:
        raise loop from err


def real_number(value: Any, name: str) -> Any:
    """``value`` as plain Python (numpy ints and floats as int and float), else a ``TypeError``.

    Any ``numbers.Real`` is taken (a ``Fraction`` stays one: return bounds compare exactly,
    and :mod:`decimal` values, which are not ``Real``, are taken too); bools are refused
    (``True`` is no fraction or bound), and so are strings (``"0.5"``).

    Example:
        >>> real_number(np.float32(0.5), "fraction"), real_number(np.int64(2), "min_return")
        (0.5, 2)
        >>> from fractions import Fraction
        >>> real_number(Fraction(5, 2), "min_return")
        Fraction(5, 2)
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} ({value!r})")
    if isinstance(value, np.integer):
        return int(value)
    return float(value) if isinstance(value, np.floating) else value


def split_args(fraction: Any, seed: Any) -> tuple[float, int]:
    """``split``'s ``fraction`` (a real number in ``[0, 1]``) and ``seed`` (an int >= 0).

    The seed follows the package's rule (:func:`episodes.seeds.check_seed`); None is refused,
    as the split is deterministic for a seed.

    Example:
        >>> split_args(1, 0)
        (1.0, 0)
        >>> split_args(float("nan"), 0)
        Traceback (most recent call last):
        ...
        ValueError: fraction must be in [0, 1], got nan
    """
    share = float(real_number(fraction, "fraction"))
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {share!r}")
    try:
        checked = check_seed(seed)
    except ValueError:
        checked = None
    if checked is None:  # None too: the split is deterministic for a seed
        raise ValueError(f"seed must be an int >= 0, got {seed!r}") from None
    return share, checked


def _length(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__} ({value!r})")
    if value < 0:  # no episode is shorter than 0 steps
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _bound(value: Any, name: str) -> int | float | None:
    if value is None:
        return None
    number = real_number(value, name)
    if number != number:
        raise ValueError(f"{name} must be a number, got nan")
    return number


def filter_args(
    min_return: Any,
    max_return: Any,
    min_length: Any,
    max_length: Any,
    done_only: Any,
    custom_data: Any,
    predicate: Any,
) -> tuple[Any, ...]:
    """``filter_dataset``'s tests, checked and as plain Python, in the order given.

    ``custom_data`` comes back as a new dict ({} for None); NaN bounds, negative lengths, a
    lower bound above its upper one and a NaN in ``custom_data`` are ``ValueError``s (they
    would filter silently), values of the wrong type ``TypeError``s.

    Example:
        >>> filter_args(np.float64(1.0), None, np.int64(2), None, np.True_, None, None)
        (1.0, None, 2, None, True, {}, None)
        >>> filter_args(None, None, None, None, "no", None, None)
        Traceback (most recent call last):
        ...
        TypeError: done_only must be a bool, got str ('no')
    """
    low_ret, high_ret = _bound(min_return, "min_return"), _bound(max_return, "max_return")
    low_len, high_len = _length(min_length, "min_length"), _length(max_length, "max_length")
    for what, low, high in (("return", low_ret, high_ret), ("length", low_len, high_len)):
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_{what} {low} is above max_{what} {high}: nothing would pass")
    flag = as_flag(done_only, "done_only")
    if custom_data is not None and not isinstance(custom_data, Mapping):
        raise TypeError(
            f"custom_data must be a mapping of keys to values (or None), got "
            f"{type(custom_data).__name__} ({custom_data!r})"
        )
    tests = dict(custom_data or {})
    for key, value in tests.items():
        if holds_nan(value):
            raise ValueError(f"custom_data[{key!r}] holds a NaN, which equals nothing")
    if predicate is not None and not callable(predicate):
        raise TypeError(f"predicate must be callable or None, got {type(predicate).__name__}")
    return low_ret, high_ret, low_len, high_len, flag, tests, predicate


def merge_sources(sources: Any) -> list[PathLike]:
    """``merge``'s ``sources`` as a list of paths: one path alone is a ``TypeError``.

    A str iterated would be its characters; a single source goes in a list.

    Example:
        >>> merge_sources(("a", "b"))
        ['a', 'b']
        >>> merge_sources("a")
        Traceback (most recent call last):
        ...
        TypeError: sources must be a list of dataset paths, got the single path 'a': pass ['a']
    """
    if isinstance(sources, (str, bytes, os.PathLike)):
        raise TypeError(
            f"sources must be a list of dataset paths, got the single path {sources!r}: "
            f"pass [{sources!r}]"
        )
    if not hasattr(sources, "__iter__"):
        raise TypeError(f"sources must be a list of dataset paths, got {type(sources).__name__}")
    listed = list(sources)
    for i, src in enumerate(listed):
        if not isinstance(src, (str, os.PathLike)):
            raise TypeError(
                f"sources[{i}] must be a path (str or os.PathLike), got {type(src).__name__} "
                f"({src!r})"
            )
    if not listed:
        raise ValueError("merge needs at least one source")
    return listed


def holds_nan(value: Any) -> bool:
    """Whether ``value`` is a float NaN or holds one in its dicts, lists and tuples."""
    if isinstance(value, dict):
        return any(holds_nan(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_nan(v) for v in value)
    return isinstance(value, float) and math.isnan(value)


def with_provenance(user: dict[str, Any], name: str, record: Any) -> dict[str, Any]:
    """``user`` (a dataset's ``metadata.user``) with a tool's ``record`` added, nothing replaced.

    The record goes under ``name`` (``"split"``, ``"merged_from"``, ``"filtered_from"``), or,
    where ``user`` holds that key already (the user's own entry, or an earlier tool's record, as
    in a split of a split), under the first of ``name_2``, ``name_3``, ... it lacks: ``user`` is
    the user's, and a key there keeps its value.

    Example:
        >>> with_provenance({"run": 3}, "split", {"from": "a"})
        {'run': 3, 'split': {'from': 'a'}}
        >>> with_provenance({"split": "test", "split_2": {"from": "a"}}, "split", {"from": "b"})
        {'split': 'test', 'split_2': {'from': 'a'}, 'split_3': {'from': 'b'}}
    """
    key, n = name, 1
    while key in user:
        n += 1
        key = f"{name}_{n}"
    return {**user, key: record}


def same_json_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal JSON values (``==``, but a bool equals no number).

    Numpy scalars and arrays count as the numbers, bools and lists they hold.

    Example:
        >>> same_json_value(True, 1), same_json_value(1, 1.0), same_json_value([1], (1,))
        (False, True, True)
    """
    a, b = (x.tolist() if isinstance(x, (np.ndarray, np.generic)) else x for x in (a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(same_json_value(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same_json_value(a[k], b[k]) for k in a)
        )
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # objects whose == is not a yes or no
        return False


def parse_custom_data(items: Iterable[str]) -> dict[str, Any]:
    """:func:`filter_dataset`'s ``custom_data`` from ``KEY=VALUE`` texts (``filter --custom``).

    ``VALUE`` is JSON (``0`` an int, ``true`` a bool, ``"a"`` a string), or else text.

    Raises:
        ValueError: An item is not ``KEY=VALUE``, holds a NaN (which equals nothing: the filter
            would keep nothing), repeats a key (a dict would keep the last test only), or
            nests too deep for the JSON parser.

    Example:
        >>> parse_custom_data(["env_index=0", "tag=fast", "ok=true", "pair=[1, 2]"])
        {'env_index': 0, 'tag': 'fast', 'ok': True, 'pair': [1, 2]}
    """
    tests: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--custom takes KEY=VALUE, got {item!r}")
        if key in tests:
            raise ValueError(f"--custom {key}= is given twice; an episode's {key} is one value")
        try:  # 0 -> int, "a" -> str, true -> bool; Infinity and -Infinity are values too
            tests[key] = json.loads(text)
        except ValueError:
            tests[key] = text
        except RecursionError:  # no stored custom data nests that deep
            raise ValueError(f"--custom {key}: the value nests too deep to parse") from None
        if holds_nan(tests[key]):
            raise ValueError(
                f"--custom {key}: NaN equals no value, so the filter would keep nothing "
                '(for the text, write "NaN" with the quotes)'
            )
    return tests

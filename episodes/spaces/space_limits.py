"""What a space dict may describe: spaces that build in bounded time and whose items can exist.

gymnasium's ``Graph`` and ``Sequence(stack=True)`` copy their parts when built
(``batch_space``), and a copy of such a space holds its own copies again: nested, the copies
double per level, so a dict of a few hundred bytes (Graphs nested through ``edge_space``) would
take minutes to decode. :func:`check_space_dict` counts, before anything is built, how many
spaces those constructors would copy, and refuses more than :data:`MAX_COPIED_SPACES`; it also
refuses sizes no item could have (``MultiBinary(2**70)``, ``Text(min_length=2**70)``). Both
sides of :mod:`~episodes.spaces.serialization` apply it: what the decoder refuses is not written.

Example:
    >>> check_space_dict({"type": "Discrete", "n": 2, "start": 0})
    >>> check_space_dict({"type": "MultiBinary", "n": 2**70})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: space<MultiBinary>: 'n' gives 1180591620717411303424 elements, more than any ...
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = [
    "MAX_COPIED_SPACES",
    "MAX_SCALAR_BOUND",
    "MAX_SCALAR_ENTRIES",
    "ScalarBoundsError",
    "check_space_dict",
]

#: The most spaces that the Graph and stacked Sequence constructors of one space may copy in
#: all: a Sequence(stack=True) of a Dict of 500 Boxes, or 7 such Sequences nested, decode in a
#: few hundredths of a second.
MAX_COPIED_SPACES = 512
#: A Box bound written as one value (the same for every entry) stands for at most this many
#: entries, and all such bounds of one space dict for at most ``MAX_SCALAR_ENTRIES``: a few bytes
#: of a stranger's file may not make the reader fill gigabytes. Bigger boxes list their bounds,
#: and so cost the file what they cost the reader.
MAX_SCALAR_BOUND = 1 << 20
MAX_SCALAR_ENTRIES = 1 << 22


class ScalarBoundsError(ValueError):
    """A space dict whose one-value Box bounds stand for more than ``MAX_SCALAR_ENTRIES``."""


# Nesting deeper than this is refused by the decoder itself (its MAX_DEPTH is less).
_WALK_DEPTH = 64


def check_space_dict(d: Any, where: str = "space", *, max_depth: int | None = None) -> None:
    """Raises a ``ValueError`` where ``d`` describes a space too costly to build or hold.

    Only the limits are checked here: a malformed dict passes, for the decoder to name its fault.
    With ``max_depth``, spaces nested deeper are refused too (the decoder refuses them itself).

    Example:
        >>> seq = {"type": "Discrete", "n": 2, "start": 0}
        >>> for _ in range(12):
        ...     seq = {"type": "Sequence", "stack": True, "feature_space": seq}
        >>> check_space_dict(seq)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: space<Sequence>...: building it would copy 1013 spaces, more than 512 ...
    """
    _walk(d, where, 0, [0, 0], max_depth)


def _walk(d: Any, where: str, depth: int, copied: list[int], max_depth: int | None) -> int:
    """The number of spaces the space of ``d`` holds, its constructors' copies included.

    ``copied`` counts the copies so far and the entries of one-value Box bounds so far.
    """
    if max_depth is not None and depth > max_depth:
        raise ValueError(f"{where}: spaces nested more than {max_depth} deep")
    if not isinstance(d, dict) or depth > _WALK_DEPTH:
        return 1
    kind = d.get("type")
    here = f"{where}<{kind}>"
    _check_sizes(d, kind, here)
    if kind == "Box":
        _count_scalar_bounds(d, here, copied)
    spaces = d.get("spaces")
    parts: list[tuple[Any, str]] = []
    if kind == "Dict" and isinstance(spaces, list):
        parts = [(p[1], f"{here}[{p[0]!r}]") for p in spaces if isinstance(p, list) and len(p) == 2]
    elif kind in ("Tuple", "OneOf") and isinstance(spaces, list):
        parts = [(sub, f"{here}[{i}]") for i, sub in enumerate(spaces)]
    elif kind == "Sequence":
        parts = [(d.get("feature_space"), f"{here}.feature_space")]
    elif kind == "Graph":
        parts = [(d.get(k), f"{here}.{k}") for k in ("node_space", "edge_space") if d.get(k)]
    held = sum(_walk(sub, at, depth + 1, copied, max_depth) for sub, at in parts)
    if kind == "Graph" or (kind == "Sequence" and d.get("stack") is True):
        copied[0] += held  # batch_space copies every part (and what their copies hold)
        if copied[0] > MAX_COPIED_SPACES:
            raise ValueError(
                f"{here}: building it would copy {copied[0]} spaces, more than "
                f"{MAX_COPIED_SPACES} (Graph and Sequence(stack=True) copy their parts)"
            )
        held *= 2
    return 1 + held


def _count_scalar_bounds(d: dict[str, Any], where: str, counts: list[int]) -> None:
    shape = d.get("shape")
    if not isinstance(shape, list) or not all(type(x) is int and x >= 0 for x in shape):
        return  # the decoder names the fault
    scalars = sum(isinstance(d.get(k), (int, float, str)) for k in ("low", "high"))
    counts[1] += scalars * math.prod(shape)
    if counts[1] > MAX_SCALAR_ENTRIES:
        raise ScalarBoundsError(
            f"{where}: one-value bounds stand for {counts[1]} entries in all, more than "
            f"{MAX_SCALAR_ENTRIES} (bigger spaces list their bounds)"
        )


def _check_sizes(d: dict[str, Any], kind: Any, where: str) -> None:
    if kind == "MultiBinary":
        n = d.get("n")
        sides = n if isinstance(n, list) else [n]
        if all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in sides):
            if math.prod(sides) > sys.maxsize:
                raise ValueError(
                    f"{where}: 'n' gives {math.prod(sides)} elements, more than any array holds"
                )
    elif kind == "Text":
        # A huge max_length is an unbounded Text (its strings read in list mode); a min_length
        # no string reaches leaves the space without an item.
        value = d.get("min_length")
        if isinstance(value, int) and value > sys.maxsize:
            raise ValueError(f"{where}: 'min_length' {value} is longer than any string can be")

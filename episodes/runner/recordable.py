"""Which spaces the env runner can record: the ones whose items batch into fixed-shape arrays."""

from __future__ import annotations

from functools import singledispatch
from typing import Any

from gymnasium import spaces

__all__ = ["unrecordable_kind"]


@singledispatch
def unrecordable_kind(space: Any) -> str | None:
    """The name of the space kind inside ``space`` the runner cannot record (None: none).

    The runner records Box, Discrete, MultiBinary and MultiDiscrete spaces (and spaces it does
    not know, judged by their items), nested in Dict and Tuple spaces; not Text, Sequence,
    Graph or OneOf ones, whose items have no fixed shape.

    Example:
        >>> unrecordable_kind(spaces.Dict(a=spaces.Discrete(2), b=spaces.Text(3)))
        'Text'
        >>> unrecordable_kind(spaces.Tuple([spaces.Box(0, 1), spaces.MultiBinary(2)])) is None
        True
    """
    return None


@unrecordable_kind.register(spaces.Text)
@unrecordable_kind.register(spaces.Sequence)
@unrecordable_kind.register(spaces.Graph)
@unrecordable_kind.register(spaces.OneOf)
def _(space: spaces.Space[Any]) -> str | None:
    return type(space).__name__


@unrecordable_kind.register
def _(space: spaces.Dict) -> str | None:
    return next(filter(None, map(unrecordable_kind, space.spaces.values())), None)


@unrecordable_kind.register
def _(space: spaces.Tuple) -> str | None:
    return next(filter(None, map(unrecordable_kind, space.spaces)), None)

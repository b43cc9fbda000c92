"""Which spaces the env runner can record: the ones whose items batch into fixed-shape arrays."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from episodes.spaces import UNSTACKABLE_SPACES, find_space_kind

__all__ = ["unrecordable_kind"]


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
    return find_space_kind(space, (spaces.Text, *UNSTACKABLE_SPACES))

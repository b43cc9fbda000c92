"""Whether the steps of several envs (or chunks) of one field can be joined, and the refusal.

The general path stacks per-env ``[T, ...]`` columns; the side-by-side fast path joins
runners' ``[T, N_r, ...]`` columns. Both ask :func:`check_alike_envs` first, so a Discrete
env's int actions next to a Box env's floats, or steps of other shapes, are refused with one
message, naming the field and both envs, whichever path meets them.

Example:
    >>> check_alike_envs([np.zeros((3, 2)), np.zeros((3, 2))], "actions", ["env 0", "env 1"])
    >>> check_alike_envs([np.zeros((3, 2)), np.zeros((3, 3))], "actions", ["env 0", "env 1"])
    Traceback (most recent call last):
    ...
    ValueError: actions: env 0 has steps of float64(2,), env 1 of float64(3,); their nesting ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.structs import map_leaves


def step_layout(rows: Any, kinds: bool = True) -> Any:
    """What rows ``[n, ...]`` of one field must share to be joined: nesting, steps' shapes, kinds.

    Signed and unsigned integers are one kind (joined losslessly); ints and floats are not
    (a Discrete env's actions would become floats next to a Box env's). ``kinds=False``
    compares the nesting and shapes only.

    Example:
        >>> step_layout(np.zeros((5, 2), np.float32)) == step_layout(np.ones((1, 2)))
        True
        >>> step_layout(np.zeros(5, np.int64)) == step_layout(np.zeros(5, np.float32))
        False
    """

    def leaf_layout(leaf: Any) -> tuple[str | None, tuple[int, ...]]:
        kind = np.asarray(leaf).dtype.kind if kinds else None
        return ("i" if kind == "u" else kind), tuple(np.shape(leaf)[1:])

    # A dict's keys compare as a set, and a list and a tuple alike: as the joins
    # (episodes.structs.map_alike) treat them.
    return _as_tuples(map_leaves(leaf_layout, rows))


def _as_tuples(layout: Any) -> Any:
    if isinstance(layout, dict):
        return {key: _as_tuples(value) for key, value in layout.items()}
    if isinstance(layout, (list, tuple)):
        return tuple(_as_tuples(value) for value in layout)
    return layout


def same_space(a: Any, b: Any) -> bool:
    """Whether two declared spaces are both given and equal.

    Example:
        >>> import gymnasium as gym
        >>> same_space(gym.spaces.Discrete(2), gym.spaces.Discrete(2)), same_space(None, None)
        (True, False)
    """
    return a is not None and b is not None and (a is b or bool(a == b))


def unlike(spaces: tuple[Any, Any] | None, first: Any, other: Any) -> str | None:
    """Why two fields' rows do not join (for the error message), or None when they do.

    Kinds (int vs float) count unless both declare one equal space; ``spaces=None`` (extra
    outputs) never compares them.

    Example:
        >>> unlike((None, None), np.zeros(2, np.int64), np.zeros(2))
        'their dtypes/kinds differ (bool, int, float) and no equal space is declared for both'
        >>> unlike(None, np.zeros(2, np.int64), np.zeros(2)) is None
        True
    """
    kinds = spaces is not None and not same_space(*spaces)
    if step_layout(first, kinds) == step_layout(other, kinds):
        return None
    if spaces and spaces[0] is not None and spaces[1] is not None and kinds:
        return f"their declared spaces differ ({spaces[0]} vs {spaces[1]})"
    if step_layout(first, False) != step_layout(other, False):
        return "their nesting or per-step shapes differ"
    return "their dtypes/kinds differ (bool, int, float) and no equal space is declared for both"


def describe_steps(rows: Any) -> str:
    """The per-step dtype and shape of every leaf of rows ``[n, ...]``, for error messages.

    Example:
        >>> describe_steps({"a": np.zeros((3, 2), np.float32)})
        "{'a': 'float32(2,)'}"
    """
    described = map_leaves(lambda leaf: f"{np.asarray(leaf).dtype}{np.shape(leaf)[1:]}", rows)
    return described if isinstance(described, str) else repr(described)


def check_alike_envs(
    per_env: Sequence[Any], field: str, labels: Sequence[str], spaces: Sequence[Any] | None = None
) -> None:
    """Refuses envs whose rows ``[n, ...]`` of ``field`` differ from env 0's (:func:`unlike`).

    ``spaces``: each env's declared space of the field (None: unknown). Kinds are compared
    against env 0's unless both declare one equal space; ``spaces=None`` (extra outputs)
    never compares them. ``labels`` name the envs in the message.

    Raises:
        ValueError: Naming the field, env 0 and the first env unlike it, both envs' steps and
            what differs.

    Example:
        >>> check_alike_envs([np.zeros(3, np.int64), np.zeros(3)], "actions", ["a", "b"],
        ...                  [None, None])
        Traceback (most recent call last):
        ...
        ValueError: actions: a has steps of int64(), b of float64(); their dtypes/kinds differ ...
    """
    for n, column in enumerate(per_env):
        reason = unlike(None if spaces is None else (spaces[0], spaces[n]), per_env[0], column)
        if reason is not None:
            raise ValueError(
                f"{field}: {labels[0]} has steps of {describe_steps(per_env[0])}, {labels[n]} of "
                f"{describe_steps(column)}; {reason}; the envs of one rollout need alike steps"
            )


def env_space(group: Sequence[SingleAgentEpisode], attribute: str) -> Any:
    """The space of ``attribute`` all of an env's chunks with steps declare (None: no one).

    Example:
        >>> import gymnasium as gym
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[0.0],
        ...                         action_space=gym.spaces.Discrete(2), len_lookback_buffer=0)
        >>> env_space([ep], "action_space"), env_space([ep], "observation_space")
        (Discrete(2), None)
    """
    spaces = [getattr(chunk, attribute) for chunk in group if len(chunk)]
    return spaces[0] if spaces and all(same_space(spaces[0], s) for s in spaces) else None


def first_id(group: Sequence[SingleAgentEpisode]) -> Any:
    """The id of a column's first chunk with steps (for error messages).

    Example:
        >>> steps = SingleAgentEpisode("b", observations=[0, 1], actions=[0], rewards=[0.0],
        ...                            len_lookback_buffer=0)
        >>> first_id([SingleAgentEpisode("a"), steps]), first_id([SingleAgentEpisode("a")])
        ('b', 'a')
    """
    return next((c.id_ for c in group if len(c)), group[0].id_ if group else None)


def env_label(n: int, group: Sequence[SingleAgentEpisode], padded: bool = False) -> str:
    """How a refusal names env (or, ``padded``, column) ``n``: with its first episode's id.

    Example:
        >>> env_label(1, [SingleAgentEpisode("a", observations=[0, 1], actions=[0],
        ...                                  rewards=[0.0], len_lookback_buffer=0)])
        "env 1 (episode 'a')"
    """
    return f"{'column' if padded else 'env'} {n} (episode {first_id(group)!r})"

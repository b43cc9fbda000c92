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
from episodes.spaces import exact_key
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


class SpaceMatch:
    """``a is b or a == b`` for spaces, each ordered pair of objects compared once.

    One conversion's memo: chunks unpickled one by one, or from several workers, carry
    equal but distinct space objects, and gymnasium's ``==`` compares every leaf with
    ``np.allclose`` (tens of microseconds a Box); copies equal bit for bit are known equal by
    their :func:`~episodes.spaces.exact_key` alone. Keyed by the objects' ids, and holding them,
    so an id is never reused while the memo lives; a space must not change meanwhile. The
    order is kept (``allclose`` is not symmetric): ``(a, b)`` and ``(b, a)`` are two pairs.

    Example:
        >>> import gymnasium as gym
        >>> match, a, b = SpaceMatch(), gym.spaces.Discrete(2), gym.spaces.Discrete(2)
        >>> match(a, b), match(a, b), match(a, gym.spaces.Discrete(3)), len(match.pairs)
        (True, True, False, 2)
    """

    def __init__(self) -> None:
        self.pairs: dict[tuple[int, int], tuple[Any, Any, bool]] = {}
        self.keys: dict[int, tuple[Any, Any]] = {}

    def __call__(self, a: Any, b: Any) -> bool:
        """``a is b or bool(a == b)``, ``==`` asked once for each ordered pair of objects.

        Copies whose contents are the same bit for bit (:func:`~episodes.spaces.exact_key`)
        are equal without asking ``==``: one key per object instead of one ``==`` per copy.
        """
        if a is b:
            return True
        key = (id(a), id(b))
        known = self.pairs.get(key)
        if known is None:
            exact = self._exact_key(a)
            same = exact is not None and exact == self._exact_key(b)
            known = self.pairs[key] = (a, b, same or bool(a == b))
        return known[2]

    def _exact_key(self, space: Any) -> Any:
        known = self.keys.get(id(space))
        if known is None:
            known = self.keys[id(space)] = (space, exact_key(space))
        return known[1]


def same_space(a: Any, b: Any, match: SpaceMatch | None = None) -> bool:
    """Whether two declared spaces are both given and equal (``match``: a call's memo).

    Example:
        >>> import gymnasium as gym
        >>> same_space(gym.spaces.Discrete(2), gym.spaces.Discrete(2)), same_space(None, None)
        (True, False)
    """
    if a is None or b is None:
        return False
    return (a is b or bool(a == b)) if match is None else match(a, b)


def agreed_space(spaces: Sequence[Any], match: SpaceMatch | None = None) -> Any:
    """The space the chunks that declare one agree on (None: none, or they differ).

    A joined column is nested as it says (:func:`~episodes.spaces.nest_as_space`, once per
    column, not per chunk), so a Tuple part is a tuple whether its items were recorded as
    tuples or lists, or read without a space. Each distinct object is compared once
    (``match``: the memo of the call, else one of this call's).

    Example:
        >>> import gymnasium as gym
        >>> agreed_space([None, gym.spaces.Discrete(2), gym.spaces.Discrete(2)])
        Discrete(2)
        >>> agreed_space([gym.spaces.Discrete(2), gym.spaces.Discrete(3)]) is None
        True
    """
    declared = [s for s in spaces if s is not None]
    same = SpaceMatch() if match is None else match
    if declared and all(same(s, declared[0]) for s in declared):
        return declared[0]
    return None


def unlike(
    spaces: tuple[Any, Any] | None, first: Any, other: Any, match: SpaceMatch | None = None
) -> str | None:
    """Why two fields' rows do not join (for the error message), or None when they do.

    Kinds (int vs float) count unless both declare one equal space; ``spaces=None`` (extra
    outputs) never compares them.

    Example:
        >>> unlike((None, None), np.zeros(2, np.int64), np.zeros(2))
        'their dtypes/kinds differ (bool, int, float) and no equal space is declared for both'
        >>> unlike(None, np.zeros(2, np.int64), np.zeros(2)) is None
        True
    """
    kinds = spaces is not None and not same_space(*spaces, match)
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
    per_env: Sequence[Any],
    field: str,
    labels: Sequence[str],
    spaces: Sequence[Any] | None = None,
    match: SpaceMatch | None = None,
) -> None:
    """Refuses envs whose rows ``[n, ...]`` of ``field`` differ from env 0's (:func:`unlike`).

    ``spaces``: each env's declared space of the field (None: unknown). Kinds are compared
    against env 0's unless both declare one equal space; ``spaces=None`` (extra outputs)
    never compares them. ``labels`` name the envs in the message; ``match``: the call's
    memo of space comparisons (else one of this call's: each distinct space compared once).

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
    same = SpaceMatch() if match is None else match
    for n, column in enumerate(per_env):
        pair = None if spaces is None else (spaces[0], spaces[n])
        reason = unlike(pair, per_env[0], column, same)
        if reason is not None:
            raise ValueError(
                f"{field}: {labels[0]} has steps of {describe_steps(per_env[0])}, {labels[n]} of "
                f"{describe_steps(column)}; {reason}; the envs of one rollout need alike steps"
            )


def alike_chunk(
    n: int,
    seen: dict[str, tuple[SingleAgentEpisode, Any]],
    field: str,
    chunk: SingleAgentEpisode,
    value: Any,
    space: str | None,
    match: SpaceMatch | None = None,
) -> Any:
    """``value``, ``chunk``'s rows of ``field``, once its steps are like env ``n``'s first chunk's.

    Once per chunk, not per step; ``seen`` keeps each field's first chunk and rows. Kinds
    (int vs float) are compared unless both chunks declare one equal ``space`` (the name of
    the field's space attribute; None, for extra outputs: never compared); ``match``: the
    call's memo of space comparisons.

    Raises:
        ValueError: Naming the field, env ``n``, both chunks, their steps and what differs.

    Example:
        >>> a, b = (SingleAgentEpisode(i, observations=[0, 1], actions=[0], rewards=[0.0],
        ...                            len_lookback_buffer=0) for i in "ab")
        >>> seen = {}
        >>> alike_chunk(0, seen, "actions", a, np.zeros(1, np.int64), "action_space").tolist()
        [0]
        >>> alike_chunk(0, seen, "actions", b, np.zeros(1), "action_space")
        Traceback (most recent call last):
        ...
        ValueError: actions: env 0's chunk of episode 'a' (t=0) has steps of int64(), its ...
    """
    first, first_value = seen.setdefault(field, (chunk, value))
    if first is chunk:
        return value
    spaces = None if space is None else (getattr(first, space), getattr(chunk, space))
    reason = unlike(spaces, first_value, value, match)
    if reason is not None:
        raise ValueError(
            f"{field}: env {n}'s chunk of episode {first.id_!r} (t={first.t_started}) has "
            f"steps of {describe_steps(first_value)}, its chunk of episode {chunk.id_!r} "
            f"(t={chunk.t_started}) of {describe_steps(value)}; "
            f"{reason}; an env's chunks need alike steps"
        )
    return value


def env_space(
    group: Sequence[SingleAgentEpisode], attribute: str, match: SpaceMatch | None = None
) -> Any:
    """The space of ``attribute`` all of an env's chunks with steps declare (None: no one).

    ``match``: the call's memo of space comparisons (else one of this call's).

    Example:
        >>> import gymnasium as gym
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[0.0],
        ...                         action_space=gym.spaces.Discrete(2), len_lookback_buffer=0)
        >>> env_space([ep], "action_space"), env_space([ep], "observation_space")
        (Discrete(2), None)
    """
    spaces = [getattr(chunk, attribute) for chunk in group if len(chunk)]
    same = SpaceMatch() if match is None else match
    return spaces[0] if spaces and all(same_space(spaces[0], s, same) for s in spaces) else None


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

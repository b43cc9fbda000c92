"""Strategies for :class:`~episodes.SingleAgentEpisode` objects.

Episodes are built from drawn spaces and items through the public constructor, so every drawn
episode passes ``validate()``. Short episodes, no lookback, not done and list mode come first,
so failures shrink to the smallest episode that still shows them.

Example:
    >>> from hypothesis import find
    >>> ep = find(episodes(), lambda ep: True)
    >>> len(ep), ep.is_done, ep.is_numpy
    (0, False, False)
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any, Union

import gymnasium as gym
import numpy as np
from hypothesis import strategies as st

from episodes.episode import SingleAgentEpisode
from episodes.spaces import batch_in_space
from episodes.testing.strategies.spaces import BATCHABLE_KINDS, items, spaces, whole

__all__ = [
    "DEFAULT_EXTRA_MODEL_OUTPUTS",
    "SpaceLike",
    "episodes",
    "infos",
    "resolve_space",
    "stacks",
]

#: A space, a strategy drawing spaces, or None (draw a small batchable space).
SpaceLike = Union[gym.Space[Any], st.SearchStrategy[gym.Space[Any]], None]  # noqa: UP007 - a runtime alias

#: Extra-model-output columns :func:`episodes` may add when not told otherwise.
DEFAULT_EXTRA_MODEL_OUTPUTS: dict[str, gym.Space[Any]] = {
    "action_logp": gym.spaces.Box(-10.0, 0.0, (), np.float32),
    "vf_preds": gym.spaces.Box(-10.0, 10.0, (), np.float32),
}

_REWARDS = st.floats(-10.0, 10.0, allow_nan=False, width=32)
#: The end states drawn; "both" is terminated and truncated at once (gymnasium reports both
#: when a time limit coincides with a terminal state). Sampled uniformly; shrinks to False.
_DONE_OPTIONS = (False, "terminated", "truncated", "both")


def infos() -> st.SearchStrategy[dict[str, Any]]:
    """Draws info dicts: mostly ``{}``, sometimes a small int entry.

    Example:
        >>> from hypothesis import find
        >>> find(infos(), lambda info: True)
        {}
    """
    return _default_infos()


# builds(dict), not just({}): every info must be its own object. Built once: a strategy built
# anew for every draw costs hypothesis's validation each time.
_INFOS: st.SearchStrategy[dict[str, Any]] = st.builds(dict) | st.fixed_dictionaries(
    {"step": st.integers(0, 3)}
)


def _default_infos() -> st.SearchStrategy[dict[str, Any]]:
    return _INFOS


def _check_id(id_: Any) -> None:
    """Refuses an ``id_`` that is neither None, a str, an int nor a strategy (bools too)."""
    if id_ is None or isinstance(id_, (str, st.SearchStrategy)):
        return
    if isinstance(id_, (bool, np.bool_)) or not whole(id_):
        raise TypeError(
            f"id_ must be a str, an int, a strategy drawing ids or None, got {type(id_).__name__}"
        )


def _own_infos(draw: st.DrawFn, strategy: st.SearchStrategy[Any] | None, count: int) -> list[Any]:
    """``count`` info dicts drawn from ``strategy`` (None: :func:`infos`), each its own object.

    A strategy's draws are deep-copied: ``st.just({"a": 1})`` (alone or inside
    ``fixed_dictionaries``) draws one object every time, and the steps would share it, so
    writing one step's info would change the others'.
    """
    if strategy is None:  # infos() builds a new dict for every draw
        return draw(st.lists(_default_infos(), min_size=count, max_size=count))
    drawn = draw(st.lists(strategy, min_size=count, max_size=count))
    for info in drawn:
        if not isinstance(info, dict):
            raise TypeError(f"the infos strategy must draw dicts, got {type(info).__name__}")
    return [copy.deepcopy(info) for info in drawn]


def resolve_space(draw: st.DrawFn, space: SpaceLike) -> gym.Space[Any]:
    """Turns a :data:`SpaceLike` into a space inside a ``@composite`` strategy.

    Example:
        >>> from hypothesis import find
        >>> find(st.composite(lambda draw: resolve_space(draw, gym.spaces.Discrete(2)))(),
        ...      lambda s: True)
        Discrete(2)
    """
    if space is None:
        return draw(spaces(BATCHABLE_KINDS, max_depth=1, max_children=2))
    if isinstance(space, st.SearchStrategy):
        return draw(space)
    if isinstance(space, gym.Space):
        return space
    raise TypeError(f"expected a gymnasium space, a strategy or None, got {type(space).__name__}")


def _check_int_range(value: Any, what: str) -> None:
    if isinstance(value, tuple):
        if not (len(value) == 2 and all(map(whole, value)) and 0 <= value[0] <= value[1]):
            raise ValueError(
                f"{what} range must be (low, high) with 0 <= low <= high, got {value!r}"
            )
    elif not (whole(value) and value >= 0):
        raise ValueError(f"{what} must be an int >= 0 or a (low, high) tuple, got {value!r}")


def _int_range(draw: st.DrawFn, value: int | tuple[int, int], what: str) -> int:
    _check_int_range(value, what)
    if isinstance(value, tuple):
        return draw(st.integers(int(value[0]), int(value[1])))
    return int(value)


def _check_space_like(value: Any, name: str) -> None:
    """Refuses what :func:`resolve_space` cannot turn into a space, naming the argument."""
    if not (value is None or isinstance(value, (gym.Space, st.SearchStrategy))):
        raise TypeError(
            f"{name} must be a gymnasium space, a strategy of spaces or None, got "
            f"{type(value).__name__}"
        )


def _check_extra_model_outputs(value: Any) -> None:
    if value is None:
        return
    # A list of names would be read as a dict by dict() (['vf'] became {'v': 'f'}).
    if not isinstance(value, Mapping):
        raise TypeError(
            "extra_model_outputs must be a mapping of key -> gymnasium space (or None), got "
            f"{type(value).__name__}"
        )
    for key, space in value.items():
        if not isinstance(key, str) or not isinstance(space, gym.Space):
            raise TypeError(
                "extra_model_outputs must map str keys to gymnasium spaces (one value's "
                f"space, not a strategy), got {key!r}: {type(space).__name__}"
            )


def _check_drawable(obs_space: Any, act_space: Any, emo_spaces: Mapping[str, Any]) -> None:
    """Refuses a space (given as one) whose values :func:`items` cannot draw, naming it."""
    named = [("observation_space", obs_space), ("action_space", act_space)]
    named += [(f"extra_model_outputs[{key!r}]", space) for key, space in emo_spaces.items()]
    for name, space in named:
        if isinstance(space, gym.Space):
            try:
                items(space)  # strategies for every part are built now: an odd one raises
            except TypeError as err:
                raise TypeError(f"{name} {space!r}: {err}") from None


def episodes(
    observation_space: SpaceLike = None,
    action_space: SpaceLike = None,
    *,
    min_len: int = 0,
    max_len: int = 5,
    lookback: int | tuple[int, int] = (0, 3),
    done: bool | str | None = None,
    extra_model_outputs: Mapping[str, gym.Space[Any]] | None = None,
    numpy: bool | None = None,
    t_started: int | tuple[int, int] | None = None,
    id_: Any = None,
    infos: st.SearchStrategy[dict[str, Any]] | None = None,
) -> st.SearchStrategy[SingleAgentEpisode]:
    """Draws a valid, reset :class:`~episodes.SingleAgentEpisode` chunk.

    Every argument is checked here, when the strategy is built, not when it first draws.

    Args:
        observation_space: The observation space, a strategy for it, or None to draw a small
            batchable one (Box/Discrete/MultiDiscrete/MultiBinary, maybe in a Dict/Tuple).
        action_space: The same for actions.
        min_len: Fewest steps after the lookback.
        max_len: Most steps after the lookback.
        lookback: Steps of lookback, an int or an inclusive ``(low, high)`` range.
        done: ``False``, ``True`` (any end), ``"terminated"``, ``"truncated"``, ``"both"``
            (terminated and truncated at once, as gymnasium reports a time limit hit on a
            terminal step), or None for any. None draws each of not done, terminated only,
            truncated only and both with probability 1/4, ``True`` each end with 1/3 (for
            lengths >= 1). An episode of length 0 is never done, so a required end draws
            lengths from ``max(min_len, 1)`` (and ``max_len=0`` is a ``ValueError``).
        extra_model_outputs: Dict of key -> space of one value; None draws a subset of
            :data:`DEFAULT_EXTRA_MODEL_OUTPUTS`; ``{}`` for none.
        numpy: Whether the episode is numpy'd (``to_numpy()``); None for either.
        t_started: The step of ``ts=0``; an int, a range, or None (= the lookback length, as
            for a chunk cut from a fresh episode).
        id_: The episode id: a str or an int, a strategy drawing ids, or None for one of a
            few fixed ids (``"ep-0"``, ``"ep-1"``; kept deterministic).
        infos: A strategy drawing one step's info dict (each step draws its own and holds
            a deep copy of it); None draws :func:`infos` (``{}`` or ``{"step": int}``).

    Raises:
        ValueError: A length, range, ``done`` or ``numpy`` value out of its domain, or
            ``numpy=True`` with spaces (given as spaces) whose items do not stack.
        TypeError: A space that is neither a space, a strategy nor None, or a space (or part
            of one) :func:`items` cannot draw (a gymnasium space class of your own);
            ``extra_model_outputs`` not a mapping of str -> gymnasium space; ``id_`` neither a
            str, an int (a bool is refused), a strategy nor None; ``infos`` not a strategy (and,
            when it draws, an info that is not a dict).

    Example:
        >>> from hypothesis import given
        >>> @given(episodes(gym.spaces.Discrete(3), gym.spaces.Discrete(2), min_len=1))
        ... def test(ep):
        ...     ep.validate()
        ...     assert len(ep.get_actions()) == len(ep) >= 1
        >>> test()
    """
    _check_space_like(observation_space, "observation_space")
    _check_space_like(action_space, "action_space")
    if not (whole(min_len) and whole(max_len) and 0 <= min_len <= max_len):
        raise ValueError(f"need ints 0 <= min_len <= max_len, got {min_len!r}, {max_len!r}")
    # Checked by identity, before any draw: 0 == False and np.True_ == True would pass an
    # "in" test here and fail later, on the draws that are not empty.
    if not (
        done is None
        or done is True
        or done is False
        or (isinstance(done, str) and done in _DONE_OPTIONS[1:])
    ):
        raise ValueError(
            f"done must be None, a bool, 'terminated', 'truncated' or 'both', got {done!r}"
        )
    if done not in (None, False) and max_len == 0:
        raise ValueError(f"done={done!r} needs max_len >= 1: an episode of length 0 is never done")
    if not (numpy is None or isinstance(numpy, (bool, np.bool_))):
        raise ValueError(f"numpy must be None or a bool, got {numpy!r}")
    _check_int_range(lookback, "lookback")
    if t_started is not None:
        _check_int_range(t_started, "t_started")
    _check_extra_model_outputs(extra_model_outputs)
    _check_drawable(observation_space, action_space, extra_model_outputs or {})
    _check_id(id_)
    if not (infos is None or isinstance(infos, st.SearchStrategy)):
        raise TypeError(
            f"infos must be a hypothesis strategy of info dicts or None, got {type(infos).__name__}"
        )
    emo_spaces = None if extra_model_outputs is None else dict(extra_model_outputs)
    if numpy:  # the spaces given as spaces now; those given as strategies on each draw
        _refuse_numpy(observation_space, action_space, emo_spaces or {})
    return _episodes(
        observation_space,
        action_space,
        # A required end needs a step (length 0 is never done).
        min_len=max(int(min_len), 0 if done in (None, False) else 1),
        max_len=int(max_len),
        lookback=lookback,
        done=done,
        extra_model_outputs=emo_spaces,
        numpy=None if numpy is None else bool(numpy),
        t_started=t_started,
        id_=id_,
        info_strategy=infos,
    )


def _refuse_numpy(obs_space: Any, act_space: Any, emo_spaces: dict[str, Any]) -> None:
    """Refuses ``numpy=True`` for spaces whose items do not stack.

    None (drawn batchable) and strategies (checked on each draw) pass.
    """
    named = [("observation_space", obs_space), ("action_space", act_space)]
    named += [(f"extra_model_outputs[{key!r}]", space) for key, space in emo_spaces.items()]
    for name, space in named:
        why = _why_unstacked(space) if isinstance(space, gym.Space) else None
        if why is not None:
            raise ValueError(
                f"numpy=True needs spaces whose items stack into arrays (not Sequence, Graph, "
                f"OneOf...), but {name} {space} does not: {why}"
            )


@st.composite
def _episodes(
    draw: st.DrawFn,
    observation_space: SpaceLike,
    action_space: SpaceLike,
    *,
    min_len: int,
    max_len: int,
    lookback: int | tuple[int, int],
    done: bool | str | None,
    extra_model_outputs: dict[str, gym.Space[Any]] | None,
    numpy: bool | None,
    t_started: int | tuple[int, int] | None,
    id_: Any,
    info_strategy: st.SearchStrategy[dict[str, Any]] | None,
) -> SingleAgentEpisode:
    """What :func:`episodes` returns, its arguments checked."""
    obs_space = resolve_space(draw, observation_space)
    act_space = resolve_space(draw, action_space)
    n_lookback = _int_range(draw, lookback, "lookback")
    length = draw(st.integers(min_len, max_len))
    steps = n_lookback + length
    if extra_model_outputs is None:
        keys = draw(st.lists(st.sampled_from(sorted(DEFAULT_EXTRA_MODEL_OUTPUTS)), unique=True))
        emo_spaces = {k: DEFAULT_EXTRA_MODEL_OUTPUTS[k] for k in sorted(keys)}
    else:
        emo_spaces = extra_model_outputs
    stackable = all(map(stacks, [obs_space, act_space, *emo_spaces.values()]))
    if numpy and not stackable:  # refused on every draw, not only on those that do not stack
        _refuse_numpy(obs_space, act_space, emo_spaces)
    observations = draw(st.lists(items(obs_space), min_size=steps + 1, max_size=steps + 1))
    actions = draw(st.lists(items(act_space), min_size=steps, max_size=steps))
    rewards = draw(st.lists(_REWARDS, min_size=steps, max_size=steps))
    info_list = _own_infos(draw, info_strategy, steps + 1)
    emos = {
        key: draw(st.lists(items(space), min_size=steps, max_size=steps))
        for key, space in emo_spaces.items()
    }
    if length == 0:
        flag: bool | str = False
    elif done is None:
        flag = draw(st.sampled_from(_DONE_OPTIONS))  # type: ignore[assignment]
    elif done is True:
        flag = draw(st.sampled_from(_DONE_OPTIONS[1:]))
    else:
        flag = bool(done) and str(done)
    start = n_lookback if t_started is None else _int_range(draw, t_started, "t_started")
    if id_ is None:
        id_ = draw(st.sampled_from(("ep-0", "ep-1")))
    elif isinstance(id_, st.SearchStrategy):
        id_ = draw(id_)
    episode = SingleAgentEpisode(
        id_,
        observations=observations,
        observation_space=obs_space,
        infos=info_list,
        actions=actions,
        action_space=act_space,
        rewards=rewards,
        terminated=flag in ("terminated", "both"),
        truncated=flag in ("truncated", "both"),
        extra_model_outputs=emos,
        t_started=start,
        len_lookback_buffer=n_lookback,
    )
    if numpy is None:
        numpy = stackable and draw(st.booleans())  # Sequence or Graph items do not stack
    if numpy:
        episode.to_numpy()
    return episode


def stacks(space: gym.Space[Any]) -> bool:
    """Whether ``to_numpy`` can stack items of ``space`` into arrays (not Sequence, Graph...).

    The library's own rule, asked of :func:`~episodes.spaces.batch_in_space` (what
    ``to_numpy`` stacks with): a space with a Sequence, Graph or OneOf part, a Dict whose keys
    do not sort (int and str keys together) or a Text too wide for numpy does not stack, and
    neither does an empty Dict or Tuple, or one of empty parts only (a numpy column has
    nothing to stack; an empty part beside others is kept), nor a kind this toolkit does not
    know. Nor, though ``to_numpy`` stacks it, a Text whose charset holds NUL: numpy's strings
    drop a trailing NUL, so a numpy'd episode would not hold the items drawn.

    Example:
        >>> stacks(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))
        True
        >>> stacks(gym.spaces.Sequence(gym.spaces.Discrete(2)))
        False
        >>> stacks(gym.spaces.Dict({1: gym.spaces.Discrete(2), "a": gym.spaces.Discrete(2)}))
        False
    """
    return _why_unstacked(space) is None


def _why_unstacked(space: gym.Space[Any]) -> str | None:
    """Why ``to_numpy`` cannot stack items of ``space``; None where it can."""
    if not _fixed_layout(space):
        return "its items have no fixed layout"
    if not _holds_values(space):
        return "its items hold no values (only empty Dict or Tuple parts)"
    if _nul_text(space):
        # to_numpy stacks them, but numpy's strings cut a trailing NUL: "a\x00" would read "a".
        return "a Text part's charset holds NUL, and numpy's strings drop trailing NULs"
    try:
        batch_in_space([], space)  # no items: the layout alone (keys, widths, kinds) decides
    except ValueError as err:
        return str(err)
    return None


@functools.singledispatch
def _fixed_layout(space: gym.Space[Any]) -> bool:
    return False  # a kind this toolkit does not know (nor draws): left in list mode


@_fixed_layout.register(gym.spaces.Discrete)
@_fixed_layout.register(gym.spaces.Text)  # strings stack into one str_ array (not too wide)
@_fixed_layout.register(gym.spaces.Box)
@_fixed_layout.register(gym.spaces.MultiBinary)
@_fixed_layout.register(gym.spaces.MultiDiscrete)
def _(space: gym.Space[Any]) -> bool:
    return True


@_fixed_layout.register
def _(space: gym.spaces.Dict) -> bool:
    # An empty part is a fixed layout too (to_numpy keeps it beside the others' arrays).
    return all(_fixed_layout(sub) for sub in space.spaces.values())


@_fixed_layout.register
def _(space: gym.spaces.Tuple) -> bool:
    return all(_fixed_layout(sub) for sub in space.spaces)


def _parts(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return list(space.spaces)
    return []


def _holds_values(space: gym.Space[Any]) -> bool:
    """Whether an item holds a value beside its Dict and Tuple nesting (an array leaf)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return any(map(_holds_values, _parts(space)))
    return True


def _nul_text(space: gym.Space[Any]) -> bool:
    """Whether a Text part may draw strings ending in NUL, which a numpy'd column would cut."""
    if isinstance(space, gym.spaces.Text):
        return "\x00" in space.character_set
    return any(map(_nul_text, _parts(space)))

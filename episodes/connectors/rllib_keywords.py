"""RLlib 2.60's connector keywords that ours do not take, each with what to write here instead.

A port from RLlib keeps its keyword names (``FrameStackingEnvToModule(num_frames=4)``), and
Python's own answer, "got an unexpected keyword argument", says neither what the keyword is
called here nor that it has no counterpart. :func:`explains_rllib_keywords` wraps a
connector's ``__init__`` so that a keyword it does not take that :data:`RLLIB_KEYWORDS` lists
is a ``TypeError`` naming the connector, the keyword and our way of saying it; so is a
gymnasium space given by position, where RLlib's pieces take their input spaces. Every call
the connector accepted is accepted as before, and its signature is unchanged; keywords the
table does not list keep Python's error.

Example:
    >>> from episodes.connectors import FrameStack
    >>> try:
    ...     FrameStack(num_frames=4)
    ... except TypeError as err:
    ...     print(str(err).split(": ", 1)[1])
    the number of frames is FrameStack's n: FrameStack(4)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec

import gymnasium as gym

__all__ = ["RLLIB_KEYWORDS", "explains_rllib_keywords"]

_SPACES = "the spaces come from the episodes (each its observation_space and action_space)"
_ONE_AGENT = (
    "there is no multi-agent mode: give each agent's chunks as single-agent episodes (they "
    "carry agent_id, module_id and multi_agent_episode_id)"
)
_SIDE = (
    "the side is inference=: as_learner_connector=True is inference=False (the default, one "
    "row per step), as_learner_connector=False is inference=True (one row per episode)"
)

# RLlib keyword (or "Connector.keyword" where one connector needs its own words) -> the hint.
RLLIB_KEYWORDS: dict[str, str] = {
    "input_observation_space": _SPACES,
    "input_action_space": _SPACES,
    "multi_agent": _ONE_AGENT,
    "agent_ids": _ONE_AGENT,
    "as_learner_connector": _SIDE,
    "AddLearnerColumns.as_learner_connector": (
        "AddLearnerColumns is the learner side only (one row per step); an episode's latest "
        "observation is FlattenObservations(inference=True) or FrameStack(1, inference=True)"
    ),
    "num_frames": "the number of frames is FrameStack's n: FrameStack(4)",
    "keys_to_remove": (
        "FlattenObservations flattens every leaf of the observations; to leave Dict keys out, "
        "read the leaves you want and flatten them with flatten_rows"
    ),
    "n_prev_actions": "previous actions are PrevActionsPrevRewards(n_prev_actions=...)",
    "clip_by_value": "MeanStdFilter's clip is clip= (None: no clipping)",
    "update_stats": "MeanStdFilter counts new observations with update=True (the default)",
    "de_mean_to_zero": "MeanStdFilter always subtracts the mean and divides by std + eps",
    "de_std_to_one": "MeanStdFilter always subtracts the mean and divides by std + eps",
    "n_prev_rewards": "previous rewards are PrevActionsPrevRewards(n_prev_rewards=...)",
}

P = ParamSpec("P")
_BY_POSITION, _EITHER = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD


def explains_rllib_keywords(init: Callable[P, None]) -> Callable[P, None]:
    """``init`` (a connector's ``__init__``), refusing RLlib's keywords with our names for them.

    A keyword ``init`` does not take that :data:`RLLIB_KEYWORDS` lists, or a gymnasium space
    given by position (RLlib's ``input_observation_space``, ``input_action_space``) where
    ``init``'s parameter there is not named for a space (``space``, ``observation_space``), is a
    ``TypeError`` naming the connector and saying what to write instead, before ``init`` runs.
    Everything else goes to ``init`` as it came, Python's errors included; ``inspect`` and
    type checkers see ``init``'s own signature.

    Example:
        >>> class Stack:
        ...     @explains_rllib_keywords
        ...     def __init__(self, n, *, inference=False):
        ...         self.n = n
        >>> Stack(3).n, str(inspect.signature(Stack.__init__))
        (3, '(self, n, *, inference=False)')
        >>> Stack(3, as_learner_connector=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: Stack takes no as_learner_connector= (an RLlib 2.60 keyword): the side is ...
        >>> Stack(3, frames=2)  # not RLlib's: Python's own error
        Traceback (most recent call last):
        TypeError: Stack.__init__() got an unexpected keyword argument 'frames'
    """
    parameters = inspect.signature(init).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return init  # takes every keyword: nothing to explain
    taken = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    # Positions where a space is the init's own argument (a parameter named for one, or *args).
    ordered = [p for p in parameters if p.kind in (_BY_POSITION, _EITHER)]
    spread = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    owner = init.__qualname__.split(".")[0]  # a subclass's connector keeps its class's hints

    @functools.wraps(init)
    def checked(*args: P.args, **kwargs: P.kwargs) -> None:
        odd = [key for key in kwargs if key not in taken]
        spaces = [
            i
            for i, arg in enumerate(args[1:], 1)
            if isinstance(arg, gym.Space)
            and not (spread or (i < len(ordered) and "space" in ordered[i].name))
        ]
        if spaces or any(key in RLLIB_KEYWORDS for key in odd):
            _refuse(type(args[0]).__name__, owner, odd, spaces)
        init(*args, **kwargs)

    return checked


def _refuse(who: str, owner: str, odd: list[str], spaces: list[int]) -> None:
    hints = [
        f"{who} takes no {key}= (an RLlib 2.60 keyword): "
        + RLLIB_KEYWORDS.get(f"{owner}.{key}", RLLIB_KEYWORDS[key])
        for key in odd
        if key in RLLIB_KEYWORDS
    ]
    if spaces:  # RLlib's pieces take their input spaces first, by position
        hints.append(
            f"{who} got a gymnasium space as positional argument {spaces[0]} (RLlib's "
            f"input_observation_space or input_action_space): {_SPACES}"
        )
    raise TypeError("; ".join(hints))

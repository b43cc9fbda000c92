"""Reading a vector env's autoreset mode, and the evidence of a mode read wrongly.

A vector env says its mode in ``metadata["autoreset_mode"]``; the runner reads next-step where
it says none. A same-step env that says none (Isaac Lab's, custom batched envs) and reports no
``infos["final_obs"]`` is then recorded as next-step without an error: every step after an
ending is taken for a reset step, so each next episode loses its first transition and each
truncation bootstraps from the next episode's first observation. A true next-step env's reset
step returns reward 0 and neither flag (gymnasium's convention); :func:`doubt_next_step` finds
reset steps that did not, which a same-step env's real transitions at those steps give.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = [
    "AutoresetModeWarning",
    "autoreset_mode_of",
    "declares_mode",
    "doubt_next_step",
    "warn_doubt",
]


class AutoresetModeWarning(RuntimeWarning):
    """The env looks like a same-step env, while the runner reads it as next-step.

    Example:
        >>> issubclass(AutoresetModeWarning, RuntimeWarning)
        True
    """


_UNSET = object()  # no mode named


def autoreset_mode_of(env: gym.vector.VectorEnv) -> AutoresetMode:
    """The env's autoreset mode from ``env.metadata["autoreset_mode"]`` (next-step if unset).

    Unset covers an env without ``metadata``, or with ``metadata`` None, too. The value is an
    ``AutoresetMode`` or its value, as gymnasium's vector envs take it (``"NextStep"``,
    ``"SameStep"``, ``"Disabled"``); anything else is a ``ValueError`` naming the key, the value
    and those. Where ``env.metadata`` names no mode but ``env.unwrapped.metadata`` names
    disabled (a wrapper's class-level ``metadata`` hides the wrapped env's), the guess of
    next-step is refused naming both, before any step: the runner would never reset the ended
    sub-envs, and gymnasium's bare ``AssertionError`` would come at the step after an ending,
    the env stepped past what was recorded. The unwrapped env's mode is not taken instead: it
    holds for the wrapper only where the wrapper passes steps and resets on unchanged, which
    the runner cannot see (a wrapper may reset the sub-envs itself); a mode the wrapper names
    is its own, and taken.

    Raises:
        ValueError: A mode that is none, or a disabled mode the wrapper hides.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync",
        ...                    vector_kwargs={"autoreset_mode": "SameStep"})
        >>> autoreset_mode_of(env)
        <AutoresetMode.SAME_STEP: 'SameStep'>
        >>> env.metadata = {"autoreset_mode": "same_step"}
        >>> autoreset_mode_of(env)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: env.metadata['autoreset_mode'] is 'same_step', no autoreset mode: ...
    """
    metadata = getattr(env, "metadata", None)
    if metadata is not None and (mode := metadata.get("autoreset_mode", _UNSET)) is not _UNSET:
        return _mode(mode, "env.metadata")
    inner = getattr(env, "unwrapped", env)
    if inner is not env and declares_mode(inner):
        hidden = _mode(inner.metadata["autoreset_mode"], "env.unwrapped.metadata")
        if hidden is AutoresetMode.DISABLED:
            raise ValueError(
                "env.metadata names no 'autoreset_mode' (the runner would read next-step), "
                "but env.unwrapped.metadata['autoreset_mode'] is AutoresetMode.DISABLED: a "
                "wrapper's class-level metadata hides the wrapped env's, and read as next-step "
                "the ended sub-envs are never reset (gymnasium asserts at the step after an "
                "ending). Set env.metadata = {**env.metadata, 'autoreset_mode': "
                "gymnasium.vector.AutoresetMode.DISABLED} (or the mode the wrapper steps in, "
                "if it resets sub-envs itself) before making the runner"
            )
    return AutoresetMode.NEXT_STEP


def _mode(value: Any, where: str) -> AutoresetMode:
    """``value`` as an ``AutoresetMode`` (a member or its value), else the ``ValueError``."""
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except (ValueError, TypeError):
        pass
    members = ", ".join(f"{m.name} ({m.value!r})" for m in AutoresetMode)
    raise ValueError(
        f"{where}['autoreset_mode'] is {value!r}, no autoreset mode: give a "
        f"gymnasium.vector.AutoresetMode or its value: {members}"
    )


def doubt_next_step(blocks: Any, first: int, stop: int) -> str | None:
    """Why rows ``first:stop`` of next-step ``blocks`` look same-step (None: they do not).

    A reset step (a dead row) that returned a reward other than 0, or ``terminated`` or
    ``truncated``, is no next-step reset step: the message names the first such sub-env and
    what it returned. One vectorized pass over the call's rows (on the host copies).

    Example:
        >>> from episodes.runner.blocks import Blocks
        >>> blocks = Blocks.allocate(np.zeros(2), rows=2)
        >>> blocks.dead[:] = [[False, False], [True, False]]
        >>> blocks.rewards[:], blocks.terminated[:], blocks.truncated[:] = 1.0, False, False
        >>> print(doubt_next_step(blocks, 0, 2))  # doctest: +ELLIPSIS
        sub-env 0's step after its episode ended returned reward 1.0, ...
        >>> blocks.rewards[1, 0] = 0.0
        >>> doubt_next_step(blocks, 0, 2) is None
        True
    """
    dead = blocks.dead[first:stop]
    if not dead.any():
        return None
    rewards = blocks.rewards[first:stop]
    odd = dead & ((rewards != 0) | blocks.terminated[first:stop] | blocks.truncated[first:stop])
    if not odd.any():
        return None
    row, env = (int(i[0]) for i in np.nonzero(odd))
    r = first + row
    return (
        f"sub-env {env}'s step after its episode ended returned reward "
        f"{rewards[row, env].item()!r}, "
        f"terminated={bool(blocks.terminated[r, env])}, "
        f"truncated={bool(blocks.truncated[r, env])}, where a next-step env's reset step returns "
        "0 and neither flag: the env looks same-step (as Isaac Lab's), which, read as "
        "next-step, loses each next episode's first transition and bootstraps truncations from "
        "the next episode's first observation. Set env.metadata['autoreset_mode'] = "
        "gymnasium.vector.AutoresetMode.SAME_STEP and report infos['final_obs'], or declare "
        "NEXT_STEP if it is one (the runner reads next-step where the metadata says no mode)"
    )


def warn_doubt(recorder: Any, env: Any, stacklevel: int = 2) -> None:
    """Warns once (:class:`AutoresetModeWarning`) of the doubt a recorder found, then forgets it.

    Only where ``env`` declares no mode (:func:`declares_mode`): the runner guessed next-step,
    and the env's reset steps say otherwise. An env declaring next-step may pay a reward at
    its reset steps (the runner records it in no episode). Called by ``EnvRunner.sample`` as
    the call's last step, so a filter raising the warning leaves the runner usable;
    ``stacklevel`` as ``warnings.warn``'s, seen from the caller (2: the line that called it).

    Example:
        >>> from types import SimpleNamespace
        >>> recorder = SimpleNamespace(doubt=None)
        >>> warn_doubt(recorder, SimpleNamespace(metadata={}))  # nothing found: nothing said
    """
    doubt = recorder.doubt
    if doubt is not None:
        recorder.doubt = None  # first: a filter raising it raises it once
        if not declares_mode(env):
            warnings.warn(AutoresetModeWarning(doubt), stacklevel=stacklevel + 1)


def declares_mode(env: Any) -> bool:
    """Whether ``env.metadata`` (a mapping) names an autoreset mode (gymnasium's vector envs do).

    Example:
        >>> import gymnasium as gym
        >>> declares_mode(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))
        True
        >>> from types import SimpleNamespace
        >>> declares_mode(SimpleNamespace(metadata=None)), declares_mode(object())
        (False, False)
    """
    metadata = getattr(env, "metadata", None)
    return isinstance(metadata, Mapping) and "autoreset_mode" in metadata

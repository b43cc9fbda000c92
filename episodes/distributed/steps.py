"""The driver's check of a ``num_steps`` the runners would refuse as too big for their blocks.

A runner refuses a ``sample(num_steps)`` whose blocks cannot be allocated (a ``ValueError``
naming ``num_steps``, :func:`episodes.runner.sizing.allocating`); on an actor that refusal
would count as a lost sample and restart it. The exact size of the blocks is known only on
the actor, so the driver checks a lower bound of it: every sub-env records ``num_steps``
transitions, and each holds at least one byte per observation and action element plus three
bytes for the reward and the two flags (:func:`least_step_bytes`). A ``num_steps`` whose
bound (times the largest runner's sub-envs) reaches ``2**63`` bytes (no array describes it),
or exceeds the memory (RAM plus swap) of every runner's node, cannot be sampled: refused.

Example:
    >>> from gymnasium.spaces import Box, Discrete
    >>> least_step_bytes(Box(0, 1, (4,)), Discrete(2))  # 4 + 1 elements, 3 bytes of flags
    8
    >>> check_num_steps(16, 1, num_envs=2, step_bytes=8, memory=2**30)
    16
    >>> check_num_steps(2**40, 1, num_envs=2, step_bytes=8, memory=2**30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: num_steps=1099511627776: too many steps for one call: ...
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from episodes.distributed.dropped import get_all
from episodes.indexing import whole_number

__all__ = [
    "check_num_steps",
    "least_step_bytes",
    "node_memory",
    "num_steps_check",
    "runner_memory",
]

# What no array can describe: an allocation of this many bytes fails on any machine.
_MAX_BYTES = 2**63


def least_step_bytes(observation_space: Any, action_space: Any) -> int:
    """A lower bound of the bytes one sub-env's recorded transition takes in a runner's blocks.

    One byte per element of the observation and action spaces (Box, Discrete, Multi*, nested
    in Dict and Tuple; other spaces count 0), plus 3 for the reward and the two flags.

    Example:
        >>> from gymnasium.spaces import Box, Dict, Discrete
        >>> least_step_bytes(Dict({"a": Box(0, 1, (2, 3)), "b": Discrete(4)}), Discrete(2))
        11
    """
    return _elements(observation_space) + _elements(action_space) + 3


def _elements(space: Any) -> int:
    inner = getattr(space, "spaces", None)  # Dict (a mapping) and Tuple (a tuple)
    if isinstance(inner, dict):
        return sum(_elements(s) for s in inner.values())
    if isinstance(inner, tuple):
        return sum(_elements(s) for s in inner)
    shape = getattr(space, "shape", None)
    if getattr(space, "dtype", None) is None or not isinstance(shape, tuple):
        return 0  # Text, Graph, Sequence: no fixed size
    return int(np.prod(shape, dtype=object))


def node_memory(runner: Any = None, context: Any = None) -> int | None:
    """This node's RAM plus swap in bytes (None where it cannot be read).

    Takes ``fn(runner, context)``'s arguments: the group runs it on each actor
    (``RunnerActor.apply``).

    Example:
        >>> node_memory() is None or node_memory() > 0
        True
    """
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None  # no sysconf (Windows)
    swap = 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("SwapTotal:"):
                    swap = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return ram + swap if ram > 0 else None


def runner_memory(ray: Any, handles: list[Any]) -> int | None:
    """The largest memory of the actors' nodes (None: any unknown, or an actor failed).

    Example:
        >>> runner_memory(None, [])  # no actor: no bound
    """
    if not handles:
        return None
    try:
        sizes = get_all(ray, [handle.apply.remote(node_memory) for handle in handles])
    except Exception:
        return None  # no bound: a dead actor is the next request's lost sample
    return None if any(size is None for size in sizes) else max(int(s) for s in sizes)


def check_num_steps(
    num_steps: Any, least: int, *, num_envs: int, step_bytes: int, memory: int | None
) -> int:
    """``num_steps`` as an int the runners take, else a ``ValueError`` naming it.

    Args:
        num_steps: The call's steps per sub-env.
        least: The smallest the runners take (an int below it is refused too).
        num_envs: The largest runner's sub-envs.
        step_bytes: :func:`least_step_bytes` of the runners' spaces.
        memory: The largest runner node's RAM plus swap (None: only the ``2**63`` bound).

    Raises:
        ValueError: Not an int >= ``least``, or ``num_steps * num_envs * step_bytes`` bytes
            reach ``2**63`` or exceed ``memory``.

    Example:
        >>> check_num_steps(2**70, 1, num_envs=1, step_bytes=3, memory=None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: num_steps=1180591620717411303424: too many steps for one call: ...
    """
    num_steps = whole_number(num_steps, "num_steps", least)
    need = num_steps * num_envs * step_bytes
    if need >= _MAX_BYTES or (memory is not None and need > memory):
        where = (
            "more than any array can hold"
            if need >= _MAX_BYTES
            else f"more than the {memory} bytes of RAM and swap of the largest runner node"
        )
        raise ValueError(
            f"num_steps={num_steps}: too many steps for one call: the runners' blocks would "
            f"take at least {need} bytes ({num_envs} sub-envs x {step_bytes} bytes per step), "
            f"{where}; sample fewer steps per call"
        )
    return num_steps


def num_steps_check(
    ray: Any, handles: list[Any], infos: Sequence[dict[str, Any]], least: int
) -> Callable[[Any], int]:
    """The group's ``num_steps`` check, for the actors just started (``handles``, ``infos``).

    Bounded by the largest node's memory among them (:func:`runner_memory`), their largest
    ``num_envs`` and the first one's spaces.

    Example:
        >>> from gymnasium.spaces import Discrete
        >>> info = {"num_envs": 2, "observation_space": Discrete(3), "action_space": Discrete(2)}
        >>> check = num_steps_check(None, [], [info], 1)  # no actor asked: no memory bound
        >>> check(8)
        8
    """
    step_bytes = least_step_bytes(infos[0]["observation_space"], infos[0]["action_space"])
    num_envs = max(int(info["num_envs"]) for info in infos)
    return partial(
        check_num_steps,
        least=least,
        num_envs=num_envs,
        step_bytes=step_bytes,
        memory=runner_memory(ray, handles),
    )

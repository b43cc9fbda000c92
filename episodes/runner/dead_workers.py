"""Sub-envs whose worker process gymnasium shut down: named before a runner steps the env.

gymnasium's ``AsyncVectorEnv`` shuts a worker down for good when its env raises (a bug in a
user's ``step``), and sets its pipe to None. The env can then neither step nor reset: the next
call fails inside gymnasium with "'NoneType' object has no attribute 'send'", after the runner's
own message had said that ``reset()`` would help. This names the cause instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dead_workers", "refuse_dead_workers"]


def dead_workers(env: Any) -> list[int]:
    """Indices of the sub-envs whose worker ``env`` (or the env it wraps) shut down.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> dead_workers(env)  # only an AsyncVectorEnv has workers
        []
    """
    pipes = getattr(getattr(env, "unwrapped", env), "parent_pipes", None)
    if not isinstance(pipes, (list, tuple)):
        return []
    return [i for i, pipe in enumerate(pipes) if pipe is None]


def refuse_dead_workers(env: Any) -> None:
    """Raises ``RuntimeError`` naming the sub-envs whose workers are gone, if any.

    Example:
        >>> from types import SimpleNamespace
        >>> refuse_dead_workers(SimpleNamespace(parent_pipes=["pipe", "pipe"]))
        >>> refuse_dead_workers(SimpleNamespace(parent_pipes=[None, "pipe"]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        RuntimeError: the vector env's worker of sub-env 0 was shut down ...
    """
    dead = dead_workers(env)
    if dead:
        which = (
            f"worker of sub-env {dead[0]} was"
            if len(dead) == 1
            else f"workers of sub-envs {dead} were"
        )
        raise RuntimeError(
            f"the vector env's {which} shut down (an AsyncVectorEnv stops a worker "
            "whose env raised, for good): this env can neither step nor reset again, so "
            "reset() cannot help; close it, then make a new env and a new EnvRunner"
        )

"""Reading a vector env's autoreset mode."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import AutoresetMode

__all__ = ["autoreset_mode_of"]


def autoreset_mode_of(env: gym.vector.VectorEnv) -> AutoresetMode:
    """The env's autoreset mode from ``env.metadata["autoreset_mode"]`` (next-step if unset).

    Unset covers an env without ``metadata``, or with ``metadata`` None, too.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync",
        ...                    vector_kwargs={"autoreset_mode": "SameStep"})
        >>> autoreset_mode_of(env)
        <AutoresetMode.SAME_STEP: 'SameStep'>
    """
    metadata = getattr(env, "metadata", None)
    if metadata is None:
        return AutoresetMode.NEXT_STEP
    mode = metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)

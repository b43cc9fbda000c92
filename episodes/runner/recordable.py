"""What the env runner can record: vector envs, and spaces whose items batch into fixed shapes."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces

from episodes.spaces import UNSTACKABLE_SPACES, find_space_kind

__all__ = ["check_vector_env", "unrecordable_kind"]


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


def check_vector_env(env: Any) -> None:
    """Refuses anything but a vector env (one with ``num_envs``), naming how to make one.

    A single ``gymnasium.Env`` is the common mistake: the runner steps ``num_envs`` sub-envs
    at once and reads batched spaces. A ``gym.Env`` that has ``num_envs`` (a simulator's own
    batched env, as Isaac Lab's) is taken.

    Raises:
        TypeError: ``env`` has no ``num_envs`` (a single env, or no env at all).

    Example:
        >>> import gymnasium as gym
        >>> check_vector_env(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))
        >>> check_vector_env(gym.make("CartPole-v1"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: EnvRunner steps a gymnasium vector env, got a single env (TimeLimit ...
    """
    # A gym.Env with num_envs is a batched env of its own (Isaac Lab's are): it is recorded.
    if isinstance(env, gym.Env) and not hasattr(env, "num_envs"):
        spec = getattr(env, "spec", None)
        name = type(env).__name__ + (f" {spec.id}" if spec is not None else "")
        if hasattr(env.unwrapped, "num_envs"):  # gymnasium's wrappers pass no attribute on
            raise TypeError(
                f"EnvRunner reads num_envs from the env it is given: {name} wraps a batched "
                f"env (num_envs={env.unwrapped.num_envs}) but does not pass num_envs on; give "
                "the env unwrapped (env.unwrapped) or a wrapper that has num_envs"
            )
        raise TypeError(
            f"EnvRunner steps a gymnasium vector env, got a single env ({name}): make one with "
            "gym.make_vec(env_id, num_envs, vectorization_mode='sync') or "
            "gym.vector.SyncVectorEnv([make_env] * num_envs)"
        )
    if not hasattr(env, "num_envs"):
        raise TypeError(
            f"EnvRunner steps a gymnasium vector env (with num_envs), got {type(env).__name__}"
        )

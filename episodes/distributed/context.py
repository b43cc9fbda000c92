"""Who a remote runner is, and how it is built: the same recipe on an actor and locally.

A :class:`RunnerContext` names one runner of a group (its index, its restart generation and the
seed that follows from both). :func:`build_runner` is the recipe every runner actor follows, so
calling it in the driver's process gives the runner that the actor runs, step for step.

Example:
    >>> RunnerContext.create(seed=7, index=1).seed  # 7 + 2**20
    1048583
    >>> ctx = RunnerContext.create(seed=7, index=1, generation=1)
    >>> ctx.seed != 1048583 and ctx == RunnerContext.create(seed=7, index=1, generation=1)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.distributed.checks import check_mapping
from episodes.indexing import whole_number
from episodes.runner import EnvRunner
from episodes.seeds import check_seed  # re-exported: the group and older callers import it here

__all__ = [
    "EnvFactory",
    "PolicyFactory",
    "RunnerContext",
    "build_runner",
    "check_seed",
    "RUNNER_SEED_STRIDE",
    "runner_seed",
]

EnvFactory = Callable[["RunnerContext"], gym.vector.VectorEnv]
PolicyFactory = Callable[[gym.vector.VectorEnv, "RunnerContext"], Any]


#: How far apart the runners' seeds are: a gymnasium vector env seeds sub-env ``k`` with
#: ``seed + k``, so runners ``seed + index`` apart (RLlib's choice) would give R runners of N
#: sub-envs only R + N - 1 seeds among them, and record the same episodes in several columns.
RUNNER_SEED_STRIDE = 2**20


def runner_seed(seed: int | None, index: int, generation: int = 0) -> int | None:
    """The env seed of runner ``index`` after ``generation`` restarts.

    Generation 0 uses ``seed + index * RUNNER_SEED_STRIDE`` (2**20), so no two runners' sub-envs
    share a seed while each has fewer than 2**20; a restarted runner gets a seed mixed from all
    three numbers, so it never replays the episodes its predecessor already delivered.

    Raises:
        ValueError: ``seed`` neither None nor an int >= 0, or ``index`` or ``generation`` not
            an int >= 0 (floats, bools and strings refused, not truncated: ``int(1.5)`` would
            quietly run the runners of seed 1).

    Example:
        >>> runner_seed(0, 0), runner_seed(0, 1), runner_seed(None, 3)
        (0, 1048576, None)
        >>> runner_seed(1.5, 0)
        Traceback (most recent call last):
        ...
        ValueError: seed must be None or an int >= 0, got 1.5
    """
    seed = check_seed(seed)
    index = whole_number(index, "index", 0)
    generation = whole_number(generation, "generation", 0)
    if seed is None:
        return None
    if generation == 0:
        return seed + index * RUNNER_SEED_STRIDE
    words = np.random.SeedSequence([seed, index, generation]).generate_state(1)
    return int(words[0])


@dataclass(frozen=True)
class RunnerContext:
    """What an env or policy factory learns about the runner it builds for.

    Attributes:
        index: The runner's slot in its group (0-based).
        generation: How many times this slot was restarted (0: the first actor).
        seed: The seed of the runner's first ``env.reset`` (see :func:`runner_seed`).
        num_runners: The size of the group.
        config: Free-form settings passed to the group, forwarded unchanged.

    Example:
        >>> ctx = RunnerContext(index=2, num_runners=4, config={"level": "hard"})
        >>> ctx.seed, ctx.generation, ctx.config["level"]
        (None, 0, 'hard')
    """

    index: int = 0
    generation: int = 0
    seed: int | None = None
    num_runners: int = 1
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        *,
        seed: int | None,
        index: int,
        generation: int = 0,
        num_runners: int = 1,
        config: dict[str, Any] | None = None,
    ) -> RunnerContext:
        """The context of runner ``index`` in a group seeded with ``seed``.

        Raises:
            ValueError: ``seed`` neither None nor an int >= 0, ``index`` or ``generation`` not
                an int >= 0, or ``num_runners`` not an int >= 1 (nothing truncated).
            TypeError: ``config`` neither None nor a mapping.

        Example:
            >>> ctx = RunnerContext.create(seed=10, index=3, num_runners=4, config={"level": 1})
            >>> ctx.seed, ctx.generation, ctx.num_runners, ctx.config
            (3145738, 0, 4, {'level': 1})
            >>> RunnerContext.create(seed=None, index=3).seed is None
            True
        """
        seed = runner_seed(seed, index, generation)  # checks all three
        return cls(
            index=whole_number(index, "index", 0),
            generation=whole_number(generation, "generation", 0),
            seed=seed,
            num_runners=whole_number(num_runners, "num_runners", 1),
            config=check_mapping(config, "config"),  # a list of pairs too, as the group
        )


def build_runner(
    env_factory: EnvFactory,
    policy_factory: PolicyFactory,
    context: RunnerContext,
    **runner_kwargs: Any,
) -> EnvRunner:
    """Builds the env, the policy and the :class:`~episodes.runner.EnvRunner` of one runner.

    Every runner actor of a :class:`~episodes.distributed.RunnerGroup` calls exactly this, so
    calling it locally reproduces what a remote runner records.

    Args:
        env_factory: ``env_factory(context) -> VectorEnv``.
        policy_factory: ``policy_factory(env, context) -> policy`` (what ``EnvRunner`` takes).
        context: The runner's context; its ``seed`` seeds the first reset.
        **runner_kwargs: Further ``EnvRunner`` arguments (``len_lookback_buffer``, ...).

    Example:
        >>> from episodes.runner import RandomPolicy
        >>> runner = build_runner(
        ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
        ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
        ...     RunnerContext.create(seed=0, index=0))
        >>> sum(len(c) for c in runner.sample(5))
        10
    """
    if "seed" in runner_kwargs:
        raise ValueError("the runner's seed comes from its context: pass seed= to the group")
    env = env_factory(context)
    policy = policy_factory(env, context)
    return EnvRunner(env, policy, seed=context.seed, **runner_kwargs)

"""The runner actor: one process owning a vector env, a policy and an ``EnvRunner``.

:class:`RunnerActor` is a plain class; :class:`~episodes.distributed.RunnerGroup` turns it
into a Ray actor (``ray.remote(RunnerActor)``), so it can also be built and tested in-process.
Everything it owns is built on the actor from the factories (see
:func:`~episodes.distributed.context.build_runner`): envs are never shipped.

Example:
    >>> import gymnasium as gym
    >>> from episodes.runner import RandomPolicy
    >>> actor = RunnerActor(
    ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
    ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
    ...     RunnerContext.create(seed=0, index=0))
    >>> out = actor.sample(4, request=0)
    >>> out.num_envs, out.env_steps, out.metrics["num_env_steps"]
    (2, 8, 8)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from episodes.distributed.context import (
    EnvFactory,
    PolicyFactory,
    RunnerContext,
    build_runner,
)
from episodes.distributed.sample import RunnerSample, stamp_chunk
from episodes.distributed.shared_memory import ActorSegments, Request
from episodes.indexing import whole_number

__all__ = ["RunnerActor", "WriterSpec"]


@dataclass(frozen=True)
class WriterSpec:
    """Where runners write what they sample: one shared format v2 dataset.

    Attributes:
        path: The dataset directory (created by the first writer; the others append).
        metadata: A :class:`episodes.io.DatasetMetadata`, stored when the dataset is created.
        options: Further ``episodes.io.DatasetWriter`` arguments (``data_format``, ...).

    Example:
        >>> import tempfile
        >>> import gymnasium as gym
        >>> from episodes.io import dataset_info
        >>> from episodes.runner import RandomPolicy
        >>> path = tempfile.mkdtemp() + "/data"
        >>> actor = RunnerActor(
        ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
        ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
        ...     RunnerContext.create(seed=0, index=0), writer=WriterSpec(path))
        >>> actor.sample(3, request=0).env_steps, dataset_info(path).num_steps  # 3 x 2 envs
        (6, 6)
        >>> actor.close()
    """

    path: str
    metadata: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    def create_dataset(self) -> None:
        """Creates the dataset once, on the caller, so the runners' writers only ever append.

        Writers that create one dataset at the same moment can trip over each other's files.

        Example:
            >>> import tempfile
            >>> from episodes.io import dataset_info
            >>> spec = WriterSpec(tempfile.mkdtemp() + "/data")
            >>> spec.create_dataset(); dataset_info(spec.path).num_steps
            0
        """
        from episodes.io import DatasetWriter

        DatasetWriter(self.path, metadata=self.metadata, **self.options).close()


class RunnerActor:
    """Samples with its own runner; optionally writes every sample to a shared dataset.

    Args:
        env_factory: ``env_factory(context) -> VectorEnv``, called here.
        policy_factory: ``policy_factory(env, context) -> policy``, called here. To receive
            broadcast weights the policy needs ``set_weights(weights)``.
        context: This runner's slot, generation and seed.
        runner_kwargs: Further ``EnvRunner`` arguments.
        writer: Where to write the chunks of every sample (None: nowhere).

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import RandomPolicy
        >>> actor = RunnerActor(
        ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
        ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
        ...     RunnerContext.create(seed=5, index=1))
        >>> actor.context.seed, actor.runner.num_envs, actor.weights_version
        (1048581, 2, -1)
    """

    def __init__(
        self,
        env_factory: EnvFactory,
        policy_factory: PolicyFactory,
        context: RunnerContext,
        runner_kwargs: dict[str, Any] | None = None,
        writer: WriterSpec | None = None,
    ):
        self.context = context
        self.runner = build_runner(env_factory, policy_factory, context, **(runner_kwargs or {}))
        self.weights_version = -1
        self._writer_spec = writer
        self._writer: Any = None
        self._segments = ActorSegments()

    def info(self) -> dict[str, Any]:
        """Sub-env count, spaces, pid, least ``num_steps``, and whether the policy takes weights.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import RandomPolicy
            >>> actor = RunnerActor(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...     RunnerContext.create(seed=0, index=0))
            >>> info = actor.info()
            >>> info["num_envs"], info["action_space"], info["takes_weights"]
            (2, Discrete(2), False)
        """
        import os

        env = self.runner.env
        return {
            "num_envs": self.runner.num_envs,
            "observation_space": env.single_observation_space,
            "action_space": env.single_action_space,
            "pid": os.getpid(),
            "takes_weights": callable(getattr(self.runner.policy, "set_weights", None)),
            "least_num_steps": self.runner.least_num_steps,
        }

    def set_weights(self, weights: Any, version: int) -> int:
        """Loads ``weights`` into the policy (``policy.set_weights``); returns ``version``.

        Raises:
            TypeError: The policy has no ``set_weights``.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> class Constant:  # a policy whose weights are the action it always takes
            ...     action = 0
            ...     def set_weights(self, weights):
            ...         self.action = weights
            ...     def __call__(self, obs):
            ...         return np.full(len(obs), self.action), {}
            >>> actor = RunnerActor(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: Constant(), RunnerContext.create(seed=0, index=0))
            >>> actor.set_weights(1, version=3)
            3
            >>> out = actor.sample(2, request=0)
            >>> out.weights_version, [chunk.get_actions().tolist() for chunk in out.episodes]
            (3, [[1, 1], [1, 1]])
        """
        setter = getattr(self.runner.policy, "set_weights", None)
        if setter is None:
            raise TypeError(
                f"{type(self.runner.policy).__name__} has no set_weights(weights): the group "
                "cannot load broadcast weights into it"
            )
        setter(weights)
        self.weights_version = int(version)
        return self.weights_version

    def sample(
        self, num_steps: int, request: int, shared: Request | None = None, env_offset: int = 0
    ) -> Any:
        """Samples ``num_steps`` per sub-env, writes them if asked, returns them whole.

        The chunks are written and flushed before they are returned: a runner that dies in
        between has committed a sample the caller never saw (the dataset is then a superset).
        A writing runner first stamps them as a ``GroupSample`` does
        (:func:`~episodes.distributed.sample.stamp_chunk`: ``runner_index``,
        ``runner_env_index`` and ``env_index`` = ``env_offset`` + its sub-env), so the dataset
        holds the ``custom_data`` the caller's chunks get (the chunks it returns carry them too).

        Args:
            num_steps: Transitions per sub-env.
            request: The caller's sequence number of the request.
            shared: Where to put the reply (see :mod:`episodes.distributed.shared_memory`);
                None: return the :class:`RunnerSample` itself.
            env_offset: This runner's first column among the group's runners (the sub-envs
                of the runners before it: :func:`~episodes.distributed.sample.env_offsets`).

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import RandomPolicy
            >>> actor = RunnerActor(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...     RunnerContext.create(seed=0, index=0))
            >>> out = actor.sample(5, request=7)
            >>> type(out).__name__, out.request, out.env_steps, len(out.episodes)
            ('RunnerSample', 7, 10, 2)
        """
        offset = whole_number(env_offset, "env_offset", 0)  # refused before any env step
        if shared is not None:
            self._segments.prepare(shared)  # before any env step: see ActorSegments.prepare
        episodes = self.runner.sample(num_steps)
        if self._writer_spec is not None:
            for j in range(len(episodes)):  # stamped as the caller's GroupSample stamps them
                stamp_chunk(episodes, j, self.context.index, offset)
            writer = self._open_writer()
            writer.write_many(episodes)
            writer.flush()
        sample = RunnerSample(
            runner_index=self.context.index,
            generation=self.context.generation,
            request=int(request),
            weights_version=self.weights_version,
            num_envs=self.runner.num_envs,
            episodes=episodes,
            metrics=self.runner.get_metrics(),
        )
        return sample if shared is None else self._segments.reply(sample, shared)

    def apply(self, fn: Callable[..., Any], shared: Request | None = None) -> Any:
        """``fn(runner, context)`` on this actor (inspection, custom setup, benchmarks).

        ``shared``: as in :meth:`sample`.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import RandomPolicy
            >>> actor = RunnerActor(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...     RunnerContext.create(seed=0, index=0))
            >>> actor.apply(lambda runner, ctx: (ctx.index, ctx.seed, runner.num_envs))
            (0, 0, 2)
        """
        if shared is not None:
            self._segments.prepare(shared)
        value = fn(self.runner, self.context)
        return value if shared is None else self._segments.reply(value, shared)

    def close(self) -> None:
        """Commits and closes the writer, closes the env.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import RandomPolicy
            >>> actor = RunnerActor(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...     RunnerContext.create(seed=0, index=0))
            >>> actor.close()
            >>> actor.runner.env.closed
            True
        """
        try:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                writer.close()
        finally:  # the env is closed even when the commit failed
            self.runner.env.close()

    def _open_writer(self) -> Any:
        if self._writer is None:
            from episodes.io import DatasetWriter

            spec = self._writer_spec
            assert spec is not None
            self._writer = DatasetWriter(spec.path, metadata=spec.metadata, **spec.options)
        return self._writer

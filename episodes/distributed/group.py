"""RunnerGroup: env runners as Ray actors, sampled in parallel, replaced when they die.

Each runner is a :class:`~episodes.distributed.actor.RunnerActor` (one process, one vector
env, one policy, one :class:`~episodes.runner.EnvRunner`). The driver keeps one *slot* per
runner: the actor handle, its restart generation and at most one request in flight.

Data path: a runner on the caller's node writes its sample's numpy blocks into a shared-memory
segment the caller leased to the request (one copy, into pages both processes keep mapped;
see :mod:`episodes.distributed.shared_memory`), and only the pickle stream goes through Ray.
Elsewhere, or when the sample does not fit, the sample is the actor's return value: it lands
in Ray's object store and reaches the caller through ``ray.get``, its blocks as out-of-band
buffers (memory-mapped on the caller's node, not unpickled element by element).

Failure path: when a request fails (the actor was killed, its process crashed, the env or
the policy raised), the request is recorded as a :class:`~episodes.distributed.LostSample`
(counted in the metrics; none of its chunks is returned, so nothing is half-recorded), the
actor is killed and a fresh one (fresh env, next generation's seed, the current weights) takes
its slot. What was returned before stays valid: returned objects belong to the caller.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

from episodes.distributed import slots as slot_ops
from episodes.distributed.actor import RunnerActor
from episodes.distributed.checks import (
    check_mapping,
    check_picklable,
    check_runner_kwargs,
    check_timeout,
    raise_dead_runners,
    readable_error,
)
from episodes.distributed.context import EnvFactory, PolicyFactory, RunnerContext, check_seed
from episodes.distributed.deadline import Deadline, stuck_before
from episodes.distributed.dropped import drop
from episodes.distributed.metrics import GroupMetrics
from episodes.distributed.refused_weights import WeightsRefused, raise_refusal, read_weights_ack
from episodes.distributed.require import require_ray
from episodes.distributed.sample import GroupSample, LostSample, RunnerSample, env_offsets
from episodes.distributed.shared_memory import SHM_DIR, Reply, SlotSegments
from episodes.distributed.slots import Slot, apply_on_all, start_actors
from episodes.distributed.steps import num_steps_check
from episodes.distributed.targets import group_writer, refuse_other_spaces
from episodes.indexing import as_flag, whole_number

__all__ = ["RunnerGroup"]


class RunnerGroup:
    """A group of remote env runners: parallel, asynchronous and fault-tolerant sampling.

    Runner ``i`` is built on its actor exactly as :func:`~episodes.distributed.build_runner`
    builds it locally from ``RunnerContext.create(seed=seed, index=i, ...)``, so with the same
    seeds it records the same transitions as that local runner.

    Args:
        env_factory: ``env_factory(context) -> VectorEnv``, called on each actor (must pickle:
            a module-level function or a ``functools.partial`` of one).
        policy_factory: ``policy_factory(env, context) -> policy``, called on each actor; the
            policy needs ``set_weights(weights)`` if weights are broadcast.
        num_runners: How many runner actors.
        seed: Base seed (runner ``i`` resets with ``seed + i * 2**20``; None: unseeded).
        runner_kwargs: Further ``EnvRunner`` arguments.
        config: Free-form settings handed to the factories in ``context.config``.
        write_to: A format v2 dataset every runner writes its samples into (None: none).
        write_metadata: The ``episodes.io.DatasetMetadata`` stored if the group makes the dataset.
        write_options: Further ``episodes.io.DatasetWriter`` arguments.
        num_cpus_per_runner: Ray CPUs each actor reserves.
        actor_options: Further ``ray.remote`` options of the actors.
        max_consecutive_failures: A slot that fails this many times in a row raises instead
            of restarting again (a factory or policy bug, not bad luck); a successful request
            or :meth:`restart_runner` starts the count over.
        start_timeout_s: The longest wait for the first actors to start (they wait for free
            CPUs: a cluster without ``num_runners * num_cpus_per_runner`` of them would hang),
            and for a replacement actor, when its slot's request is collected.
        shared_memory: Let runners on this node hand samples over through shared-memory
            segments in ``/dev/shm`` (False: always through Ray's object store).

    Raises:
        ImportError: Ray is not installed.
        TypeError: ``shared_memory`` not a bool (``"no"`` would mean yes); ``runner_kwargs``,
            ``config``, ``write_options`` or ``actor_options`` neither None nor a mapping.
        ValueError: ``num_runners`` or ``max_consecutive_failures`` not an int >= 1 (floats
            refused), ``seed`` neither None nor an int >= 0, ``start_timeout_s`` not None or
            seconds >= 0, ``write_metadata``/``write_options`` without ``write_to``, actor
            options Ray refuses (before ``write_to`` is created), a ``write_to`` dataset of
            another env id than ``write_metadata``'s or other spaces than the runners'.
        RuntimeError: An actor failed to start (the factories raised).

    Example:
        >>> import gymnasium as gym, ray
        >>> from episodes.runner import RandomPolicy
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> group = RunnerGroup(
        ...     lambda ctx: gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"),
        ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
        ...     num_runners=2, seed=0)
        >>> group.sample(16).env_steps  # 2 runners x 4 sub-envs x 16 steps
        128
        >>> group.stop()
    """

    def __init__(
        self,
        env_factory: EnvFactory,
        policy_factory: PolicyFactory,
        *,
        num_runners: int = 2,
        seed: int | None = None,
        runner_kwargs: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        write_to: str | os.PathLike[str] | None = None,
        write_metadata: Any = None,
        write_options: dict[str, Any] | None = None,
        num_cpus_per_runner: float = 1.0,
        actor_options: dict[str, Any] | None = None,
        max_consecutive_failures: int = 3,
        start_timeout_s: float | None = 300.0,
        shared_memory: bool = True,
    ):
        # Checked before any actor starts (refused, nothing is left running).
        self.num_runners = whole_number(num_runners, "num_runners", 1)
        self._max_failures = whole_number(max_consecutive_failures, "max_consecutive_failures", 1)
        self._start_timeout_s = start_timeout_s = check_timeout(start_timeout_s, "start_timeout_s")
        shared_memory = as_flag(shared_memory, "shared_memory")
        self.seed = check_seed(seed)  # here: on the actors it would fail their start
        self._runner_kwargs = check_runner_kwargs(check_mapping(runner_kwargs, "runner_kwargs"))
        self._config = check_mapping(config, "config")
        write_options = check_mapping(write_options, "write_options")
        if write_to is None and (write_metadata is not None or write_options):
            raise ValueError("write_metadata and write_options need write_to (the dataset)")
        self._ray = require_ray()
        # What every actor is sent, pickled as Ray would: refused before write_to is created.
        check_picklable(
            {"env_factory": env_factory, "policy_factory": policy_factory, "config": self._config,
             "runner_kwargs": self._runner_kwargs, "write_metadata": write_metadata,
             "write_options": write_options}
        )  # fmt: skip
        self._env_factory, self._policy_factory = env_factory, policy_factory
        options = {"num_cpus": num_cpus_per_runner, "max_restarts": 0}
        self._cpus = num_cpus_per_runner
        options.update(check_mapping(actor_options, "actor_options"))
        # Ray checks the options here: a refused one must not leave write_to created.
        self._actor_cls = self._ray.remote(RunnerActor).options(**options)
        self._writer = group_writer(write_to, write_metadata, write_options)  # made
        self.metrics = GroupMetrics()
        self.weights_version = -1
        self._weights_ref: Any = None
        self._next_request = 0
        self._shm_dir = SHM_DIR if shared_memory else None
        handles = [self._spawn(i, 0) for i in range(self.num_runners)]
        cpus = f"{self.num_runners} x {num_cpus_per_runner}"
        infos = start_actors(self._ray, handles, start_timeout_s, cpus)
        refuse_other_spaces(self._ray, handles, self._writer, infos[0])  # before any sample
        self._slots = [
            Slot(i, 0, handle, int(info["num_envs"]), segments=SlotSegments(self._shm_dir))
            for i, (handle, info) in enumerate(zip(handles, infos))
        ]
        self._takes_weights = all(info["takes_weights"] for info in infos)
        # Refused here, not by the actors: a refused request would count as a failure.
        self._least_num_steps = max(int(info["least_num_steps"]) for info in infos)
        self._check_steps = num_steps_check(self._ray, handles, infos, self._least_num_steps)
        self._stopped = False
        self.observation_space = infos[0]["observation_space"]
        self.action_space = infos[0]["action_space"]

    @property
    def actors(self) -> list[Any]:
        """The current actor handles, slot by slot (a replaced actor's handle changes).

        Example:
            >>> import os
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=2, seed=0) as group:
            ...     infos = ray.get([actor.info.remote() for actor in group.actors])
            ...     pids = [info["pid"] for info in infos]
            ...     print(len(set(pids)), os.getpid() in pids)  # two processes, neither this one
            2 False
        """
        return [slot.handle for slot in self._slots]

    @property
    def generations(self) -> list[int]:
        """How many times each slot was restarted.

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=2, seed=0) as group:
            ...     group.restart_runner(1)
            ...     print(group.generations)
            [0, 1]
        """
        return [slot.generation for slot in self._slots]

    @property
    def num_envs(self) -> list[int]:
        """Sub-envs per runner.

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=2, seed=0) as group:
            ...     print(group.num_envs)
            [2, 2]
        """
        return [slot.num_envs for slot in self._slots]

    @property
    def num_in_flight(self) -> int:
        """Asynchronous requests not yet collected.

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=1, seed=0) as group:
            ...     done = group.sample_async(4, timeout_s=0)  # launch; take it if already done
            ...     print(len(done.samples) + group.num_in_flight)  # returned, or in flight
            ...     _ = group.sample_async(4, launch=False)  # collect, launch nothing
            ...     print(group.num_in_flight)
            1
            0
        """
        return sum(slot.ref is not None or slot.held is not None for slot in self._slots)

    def set_weights(self, weights: Any) -> int:
        """Broadcasts ``weights``: one ``ray.put``, its reference passed to every actor.

        Each actor applies them (``policy.set_weights``) before its next sample; a request
        already in flight keeps the weights it started with (its sample says which version).
        A policy that refuses them (raises) makes the collection of that sample raise a
        ``ValueError`` (:mod:`~episodes.distributed.refused_weights`), its actor kept.

        Returns:
            The new weights version (0, 1, 2, ...).

        Raises:
            TypeError: The runners' policies have no ``set_weights`` (nothing is sent).

        Example:
            >>> import gymnasium as gym, numpy as np, ray
            >>> class Constant:  # a policy whose weights are the action it always takes
            ...     action = 0
            ...     def set_weights(self, weights):
            ...         self.action = weights
            ...     def __call__(self, obs):
            ...         return np.full(len(obs), self.action), {}
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: Constant(), num_runners=1) as group:
            ...     print(group.set_weights(1), group.set_weights(1))  # versions 0 and 1
            ...     sample = group.sample(3)
            ...     print(sample.samples[0].weights_version,
            ...           [chunk.get_actions().tolist() for chunk in sample])
            0 1
            1 [[1, 1, 1], [1, 1, 1]]
        """
        self._check_running()
        if not self._takes_weights:
            raise TypeError(
                "the runners' policies have no set_weights(weights): give the policy built by "
                "policy_factory one to receive broadcast weights"
            )
        self._weights_ref = self._ray.put(weights)
        self.weights_version += 1
        for slot in self._slots:
            self._push_weights(slot)
        return self.weights_version

    def _push_weights(self, slot: Slot) -> None:
        if self._weights_ref is not None:
            drop(slot.weights_ack)  # overwritten: only the latest broadcast's is checked
            slot.weights_ack = slot.handle.set_weights.remote(
                self._weights_ref, self.weights_version
            )

    def sample(
        self, num_steps: int, *, weights: Any = None, timeout_s: float | None = None
    ) -> GroupSample:
        """Every runner samples ``num_steps`` per sub-env in parallel; waits for all of them.

        Args:
            num_steps: Transitions per sub-env (>= 1).
            weights: Broadcast these first (see :meth:`set_weights`); None: keep the current.
            timeout_s: The longest wait from this call on (None: as long as it takes); a request
                not done by then (a hung env or policy) is lost as a crashed runner's is.

        Returns:
            The runners that answered, side by side; the requests lost to dead (or, past
            ``timeout_s``, slow) runners are in ``.lost`` (their slots hold fresh actors).

        Raises:
            ValueError: A ``timeout_s`` not None or seconds >= 0 (before anything is sent);
                weights a runner's policy refused (``WeightsRefused``, raised as below).
            RuntimeError: Asynchronous requests are still in flight, or a slot kept failing
                (raised once every other request was collected, as any error while
                collecting). An interrupt (``KeyboardInterrupt``) while waiting leaves the
                requests not taken yet in flight: collect them with ``sample_async(...,
                launch=False)``.

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=2, seed=0) as group:
            ...     sample = group.sample(8)
            ...     print(len(sample.samples), sample.num_envs, sample.env_steps, sample.lost)
            2 4 32 []
        """
        self._check_running()
        num_steps = self._check_steps(num_steps)
        deadline = Deadline(check_timeout(timeout_s, "timeout_s"))
        if self.num_in_flight:
            raise RuntimeError(
                f"{self.num_in_flight} asynchronous requests are in flight: collect them with "
                "sample_async(..., launch=False) first"
            )
        if weights is not None:
            self.set_weights(weights)
        for slot in self._slots:
            self._launch(slot, int(num_steps))
        return self._collect(list(self._slots), deadline)

    def sample_async(
        self,
        num_steps: int,
        *,
        weights: Any = None,
        timeout_s: float | None = None,
        launch: bool = True,
    ) -> GroupSample:
        """Starts a request on every idle runner; returns whatever requests have finished.

        Waits (up to ``timeout_s``; None: as long as it takes) for at least one request, then
        takes every request that is done by then. Runners whose request is still running keep
        it; the next call collects it.

        Args:
            num_steps: Transitions per sub-env of the requests started now.
            weights: Broadcast these first; requests in flight keep their weights.
            timeout_s: The longest wait for a first finished request (0: just poll).
            launch: False: start nothing, only collect (to drain before :meth:`sample`).

        Returns:
            The finished requests (possibly none), lost ones in ``.lost``.

        Raises:
            ValueError: A ``num_steps`` the runners would refuse, a ``timeout_s`` not None
                or seconds >= 0 (checked before a broadcast or a launch); weights a finished
                runner's policy refused (``WeightsRefused``, once the others are collected).
            TypeError: ``launch`` not a bool (checked as early).

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=1, seed=0) as group:
            ...     out = group.sample_async(8)  # waits for the first request: the only one
            ...     print(len(out.samples), out.env_steps, group.num_in_flight)
            1 16 0
        """
        self._check_running()
        num_steps = self._check_steps(num_steps)
        # Before the broadcast and the launches: a refused call starts nothing.
        timeout_s = check_timeout(timeout_s, "timeout_s")
        launch = as_flag(launch, "launch")
        if weights is not None:
            self.set_weights(weights)
        if launch:
            for slot in self._slots:
                if slot.ref is None and slot.held is None:
                    self._launch(slot, int(num_steps))
        finished = slot_ops.finished_slots(self._ray, self._slots, timeout_s)
        return self._collect(finished, Deadline(None)) if finished else GroupSample([])

    def _launch(self, slot: Slot, num_steps: int) -> None:
        slot.request = self._next_request
        self._next_request += 1
        slot.num_steps = num_steps
        shared, slot.lease = slot.segments.request()
        offset = env_offsets([s.num_envs for s in self._slots])[slot.index]  # among all runners
        slot.ref = slot.handle.sample.remote(num_steps, slot.request, shared, offset)

    def _check_running(self) -> None:
        if self._stopped:
            raise RuntimeError("this RunnerGroup was stopped; create a new one")

    def _collect(self, slots: Sequence[Slot], deadline: Deadline) -> GroupSample:
        self._refusals: list[WeightsRefused] = []  # this round's, raised with its sample
        stuck = stuck_before(self._ray, slots, self._start_timeout_s, deadline)
        failed: Exception | None = None
        if stuck:  # their requests stay in flight, for a later collection
            failed = slot_ops.not_started(stuck, self._start_timeout_s, self._cpus)
        taken: list[Any] = []
        try:
            for slot in (slot for slot in slots if slot not in stuck):
                # All are collected after one gave up too; an interrupt leaves the rest in flight.
                outcome, slot.held = slot.held, None
                try:
                    taken.append((slot, self._take(slot, deadline) if outcome is None else outcome))
                except Exception as err:
                    failed = failed or err
        except BaseException:
            for slot, outcome in taken:  # taken already: the next collection hands them out
                slot.held = outcome
            raise
        if failed is not None:
            raise failed
        outcomes = [outcome for _, outcome in taken]
        samples = [outcome for outcome in outcomes if isinstance(outcome, RunnerSample)]
        done = GroupSample(samples, [o for o in outcomes if isinstance(o, LostSample)])
        raise_refusal(self._refusals, done)  # the round handed out with the error
        return done

    def _take(self, slot: Slot, deadline: Deadline) -> RunnerSample | LostSample:
        lease, refusal = slot.lease, None
        try:
            try:
                read_weights_ack(self._ray, deadline, slot, self.weights_version)
            except WeightsRefused as refused:  # its request ran on the weights it had: taken
                refusal = refused
                self._push_weights(slot)  # tried again before its next request
            reply = deadline.get(self._ray, slot.ref)
        except Exception as err:
            drop(slot.ref)  # unread when the weights acknowledgement failed first
            slot.ref = slot.lease = None
            slot.segments.discard(lease)  # never mapped, maybe: its name must not stay
            return self._lose(slot, err)
        # An interrupt above left the request in flight (collected by a later call, its lease
        # kept); from here on it is taken: an error or an interrupt loses it, and its segment.
        slot.ref = slot.lease = None
        shared = isinstance(reply, Reply) and reply.stream is not None
        try:
            sample: RunnerSample = slot.segments.receive(reply, lease)
        except Exception as err:  # a reply the caller cannot unpickle, as on Ray's path
            slot.segments.discard(lease)
            return self._lose(slot, err)
        except BaseException:
            slot.segments.discard(lease)
            self.metrics.add_lost(
                num_env_steps=slot.num_steps * slot.num_envs,
                error=f"runner {slot.index}: interrupted while its sample was received",
            )
            raise
        self._refusals.extend([refusal] if refusal else [])  # a lost one's new actor says it
        slot.failures = 0
        slot.num_envs = sample.num_envs  # a replacement's env_factory may have made another
        self.metrics.add_sample(sample.without_totals(), shared_memory=shared)
        return sample

    def _lose(self, slot: Slot, err: Exception) -> LostSample:
        text = readable_error(
            f"runner {slot.index} generation {slot.generation}: {type(err).__name__}: {err}"
        )
        lost = LostSample(
            slot.index, slot.generation, slot.request, slot.num_steps * slot.num_envs, text
        )
        self.metrics.add_lost(num_env_steps=lost.num_env_steps, error=text)
        slot.failures += 1
        if slot.failures >= self._max_failures:
            raise RuntimeError(
                f"runner {slot.index} failed {slot.failures} times in a row; last: {text}"
            ) from err
        self._restart(slot)
        return lost

    def _spawn(self, index: int, generation: int) -> Any:
        context = RunnerContext.create(
            seed=self.seed,
            index=index,
            generation=generation,
            num_runners=self.num_runners,
            config=self._config,
        )
        return self._actor_cls.remote(
            self._env_factory, self._policy_factory, context, self._runner_kwargs, self._writer
        )

    def _restart(self, slot: Slot) -> None:
        self._ray.kill(slot.handle, no_restart=True)
        # The old actor may still be writing: its segments are never leased again.
        slot_ops.let_go(slot)
        slot.segments = SlotSegments(self._shm_dir, hints=dict(slot.segments.hints))
        slot.generation += 1
        slot.handle = self._spawn(slot.index, slot.generation)
        slot.started = slot.handle.info.remote()  # awaited, with a limit, before its reply
        self._push_weights(slot)
        self.metrics.num_restarts += 1

    def restart_runner(self, index: int) -> None:
        """Replaces runner ``index`` by a fresh actor now (a request in flight is lost).

        A sample an interrupt kept back is still handed out by the next collection.

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=1, seed=0) as group:
            ...     group.restart_runner(0)
            ...     sample = group.sample(4)  # from the fresh actor
            ...     print(group.generations, sample.samples[0].generation,
            ...           group.get_metrics()["num_restarts"])
            [1] 1 1
        """
        self._check_running()
        if isinstance(index, bool) or not 0 <= operator.index(index) < len(self._slots):
            raise IndexError(f"runner index {index!r} is not in [0, {len(self._slots)})")
        slot = self._slots[index]
        if slot.ref is not None:  # the restart lets go of it
            self.metrics.add_lost(
                num_env_steps=slot.num_steps * slot.num_envs, error=f"runner {index} restarted"
            )
        slot.failures = 0  # a deliberate fresh start: its failures in a row start over
        self._restart(slot)

    def foreach_runner(self, fn: Callable[[Any, RunnerContext], Any]) -> list[Any]:
        """``fn(runner, context)`` on every actor, in slot order (waits for all).

        Results travel as samples do (through shared memory on this node; one holding a Ray
        ``ObjectRef`` or actor handle through Ray, which keeps what it names alive). When ``fn``
        raises, the first error is raised once every other runner's result was taken (and dropped).
        A dead runner's Ray error is raised naming it (replaced at the next :meth:`sample`).

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=2, seed=10) as group:
            ...     print(group.foreach_runner(lambda r, ctx: (ctx.index, ctx.seed, r.num_envs)))
            [(0, 10, 2), (1, 1048586, 2)]
        """
        self._check_running()
        try:
            return apply_on_all(self._ray, self._slots, fn)
        except self._ray.exceptions.RayActorError as err:
            raise_dead_runners(self._ray, self._slots, err)

    def get_metrics(self, *, reset: bool = True) -> dict[str, Any]:
        """The group's counters and the runners' merged metrics (see :class:`GroupMetrics`).

        Raises:
            TypeError: ``reset`` not a bool (``"no"`` would clear them).

        Example:
            >>> import gymnasium as gym, ray
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> with RunnerGroup(
            ...         lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...         lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...         num_runners=1, seed=0) as group:
            ...     _ = group.sample(8)
            ...     m = group.get_metrics()
            ...     print(m["num_samples"], m["num_env_steps"], m["num_lost_samples"],
            ...           group.get_metrics()["num_samples"])  # the first call reset them
            1 16 0 0
        """
        return self.metrics.reduce(reset=reset)

    def stop(self) -> None:
        """Closes every runner (committing what they wrote) and ends the actors.

        Requests still in flight, and samples an interrupt kept back for the next collection
        (which counted as arrived too), are counted as lost (``num_lost_samples``); with
        ``write_to`` what they recorded is committed all the same.

        Example:
            >>> import tempfile
            >>> import gymnasium as gym, ray
            >>> from episodes.io import dataset_info
            >>> from episodes.runner import RandomPolicy
            >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
            ...              configure_logging=False, ignore_reinit_error=True)
            >>> path = tempfile.mkdtemp() + "/data"
            >>> group = RunnerGroup(
            ...     lambda ctx: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            ...     lambda env, ctx: RandomPolicy(env.action_space, seed=ctx.seed),
            ...     num_runners=1, seed=0, write_to=path)
            >>> sample = group.sample(4)
            >>> group.stop()  # what leaving a ``with RunnerGroup(...)`` block does
            >>> dataset_info(path).num_steps, sample.env_steps  # every sample committed
            (8, 8)
        """
        if self._stopped:
            return  # a second stop (an explicit one, then leaving the with block)
        self._stopped = True
        for slot in self._slots:
            slot_ops.abandon(slot, self.metrics)
        slot_ops.close_all(self._ray, self._slots, 60)  # before the kills: they cut a commit
        for slot in self._slots:
            self._ray.kill(slot.handle, no_restart=True)
            slot_ops.let_go(slot)

    def __reduce__(self, *_: Any) -> Any:  # pickle, copy.copy and deepcopy(memo): refused
        raise TypeError("a RunnerGroup owns its actors: it cannot be pickled or copied")

    __copy__ = __deepcopy__ = __reduce__

    def __enter__(self) -> RunnerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

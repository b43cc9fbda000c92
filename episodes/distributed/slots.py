"""The driver's side of each runner actor: its slot, its start and its replies to an ``apply``.

Kept apart from :mod:`episodes.distributed.group` to keep the group small: a
:class:`Slot` is what the group holds per runner (the actor handle, its restart generation, at
most one request in flight and that request's shared-memory lease).

Example:
    >>> slot = Slot(index=0, generation=0, handle=None, num_envs=4)
    >>> slot.ref is None, slot.lease is None, slot.segments.enabled  # idle, no segments
    (True, True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from episodes.distributed.checks import readable_error
from episodes.distributed.dropped import drop, get_all
from episodes.distributed.sample import RunnerSample
from episodes.distributed.shared_memory import Segment, SlotSegments

__all__ = [
    "Slot",
    "abandon",
    "apply_on_all",
    "close_all",
    "finished_slots",
    "let_go",
    "not_started",
    "start_actors",
    "stuck_replacements",
]


@dataclass
class Slot:
    """One runner as the group holds it.

    Attributes:
        index: The runner's index in the group.
        generation: How many times the slot's actor was replaced.
        handle: The actor handle.
        num_envs: The actor's sub-envs.
        request: The sequence number of its latest request.
        ref: The request in flight (None: idle).
        num_steps: Steps per sub-env of that request.
        weights_ack: The reference of the latest weights pushed, until collected.
        failures: Failed requests in a row.
        segments: The caller's shared-memory segments of this actor.
        lease: The segment leased to the request in flight.
        held: A request's outcome taken but not handed out yet (an interrupt came while the
            group collected the others); the next collection hands it out first.
        started: A replacement actor's first call, until the group saw it answer.

    Example:
        >>> Slot(index=1, generation=2, handle=None, num_envs=4).failures
        0
    """

    index: int
    generation: int
    handle: Any
    num_envs: int
    request: int = -1
    ref: Any = None
    num_steps: int = 0
    weights_ack: Any = None
    failures: int = 0
    segments: SlotSegments = field(default_factory=lambda: SlotSegments(None))
    lease: Segment | None = None
    held: Any = None
    started: Any = None


def start_actors(
    ray: Any, handles: list[Any], timeout_s: float | None, cpus: str
) -> list[dict[str, Any]]:
    r"""Each new actor's ``info()``; on a failed or late start (any error) every actor is killed.

    Args:
        ray: The ``ray`` module.
        handles: The actors just created.
        timeout_s: The longest wait (None: no limit).
        cpus: What the group asked for (``"2 x 1.0"``), for the timeout's message.

    Raises:
        RuntimeError: An actor did not start within ``timeout_s``, or failed to start (its
            factory raised: the message holds its error, without Ray's colour codes).

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... class Broken:
        ...     def __init__(self):
        ...         raise ValueError("no env")
        ...     def info(self):
        ...         return {}
        >>> try:
        ...     start_actors(ray, [Broken.remote()], 60, "1 x 0")
        ... except RuntimeError as err:
        ...     print(str(err).startswith("a runner actor failed to start"), "\x1b[" in str(err))
        True False
    """
    try:
        return get_all(ray, [h.info.remote() for h in handles], timeout_s)
    except ray.exceptions.GetTimeoutError as err:
        for handle in handles:
            ray.kill(handle)
        raise RuntimeError(
            f"the runner actors did not start within {timeout_s} s: does the cluster have "
            f"{cpus} free CPUs?"
        ) from err
    except ray.exceptions.RayError as err:
        for handle in handles:
            ray.kill(handle)
        raise RuntimeError(readable_error(f"a runner actor failed to start: {err}")) from err
    except BaseException:  # any other error, or an interrupt: no actor is left running
        for handle in handles:
            ray.kill(handle)
        raise


def apply_on_all(ray: Any, slots: Sequence[Slot], fn: Callable[..., Any]) -> list[Any]:
    """``fn(runner, context)`` on every slot's actor (``RunnerActor.apply``), in slot order.

    Results travel as samples do (through shared memory on the caller's node). Reply by
    reply: the runners that answered still hand their segments back (and have their names
    removed) when another one raised; the first error is raised after.

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... class Echo:
        ...     def apply(self, fn, shared=None):
        ...         return fn("runner", "context")
        >>> apply_on_all(ray, [Slot(0, 0, Echo.remote(), 1)], lambda r, c: (r, c))
        [('runner', 'context')]
    """
    leases = [slot.segments.request("apply") for slot in slots]
    refs = [slot.handle.apply.remote(fn, shared) for slot, (shared, _) in zip(slots, leases)]
    results, failed = [], None
    for i, (slot, ref, (_, lease)) in enumerate(zip(slots, refs, leases)):
        try:
            results.append(slot.segments.receive(ray.get(ref), lease, "apply"))
        except Exception as err:
            slot.segments.discard(lease)
            failed = failed or err
        except BaseException:  # interrupted: the leases not taken yet are given up
            for later, (_, left), unread in zip(slots[i:], leases[i:], refs[i:]):
                later.segments.discard(left)
                drop(unread)  # fn may raise there too: read when it arrives
            raise
    if failed is not None:
        del results  # the traceback keeps this frame: they would keep their segments leased
        raise failed
    return results


def stuck_replacements(ray: Any, slots: Sequence[Slot], timeout_s: float | None) -> list[Slot]:
    """The replacement actors among ``slots`` that did not start within ``timeout_s``.

    One wait for all of them, as for the first actors: a started one's first call (its
    ``started`` reference) has answered, and is forgotten; a failed start fails its request
    too, which the group takes as a loss.

    Example:
        >>> stuck_replacements(None, [Slot(index=0, generation=0, handle=None, num_envs=1)], 1.0)
        []
    """
    # Only a request in flight waits for its actor: an outcome held since an interrupt is
    # handed out as it is.
    starting = [
        slot
        for slot in slots
        if slot.started is not None and slot.ref is not None and slot.held is None
    ]
    if not starting:
        return []
    refs = [slot.started for slot in starting]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    done = set(ready)
    for slot in starting:
        if slot.started in done:
            slot.started = None
    return [slot for slot in starting if slot.started is not None]


def not_started(stuck: list[Slot], timeout_s: float | None, cpus: float) -> RuntimeError:
    """The error naming every runner whose replacement actor did not start.

    Example:
        >>> str(not_started([Slot(index=1, generation=2, handle=None, num_envs=1)], 3.0, 1.0))[:60]
        'the replacement actors of runners 1 (generation 2) did not s'
    """
    names = ", ".join(f"{slot.index} (generation {slot.generation})" for slot in stuck)
    return RuntimeError(
        f"the replacement actors of runners {names} did not start within {timeout_s} s: does "
        f"the cluster have {cpus} CPUs free for each? Their requests stay in flight: "
        "sample_async(..., launch=False) collects them once they start"
    )


def finished_slots(ray: Any, slots: Sequence[Slot], timeout_s: float | None) -> list[Slot]:
    """The slots whose request is done, waiting up to ``timeout_s`` for a first one.

    Outcomes held since an interrupt are done already: beside one, nothing is waited for.

    Example:
        >>> finished_slots(None, [Slot(index=0, generation=0, handle=None, num_envs=1)], 0)
        []
    """
    busy = [slot.ref for slot in slots if slot.ref is not None]
    held = any(slot.held is not None for slot in slots)
    ready: list[Any] = []
    if busy and ray.wait(busy, num_returns=1, timeout=0 if held else timeout_s)[0]:
        ready = ray.wait(busy, num_returns=len(busy), timeout=0)[0]
    done = set(ready)
    return [slot for slot in slots if slot.held is not None or slot.ref in done]


def let_go(slot: Slot) -> None:
    """The slot's actor was killed (replaced or stopped): what the slot held of it is let go.

    Its references (request, weights acknowledgement, start) are dropped unread, their
    results read when they arrive, never waited for (:func:`~episodes.distributed.dropped.drop`);
    its lease is freed and its segments closed (leased ones once their reply is gone).

    Example:
        >>> slot = Slot(index=0, generation=0, handle=None, num_envs=1)
        >>> let_go(slot); slot.ref, slot.weights_ack, slot.started, slot.lease
        (None, None, None, None)
    """
    for ref in (slot.ref, slot.weights_ack, slot.started):
        drop(ref)
    slot.ref = slot.weights_ack = slot.started = None
    slot.segments.abandon(slot.lease)
    slot.lease = None
    slot.segments.close()


def abandon(slot: Slot, metrics: Any) -> None:
    """Counts as lost what a stopping group leaves uncollected in ``slot`` (``GroupMetrics``).

    A request in flight (a writing runner commits it all the same), and a sample an interrupt
    kept back for the next collection (it counted as arrived too).

    Example:
        >>> from episodes.distributed.metrics import GroupMetrics
        >>> slot, metrics = Slot(index=0, generation=0, handle=None, num_envs=2), GroupMetrics()
        >>> slot.ref, slot.num_steps = "in flight", 3
        >>> abandon(slot, metrics); metrics.num_lost_samples, metrics.num_lost_env_steps
        (1, 6)
    """
    if slot.ref is not None:
        metrics.add_lost(
            num_env_steps=slot.num_steps * slot.num_envs,
            error=f"runner {slot.index}: stopped with a request in flight",
        )
    if isinstance(slot.held, RunnerSample):  # arrived (a loss was counted when taken)
        metrics.add_lost(
            num_env_steps=slot.held.env_steps,
            error=f"runner {slot.index}: stopped with a sample an interrupt kept back",
        )
    slot.held = None


def close_all(ray: Any, slots: Sequence[Slot], timeout_s: float) -> None:
    """Closes every slot's actor (``RunnerActor.close``), waiting up to ``timeout_s`` in all.

    All closes are waited for, failed ones too (a dead runner has nothing left to close; a
    failed close is no reason to stop waiting for the others' commits); their errors are read
    and dropped, and so are those of closes not done in time.

    Example:
        >>> import ray
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
        ...              configure_logging=False, ignore_reinit_error=True)
        >>> @ray.remote(num_cpus=0)
        ... class Leaky:
        ...     def close(self):
        ...         raise OSError("env close failed")
        >>> close_all(ray, [Slot(0, 0, Leaky.remote(), 1)], 60)  # no error, none unhandled
    """
    closing = [slot.handle.close.remote() for slot in slots]
    done = set(ray.wait(closing, num_returns=len(closing), timeout=timeout_s)[0])
    for ref in closing:
        if ref not in done:
            drop(ref)
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayError:
            pass

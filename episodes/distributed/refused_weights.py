"""A weights broadcast a runner's policy refuses: the caller's error, not a crash.

A policy whose ``set_weights`` raises (weights of another model: keys or shapes it does not
know) would refuse the same weights in a fresh actor too, so restarting the runner only
repeats the failure until ``max_consecutive_failures``. :func:`read_weights_ack` tells that
refusal (the actor is alive, the policy's own error came back) apart from a dead actor or a
missed deadline, which stay losses the group restarts.

Example:
    >>> err = WeightsRefused("runner 0 (generation 0) refused weights version 1")
    >>> isinstance(err, ValueError)  # bad input, as the caller sees it
    True
"""

from __future__ import annotations

from typing import Any

from episodes.distributed.checks import readable_error
from episodes.distributed.slots import Slot

__all__ = ["WeightsRefused", "raise_refusal", "read_weights_ack"]


class WeightsRefused(ValueError):
    """A runner's policy raised while loading broadcast weights (its ``set_weights``).

    The round's samples are not lost with it: ``sample`` is the :class:`GroupSample` the
    collection would have returned (None until the round is collected), the refusing
    runners' samples included, since their requests ran with the weights they had. Adding
    them keeps every episode's chunks contiguous.

    Example:
        >>> raise WeightsRefused("runner 1 (generation 0) refused weights version 2")
        Traceback (most recent call last):
        ...
        episodes.distributed.refused_weights.WeightsRefused: runner 1 (generation 0) refused \
weights version 2
    """

    sample: Any = None


def read_weights_ack(ray: Any, deadline: Any, slot: Slot, version: int) -> None:
    """Waits for ``slot``'s pending weights acknowledgement (none pending: returns at once).

    Args:
        ray: The ``ray`` module.
        deadline: The collection's :class:`~episodes.distributed.deadline.Deadline`.
        slot: The runner's slot; its ``weights_ack`` is cleared once loaded.
        version: The weights version last pushed to it (the group's current one).

    Raises:
        WeightsRefused: The policy's ``set_weights`` raised (the message names the runner,
            the version and the policy's error); ``weights_ack`` is left to be pushed again.
        Exception: Whatever else reading it raises (a dead actor, the deadline).

    Example:
        >>> slot = Slot(index=0, generation=0, handle=None, num_envs=1)
        >>> read_weights_ack(None, None, slot, 0)  # nothing pending
    """
    if slot.weights_ack is None:
        return
    try:
        deadline.get(ray, slot.weights_ack)
    except ray.exceptions.RayTaskError as err:  # not RayActorError: the actor is alive
        cause = getattr(err, "cause", None) or err
        reason = readable_error(f"{type(cause).__name__}: {cause}").strip().splitlines()
        if isinstance(cause, ray.exceptions.TaskCancelledError):  # how Ray returns an interrupt
            reason = [f"KeyboardInterrupt (or was cancelled: {reason[0] if reason else ''})"]
        raise WeightsRefused(
            f"runner {slot.index} (generation {slot.generation}) refused weights version "
            f"{version}: its policy's set_weights raised {reason[0] if reason else ''}; it "
            "keeps the weights it had and is not restarted, and every collection of it raises "
            "this until set_weights broadcasts weights it can load"
        ) from err
    slot.weights_ack = None


def raise_refusal(refusals: list[WeightsRefused], sample: Any) -> None:
    """Raises the round's first refusal with the round's ``sample`` attached (none: returns).

    ``refusals`` is emptied: the next round starts without them.

    Example:
        >>> raise_refusal([], None)  # no runner refused
        >>> try:
        ...     raise_refusal([WeightsRefused("runner 0 refused")], "the round's sample")
        ... except WeightsRefused as err:
        ...     print(err.sample)
        the round's sample
    """
    if not refusals:
        return
    first = refusals[0]
    refusals.clear()
    first.sample = sample
    raise first

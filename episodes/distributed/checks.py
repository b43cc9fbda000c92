r"""The runner group's argument checks and error text (kept apart to keep the group small).

Example:
    >>> check_timeout(None, "timeout_s"), check_mapping(None, "runner_kwargs")
    (None, {})
    >>> readable_error("\x1b[36mray::RunnerActor.sample()\x1b[39m failed")
    'ray::RunnerActor.sample() failed'
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any, NoReturn

__all__ = [
    "check_mapping",
    "check_picklable",
    "check_runner_kwargs",
    "check_timeout",
    "raise_dead_runners",
    "readable_error",
]

#: Timeouts from this many seconds on (about 31 years) wait without a limit: Ray's waits take
#: milliseconds as a C int64 and overflow above about 9.2e15 s.
NO_LIMIT_S = 1e9

# Terminal control sequences (colours, bold) that Ray puts into its errors' text.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def check_timeout(value: Any, what: str) -> float | None:
    """``value`` as seconds to wait, else a ``ValueError``.

    None, infinity and anything from ``NO_LIMIT_S`` (1e9 s) on mean no limit (Ray's waits would
    overflow on the largest finite ones, after a request started).

    Raises:
        ValueError: ``value`` neither None nor a number of seconds >= 0 (a bool is not one,
            NaN neither).

    Example:
        >>> check_timeout(2, "timeout_s"), check_timeout(float("inf"), "timeout_s")
        (2.0, None)
        >>> check_timeout(1e16, "timeout_s") is None  # more than Ray's waits take: no limit
        True
        >>> check_timeout(True, "timeout_s")
        Traceback (most recent call last):
        ...
        ValueError: timeout_s must be None or a number of seconds >= 0, got True
    """
    # numbers.Real takes numpy's ints and floats; NaN fails ">= 0". Compared as they are: an
    # int beyond floats (10**400) is no OverflowError, it is no limit.
    if value is None:
        return None
    seconds: Any = value if isinstance(value, Real) and not isinstance(value, bool) else -1
    if not seconds >= 0:
        raise ValueError(f"{what} must be None or a number of seconds >= 0, got {value!r}")
    return None if seconds >= NO_LIMIT_S else float(seconds)


def check_mapping(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a new dict (None: an empty one), refusing anything but a mapping.

    Raises:
        TypeError: ``value`` neither None nor a mapping (a list of pairs is refused, not read
            as one).

    Example:
        >>> check_mapping(None, "config"), check_mapping({"num_envs": 2}, "config")
        ({}, {'num_envs': 2})
        >>> check_mapping([("num_envs", 2)], "config")
        Traceback (most recent call last):
        ...
        TypeError: config must be a mapping (a dict) or None, got list
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping (a dict) or None, got {type(value).__name__}")
    return dict(value)


def check_runner_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` if each is an ``EnvRunner`` keyword an actor may pass, else a ``ValueError``.

    Checked by the group before any actor starts or ``write_to`` is made: an actor would refuse
    them only once started. ``env``, ``policy`` and ``seed`` come from the factories and the
    runner's context.

    Example:
        >>> check_runner_kwargs({"window": "vector_steps"})
        {'window': 'vector_steps'}
        >>> check_runner_kwargs({"seed": 3})
        Traceback (most recent call last):
        ...
        ValueError: runner_kwargs: the runner's seed comes from its context: pass seed= to the group
    """
    import inspect

    from episodes.runner import EnvRunner

    if "seed" in kwargs:
        raise ValueError(
            "runner_kwargs: the runner's seed comes from its context: pass seed= to the group"
        )
    taken = set(inspect.signature(EnvRunner).parameters) - {"env", "policy", "seed"}
    unknown = sorted(map(str, set(kwargs) - taken))
    if unknown:
        raise ValueError(f"runner_kwargs: EnvRunner takes no {unknown}; it takes {sorted(taken)}")
    return kwargs


def check_picklable(values: Mapping[str, Any]) -> None:
    """Refuses a value Ray could not send to the actors, naming it (before anything starts).

    Pickled as Ray pickles an actor's arguments (``ray.cloudpickle``).

    Raises:
        TypeError: A value cannot be pickled: the message names its argument and the reason.

    Example:
        >>> import threading
        >>> check_picklable({"config": {"lock": threading.Lock()}})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: config cannot be pickled (Ray sends it to every runner actor): TypeError: ...
    """
    from ray import cloudpickle

    for what, value in values.items():
        try:
            cloudpickle.dumps(value)
        except Exception as err:
            reason = readable_error(str(err)).strip().splitlines()
            raise TypeError(
                f"{what} cannot be pickled (Ray sends it to every runner actor): "
                f"{type(err).__name__}: {reason[0] if reason else ''}; use a module-level "
                "function or a functools.partial of one, holding no lock, file or connection"
            ) from err


def readable_error(text: str) -> str:
    r"""``text`` without terminal control sequences (Ray colours its errors' text).

    Example:
        >>> readable_error("\x1b[1m\x1b[36mray::f()\x1b[39m\x1b[22m (pid=1)")
        'ray::f() (pid=1)'
    """
    return _ANSI.sub("", text)


def raise_dead_runners(ray: Any, slots: Sequence[Any], err: Exception) -> NoReturn:
    """Raises what ``foreach_runner`` raises when a runner actor died: which, and what next.

    Only called after such a failure: every slot's actor is asked for its ``info`` (a dead
    one answers at once with Ray's ``ActorDiedError``). Raised: a copy of ``err`` (of its
    type: an ``ActorDiedError`` stays one, for callers that catch it) whose text names the
    dead runners and what the group does about them; ``err`` itself if none is found dead
    (Ray's error was of an actor only unreachable for a moment: ``ActorUnavailableError``,
    another ``RayActorError``, names no runner dead).

    Example:
        >>> raise_dead_runners(None, [], ValueError("no runner"))
        Traceback (most recent call last):
        ...
        ValueError: no runner
    """
    if not slots:
        raise err
    refs = [slot.handle.info.remote() for slot in slots]
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=30)
    dead = []
    for slot, ref in zip(slots, refs):
        if ref in done:
            try:
                ray.get(ref)
            except ray.exceptions.ActorDiedError:  # not ActorUnavailableError: it may recover
                dead.append(slot)
            except Exception:  # noqa: BLE001 (unreachable for now, or alive: no runner named)
                pass
    if not dead:
        raise err
    names = ", ".join(f"{slot.index} (generation {slot.generation})" for slot in dead)
    named = copy.copy(err)
    named.error_msg = (  # type: ignore[attr-defined]
        f"foreach_runner: runner{'s' * (len(dead) > 1)} {names} died "
        f"({readable_error(str(err)).strip().splitlines()[0]}); the group replaces a dead "
        "runner at its next sample() or sample_async() (that request counts as lost), or "
        f"now with restart_runner({dead[0].index})"
    )
    raise named from err

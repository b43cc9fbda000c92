"""Reset options through the env runner: the full reset's, and disabled mode's per-reset ones.

Two kinds of reset reach a runner's vector env, and options reach each as follows:

* the full reset that starts the runner's episodes (its first ``sample``, and the first after
  ``runner.reset``): ``runner.reset(seed=..., options=...)`` gives that reset's options, passed
  once to ``env.reset`` (gymnasium hands the same dict to every sub-env);
* in disabled autoreset mode, the runner's ``env.reset(options={"reset_mask": mask})`` of the
  sub-envs that ended at a step: ``EnvRunner(..., reset_options=...)`` adds keys beside
  ``reset_mask``, a dict (the same keys at every such reset) or ``reset_options(mask) -> dict``
  (called once per such reset with a copy of the mask: which sub-envs reset).

Next-step and same-step autoresets take no options: gymnasium's vector envs reset those
sub-envs inside ``step``, which has no options argument. ``reset_options`` is refused there
rather than ignored; set what the next episode is to be on the sub-envs instead
(``env.call``/``env.set_attr``), picked up at their next reset.

Unused, nothing changes: the full reset is ``env.reset(seed=seed)`` as before, and disabled
mode's reset is the env's own ``reset``, called with ``reset_mask`` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsIndex, TypeAlias

import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = ["ResetOptions", "Seed", "check_options", "check_reset_options", "masked_reset"]

#: What ``EnvRunner``'s ``reset_options`` takes: a dict, or ``f(mask) -> dict`` (a dict, as
#: gymnasium's ``reset(options=)`` is typed: a read-only mapping is refused, not copied).
ResetOptions: TypeAlias = dict[str, Any] | Callable[[np.ndarray], dict[str, Any]]
#: An env seed as ``EnvRunner`` takes it (see :func:`episodes.seeds.check_env_seed`).
Seed: TypeAlias = SupportsIndex | Sequence[SupportsIndex | None] | None


def check_options(options: Any, what: str = "options") -> dict[str, Any] | None:
    """``options`` for a full reset, copied: None or a dict with str keys and no ``reset_mask``.

    ``reset_mask`` is the runner's: a full reset of some sub-envs would start new episodes in
    the runner for sub-envs whose episodes go on in the env.

    Raises:
        TypeError: ``options`` is neither None nor a dict, or has a key that is no str.
        ValueError: ``options`` has a key ``"reset_mask"``.

    Example:
        >>> check_options({"task": 2}), check_options(None)
        ({'task': 2}, None)
        >>> check_options([("task", 2)])
        Traceback (most recent call last):
        TypeError: options must be None or a dict of reset options, got list [('task', 2)]
    """
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(
            f"{what} must be None or a dict of reset options, got "
            f"{type(options).__name__} {options!r}"
        )
    odd = [k for k in options if not isinstance(k, str)]
    if odd:
        raise TypeError(f"{what} keys must be str (gymnasium's options), got {odd[0]!r}")
    if "reset_mask" in options:
        raise ValueError(
            f"{what} has a key 'reset_mask': it is the runner's, which resets the ended "
            "sub-envs itself in disabled mode (a full reset resets every sub-env); drop it"
        )
    return dict(options)


def check_reset_options(reset_options: Any, mode: AutoresetMode) -> ResetOptions | None:
    """``EnvRunner``'s ``reset_options`` checked: None, a dict (copied) or a callable.

    Refused outside disabled mode, where the env resets sub-envs in ``step``, without options.

    Raises:
        TypeError: A value that is none of those (or a dict as :func:`check_options` refuses).
        ValueError: Not None while ``mode`` is not disabled, or a dict with ``reset_mask``.

    Example:
        >>> check_reset_options({"level": 3}, AutoresetMode.DISABLED)
        {'level': 3}
        >>> check_reset_options({"level": 3}, AutoresetMode.SAME_STEP)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: reset_options is given, but the env's autoreset mode is SAME_STEP: ...
    """
    if reset_options is None:
        return None
    if mode is not AutoresetMode.DISABLED:
        raise ValueError(
            f"reset_options is given, but the env's autoreset mode is {mode.name}: gymnasium "
            "resets its sub-envs inside step(), which takes no options. Only disabled mode, "
            "where the runner calls env.reset itself, can pass them; otherwise set the next "
            "episode's settings on the sub-envs (env.call / env.set_attr)"
        )
    if callable(reset_options):
        return reset_options
    if not isinstance(reset_options, dict):
        raise TypeError(
            "reset_options must be None, a dict of reset options or a callable "
            f"reset_options(mask) -> dict, got {type(reset_options).__name__} {reset_options!r}"
        )
    return check_options(reset_options, "reset_options")


def masked_reset(reset: Callable[..., Any], reset_options: ResetOptions) -> Callable[..., Any]:
    """``reset`` whose ``options`` get ``reset_options``' keys beside the runner's ``reset_mask``.

    A new dict for every reset (gymnasium's vector envs take ``reset_mask`` out of the dict they
    get). A callable gets a copy of the mask and must return a dict without ``reset_mask``:
    anything else raises in ``sample`` after the env stepped, so, as any such failure, the
    runner then needs ``runner.reset()``.

    Example:
        >>> seen = []
        >>> def reset(*, options): seen.append(options); return None, {}
        >>> _ = masked_reset(reset, lambda m: {"n": int(m.sum())})(
        ...     options={"reset_mask": np.array([True, True])})
        >>> sorted(seen[0]), seen[0]["n"]
        (['n', 'reset_mask'], 2)
    """

    def call(*, options: dict[str, Any]) -> Any:
        mask = options["reset_mask"]
        if callable(reset_options):
            given = reset_options(mask.copy())
            if not isinstance(given, dict):
                raise TypeError(
                    "reset_options(mask) must return a dict of reset options, got "
                    f"{type(given).__name__} {given!r}"
                )
            extra: Mapping[str, Any] = check_options(given, "reset_options(mask)'s dict") or {}
        else:
            extra = reset_options
        return reset(options={**extra, "reset_mask": mask})

    return call

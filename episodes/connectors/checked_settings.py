"""Connector settings checked on every assignment, not only by the constructor.

A setting changed after construction (``stack.n = 4``, ``conn.inference = True`` to reuse a
learner connector for acting, ``filt.update = False`` to freeze a filter for evaluation) is
checked as the constructor checks it: a bad value is the constructor's ``TypeError`` or
``ValueError``, and the old value stays. A class names its settings and their checks as
keywords of its class statement; a subclass adds its own to those it inherits.

Example:
    >>> def positive(value):
    ...     if value <= 0:
    ...         raise ValueError(f"Window's size must be > 0, got {value!r}")
    ...     return value
    >>> class Window(CheckedSettings, size=positive):
    ...     def __init__(self, size: int):
    ...         self.size = size
    >>> window = Window(3)
    >>> window.size = 0
    Traceback (most recent call last):
    ...
    ValueError: Window's size must be > 0, got 0
    >>> window.size
    3
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from episodes.indexing import as_flag

__all__ = ["INFERENCE", "CheckedSettings", "flag"]

Check = Callable[[Any], Any]


class CheckedSettings:
    """Base of classes whose named settings are checked whenever they are assigned.

    The class statement's keywords name the settings, each with a check: a callable taking
    the value given and returning the value to keep (``as_flag``'s ``bool`` for a numpy
    bool) or raising. Other attributes are set as usual. ``copy.copy``, ``copy.deepcopy``
    and pickling restore the checked values without checking them again.

    Example:
        >>> import numpy as np
        >>> class Player(CheckedSettings, loud=flag("loud")):
        ...     pass
        >>> player = Player()
        >>> player.loud = np.True_
        >>> player.loud, sorted(Player.setting_checks)
        (True, ['loud'])
        >>> player.loud = "no"
        Traceback (most recent call last):
        ...
        TypeError: loud must be a bool, got str ('no')
        >>> player.loud
        True
    """

    #: The checks of the class's settings, its own and those it inherits, by name.
    setting_checks: ClassVar[Mapping[str, Check]] = {}

    def __init_subclass__(cls, **checks: Check) -> None:
        super().__init_subclass__()
        inherited: dict[str, Check] = {}
        for base in reversed(cls.__mro__[1:]):
            inherited.update(getattr(base, "setting_checks", {}))
        cls.setting_checks = {**inherited, **checks}

    def __setattr__(self, name: str, value: Any) -> None:
        check = self.setting_checks.get(name)
        # The check runs before anything is set: a refused value leaves the old one.
        super().__setattr__(name, value if check is None else check(value))


def flag(name: str) -> Check:
    """The check of a bool setting called ``name`` (``as_flag``: numpy bools too).

    Example:
        >>> import numpy as np
        >>> flag("inference")(np.False_)
        False
    """
    return lambda value: as_flag(value, name)


#: The check of every ``EpisodeConnector``'s ``inference`` setting.
INFERENCE = flag("inference")

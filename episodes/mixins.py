"""Mixins that present their methods as the host class's own.

The episode and the replay buffers are assembled from mixins (one concern per module), but a
user calls ``SingleAgentEpisode.add_env_step``: errors from binding arguments, ``help()`` and
tracebacks should say so, not name a mixin the user never met.

Example:
    >>> class _Reads:
    ...     def get(self, index): ...
    >>> class Store(_Reads): ...
    >>> name_methods_after(Store, _Reads)
    >>> Store.get.__qualname__
    'Store.get'
"""

from __future__ import annotations

import inspect

__all__ = ["name_methods_after"]


def name_methods_after(host: type, *mixins: type) -> None:
    """Renames the public functions of ``mixins`` (their ``__qualname__``) after ``host``.

    Python 3.11+ names the function's qualified name in argument errors
    (``Store.get() missing 1 required positional argument``). Their ``__module__`` becomes
    ``host``'s, so that pickle finds them as ``host``'s attributes. Static and class methods
    are renamed too; properties and names starting with ``_`` are left as they are.

    Args:
        host: The class the mixins are mixed into (the one users call).
        *mixins: Its mixin classes, used by ``host`` alone.

    Example:
        >>> class _Mixin:
        ...     def run(self, steps): ...
        >>> class Host(_Mixin): ...
        >>> name_methods_after(Host, _Mixin)
        >>> try:
        ...     Host().run()
        ... except TypeError as error:
        ...     print(str(error).split("(")[0])
        Host.run
    """
    for mixin in mixins:
        for name, value in vars(mixin).items():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if not name.startswith("_") and inspect.isfunction(value):
                # Both: pickle finds a function by its module and qualified name.
                value.__qualname__ = f"{host.__name__}.{name}"
                value.__module__ = host.__module__

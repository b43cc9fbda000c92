"""The one place that imports Ray, with the install hint when it is missing.

Example:
    >>> require_ray().__name__
    'ray'
"""

from __future__ import annotations

from typing import Any

__all__ = ["INSTALL_HINT", "require_ray"]

INSTALL_HINT = "episodes.distributed needs Ray: pip install 'episodes[ray]'"


def require_ray() -> Any:
    """The ``ray`` module (with ``ray.exceptions`` loaded).

    Raises:
        ImportError: Ray is not installed; the message says how to install it.

    Example:
        >>> ray = require_ray()
        >>> ray.__name__, ray.exceptions.RayActorError.__name__  # the submodule is loaded
        ('ray', 'RayActorError')
    """
    try:
        import ray
        import ray.exceptions  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err
    return ray

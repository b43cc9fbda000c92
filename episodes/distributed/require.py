"""The one place that imports Ray, with the install hint when it is missing.

Example:
    >>> require_ray().__name__
    'ray'
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["INSTALL_HINT", "require_ray"]

INSTALL_HINT = "episodes.distributed needs Ray and Ray Data: pip install 'episodes[ray]'"


def require_ray() -> Any:
    """The ``ray`` module (with ``ray.exceptions`` and Ray Data loaded).

    Ray Data and its ``pyarrow`` are part of the extra: a plain ``pip install ray`` (Ray core
    alone) gets the same hint, not a bare ``ImportError`` from deep inside the package.

    Raises:
        ImportError: Ray, Ray Data or ``pyarrow`` is not installed; the message says how to
            install them. Also where they are installed but their import fails (Ray 2.60
            under ``python -OO``), naming the error.

    Example:
        >>> ray = require_ray()
        >>> ray.__name__, ray.exceptions.RayActorError.__name__  # the submodule is loaded
        ('ray', 'RayActorError')
    """
    try:
        import pyarrow  # noqa: F401
        import ray
        import ray.data  # noqa: F401
        import ray.exceptions  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from err
    except Exception as err:  # installed, but its import fails (Ray 2.60 under python -OO)
        why = " under python -OO, which strips the docstrings Ray reads" * (sys.flags.optimize > 1)
        raise ImportError(
            f"Ray is installed but cannot be imported{why}: {type(err).__name__}: {err}"
        ) from err
    return ray

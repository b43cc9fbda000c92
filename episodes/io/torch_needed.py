"""torch for the paths that need it, imported when they are used.

A numpy or JAX user's install has no torch; ``episodes``, its replay buffers' numpy batches,
``episodes.io`` and the runner work there. The few paths that need torch (the torch datasets
of :mod:`episodes.io.torch_data`, a replay batch asked for with ``device=``) import it here,
so that where it is missing the error says which path needs it and what works without it,
not only numpy's or Python's bare ``No module named 'torch'``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["needed_torch"]


def needed_torch(needs: str, instead: str) -> Any:
    """The ``torch`` module (``torch.utils.data`` loaded), or an ``ImportError`` saying why.

    Args:
        needs: What needs torch, as the error starts (``"episodes.io.torch_data"``).
        instead: What to do without torch, as the error ends.

    Raises:
        ImportError: torch is not installed (its ``name`` is ``"torch"``, as the
            ``ModuleNotFoundError`` it comes from had). An error inside an installed torch's
            own import is left as it is.

    Example:
        >>> needed_torch("device='cpu'", "leave device out").tensor([1.5]).tolist()
        [1.5]
    """
    try:
        import torch.utils.data
    except ModuleNotFoundError as missing:
        if missing.name != "torch":  # torch is there: its own import failed, as it says
            raise
        raise ImportError(
            f"{needs} needs torch, which is not installed here: install it (pip install "
            f"torch), or {instead}",
            name="torch",
        ) from missing
    return torch

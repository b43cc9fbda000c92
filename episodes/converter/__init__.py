"""The bridge from episodes to training data: flat batches and torch rollout storages.

``episodes_to_rollout``, ``Rollout`` and ``bootstrap_values`` need torch and load it on first
use; ``episodes_to_batch`` and the column helpers do not (they give numpy arrays), but live
here because they share the layout rules. Without torch, ``import episodes.converter`` works
and only the torch names are an ``ImportError`` saying so.

Example:
    >>> import numpy as np
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 0.5],
    ...                         len_lookback_buffer=0)
    >>> episodes_to_batch([ep])["rewards"].tolist()
    [1.0, 0.5]
"""

from typing import TYPE_CHECKING, Any

from episodes.converter.bootstrap import bootstrap_truncated_rewards
from episodes.converter.columns import ColumnKeys, time_major
from episodes.converter.groups import group_by_env
from episodes.converter.to_batch import episodes_to_batch

if TYPE_CHECKING:  # the torch names below, typed for checkers without importing torch
    from episodes.converter.to_rollout import Rollout, bootstrap_values, episodes_to_rollout

_NEEDS_TORCH = ("Rollout", "bootstrap_values", "episodes_to_rollout")


def __getattr__(name: str) -> Any:
    if name not in _NEEDS_TORCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    try:
        import torch  # noqa: F401 - only checks that torch is installed
    except ModuleNotFoundError as error:
        if error.name != "torch":
            raise
        raise ImportError(
            f"episodes.converter.{name} needs torch, which is not installed here: install it "
            "(pip install torch), or use episodes_to_batch, which gives numpy arrays"
        ) from error
    return getattr(importlib.import_module("episodes.converter.to_rollout"), name)


__all__ = [
    "ColumnKeys",
    "Rollout",
    "bootstrap_truncated_rewards",
    "bootstrap_values",
    "episodes_to_batch",
    "episodes_to_rollout",
    "group_by_env",
    "time_major",
]

"""Torch on-policy rollout storage: GAE, trajectory padding, mini-batch generators.

This subpackage needs torch; ``import episodes`` does not import it.
"""

try:
    import torch as _torch  # noqa: F401 - only checks that torch is installed
except ModuleNotFoundError as _missing:
    if _missing.name != "torch":
        raise
    raise ImportError(
        "episodes.rollout needs torch, which is not installed here: install it (pip install "
        "torch); episodes, its replay buffers, runner, connectors, episodes.io and "
        "episodes_to_batch work without it"
    ) from _missing

from .circular_buffer import CircularBuffer, HistoryWindows
from .gae import bootstrap_time_outs, compute_gae
from .generators import (
    DistillationBatch,
    RLBatch,
    distillation_generator,
    mini_batch_generator,
    normalize_into,
    normalize_over,
    recurrent_mini_batch_generator,
)
from .select import select_rows
from .storage import RolloutStorage
from .trajectories import (
    TrajectoryLayout,
    pad_with_layout,
    split_and_pad_trajectories,
    trajectory_layout,
    unpad_trajectories,
)
from .transition import HiddenState, Transition

__all__ = [
    "CircularBuffer",
    "DistillationBatch",
    "HiddenState",
    "HistoryWindows",
    "RLBatch",
    "RolloutStorage",
    "TrajectoryLayout",
    "Transition",
    "bootstrap_time_outs",
    "compute_gae",
    "distillation_generator",
    "mini_batch_generator",
    "normalize_into",
    "normalize_over",
    "pad_with_layout",
    "recurrent_mini_batch_generator",
    "select_rows",
    "split_and_pad_trajectories",
    "trajectory_layout",
    "unpad_trajectories",
]

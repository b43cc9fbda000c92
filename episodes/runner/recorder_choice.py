"""Which recorder a runner records with: host blocks, or torch blocks for a tensor env.

The runner picks at its env's first reset, before anything is recorded (moved out of
``env_runner`` to keep that module within its size bound).
"""

from __future__ import annotations

from typing import Any

from episodes.runner.infos import is_tensor
from episodes.runner.metrics import RunnerMetrics
from episodes.runner.recorder import BatchedRecorder
from episodes.structs import flatten

__all__ = ["device_recorder", "holds_tensors"]


def holds_tensors(batch: Any) -> bool:
    """True when every leaf of a batch is a torch tensor (checked without importing torch).

    Observations mixing tensors and arrays are recorded on the host, whichever leaf comes first.

    Example:
        >>> import numpy as np
        >>> holds_tensors({"a": np.zeros(2)}), holds_tensors({})
        (False, False)
    """
    leaves = flatten(batch)[0]
    return bool(leaves) and all(map(is_tensor, leaves))


def device_recorder(
    num_envs: int, mode: Any, lookback: int, metrics: RunnerMetrics, *, vector_steps: bool = False
) -> BatchedRecorder:
    """A ``DeviceRecorder`` (torch blocks), made as ``BatchedRecorder`` is.

    Example:
        >>> from gymnasium.vector import AutoresetMode
        >>> device_recorder(2, AutoresetMode.SAME_STEP, 1, RunnerMetrics()).num_envs
        2
    """
    # Imported here: torch is needed only by envs that yield tensors.
    from episodes.runner.device_recorder import DeviceRecorder

    return DeviceRecorder(num_envs, mode, lookback, metrics, vector_steps=vector_steps)

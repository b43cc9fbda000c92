"""The action and extra-output blocks, allocated from the policy's first outputs before env.step.

Those blocks take the dtypes and shapes of the policy's outputs, so they cannot be allocated
with the observation blocks when a runner's first call begins. Allocated by the first
``env.step``'s recording, a ``num_steps`` too big for them (a wide extra output such as
``[N, 100_000]`` logits) would fail in numpy's or torch's words after the env stepped, leaving
the runner unusable. :func:`allocate_outputs` allocates them once, at the runner's first step,
before ``env.step`` and under :func:`~episodes.runner.sizing.allocating`: the refusal is the
``ValueError`` naming ``num_steps`` that the observation blocks give, and the runner is left
as it was. Later calls find the blocks allocated (they are resized with the others, inside the
same refusal).

Example:
    >>> import numpy as np
    >>> from gymnasium.vector import AutoresetMode
    >>> from episodes.runner.metrics import RunnerMetrics
    >>> from episodes.runner.recorder import BatchedRecorder
    >>> rec = BatchedRecorder(2, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
    >>> rec.begin(4, np.zeros((2, 3)))
    >>> allocate_outputs(rec, np.zeros(2, np.int64), {"logp": np.zeros(2, np.float32)})
    >>> rec.blocks.actions.leaves[0].shape, rec.blocks.extras["logp"].leaves[0].dtype.name
    ((4, 2), 'float32')
"""

from __future__ import annotations

from typing import Any

from episodes.runner.host_values import host_outputs
from episodes.runner.recorder import BatchedRecorder
from episodes.runner.sizing import allocating

__all__ = ["allocate_outputs"]


def allocate_outputs(recorder: BatchedRecorder, actions: Any, extras: dict[str, Any]) -> None:
    """Allocates ``recorder``'s action and extra-output blocks, unless they are allocated.

    The outputs are converted as the recorder's ``step`` converts them (to host arrays, or to
    tensors on a device recorder's device), so the blocks get the dtypes the first row write
    would have given them; the conversion's own errors pass through as they are.

    Raises:
        ValueError: The blocks cannot be allocated (see :func:`allocating`): the message
            names the call's ``num_steps``.

    Example:
        >>> import numpy as np
        >>> from gymnasium.vector import AutoresetMode
        >>> from episodes.runner.metrics import RunnerMetrics
        >>> rec = BatchedRecorder(1, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
        >>> rec.begin(3, np.zeros((1, 1), np.float32))
        >>> allocate_outputs(rec, [1], {})  # a list of ints: an int64 column, as a step writes
        >>> allocate_outputs(rec, np.zeros(1, np.float32), {})  # allocated already: kept
        >>> rec.blocks.actions.leaves[0].dtype.name, rec.blocks.actions.rows
        ('int64', 3)
    """
    device_blocks = getattr(recorder, "device_blocks", None)
    if device_blocks is not None:  # a DeviceRecorder: torch is imported already
        from episodes.runner.device_values import as_device_batch

        blocks = device_blocks
        device = device_blocks.device
        if blocks.actions is not None:
            return
        actions = as_device_batch(actions, device, "the policy's actions")
        extras = {
            key: as_device_batch(value, device, f"the policy's extra output {key!r}")
            for key, value in extras.items()
        }
    else:
        blocks = recorder.blocks
        assert blocks is not None, "begin() first"
        if blocks.actions is not None:
            return
        actions, extras = host_outputs(actions, extras)  # masked entries refused, named
    with allocating(recorder.num_steps):
        blocks.ensure_outputs(actions, extras)

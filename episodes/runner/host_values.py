"""Policy outputs as numpy arrays on the host, whatever array type the policy returned."""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.runner.policy import check_numpy_dtype

__all__ = ["host_array"]


def host_array(value: Any) -> np.ndarray:
    """A numpy array of ``value``; a torch tensor is detached and moved to the host first.

    A policy's outputs may carry its autograd graph: recorded, they are data. A float dtype
    numpy lacks comes as float32, which holds each of its values (a later step's bfloat16,
    the first step's being refused before ``env.step``), rounded into its column as a torch
    env's blocks round it; complex32 comes as complex64.

    Example:
        >>> import torch
        >>> host_array([1, 2]).tolist(), host_array(torch.tensor([0.5], dtype=torch.bfloat16))
        ([1, 2], array([0.5], dtype=float32))
    """
    detach = getattr(value, "detach", None)
    if detach is not None and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = detach().cpu()
        try:
            return np.asarray(value)
        except TypeError:  # a dtype numpy lacks: only here, off the per-step path
            if value.dtype.is_floating_point:
                return np.asarray(value.float())
            if value.dtype.is_complex:
                return np.asarray(value.cfloat())
            check_numpy_dtype(value)  # bit-packed or sub-byte dtypes: no numpy dtype holds them
            raise
    return np.asarray(value)

"""Numpy stand-ins for TorchRL's C++ segment trees, whose extension does not load against the
torch here: TorchRL's own ``PrioritizedSampler`` code computes the priorities, the draws and
the weights; only the storage of ``(p + eps) ** alpha`` is a numpy array.

Patch them in with ``patch_trees(monkeypatch, torchrl_prioritized)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class _Tree:
    neutral = 0.0

    def __init__(self, size: int):
        self.v = np.full(size, self.neutral)

    def __getitem__(self, i: Any) -> torch.Tensor:
        return torch.as_tensor(self.v[np.asarray(i)])

    def __setitem__(self, i: Any, x: Any) -> None:
        self.v[np.asarray(i)] = np.asarray(x, np.float64)


class SumTree(_Tree):
    def query(self, lo: int, hi: int) -> float:
        return float(self.v[lo:hi].sum())

    def scan_lower_bound(self, mass: Any) -> np.ndarray:
        return np.searchsorted(np.cumsum(self.v), np.asarray(mass), side="right")


class MinTree(_Tree):
    neutral = np.inf

    def query(self, lo: int, hi: int) -> float:
        return float(self.v[lo:hi].min())


def patch_trees(monkeypatch: Any, torchrl_prioritized: Any) -> None:
    """Puts the stand-ins where TorchRL's prioritized sampler module looks for its trees."""
    for bits in ("32", "64"):
        monkeypatch.setattr(torchrl_prioritized, f"SumSegmentTreeFp{bits}", SumTree)
        monkeypatch.setattr(torchrl_prioritized, f"MinSegmentTreeFp{bits}", MinTree)

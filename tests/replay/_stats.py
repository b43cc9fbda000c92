"""Chi-square goodness of fit without scipy (Wilson-Hilferty approximation, fine for df >= 5)."""

from __future__ import annotations

import math

import numpy as np


def chi_square_p(observed: np.ndarray, expected: np.ndarray) -> float:
    """p-value of Pearson's statistic with ``len(observed) - 1`` degrees of freedom."""
    observed = np.asarray(observed, np.float64)
    expected = np.asarray(expected, np.float64)
    stat = float(((observed - expected) ** 2 / expected).sum())
    df = len(observed) - 1
    z = ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))

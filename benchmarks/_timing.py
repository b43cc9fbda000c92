"""Shared benchmark timing helper: interleaved repeats, median seconds per name."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (anything else is a usage error, exit 2)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1, number: int = 1
) -> dict[str, float]:
    """Time each callable ``repeats`` times, interleaving them per repeat.

    Interleaving (a, b, a, b, ...) spreads machine noise evenly over the contenders. Each sample
    times ``number`` back-to-back calls (for sub-millisecond operations), divided by ``number``.

    Returns:
        Median wall-clock seconds of one call, per name.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - t0) / number)
    return {name: statistics.median(s) for name, s in samples.items()}

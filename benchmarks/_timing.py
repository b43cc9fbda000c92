"""Shared benchmark helpers: interleaved repeats (median seconds per name), argparse types.

The argparse types check a flag when it is parsed, so that a bad value is a usage error
(exit 2) naming the flag, not a traceback after (or in the middle of) a long run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (anything else is a usage error, exit 2)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def device_name(text: str) -> str:
    """An argparse ``type``: a torch device this machine has (cpu, cuda[:i] or mps).

    As the examples' ``--device``: a typo or a missing GPU is a usage error, not a traceback
    from the first tensor moved there.
    """
    import torch  # here: the benchmarks that take no device need no torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(
                f"{text}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise argparse.ArgumentTypeError(f"{text}: MPS is not available on this machine")
    elif device.type != "cpu":
        raise argparse.ArgumentTypeError(f"{text}: the benchmarks run on cpu, cuda or mps")
    return str(device)


def writable_dir(text: str) -> str:
    """An argparse ``type``: an existing directory this process may create files in."""
    if not os.path.isdir(text):
        why = "is not a directory" if os.path.exists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {why}; give an existing directory")
    if not os.access(text, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: no permission to create files there")
    return text


def json_path(text: str) -> str:
    """An argparse ``type`` for ``--json PATH``: a file that can be written once the run ends.

    Checked before the run, which would otherwise lose its results to a bad path: no
    directory, a parent directory that exists, files creatable there. "" (no file) passes.
    """
    if not text:
        return text
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file path")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        why = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text}: its folder {parent} {why}")
    if os.path.exists(text):
        writable = os.access(text, os.W_OK)
    else:
        writable = os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        raise argparse.ArgumentTypeError(f"{text}: no permission to write it")
    return text


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

"""Runs a storage write under one of torch's grad modes, as the add_transition properties do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def run_in_mode(mode: str, write: Callable[..., Any], *args: Any) -> Any:
    """``write(*args)`` under ``torch.inference_mode()``, ``torch.no_grad()`` or as it is."""
    if mode == "inference":
        with torch.inference_mode():
            return write(*args)
    if mode == "no_grad":
        with torch.no_grad():
            return write(*args)
    return write(*args)

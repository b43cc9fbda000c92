"""Sizes too large to allocate are a ValueError naming them, not torch's unnamed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from episodes.rollout import CircularBuffer, RolloutStorage

MAKERS: dict[str, tuple[Callable[[], Any], str]] = {
    "num_envs beyond int64 (torch: TypeError)": (
        lambda: RolloutStorage("rl", 2**70, 3, [4], [1]),
        r"num_envs=1180591620717411303424, num_transitions_per_env=3: too large to allocate",
    ),
    "a total that overflows (torch: RuntimeError)": (
        lambda: RolloutStorage("rl", 2**40, 2**30, [4], [1]),
        r"num_envs=1099511627776, num_transitions_per_env=1073741824: too large",
    ),
    "more memory than there is (torch: RuntimeError)": (
        lambda: RolloutStorage("rl", 2**20, 2**20, [4], [1]),
        r"num_envs=1048576, num_transitions_per_env=1048576: too large",
    ),
    "hidden states too large": (
        lambda: RolloutStorage("rl", 2, 3, [4], [1], actor_hidden_state=(1, 2**62)),
        r"num_envs=2, num_transitions_per_env=3: too large",
    ),
    "a circular buffer's first item": (
        lambda: CircularBuffer(2**70, 2).append(torch.zeros(2, 3)),
        r"max_len=1180591620717411303424: too large to allocate",
    ),
}


@pytest.mark.parametrize("case", MAKERS)
def test_sizes_too_large_are_named(case: str) -> None:
    make, words = MAKERS[case]
    with pytest.raises(ValueError, match=words):
        make()


def test_other_errors_pass_through() -> None:
    with pytest.raises(TypeError, match="actions_shape"):
        RolloutStorage("rl", 2, 3, [4], 1.5)  # type: ignore[arg-type]


def test_a_buffer_refusing_its_first_item_stays_usable() -> None:
    buf = CircularBuffer(2**70, 2)
    with pytest.raises(ValueError):
        buf.append(torch.zeros(2))
    assert buf.current_length.tolist() == [0, 0]

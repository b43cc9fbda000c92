"""``episodes info`` prints each space on one short line, whatever its bounds."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli.space_text import MAX_CHARS, space_text
from episodes.io import DatasetWriter
from tests.cli._cli import run

WIDE = gym.spaces.Box(np.zeros(772, np.float32), np.linspace(1, 2, 772).astype(np.float32))

CASES = {
    "a wide Box with per-element bounds": (WIDE, "Box(0.0, high in [1.0, 2.0], (772,), float32)"),
    "a Box with one bound": (gym.spaces.Box(-1, 1, (3,)), "Box(-1.0, 1.0, (3,), float32)"),
    "an image Box": (
        gym.spaces.Box(0, 255, (3, 16, 16), np.uint8),
        "Box(0, 255, (3, 16, 16), uint8)",
    ),
    "a Dict holding a wide Box": (
        gym.spaces.Dict({"vec": WIDE, "n": gym.spaces.Discrete(4)}),
        "Dict('n': Discrete(4), 'vec': Box(0.0, high in [1.0, 2.0], (772,), float32))",
    ),
    "a Tuple": (
        gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (2,))]),
        "Tuple(Discrete(2), Box(0.0, 1.0, (2,), float32))",
    ),
    "no space": (None, "None"),
}


@pytest.mark.parametrize(("space", "expected"), CASES.values(), ids=CASES)
def test_space_text(space, expected) -> None:
    assert space_text(space) == expected


def test_other_long_spaces_are_cut_on_one_line() -> None:
    text = space_text(gym.spaces.MultiDiscrete([3] * 500))
    assert "\n" not in text and len(text) == MAX_CHARS and text.endswith("...")


def test_info_prints_a_wide_space_on_one_short_line(tmp_path: Path) -> None:
    observations = [WIDE.sample() for _ in range(4)]
    episode = SingleAgentEpisode(
        observations=observations,
        actions=[0, 1, 0],
        rewards=[1.0] * 3,
        observation_space=WIDE,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(episode)
    out = run("info", tmp_path / "d")
    assert out.returncode == 0, out.stderr
    assert "observation space: Box(0.0, high in [1.0, 2.0], (772,), float32)" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) < 200

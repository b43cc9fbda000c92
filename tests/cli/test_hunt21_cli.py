"""The command line: an env failing mid-record, a stdout it cannot write, a file above DST."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes.cli import main


class _FailsLater(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == 300:
            raise RuntimeError("env exploded\nforged line")
        return np.zeros(2, np.float32), 1.0, self.steps % 7 == 0, False, {}


gym.register("EpisodesFailsLater-v0", entry_point=_FailsLater)


def _dataset(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    assert main(["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--out", str(src)]) == 0
    return src


def test_an_env_failing_mid_record_is_one_escaped_line_and_takes_the_record_back(
    tmp_path, capsys
) -> None:
    out = tmp_path / "out"
    argv = ["record", "EpisodesFailsLater-v0", "--steps", "1000", "--out", str(out)]
    assert main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("episodes: error: EpisodesFailsLater-v0 failed after 256 recorded")
    assert "RuntimeError: env exploded\\nforged line" in lines[0]
    assert not out.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_copy_whose_stdout_cannot_be_written_still_succeeds(tmp_path) -> None:
    src = _dataset(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "episodes", "migrate", str(src), str(tmp_path / "dst")],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    assert "output could not be written" in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert main(["validate", str(tmp_path / "dst")]) == 0


@pytest.mark.parametrize("command", ["migrate", "merge", "filter"])
def test_a_destination_below_a_file_names_the_file(tmp_path, capsys, command) -> None:
    src = _dataset(tmp_path)
    (tmp_path / "f").write_text("")
    dst = str(tmp_path / "f" / "sub")
    argv = [command, str(src), dst] if command == "migrate" else [command, str(src), "--out", dst]
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'f'} is not a directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "src"]

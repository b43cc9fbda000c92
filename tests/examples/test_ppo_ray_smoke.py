"""Smoke test of examples/ppo_ray.py: the CLI end to end with two remote runners.

It checks the wiring (remote sampling, the converter on gathered chunks, the runners' shared
dataset, steps/s and the closing line), not learning: full runs are reported in the README.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FINAL_LINE = re.compile(r"^final_mean_return=(\S+)$", re.MULTILINE)
CURVE_LINE = re.compile(r"^iter +\d+ .* (\d+) steps/s$", re.MULTILINE)


def test_two_remote_runners_train_write_and_print_the_final_line(tmp_path: Path) -> None:
    steps = 2 * 8 * 128  # two iterations of 8 envs (4 per runner) x T = 128
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "ppo_ray.py"),
            "--seed",
            "1",
            "--total-steps",
            str(steps),
            "--log-every",
            "1",
            "--no-progress",
            "--save-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(CURVE_LINE.findall(proc.stdout)) == 2, proc.stdout
    assert re.search(r"^\d+ env steps in [\d.]+ s \(\d+ steps/s\)$", proc.stdout, re.MULTILINE)
    lines = FINAL_LINE.findall(proc.stdout)
    assert len(lines) == 1 and proc.stdout.rstrip().splitlines()[-1].startswith("final_mean")
    value = float(lines[0])
    assert math.isnan(value) or 0.0 < value <= 500.0
    from episodes.io import read_episodes

    saved = list(read_episodes(tmp_path / "data", numpy=True))
    assert sum(len(ep) for ep in saved) == steps

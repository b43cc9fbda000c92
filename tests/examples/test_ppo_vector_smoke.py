"""Smoke tests of examples/ppo_vector.py: a few iterations in process, and the CLI end to end.

They check the wiring (storage shapes, finite losses, the step budget, the closing line), not
learning: the full runs that reach 475 are reported in the README.
"""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FINAL_LINE = re.compile(r"^final_mean_return=(\S+)$", re.MULTILINE)
CURVE_LINE = re.compile(r"^iter +\d+ .* (\d+) steps/s \(collection +(\d+) steps/s\)$", re.MULTILINE)


def load_example() -> ModuleType:
    """Imports ``examples/ppo_vector.py`` as a module (examples/ is not a package)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("_example_ppo_vector", EXAMPLES / "ppo_vector.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_vector_steps_count_the_transitions_trained_on() -> None:
    # The count took every cell, the masked reset steps too (3% more early in training).
    ppo = load_example()
    cfg = ppo.VectorPPOConfig(num_steps=32, num_epochs=1, num_mini_batches=2)
    result = ppo.train(
        0, 2 * 16 * 32, num_envs=16, config=cfg, progress=False, log_every=0,
        window="vector_steps",
    )  # fmt: skip
    assert 0 < result["env_steps"] < 2 * 16 * 32  # CartPole episodes end within 64 steps
    assert result["history"][-1]["env_steps"] == result["env_steps"]


def test_iterations_fill_a_time_major_storage() -> None:
    ppo = load_example()
    cfg = ppo.VectorPPOConfig(num_steps=8, num_epochs=2, num_mini_batches=4)
    result = ppo.train(0, 2 * 64 * 8, num_envs=64, config=cfg, progress=False, log_every=0)
    assert result["env_steps"] == 2 * 64 * 8
    assert result["shapes"] == {
        "observations": (8, 64, 4),
        "actions": (8, 64, 1),
        "returns": (8, 64, 1),
    }
    assert len(result["history"]) == 2
    for entry in result["history"]:
        for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "steps_per_s"):
            assert math.isfinite(entry[key]), (key, entry)
        assert entry["collect_steps_per_s"] >= entry["steps_per_s"] > 0


def test_cli_prints_steps_per_second_and_the_final_line(tmp_path: Path) -> None:
    steps, num_envs = 4096, 128  # one iteration of the default T = 32
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "ppo_vector.py"),
            "--seed",
            "1",
            "--total-steps",
            str(steps),
            "--num-envs",
            str(num_envs),
            "--no-progress",
            "--save-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(CURVE_LINE.findall(proc.stdout)) == 1, proc.stdout  # one line per iteration
    lines = FINAL_LINE.findall(proc.stdout)
    assert len(lines) == 1, proc.stdout
    value = float(lines[0])
    assert math.isfinite(value) and 0.0 < value <= 500.0
    assert proc.stdout.rstrip().splitlines()[-1].startswith("final_mean_return=")
    from episodes.io import read_episodes

    saved = list(read_episodes(tmp_path / "data", numpy=True))
    assert sum(len(ep) for ep in saved) == num_envs * 32


def test_torch_env_iterations_record_on_the_device() -> None:
    ppo = load_example()
    cfg = ppo.VectorPPOConfig(num_steps=8, num_epochs=2, num_mini_batches=4)
    result = ppo.train(
        0, 2 * 64 * 8, num_envs=64, config=cfg, progress=False, log_every=0, torch_env=True
    )
    assert result["env_steps"] == 2 * 64 * 8
    assert result["shapes"]["observations"] == (8, 64, 4)
    for entry in result["history"]:
        assert math.isfinite(entry["policy_loss"]) and math.isfinite(entry["value_loss"])


def test_torch_env_cli_prints_the_final_line() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "ppo_torch_env.py"),
            "--total-steps",
            "4096",
            "--num-envs",
            "128",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.rstrip().splitlines()[-1].startswith("final_mean_return=")

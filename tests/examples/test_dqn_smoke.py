"""Smoke test of examples/dqn_cartpole.py: a short run is wired right (not that it learns).

Learning is shown by full runs (see the README's examples table).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load_dqn():
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(
        "_example_dqn_cartpole", EXAMPLES / "dqn_cartpole.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_dqn_short_run():
    dqn = _load_dqn()
    cfg = dqn.DQNConfig(
        num_steps=16, gradient_steps=4, batch_size=32, learning_starts=64, hidden=32
    )
    result = dqn.train(0, 6 * 4 * 16, num_envs=4, config=cfg, progress=False, log_every=0)
    assert result["env_steps"] == 6 * 4 * 16
    losses = [h["loss"] for h in result["history"] if not math.isnan(h["loss"])]
    assert losses and all(math.isfinite(v) for v in losses)
    shapes = result["shapes"]
    assert shapes["obs"] == (32, 4) and shapes["next_obs"] == (32, 4)
    assert shapes["rewards"] == (32,) and shapes["discounts"] == (32,)
    eps = [h["epsilon"] for h in result["history"]]
    assert eps == sorted(eps, reverse=True) and eps[0] == 1.0


def test_dqn_cli_prints_final_line(capsys):
    dqn = _load_dqn()
    dqn.main(["--seed", "1", "--total-steps", "256", "--no-progress", "--log-every", "0"])
    out = capsys.readouterr().out
    assert "final_mean_return=" in out.splitlines()[-1]

"""Training smoke tests: a few iterations of each example on CartPole, plus each CLI end to end.

They check that the pipeline runs and is wired right (finite losses, [T, N, ...] storages,
batch shapes), not that it learns: learning is shown by the full runs in the examples' notes.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples._load import EXAMPLES, load

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

FINAL_LINE = re.compile(r"^final_mean_return=(\S+)$", re.MULTILINE)


def assert_finite_history(history: list[dict], keys: tuple[str, ...]) -> None:
    assert history
    for entry in history:
        for key in keys:
            assert math.isfinite(entry[key]), (key, entry)


def test_ppo_cartpole_iterations(tmp_path: Path) -> None:
    ppo = load("ppo_cartpole")
    cfg = ppo.PPOConfig(num_steps=32, num_epochs=2, num_mini_batches=4)
    result = ppo.train(
        0,
        3 * 4 * 32,
        num_envs=4,
        config=cfg,
        progress=False,
        log_every=0,
        save_dir=str(tmp_path / "data"),
    )
    assert result["env_steps"] == 3 * 4 * 32
    assert_finite_history(result["history"], ("policy_loss", "value_loss", "entropy", "approx_kl"))
    assert result["shapes"] == {
        "observations": (32, 4, 4),
        "actions": (32, 4, 1),
        "returns": (32, 4, 1),
        "batch_observations": (32, 4),  # 128 samples in 4 mini-batches
        "batch_actions": (32, 1),
    }
    from episodes.io import read_episodes

    saved = list(read_episodes(tmp_path / "data", numpy=True))
    assert sum(len(ep) for ep in saved) == 3 * 4 * 32


def test_ppo_recurrent_iterations() -> None:
    rec = load("ppo_recurrent")
    cfg = rec.RecurrentPPOConfig(num_steps=32, num_epochs=2, num_mini_batches=2, hidden=16)
    result = rec.train(0, 2 * 4 * 32, num_envs=4, config=cfg, progress=False, log_every=0)
    assert_finite_history(result["history"], ("policy_loss", "value_loss", "entropy"))
    shapes = result["shapes"]
    assert shapes["observations"] == (32, 4, 2)  # velocities hidden
    assert shapes["hidden"] == (32, 1, 4, 16)  # [T, num_layers, N, hidden]
    max_len, num_traj = shapes["batch_masks"]
    assert max_len <= 32 and num_traj >= 2  # 2 envs per mini-batch, >= 1 trajectory each
    assert shapes["batch_observations"] == (max_len, num_traj, 2)
    assert shapes["batch_hidden"] == (1, num_traj, 16)
    assert shapes["batch_critic_hidden"] == (1, num_traj, 16)
    assert shapes["batch_actions"] == (32, 2, 1)


def test_recurrent_bootstrap_replays_the_gru() -> None:
    """The stored bootstrap of an ongoing chunk (from the runner's live critic state) equals
    a replay of the critic GRU from the state recorded in the chunk: ``hc`` is recorded right."""
    rec = load("ppo_recurrent")
    torch.manual_seed(0)
    env = rec.make_env(2)
    model = rec.RecurrentActorCritic(2, 2, 8, 1)
    policy = rec.RecurrentSamplingPolicy(model, torch.device("cpu"))
    runner = rec.EnvRunner(env, policy, state_batch_axis=1, seed=0)
    runner.sample(5)
    episodes = runner.sample(5)
    rec.store_bootstrap_values(episodes, runner, model, torch.device("cpu"))
    ongoing = [ep for ep in episodes if not ep.is_done]
    assert ongoing
    for ep in ongoing:
        # Replay the critic from the state recorded at the chunk's first step.
        obs = torch.as_tensor(ep.get_observations(), dtype=torch.float32).unsqueeze(1)
        h0 = torch.as_tensor(ep.get_extra_model_outputs("hc", 0)).unsqueeze(1)
        with torch.no_grad():
            values, _ = model.value(obs, h0)
        assert ep.custom_data["bootstrap_value"] == pytest.approx(float(values[-1, 0]), abs=1e-5)
    env.close()


def test_distill_iterations() -> None:
    distill = load("distill")
    cfg = distill.DistillConfig(num_steps=16, num_epochs=2, gradient_length=4)
    result = distill.train(0, 3 * 4 * 16, num_envs=4, config=cfg, progress=False, log_every=0)
    assert_finite_history(result["history"], ("loss", "accuracy"))
    assert [h["beta"] for h in result["history"]][0] == 1.0
    assert result["shapes"] == {
        "observations": (16, 4, 4),  # the student's noisy view only
        "actions": (16, 4, 1),
        "privileged_actions": (16, 4, 1),
        "batch_observations": (4, 4),
        "batch_privileged_actions": (4, 1),
    }


@pytest.mark.parametrize(
    ("script", "steps"),
    [("ppo_cartpole.py", 2048), ("ppo_recurrent.py", 1024), ("distill.py", 1024)],
)
def test_example_cli_prints_final_line(script: str, steps: int, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            "--seed",
            "1",
            "--total-steps",
            str(steps),
            "--num-envs",
            "4",
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
    lines = FINAL_LINE.findall(proc.stdout)
    assert len(lines) == 1, proc.stdout
    value = float(lines[0])
    assert math.isfinite(value) and 0.0 < value <= 500.0
    assert proc.stdout.rstrip().splitlines()[-1].startswith("final_mean_return=")

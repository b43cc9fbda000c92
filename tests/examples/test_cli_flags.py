"""The examples' command lines: bad flags are usage errors (exit 2), not tracebacks.

Every case stops in argparse (or in the one-line checks before any training), so they run
in process and take milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples._load import load

pytest.importorskip("torch")
pytest.importorskip("gymnasium")


def usage_error(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``main(argv)``, expects argparse's exit 2 and returns its error line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("script", "argv", "flag"),
    [
        ("ppo_cartpole", ["--num-envs", "0"], "--num-envs"),
        ("ppo_cartpole", ["--seed", "-1"], "--seed"),
        ("ppo_cartpole", ["--total-steps", "0"], "--total-steps"),
        ("ppo_cartpole", ["--total-steps", "-5"], "--total-steps"),
        ("dqn_cartpole", ["--num-envs", "-2"], "--num-envs"),
        ("ppo_vector", ["--num-envs", "0"], "--num-envs"),
        ("ppo_vector", ["--window", "bogus"], "--window"),
        ("connector_demo", ["--steps", "1"], "--steps"),
        ("connector_demo", ["--steps", "0"], "--steps"),
        ("connector_demo", ["--num-envs", "0"], "--num-envs"),
    ],
)
def test_bad_flags_are_usage_errors(
    script: str, argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(load(script).main, argv, capsys)
    assert f"argument {flag}" in line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--num-runners", "0"], "argument --num-runners"),
        (["--num-runners", "-1"], "argument --num-runners"),
        (["--num-envs", "8", "--num-runners", "3"], "split evenly"),
    ],
)
def test_ppo_ray_refuses_bad_runner_counts(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray")
    assert needle in usage_error(load("ppo_ray").main, argv, capsys)


@pytest.mark.parametrize("num_envs", ["1", "3", "0"])
def test_offline_ray_data_refuses_an_uneven_split(
    num_envs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(load("offline_ray_data").main, ["--num-envs", num_envs], capsys)
    assert "argument --num-envs" in line


@pytest.mark.parametrize("script", ["ppo_vector", "ppo_torch_env"])
def test_help_lists_window(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    ppo_vector = load("ppo_vector")
    with pytest.raises(SystemExit) as info:
        ppo_vector.main(["--help"], torch_env=script == "ppo_torch_env")
    assert info.value.code == 0
    assert "--window {transitions,vector_steps}" in capsys.readouterr().out


def test_torch_env_on_a_missing_cuda_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ppo_vector = load("ppo_vector")
    with pytest.raises(SystemExit, match="CUDA is not available"):
        ppo_vector.train(0, 64, num_envs=2, device="cuda", progress=False, torch_env=True)


def test_save_dir_appends_to_a_v2_dataset_and_refuses_a_foreign_folder(tmp_path: Path) -> None:
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, dataset_info

    common = load("_ppo_common")

    def episode(action: int) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            observations=[0, 1], actions=[action], rewards=[1.0], len_lookback_buffer=0
        )

    v2 = tmp_path / "v2"
    with DatasetWriter(v2) as writer:
        writer.write_many([episode(0)])
    with common.episode_writer(str(v2)) as writer:
        writer.write_many([episode(1)])
    info = dataset_info(v2)
    assert (info.version, info.num_steps) == (2, 2)

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a dataset")
    with pytest.raises(SystemExit, match="--save-dir") as raised:
        with common.episode_writer(str(foreign)):
            pass
    assert "\n" not in str(raised.value.code)

"""The examples' command lines on bad or unlucky input: one-line errors, not tracebacks.

Every case stops at parse time or before the first sampled step, or runs one tiny iteration;
none starts Ray (``ray.init`` is replaced by a function that fails the test) or trains.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.examples._load import load

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

#: The examples built on ``run_cli`` (shared flags, saving through ``episode_writer``).
RUN_CLI_SCRIPTS = ["ppo_cartpole", "dqn_cartpole", "distill", "ppo_recurrent", "ppo_vector"]
#: Their cheapest run: one iteration of two envs (the Ray examples split them over 2 runners).
TINY = ["--total-steps", "1", "--num-envs", "2", "--no-progress", "--log-every", "0"]


def usage_error(main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``main(argv)``, expects argparse's exit 2 and returns its error line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def one_line_exit(main: Any, argv: list[str]) -> str:
    """Runs ``main(argv)``, expects ``SystemExit("error: ...")`` (exit 1) and returns it."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    message = info.value.code
    assert isinstance(message, str) and message.startswith("error: "), message
    assert "\n" not in message
    return message


@pytest.fixture
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if an example starts Ray (the checks must come before it)."""
    ray = pytest.importorskip("ray")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Ray was started before the --save-dir check")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def cartpole_chunks(num_steps: int = 30) -> Any:
    """A few CartPole-v1 chunks of a random policy, as the examples' runners record them."""
    from episodes.runner import EnvRunner, RandomPolicy

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    try:
        runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        return runner.sample(num_steps)
    finally:
        env.close()


@pytest.fixture
def datasets(tmp_path: Path) -> dict[str, str]:
    """A Pendulum-v1 v2 dataset, CartPole-v1 datasets in v1 and v2, and a plain file."""
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetMetadata, DatasetWriter, EpisodeWriter

    pendulum = gym.make("Pendulum-v1")
    episode = SingleAgentEpisode(
        observations=[pendulum.observation_space.sample() for _ in range(3)],
        actions=[pendulum.action_space.sample() for _ in range(2)],
        rewards=[0.0, 0.0],
        observation_space=pendulum.observation_space,
        action_space=pendulum.action_space,
        len_lookback_buffer=0,
    )
    paths = {name: str(tmp_path / name) for name in ("pend", "cp1", "cp2", "afile")}
    with DatasetWriter(paths["pend"], metadata=DatasetMetadata(env_id="Pendulum-v1")) as w:
        w.write(episode)
    chunks = cartpole_chunks()
    with EpisodeWriter(paths["cp1"]) as w1:
        w1.write_many(chunks)
    with DatasetWriter(paths["cp2"], metadata=DatasetMetadata(env_id="CartPole-v1")) as w2:
        w2.write_many(chunks)
    Path(paths["afile"]).write_text("not a directory")
    return paths


# --- 1. --save-dir: episodes of another env or other spaces are refused --------------------


@pytest.mark.parametrize(
    ("script", "dataset", "needle"),
    [
        *[(script, "pend", "is a dataset of Pendulum-v1") for script in RUN_CLI_SCRIPTS],
        # Wrapped CartPoles: other observations than CartPole-v1's, in v1 and in v2.
        ("ppo_recurrent", "cp1", "other spaces"),
        ("ppo_recurrent", "cp2", "is a dataset of CartPole-v1"),
        ("distill", "cp1", "other spaces"),
        ("distill", "cp2", "is a dataset of CartPole-v1"),
    ],
)
def test_save_dir_of_another_env_is_refused(
    script: str, dataset: str, needle: str, datasets: dict[str, str]
) -> None:
    from episodes.io import dataset_info

    before = dataset_info(datasets[dataset]).num_steps
    message = one_line_exit(load(script).main, [*TINY, "--save-dir", datasets[dataset]])
    assert message.startswith(f"error: --save-dir {datasets[dataset]}: ") and needle in message
    assert dataset_info(datasets[dataset]).num_steps == before  # nothing appended


@pytest.mark.parametrize("dataset", ["cp1", "cp2"])
def test_save_dir_of_the_same_env_is_appended_to(dataset: str, datasets: dict[str, str]) -> None:
    from episodes.io import dataset_info

    common = load("_ppo_common")
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    before = dataset_info(datasets[dataset]).num_steps
    with common.episode_writer(datasets[dataset], env=env) as writer:
        writer.write_many(cartpole_chunks(5))
    env.close()
    assert dataset_info(datasets[dataset]).num_steps == before + 10


def test_save_dir_left_by_a_writer_killed_before_format_json_is_restarted(tmp_path: Path) -> None:
    """EpisodeWriter reopens the names its first steps make; the example's check must too."""
    from episodes.io import EpisodeWriter, dataset_info

    common = load("_ppo_common")
    save = tmp_path / "save"
    save.mkdir()
    (save / "chunks").mkdir()
    (save / "manifest.jsonl").write_bytes(b"")
    (save / ".lock").write_bytes(b"")
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    with common.episode_writer(str(save), env=env) as writer:
        assert isinstance(writer, EpisodeWriter)
        writer.write_many(cartpole_chunks(5))
    env.close()
    assert dataset_info(save).num_steps == 10


@pytest.mark.parametrize("script", ["ppo_ray", "offline_ray_data"])
def test_ray_save_dir_of_another_env_is_refused_before_ray_starts(
    script: str, datasets: dict[str, str], no_ray_start: None, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(load(script).main, ["--save-dir", datasets["pend"]], capsys)
    assert "argument --save-dir" in line and "is a dataset of Pendulum-v1" in line


def test_ray_functions_refuse_another_env_before_ray_starts(
    datasets: dict[str, str], no_ray_start: None
) -> None:
    with pytest.raises(ValueError, match="Pendulum-v1"):
        load("ppo_ray").train(0, 1, num_envs=2, save_dir=datasets["pend"], progress=False)
    with pytest.raises(ValueError, match="Pendulum-v1"):
        load("offline_ray_data").collect(datasets["pend"], 1, 2, seed=0)


# --- 2. --device: an invalid or unavailable device is a usage error ------------------------


@pytest.mark.parametrize("script", [*RUN_CLI_SCRIPTS, "ppo_torch_env", "ppo_ray"])
@pytest.mark.parametrize(
    ("device", "needle"),
    [("bogus", "not a torch device"), ("cuda", "CUDA is not available"), ("meta", "cpu, cuda")],
)
def test_bad_device_is_a_usage_error(
    script: str,
    device: str,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if script == "ppo_torch_env":
        main = load("ppo_vector").main
        argv = ["--device", device]
        line = usage_error(lambda a: main(a, torch_env=True), argv, capsys)
    else:
        line = usage_error(load(script).main, [*TINY, "--device", device], capsys)
    assert "argument --device" in line and needle in line


@pytest.mark.parametrize(
    ("text", "cuda_count", "mps"),
    [("cpu", 0, False), ("cuda", 1, False), ("cuda:0", 1, False), ("mps", 0, True)],
)
def test_device_type_takes_what_the_machine_has(
    text: str, cuda_count: int, mps: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    parser = load("_ppo_common").make_parser("t", total_steps=1, num_envs=1)
    assert parser.parse_args(["--device", text]).device == text


@pytest.mark.parametrize(
    ("text", "cuda_count", "mps", "needle"),
    [("cuda:1", 1, False, "1 CUDA device"), ("mps", 0, False, "MPS is not available")],
)
def test_device_type_refuses_a_missing_device(
    text: str,
    cuda_count: int,
    mps: bool,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    line = usage_error(load("ppo_cartpole").main, [*TINY, "--device", text], capsys)
    assert "argument --device" in line and needle in line


# --- 3. --save-dir naming a file, or a path under one ---------------------------------------


@pytest.mark.parametrize("script", RUN_CLI_SCRIPTS)
@pytest.mark.parametrize("under", ["", "/sub", "/sub/deeper"])
def test_save_dir_on_a_file_is_one_line(script: str, under: str, datasets: dict[str, str]) -> None:
    save_dir = datasets["afile"] + under
    message = one_line_exit(load(script).main, [*TINY, "--save-dir", save_dir])
    assert f"{datasets['afile']} " in message and "not a directory" in message


@pytest.mark.parametrize("script", ["ppo_ray", "offline_ray_data"])
@pytest.mark.parametrize("under", ["", "/sub"])
def test_ray_save_dir_on_a_file_is_refused_before_ray_starts(
    script: str,
    under: str,
    datasets: dict[str, str],
    no_ray_start: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = usage_error(load(script).main, ["--save-dir", datasets["afile"] + under], capsys)
    assert "argument --save-dir" in line and "not a directory" in line


# --- 4. the Ray examples write format v2: their help says so, a v1 dataset is refused -------


def test_ppo_ray_help_describes_v2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        load("ppo_ray").main(["--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "gets a format v2 dataset" in text and "format v1 one is refused" in text
    assert "gets a format v1 dataset" not in text


@pytest.mark.parametrize("script", ["ppo_ray", "offline_ray_data"])
def test_ray_save_dir_v1_is_refused_before_ray_starts(
    script: str, datasets: dict[str, str], no_ray_start: None, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(load(script).main, ["--save-dir", datasets["cp1"]], capsys)
    assert "argument --save-dir" in line and "format v1 dataset" in line
    assert "episodes migrate" in line


def test_offline_ray_data_save_dir_none_is_a_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load("offline_ray_data")
    seen: list[str] = []
    monkeypatch.setattr(example, "run", lambda args, path: seen.append(path))
    monkeypatch.chdir(tmp_path)
    example.main(["--save-dir", "none"])
    assert len(seen) == 1 and not Path(seen[0]).exists()  # removed after the run
    assert list(tmp_path.iterdir()) == []  # no folder named "none"
    with pytest.raises(SystemExit):
        example.main(["--help"])
    assert "'none': a temporary folder" in " ".join(capsys.readouterr().out.split())


# --- 5. ppo_recurrent with fewer envs than mini-batches -------------------------------------


@pytest.mark.parametrize("num_envs", [1, 2, 3])
def test_recurrent_with_few_envs_uses_fewer_mini_batches(num_envs: int) -> None:
    example = load("ppo_recurrent")
    cfg = example.RecurrentPPOConfig(num_steps=8, num_epochs=1, hidden=8)
    result = example.train(0, 1, num_envs=num_envs, config=cfg, progress=False, log_every=0)
    assert result["config"]["num_mini_batches"] == num_envs
    assert result["shapes"]["batch_observations"][1] == 1  # one env per mini-batch


# --- 6. no finished episode: a clear line and exit 1, not final_mean_return=nan -------------


@pytest.mark.parametrize(
    ("script", "argv", "steps"),
    [
        # The teacher balances the pole for its first 64 steps: no episode ends.
        ("distill", ["--total-steps", "1", "--num-envs", "1"], 64),
        ("distill", ["--total-steps", "1000", "--num-envs", "16"], 1024),
        ("ppo_vector", ["--total-steps", "1", "--num-envs", "1", "--seed", "8"], 32),
    ],
)
def test_no_finished_episode_exits_with_a_clear_line(
    script: str, argv: list[str], steps: int, capsys: pytest.CaptureFixture[str]
) -> None:
    message = one_line_exit(load(script).main, [*argv, "--no-progress", "--log-every", "0"])
    assert message == (f"error: no episode finished within {steps} env steps; raise --total-steps")
    assert "final_mean_return" not in capsys.readouterr().out


def test_print_final_refuses_nan_and_prints_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    common = load("_ppo_common")
    with pytest.raises(SystemExit, match="no episode finished within 7 env steps"):
        common.print_final(math.nan, 7)
    common.print_final(21.5, 7)
    assert capsys.readouterr().out == "final_mean_return=21.50\n"


def test_connector_demo_without_finished_episodes_prints_no_nan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    load("connector_demo").main(["--steps", "2", "--num-envs", "1"])
    first = capsys.readouterr().out.splitlines()[0]
    assert "0 finished episodes, no mean return yet" in first and "nan" not in first


# --- 7. --seed beyond numpy's 32 bits --------------------------------------------------------


@pytest.mark.parametrize("script", [*RUN_CLI_SCRIPTS, "ppo_ray", "offline_ray_data"])
@pytest.mark.parametrize("seed", [str(2**32), str(10**30)])
def test_seed_beyond_32_bits_is_a_usage_error(
    script: str, seed: str, no_ray_start: None, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(load(script).main, [*TINY[:4], "--seed", seed], capsys)
    assert "argument --seed" in line and str(2**32 - 1) in line


def test_seed_type_takes_the_whole_32_bit_range() -> None:
    parser = load("_ppo_common").make_parser("t", total_steps=1, num_envs=1)
    assert parser.parse_args(["--seed", str(2**32 - 1)]).seed == 2**32 - 1
    assert parser.parse_args(["--seed", "0"]).seed == 0


# --- 8. DQN below learning_starts -------------------------------------------------------------


def test_dqn_below_learning_starts_still_learns(capsys: pytest.CaptureFixture[str]) -> None:
    dqn = load("dqn_cartpole")
    cfg = dqn.DQNConfig(gradient_steps=2, batch_size=16, hidden=16)
    assert cfg.learning_starts == 1000
    result = dqn.train(0, 800, num_envs=2, config=cfg, progress=False, log_every=0)
    assert result["config"]["learning_starts"] == 800 // 2  # half of --total-steps
    assert any(math.isfinite(h["loss"]) for h in result["history"])
    assert result["shapes"]  # filled at the first update
    assert "learning_starts lowered from 1000 to 400" in capsys.readouterr().out


def test_dqn_budget_rounded_up_past_learning_starts_still_lowers_it() -> None:
    # 900 steps run as 8 iterations of 2 x 64 = 1024 steps; judged against the 1024, the
    # 1000 stayed and only the last iteration learned, though --help promises half of 900.
    dqn = load("dqn_cartpole")
    cfg = dqn.DQNConfig(gradient_steps=1, batch_size=16, hidden=16)
    result = dqn.train(0, 900, num_envs=2, config=cfg, progress=False, log_every=0)
    assert result["config"]["learning_starts"] == 450
    learned = [math.isfinite(h["loss"]) for h in result["history"]]
    assert learned == [False] * 3 + [True] * 5


def test_dqn_help_says_what_a_short_budget_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load("dqn_cartpole").main(["--help"])
    assert "below learning_starts, 1000" in " ".join(capsys.readouterr().out.split())


# --- 9. --stop-at-return must be finite; connector_example has a parser ---------------------


@pytest.mark.parametrize("script", RUN_CLI_SCRIPTS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_stop_at_return_must_be_finite(
    script: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # "=": argparse would read a bare "-inf" as a flag.
    line = usage_error(load(script).main, [*TINY, f"--stop-at-return={value}"], capsys)
    assert "argument --stop-at-return" in line and "finite" in line


def test_connector_example_answers_help_and_refuses_unknown_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = load("connector_example")
    with pytest.raises(SystemExit) as info:
        example.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "hand-recorded episode" in out
    assert "unrecognized arguments: --bogus" in usage_error(example.main, ["--bogus"], capsys)
    example.main([])
    assert capsys.readouterr().out.rstrip().endswith("equal to the un-cut episode's rows: OK")

"""Command-line pins for a bug hunt's findings (each test failed before its fix)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetMetadata, DatasetWriter, dataset_info
from tests.cli._cli import run


def episode(name: str, n: int, ret: float, custom=None) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        name,
        observations=[np.float32(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=[ret / n] * n,
        terminated=True,
        observation_space=gym.spaces.Box(-100, 100, (), np.float32),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    ep.custom_data.update(custom or {})
    return ep


@pytest.fixture
def returns(tmp_path) -> Path:
    """Episodes of returns -2000, -500, 0.5 and 3."""
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        for i, ret in enumerate([-2000.0, -500.0, 0.5, 3.0]):
            writer.write(episode(f"e{i}", 2, ret, {"a": i % 2}))
    return tmp_path / "ds"


def kept(path: Path) -> list[str]:
    return sorted(s.id_ for s in dataset_info(path).episodes)


# ---------------------------------------------------------- 10: negative option values
NUMBERS = {
    "exponent": (["--max-return", "-1e3"], ["e0"]),
    "minus_inf": (["--min-return", "-inf"], ["e0", "e1", "e2", "e3"]),
    "attached": (["--min-return=-1e3", "--max-return", "-5E-1"], ["e1"]),
    "plain": (["--max-return", "-500"], ["e0", "e1"]),
}


@pytest.mark.parametrize(("options", "ids"), NUMBERS.values(), ids=NUMBERS.keys())
def test_negative_numbers_in_any_notation_are_option_values(returns, tmp_path, options, ids):
    # argparse took -1e3 and -inf for options: a usage error (exit code 2).
    assert main(["filter", str(returns), "--out", str(tmp_path / "f"), *options]) == 0
    assert kept(tmp_path / "f") == ids


def test_a_negative_number_for_an_int_option_is_still_checked(tmp_path, capsys):
    assert main(["record", "CartPole-v1", "--steps", "-1e3", "--out", str(tmp_path / "r")]) == 2
    assert "invalid int value: '-1e3'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------- 8: repeated --custom
def test_a_custom_key_given_twice_is_refused(returns, tmp_path, capsys):
    # {a: 1, a: 2} kept only the last test, silently.
    out = tmp_path / "f"
    assert (
        main(["filter", str(returns), "--out", str(out), "--custom", "a=1", "--custom", "a=0"]) == 1
    )
    assert "--custom a= is given twice" in capsys.readouterr().err
    assert not out.exists()
    assert main(["filter", str(returns), "--out", str(out), "--custom", "a=1"]) == 0
    assert kept(out) == ["e1", "e3"]


# ------------------------------------------------------------ 11: info and escapes
def test_info_escapes_control_characters_of_the_dataset(tmp_path, capsys):
    path = tmp_path / "ds"
    meta = DatasetMetadata(env_id="CartPole-v1\x1b[2K\r\x1b[31mforged", policy="x\nreturn:   999")
    text = gym.spaces.Text(5, charset="ab\x1b")
    with DatasetWriter(path, metadata=meta) as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=["a", "b"],
                actions=[0],
                rewards=[1.0],
                observation_space=text,
                action_space=gym.spaces.Discrete(2),
                len_lookback_buffer=0,
            )
        )
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "env_id:   CartPole-v1\\x1b[2K\\r\\x1b[31mforged\n" in out
    assert "policy:   x\\nreturn:   999\n" in out
    assert "charset=\\x1bab" in out
    assert [line for line in out.splitlines() if line.startswith("return:")] == [
        "return:   mean 1  std 0  min 1  max 1"
    ]


# ------------------------------------------------------------ 7: record, empty datasets
def test_record_refuses_an_empty_dataset_of_another_env(tmp_path, capsys):
    # No episodes yet: the header's Pendulum-v1 was not compared, and the dataset took both.
    path = tmp_path / "ds"
    DatasetWriter(path, metadata=DatasetMetadata(env_id="Pendulum-v1")).close()
    assert main(["record", "CartPole-v1", "--steps", "5", "--out", str(path)]) == 1
    assert "is a dataset of Pendulum-v1; record CartPole-v1" in capsys.readouterr().err
    assert dataset_info(path).num_episodes == 0
    assert main(["record", "Pendulum-v1", "--steps", "5", "--out", str(path)]) == 0


# ------------------------------------------ 3, 12: one error line, never a traceback
def test_an_unhashable_data_format_is_one_error_line(returns):
    from episodes.io.shards import seal_line

    lines = (returns / "manifest.jsonl").read_bytes().split(b"\n")
    header, shard = (json.loads(line) for line in lines[:2])
    header.pop("crc32")
    shard.pop("crc32")
    shard["data_format"] = ["arrow"]
    (returns / "manifest.jsonl").write_bytes(seal_line(header) + seal_line(shard))
    for command in ("info", "validate"):
        proc = run(command, returns)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "unknown data_format ['arrow']" in proc.stderr


def test_validate_reports_pieces_without_observations(tmp_path):
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write_many([SingleAgentEpisode("x"), SingleAgentEpisode("x")])
    proc = run("validate", tmp_path / "ds")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "BAD episode 'x': piece at t=0 does not join its predecessor" in proc.stderr


# ------------------------------------------------------------------ 1, 6: Minari
def test_import_minari_runs_no_code_the_dataset_names(returns, tmp_path):
    pytest.importorskip("minari")
    assert (
        main(
            [
                "export",
                str(returns),
                "--to",
                "minari",
                "--dataset-id",
                "toy/d-v0",
                "--root",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )
    meta_path = tmp_path / "m/toy/d-v0/data/metadata.json"
    meta = json.loads(meta_path.read_text())
    del meta["action_space"]
    marker = tmp_path / "PWNED"
    spec = {"id": "Evil-v0", "entry_point": "os:system", "kwargs": {"command": f"touch {marker}"}}
    meta["env_spec"] = json.dumps(
        {
            **spec,
            "reward_threshold": None,
            "nondeterministic": False,
            "max_episode_steps": None,
            "order_enforce": False,
            "disable_env_checker": True,
            "additional_wrappers": [],
            "vector_entry_point": None,
        }
    )
    meta_path.write_text(json.dumps(meta))
    proc = run("import", "minari", meta_path.parent.parent, "--out", tmp_path / "back")
    assert proc.returncode == 1 and "does not store both spaces" in proc.stderr, proc.stderr
    assert not marker.exists()
    assert not os.path.exists(tmp_path / "back")


def test_a_refused_export_is_one_error_line(tmp_path):
    pytest.importorskip("minari")
    bad = SingleAgentEpisode(
        "a",
        observations=[{"x": np.float32(0.5)}] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        observation_space=gym.spaces.Box(0, 1, (), np.float32),
        action_space=gym.spaces.Discrete(2),
    )
    with DatasetWriter(tmp_path / "bad") as writer:
        writer.write(bad)
    proc = run(
        "export",
        tmp_path / "bad",
        "--to",
        "minari",
        "--dataset-id",
        "tt/d-v0",
        "--root",
        tmp_path / "mn",
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "Minari refused the export" in proc.stderr
    assert not (tmp_path / "mn").exists()


@pytest.mark.parametrize("fmt", ["1", "2"])
def test_an_interrupted_record_keeps_what_it_recorded(tmp_path, monkeypatch, capsys, fmt):
    # v2 cleared its uncommitted shard on the way out, and the directory was removed.
    from episodes.io import read_episodes
    from episodes.runner import EnvRunner

    real, calls = EnvRunner.sample, []

    def interrupted(self, num_steps):
        calls.append(num_steps)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, num_steps)

    monkeypatch.setattr(EnvRunner, "sample", interrupted)
    out = tmp_path / "ds"
    argv = ["record", "CartPole-v1", "--steps", "600", "--num-envs", "1", "--out", str(out)]
    assert main([*argv, "--format", fmt, "--seed", "0"]) == 130
    assert "kept" in capsys.readouterr().err
    stored = list(read_episodes(out))
    assert sum(len(e) for e in stored) == 256  # the first sample call's steps


def test_export_no_infos_leaves_varying_infos_out(tmp_path):
    """Infos that change layout between steps are left out, with a warning or by --no-infos."""
    pytest.importorskip("minari")
    from episodes.io import EpisodeWriter, import_minari, read_episodes

    env = gym.make("CartPole-v1")
    obs = [env.observation_space.sample() for _ in range(3)]
    ep = SingleAgentEpisode(
        "e",
        observations=obs,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        infos=[{}, {"a": 1}, {"b": 2.0}],
        observation_space=env.observation_space,
        action_space=env.action_space,
        terminated=True,
        len_lookback_buffer=0,
    )
    with EpisodeWriter(tmp_path / "src") as writer:
        writer.write(ep)
    root = tmp_path / "mn"
    base = ["export", str(tmp_path / "src"), "--to", "minari", "--root", str(root)]
    with pytest.warns(UserWarning, match="infos left out"):  # best effort by default
        assert main([*base, "--dataset-id", "tt/default-v0"]) == 0
    assert main([*base, "--dataset-id", "tt/infos-v0", "--no-infos"]) == 0
    assert import_minari("tt/infos-v0", tmp_path / "back", root=root) == 1
    (back,) = read_episodes(tmp_path / "back")
    assert back.get_infos() == [{}, {}, {}]
    assert back.get_actions().tolist() == [0, 1]


@pytest.mark.parametrize(
    "flags, named",
    [
        pytest.param(["--min-length", "-1"], "--min-length", id="negative-length"),
        pytest.param(["--min-return", "5", "--max-return", "1"], "--min-return", id="crossed"),
    ],
)
def test_filter_errors_name_the_flags_and_validate_counts_shards(tmp_path, capsys, flags, named):
    src = str(tmp_path / "d")
    assert main(["record", "CartPole-v1", "--steps", "12", "--seed", "0", "--out", src]) == 0
    assert main(["validate", src]) == 0
    assert " in 1 shard verified" in capsys.readouterr().out
    assert main(["filter", src, "--out", str(tmp_path / "f"), *flags]) == 1
    err = capsys.readouterr().err
    assert named in err and "min_" not in err and "max_" not in err


def test_python_m_episodes_cli_still_runs():
    """The command line became a package: ``python -m episodes.cli`` runs its __main__."""
    done = subprocess.run(
        [sys.executable, "-m", "episodes.cli", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: episodes")

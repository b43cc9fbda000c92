"""CLI and disk hunt, round 24: what a failed record keeps, full stdout, forged counts.

- A record whose env failed said "this record is taken back" while the episodes it had
  stored (v1: each one; v2: each committed shard) stayed.
- ``validate`` and ``info --json`` printed with a bare ``print``: with stdout on
  ``/dev/full`` they exited 1 with an error line, which reads as "the dataset is bad".
- A forged index row count of ``2**63`` was a raw ``OverflowError`` in every reader; a
  column ``size`` of ``true`` passed ``validate`` as the count 1.
- Deeply nested JSON in a Minari ``metadata.json`` or a ``--custom`` value was a raw
  ``RecursionError``.
- A record appended to a v2 dataset of another seed kept the first record's metadata silently.
"""

from __future__ import annotations

import hashlib
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
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    dataset_info,
    read_episodes,
    validate_dataset,
)
from episodes.io.manifest_lines import seal_lines
from episodes.io.tools import parse_custom_data


class _FailsAt300(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    calls = 0  # over every instance: the record's second call fails

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        _FailsAt300.calls += 1
        if _FailsAt300.calls >= 300:
            raise RuntimeError("env exploded")
        return np.zeros(2, np.float32), 1.0, _FailsAt300.calls % 7 == 0, False, {}


gym.register("EpisodesFailsAt300-v0", entry_point=_FailsAt300)


@pytest.mark.parametrize(
    ("extra", "kept_steps"),
    [(["--format", "1"], 256), (["--shard-mb", "0.001"], 256), ([], 0)],
    ids=["v1", "v2-committed", "v2-nothing-committed"],
)
def test_a_failed_record_says_what_it_keeps(tmp_path, capsys, extra, kept_steps) -> None:
    _FailsAt300.calls = 0
    out = tmp_path / "out"
    argv = ["record", "EpisodesFailsAt300-v0", "--steps", "1000", "--out", str(out), *extra]
    assert main(argv) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "failed after 256 recorded steps (RuntimeError: env exploded)" in line
    if kept_steps:
        assert "stay in" in line and "taken back" not in line
        assert dataset_info(out).num_steps <= kept_steps and dataset_info(out).num_steps > 0
    else:
        assert line.endswith("this record is taken back") and not out.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["validate"], ["info", "--json"]], ids=" ".join)
def test_a_full_stdout_keeps_the_commands_exit_code(tmp_path, command) -> None:
    ds = tmp_path / "ds"
    assert main(["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--out", str(ds)]) == 0
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "episodes", command[0], str(ds), *command[1:]],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    assert "output could not be written" in done.stderr and "error" not in done.stderr


def _forge_index(path: Path, change) -> None:
    """Changes the first shard's index and recomputes its checksums, as a forger would."""
    lines = [json.loads(line) for line in (path / "manifest.jsonl").read_text().splitlines()]
    for obj in lines:
        obj.pop("crc32")
        obj.pop("prev", None)
    index_path = path / "shards" / f"{lines[1]['shard']}.json"
    index = json.loads(index_path.read_text())
    change(index)
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines[1].update(index_sha256=hashlib.sha256(raw).hexdigest(), index_size=len(raw))
    (path / "manifest.jsonl").write_bytes(seal_lines(lines))


def _rows(value):
    def change(index):
        index["episodes"][0]["rows"][1] = value

    return change


def _size_true(index) -> None:
    index["episodes"][0]["meta"]["columns"]["rewards"]["size"] = True


@pytest.mark.parametrize(
    "change",
    [_rows(2**63), _rows(2**64), _size_true],
    ids=["rows-2**63", "rows-2**64", "size-true"],
)
def test_forged_counts_are_corruption_everywhere(tmp_path, change) -> None:
    ds = tmp_path / "ds"
    episode = SingleAgentEpisode(
        "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    with DatasetWriter(ds) as w:
        w.write(episode.to_numpy())
    _forge_index(ds, change)
    with pytest.raises(CorruptDatasetError):
        list(read_episodes(ds))
    report = validate_dataset(ds)
    assert not report.ok and len(report.problems) == 1


def test_a_custom_value_nested_too_deep_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nests too deep"):
        parse_custom_data(["k=" + "[" * 100_000 + "]" * 100_000])


def test_a_record_into_another_seeds_dataset_notes_the_kept_metadata(tmp_path, capsys) -> None:
    ds = str(tmp_path / "ds")
    base = ["record", "CartPole-v1", "--steps", "20", "--out", ds]
    assert main([*base, "--seed", "0"]) == 0
    assert main([*base, "--seed", "0"]) == 0
    # The same seed: the note says the second record repeats the first one's episodes.
    assert "repeats the episodes" in capsys.readouterr().err
    assert main([*base, "--seed", "7", "--num-envs", "4"]) == 0
    err = capsys.readouterr().err
    assert "keeps the metadata of the record that made it (seeds [0], num_envs 1)" in err
    assert dataset_info(ds).num_steps == 60


def test_a_minari_metadata_nested_too_deep_is_corruption(tmp_path) -> None:
    pytest.importorskip("minari")
    from episodes.io import import_minari

    data = tmp_path / "bad-v0" / "data"
    data.mkdir(parents=True)
    (data / "metadata.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptDatasetError, match="not JSON"):
        import_minari(tmp_path / "bad-v0", tmp_path / "out")
    assert not (tmp_path / "out").exists()

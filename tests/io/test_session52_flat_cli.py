"""Session 52: ``episodes export SRC --to npz --out FILE``, the flat arrays in one npz file:
a round trip, the refusals (an existing file, a dataset that cannot be read, observations that
are no numbers), no partial file left behind, and the Minari form's options kept apart."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.cli.errors import CliError
from episodes.cli.npz_export import npz_arrays
from episodes.io import DatasetWriter, EpisodeWriter
from episodes.io.flat_arrays import flat_transitions


def dataset(path: Path) -> Path:
    """Two episodes in three pieces (one cut by the recording), Dict observations, extras."""

    def ep(id_, t0, t1, **kw):
        obs = [{"pos": np.float32([t, -t]), "mode": t % 3} for t in range(t0, t1 + 1)]
        return SingleAgentEpisode(
            id_, observations=obs, actions=np.arange(t0, t1), rewards=np.full(t1 - t0, 0.5),
            extra_model_outputs={"logp": np.full(t1 - t0, -1.0, np.float32)},
            t_started=t0, len_lookback_buffer=0, **kw,
        ).to_numpy()  # fmt: skip

    with DatasetWriter(path, shard_bytes=1) as w:
        w.write_many([ep("a", 0, 2), ep("b", 0, 1), ep("a", 2, 4, terminated=True)])
    return path


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize(
    ("flags", "extra_keys"),
    [([], []), (["--extra-model-outputs"], ["extra_model_outputs/logp"]), (["--done-only"], [])],
)
def test_the_npz_file_loads_without_pickle_and_holds_the_flat_arrays(
    tmp_path, capsys, flags, extra_keys
):
    src = dataset(tmp_path / "src")
    out = tmp_path / "flat.npz"
    assert main(["export", str(src), "--to", "npz", "--out", str(out), *flags]) == 0
    want = flat_transitions(
        src, done_only="--done-only" in flags, extra_model_outputs=bool(extra_keys)
    )
    rows = len(want["rewards"])
    episodes = 1 if "--done-only" in flags else 2
    assert capsys.readouterr().out == f"wrote {rows} transitions of {episodes} episodes to {out}\n"
    with np.load(out, allow_pickle=False) as loaded:
        assert sorted(loaded.files) == sorted(
            ["actions", "rewards", "terminals", "timeouts", *extra_keys]
            + [
                f"{k}/{leaf}"
                for k in ("observations", "next_observations")
                for leaf in ("mode", "pos")
            ]
        )
        for key in loaded.files:
            parts = key.split("/")
            value = want[parts[0]] if len(parts) == 1 else want[parts[0]][parts[1]]
            np.testing.assert_array_equal(loaded[key], value)
            assert loaded[key].dtype == value.dtype
        assert loaded["next_observations/pos"][:, 0].tolist()[:rows] == (
            [1, 2, 3, 4] if episodes == 1 else [1, 2, 3, 4, 1]
        )
        assert loaded["timeouts"].tolist()[-1] == (episodes == 2)  # "b": the recording stopped
    assert names(tmp_path) == ["flat.npz", "src"]  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_existing_file_is_refused_unless_forced(tmp_path, capsys):
    src = dataset(tmp_path / "src")
    out = tmp_path / "flat.npz"
    out.write_bytes(b"keep me")
    assert main(["export", str(src), "--to", "npz", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"episodes: error: --out {out} exists: pass --force to replace it\n"
    assert out.read_bytes() == b"keep me"
    assert main(["export", str(src), "--to", "npz", "--out", str(out), "--force"]) == 0
    assert np.load(out, allow_pickle=False)["rewards"].tolist() == [0.5] * 5
    assert names(tmp_path) == ["flat.npz", "src"]


REFUSED = {
    "not_a_dataset": ("{tmp}/nothing", "{tmp}/f.npz", "does not exist or is not a directory"),
    "a_v1_dataset": ("{tmp}/v1", "{tmp}/f.npz", "format v1 dataset; flat_transitions reads v2"),
    "text_observations": ("{tmp}/text", "{tmp}/f.npz", "holds observations as arrays of dtype <U"),
    "out_a_directory": ("{tmp}/src", "{tmp}", "is a directory: give a file name"),
    "out_in_no_directory": ("{tmp}/src", "{tmp}/no/f.npz", "its directory {tmp}/no does not"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refusals_are_one_line_and_write_nothing(tmp_path, capsys, case):
    dataset(tmp_path / "src")
    EpisodeWriter(tmp_path / "v1").close()
    with DatasetWriter(tmp_path / "text") as w:
        w.write(
            SingleAgentEpisode(
                "t", observations=["ab", "c"], actions=[0], rewards=[1.0],
                observation_space=gym.spaces.Text(3), len_lookback_buffer=0,
            )
        )  # fmt: skip
    before = names(tmp_path)
    src, out, message = (x.format(tmp=tmp_path) for x in REFUSED[case])
    assert main(["export", src, "--to", "npz", "--out", out]) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error: ") and len(err.splitlines()) == 1
    assert message in err
    assert names(tmp_path) == before


USAGE = {
    "npz_without_out": (["--to", "npz"], "the following arguments are required: --out"),
    "minari_without_an_id": (["--to", "minari"], "required: --dataset-id"),
    "npz_with_a_dataset_id": (
        ["--to", "npz", "--out", "f.npz", "--dataset-id", "a/b-v0"],
        "argument --dataset-id: only with --to minari",
    ),
    "npz_with_no_infos": (
        ["--to", "npz", "--out", "f.npz", "--no-infos"],
        "--no-infos: only with --to minari",
    ),
    "minari_with_force": (
        ["--to", "minari", "--dataset-id", "a/b-v0", "--force"],
        "argument --force: only with --to npz",
    ),
    "minari_with_out": (
        ["--to", "minari", "--dataset-id", "a/b-v0", "--out", "x"],
        "--out: only with --to npz",
    ),
}


@pytest.mark.parametrize("case", USAGE)
def test_options_of_the_other_target_are_usage_errors(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    src = dataset(tmp_path / "src")
    flags, message = USAGE[case]
    assert main(["export", str(src), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: episodes export ") and err.splitlines()[-1].endswith(message)
    assert names(tmp_path) == ["src"]


def test_an_interrupted_write_leaves_no_file(tmp_path, monkeypatch):
    src = dataset(tmp_path / "src")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    assert main(["export", str(src), "--to", "npz", "--out", str(tmp_path / "f.npz")]) == 130
    assert names(tmp_path) == ["src"]


def test_leaves_that_would_share_an_npz_key_are_refused():
    flat = {"observations": {"a/b": np.zeros(2), "a": {"b": np.ones(2)}}}
    with pytest.raises(CliError, match="two arrays would be stored as 'observations/a/b'"):
        npz_arrays(flat)
    nested = npz_arrays({"observations": (np.zeros(1), {"x": np.ones(1)}), "rewards": np.ones(1)})
    assert list(nested) == ["observations/0", "observations/1/x", "rewards"]

"""The command line's failure paths, round 20: what a failed write leaves, copies into a mount
point, success lines and plot titles for paths that are not UTF-8, an option's value ``--``,
``filter``'s flag names and a float overflow warning."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, dataset_info, read_episodes, validate_dataset
from tests.cli._cli import run


def episode(id_: str, rewards: list[float] | None = None) -> SingleAgentEpisode:
    rewards = [1.0] if rewards is None else rewards
    return SingleAgentEpisode(
        id_,
        observations=[0] * (len(rewards) + 1),
        actions=[1] * len(rewards),
        rewards=rewards,
        terminated=True,
        len_lookback_buffer=0,
        observation_space=gym.spaces.Discrete(2),
        action_space=gym.spaces.Discrete(2),
    )


def small(path: Path, n: int = 4, rewards: list[float] | None = None) -> Path:
    with DatasetWriter(path, sync=False) as writer:
        writer.write_many(episode(f"e{i}", rewards) for i in range(n))
    return path


def names(path: Path) -> list[str]:
    return sorted(os.listdir(path))


# ------------------------------------ 1. a failed record takes back only what it made
# An env that, before it fails (no episode stored yet), has another process's file written
# where $THEIRS names: what a concurrent record or a user put there meanwhile.
FAILING_ENV = textwrap.dedent(
    """
    import os
    import gymnasium as gym
    import numpy as np

    class FailsLater(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)
        steps = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.steps == 5:
                theirs = os.environ["THEIRS"]
                os.makedirs(os.path.dirname(theirs), exist_ok=True)
                with open(theirs, "w") as f:
                    f.write("theirs")
                raise ValueError("the env broke")
            return np.zeros(2, np.float32), 1.0, False, False, {}

    gym.register("FailsLater-v0", entry_point=FailsLater)
    """
)

# case -> (--out, where the other process writes, the directories left, relative to root)
THEIRS = {
    "a sibling in the new parent": ("runs/new/a", "runs/new/b/manifest.jsonl", ["runs/new/b"]),
    "a file in the new --out": ("runs/new/a", "runs/new/a/notes.txt", ["runs/new/a"]),
    "a file in the given empty --out": ("given", "given/notes.txt", ["given"]),
}


@pytest.mark.parametrize("fmt", ["1", "2"])
@pytest.mark.parametrize("case", THEIRS)
def test_a_failed_record_keeps_what_another_process_put_there(tmp_path, case, fmt):
    out, theirs, kept = THEIRS[case]
    (tmp_path / "failing_env.py").write_text(FAILING_ENV)
    (tmp_path / "given").mkdir()
    path = os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "THEIRS": str(tmp_path / theirs)}
    argv = ["record", "failing_env:FailsLater-v0", "--steps", "20", "--format", fmt]
    proc = run(*argv, "--out", tmp_path / out, env=env, cwd=tmp_path)
    assert proc.returncode == 1 and "the env broke" in proc.stderr
    assert (tmp_path / theirs).read_text() == "theirs"  # it was not this record's to remove
    for directory in kept:  # holding only the other process's file: no manifest, no shards
        assert names(tmp_path / directory) == [Path(theirs).name]
    if case == "a sibling in the new parent":
        assert names(tmp_path / "runs" / "new") == ["b"]  # its own directory went


def test_a_failed_record_into_new_directories_still_removes_them_all(tmp_path):
    from episodes.io.tools import removed_if_failed

    out = tmp_path / "runs" / "new" / "a"
    with pytest.raises(KeyError), removed_if_failed(out):
        DatasetWriter(out).close()
        raise KeyError("the env failed")
    assert names(tmp_path) == []


# ------------------------------------ 2. a copy into an existing empty DST on another mount
COPIES = {
    "migrate": lambda src, dst: ["migrate", src, dst],
    "filter": lambda src, dst: ["filter", src, "--out", dst],
    "merge": lambda src, dst: ["merge", src, "--out", dst],
    "split": lambda src, dst: ["split", src, "--train", dst, "--val", f"{dst}-val"],
}


@pytest.fixture
def mounted(monkeypatch):
    """Makes a directory a mount point: renames and links across its boundary fail (EXDEV)."""
    mounts: list[Path] = []

    def inside(path) -> bool:
        path = Path(os.path.abspath(path))
        return any(path.is_relative_to(m) for m in mounts)

    def guard(real):
        def call(src, dst, *args, **kwargs):
            if inside(src) != inside(dst):
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), None, str(dst))
            return real(src, dst, *args, **kwargs)

        return call

    for name in ("rename", "replace", "link"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))
    return lambda path: mounts.append(Path(os.path.abspath(path)))


@pytest.mark.parametrize("command", sorted(COPIES))
def test_a_copy_fills_an_empty_mount_point(tmp_path, mounted, capsys, command):
    src = small(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir(mode=0o700)
    mounted(dst)
    inode = os.stat(dst).st_ino
    assert main(COPIES[command](str(src), str(dst))) == 0, capsys.readouterr().err
    assert os.stat(dst).st_ino == inode and stat.S_IMODE(os.stat(dst).st_mode) == 0o700
    assert names(dst) == ["manifest.jsonl", "shards"]  # no staged directory left in it
    assert validate_dataset(dst).ok
    assert not [n for n in os.listdir(tmp_path) if ".partial-" in n]  # nor beside it


def test_a_failed_copy_into_a_mount_point_leaves_it_empty(tmp_path, mounted, monkeypatch):
    import episodes.io.tools as tools

    src = small(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    mounted(dst)
    real = tools.place

    def place(staged, final):
        undo = real(staged, final)
        undo()
        raise OSError(errno.EIO, "disk gone", str(final))

    monkeypatch.setattr(tools, "place", place)
    with pytest.raises(OSError, match="disk gone"):
        tools.migrate(src, dst)
    assert names(dst) == [] and names(tmp_path) == ["dst", "src"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_copy_fills_an_empty_dst_whose_parent_is_read_only(tmp_path):
    src = small(tmp_path / "src")
    (tmp_path / "ro" / "dst").mkdir(parents=True)
    (tmp_path / "ro").chmod(0o555)
    try:
        assert main(["migrate", str(src), str(tmp_path / "ro" / "dst")]) == 0
    finally:
        (tmp_path / "ro").chmod(0o755)
    assert names(tmp_path / "ro" / "dst") == ["manifest.jsonl", "shards"]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


# name of a directory inside the empty DST -> whether the next copy into DST removes it
INSIDE = {
    "dead writer": (".dst.partial-{dead}-0123456789abcdef", True),
    "dead writer, DST since renamed": (".old.partial-{dead}-0123456789abcdef", True),
    "live writer": (".dst.partial-{live}-0123456789abcdef", False),
}


@pytest.mark.parametrize("case", INSIDE)
def test_a_killed_copy_inside_dst_is_no_data_and_goes_with_the_next_copy(tmp_path, case):
    src = small(tmp_path / "src")
    dst = tmp_path / "dst"
    template, removed = INSIDE[case]
    leftover = dst / template.format(dead=dead_pid(), live=os.getppid())
    leftover.mkdir(parents=True)
    (leftover / "shards").mkdir()
    (leftover / "shards" / "x.arrow").write_bytes(b"x" * 100)
    assert main(["migrate", str(src), str(dst)]) == 0  # DST still counts as empty
    assert leftover.exists() is not removed
    assert validate_dataset(dst).ok and dataset_info(dst).num_episodes == 4  # not read


def test_a_killed_copy_into_an_empty_dst_leaves_it_for_the_retry(tmp_path):
    src = small(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    script = "import os, sys; from episodes.io import migrate\n"
    script += "import episodes.io.tools as t\n"
    script += "t.place = lambda staged, final: os.kill(os.getpid(), 9)\n"
    script += "migrate(sys.argv[1], sys.argv[2])\n"
    proc = subprocess.run([sys.executable, "-c", script, str(src), str(dst)], timeout=300)
    assert proc.returncode == -9
    assert len(os.listdir(dst)) == 1 and os.listdir(dst)[0].startswith(".dst.partial-")
    assert names(tmp_path) == ["dst", "src"]
    assert run("migrate", src, dst).returncode == 0
    assert names(dst) == ["manifest.jsonl", "shards"]


# ------------------------------------------- 3. success lines on a strict UTF-8 stdout
NOT_UTF8 = os.fsdecode(b"dst\xff")
WRITERS = {
    "migrate": lambda src, dst: ["migrate", src, dst],
    "filter": lambda src, dst: ["filter", src, "--out", dst],
    "merge": lambda src, dst: ["merge", src, "--out", dst],
    "split": lambda src, dst: ["split", src, "--train", dst, "--val", "val"],
    "record": lambda src, dst: ["record", "CartPole-v1", "--steps", "5", "--out", dst],
}


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("name", [NOT_UTF8, "dst\nok: forged"], ids=["not-utf8", "newline"])
def test_a_finished_write_prints_its_line_escaped_and_succeeds(tmp_path, command, name):
    src = small(tmp_path / "src")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    proc = run(*WRITERS[command](src, name), env=env, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.count("\n") == 1  # one line: a newline in the path is escaped
    assert ascii(name)[1:-1] in proc.stdout
    assert dataset_info(tmp_path / name).num_episodes > 0


# -------------------------------------------------- 4. plot of a non-UTF-8 directory
def test_plot_of_a_dataset_under_a_non_utf8_name(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    src = small(tmp_path / NOT_UTF8)
    out = tmp_path / "plot.png"
    assert main(["plot", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 0


# -------------------------------------------- 5. a refused import leaves --out as found
@pytest.fixture
def damaged_minari(tmp_path) -> Path:
    pytest.importorskip("minari")
    from episodes.io import export_minari

    export_minari(small(tmp_path / "ours", n=2), "toy/ours-v0", root=tmp_path / "minari")
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "minari" / "toy" / "ours-v0", damaged)
    part = damaged / "data" / "1" / "part-0.arrow"
    part.write_bytes(part.read_bytes()[:100])
    return damaged


def test_import_refuses_a_symlink_out_before_writing(tmp_path, damaged_minari, capsys):
    (tmp_path / "target").mkdir()
    (tmp_path / "dst").symlink_to("target")
    argv = ["import", "minari", str(tmp_path / "minari" / "toy" / "ours-v0")]
    assert main([*argv, "--out", str(tmp_path / "dst")]) == 1
    assert "is a symbolic link" in capsys.readouterr().err
    assert names(tmp_path / "target") == []


def test_a_refused_import_leaves_an_empty_dir_as_found(tmp_path, damaged_minari, capsys):
    out = tmp_path / "private"
    out.mkdir(mode=0o700)
    assert main(["import", "minari", str(damaged_minari), "--out", str(out)]) == 1
    assert "Not an Arrow file" in capsys.readouterr().err
    assert names(out) == [] and stat.S_IMODE(out.stat().st_mode) == 0o700
    good = tmp_path / "minari" / "toy" / "ours-v0"
    assert main(["import", "minari", str(good), "--out", str(out)]) == 0  # the retry
    assert len(list(read_episodes(out))) == 2


def test_a_refused_import_into_new_directories_removes_them(tmp_path, damaged_minari):
    assert main(["import", "minari", str(damaged_minari), "--out", str(tmp_path / "a/b")]) == 1
    assert not (tmp_path / "a").exists()


# ------------------------------------------------- 6. an option given the value "--"
DASHES = {
    "filter --out": ["filter", "SRC", "--out=--"],
    "merge --out": ["merge", "SRC", "--out=--"],
    "split --train": ["split", "SRC", "--train=--", "--val", "v"],
    "record --out": ["record", "CartPole-v1", "--steps", "5", "--out=--"],
    "export --dataset-id": ["export", "SRC", "--to", "minari", "--dataset-id=--"],
    "plot --out": ["plot", "SRC", "--out=--"],
    "filter --custom": ["filter", "SRC", "--out", "x", "--custom=--"],
}


@pytest.mark.parametrize("case", DASHES)
def test_an_option_given_the_value_dashdash_is_a_usage_error(tmp_path, capsys, case):
    src = str(small(tmp_path / "src"))
    argv = [src if a == "SRC" else a for a in DASHES[case]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: episodes ")
    option = case.split()[1]
    expected = f"error: argument {option}: expected one argument, not -- (a path so named is ./--)"
    assert err.splitlines()[-1].endswith(expected) and "Traceback" not in err
    assert names(tmp_path) == ["src"]


def test_a_path_named_dashdash_is_written_as_dot_slash(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    small(tmp_path / "src")
    assert main(["filter", "src", "--out=./--"]) == 0
    assert dataset_info(tmp_path / "--").num_episodes == 4


# ------------------------------------------ 7. filter's flag names, and only those
FILTER_ERRORS = {
    "a path holding a bound's name": (
        ["--out", "runs/min_return/best"],
        "the destination runs/min_return/best lies inside the source runs/min_return",
    ),
    "a --custom key holding a bound's name": (
        ["--out", "x", "--custom", "max_length=1", "--custom", "max_length=2"],
        "--custom max_length= is given twice; an episode's max_length is one value",
    ),
    "a negative length": (["--out", "x", "--min-length", "-1"], "--min-length must be >= 0"),
    "bounds the wrong way round": (
        ["--out", "x", "--min-return", "2", "--max-return", "1"],
        "--min-return 2.0 is above --max-return 1.0: nothing would pass",
    ),
    "a NaN bound": (["--out", "x", "--max-return", "nan"], "--max-return must be a number"),
}


@pytest.mark.parametrize("case", FILTER_ERRORS)
def test_filter_names_its_flags_in_its_own_errors_only(tmp_path, monkeypatch, capsys, case):
    monkeypatch.chdir(tmp_path)
    small(tmp_path / "runs" / "min_return")
    args, message = FILTER_ERRORS[case]
    assert main(["filter", "runs/min_return", *args]) == 1
    assert message in capsys.readouterr().err


# ------------------------------------------------- 8. float returns past float max
@pytest.mark.parametrize("command", sorted(COPIES))
def test_copying_float_rewards_past_float_max_warns_of_nothing(tmp_path, capsys, command):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        src = small(tmp_path / "src", rewards=[1e308, 1e308])
        assert main(COPIES[command](str(src), str(tmp_path / "dst"))) == 0
    assert capsys.readouterr().err == ""
    copies = [p for p in tmp_path.iterdir() if p.name.startswith("dst")]  # split: two
    returns = [e.ret for p in copies for e in dataset_info(p).episodes]
    assert len(returns) == 4 and not np.isfinite(returns).any()  # inf, stored as null

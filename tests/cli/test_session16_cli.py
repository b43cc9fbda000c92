"""Command-line pins for session 16's hunt: plot titles, interrupts, stopped copies, stdout."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, dataset_info, migrate
from tests.cli._cli import run


def small(path: Path, n: int = 4) -> Path:
    with DatasetWriter(path, sync=False) as writer:
        for i in range(n):
            writer.write(
                SingleAgentEpisode(
                    f"e{i}",
                    observations=[0, 1],
                    actions=[0],
                    rewards=[float(i)],
                    len_lookback_buffer=0,
                    observation_space=gym.spaces.Discrete(2),
                    action_space=gym.spaces.Discrete(2),
                )
            )
    return path


def names(path: Path) -> list[str]:
    return sorted(os.listdir(path))


# ------------------------------------------------------------- plot: "$" in the dataset path
@pytest.mark.parametrize("name", ["a$^$b", "price$_usd$", "cost$5_to$\\x"])
def test_plot_draws_a_dollar_path_literally(tmp_path, monkeypatch, capsys, name):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    titles = []
    real = Figure.savefig

    def savefig(self, *args, **kwargs):
        title = self._suptitle
        titles.append((title.get_text(), title.get_parse_math()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    path = small(tmp_path / name)
    assert main(["plot", str(path), "--out", str(tmp_path / "p.png")]) == 0, capsys.readouterr()
    assert (tmp_path / "p.png").stat().st_size > 0
    assert titles == [(f"{path}: 4 episodes, 4 steps", False)]  # no mathtext


def test_any_plot_failure_is_one_cannot_write_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def broken(self, *args, **kwargs):
        raise ArithmeticError("layout\nfailed")

    monkeypatch.setattr(Figure, "tight_layout", broken)
    out = tmp_path / "p.png"
    assert main(["plot", str(small(tmp_path / "ds")), "--out", str(out)]) == 1
    # One line; since session 31 a failure to draw says so, apart from a failure to write.
    drawn = f"the plot of {tmp_path / 'ds'} for these values (returns from 0 to 3)"
    said = f"episodes: error: cannot draw {drawn}: layout failed; nothing was written to {out}\n"
    assert capsys.readouterr().err == said


# --------------------------------------------------- record: what an interrupt says it left
@pytest.mark.parametrize(
    ("fmt", "before", "said", "after"),
    [
        ("1", "missing", "was removed", False),
        ("2", "missing", "was removed", False),
        ("2", "missing parent", "was removed", False),
        ("2", "empty dir", "nothing was recorded into", True),
    ],
)
def test_record_interrupted_before_storing_says_nothing_was_kept(
    tmp_path, monkeypatch, capsys, fmt, before, said, after
):
    from episodes.runner import EnvRunner

    def interrupted(self, num_steps):
        raise KeyboardInterrupt

    monkeypatch.setattr(EnvRunner, "sample", interrupted)
    out = tmp_path / ("new" if before == "missing parent" else ".") / "ds"
    if before == "empty dir":
        out.mkdir()
    argv = ["record", "CartPole-v1", "--steps", "10", "--format", fmt, "--out", str(out)]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert said in err and "kept" not in err, err
    assert err.endswith("episodes: interrupted\n")
    assert out.exists() is after and not (tmp_path / "new").exists()
    if after:
        assert names(out) == []


def test_record_out_naming_a_file_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "afile"
    out.write_text("mine")
    assert main(["record", "CartPole-v1", "--steps", "10", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"episodes: error: --out {out} exists and is not a directory; give a directory\n"
    assert out.read_text() == "mine"


# ------------------------------------------------- stopped copies: SIGTERM, SIGKILL, leftovers
COPIES = {
    "migrate": ["migrate", "{src}", "{dst}"],
    "merge": ["merge", "{src}", "--out", "{dst}"],
    "split": ["split", "{src}", "--train", "{dst}", "--val", "{dst}v"],
    "filter": ["filter", "{src}", "--out", "{dst}"],
}

# Runs the CLI in a child whose copy signals itself once the staged directory holds a shard.
STOPPED = textwrap.dedent(
    """
    import os, signal, sys
    import episodes.io.tools as tools
    from episodes.cli import main
    real = tools._fill
    def fill(sources, into, *args, **kwargs):
        count = real(sources, into, *args, **kwargs)
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        signal.pause()  # pragma: no cover - the signal ends this
    tools._fill = fill
    sys.exit(main(sys.argv[2:]))
    """
)


def stopped(signame: str, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", STOPPED, signame, *argv], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("command", COPIES)
def test_sigterm_during_a_copy_cleans_up_as_ctrl_c_does(tmp_path, command):
    src = small(tmp_path / "src")
    argv = [a.format(src=src, dst=tmp_path / "out" / "dst") for a in COPIES[command]]
    proc = stopped("SIGTERM", argv)
    assert (proc.returncode, proc.stderr) == (143, "episodes: terminated\n")
    assert names(tmp_path) == ["src"]  # no partial copy, no parent made for it
    assert run(*argv).returncode == 0  # the retry


def test_sigterm_handler_is_restored_after_the_command(tmp_path):
    assert main(["info", str(small(tmp_path / "ds"))]) == 0
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("command", COPIES)
def test_a_killed_copy_leftover_goes_with_the_next_copy(tmp_path, command):
    src = small(tmp_path / "src")
    (tmp_path / "out").mkdir()
    argv = [a.format(src=src, dst=tmp_path / "out" / "dst") for a in COPIES[command]]
    assert stopped("SIGKILL", argv).returncode == -signal.SIGKILL
    left = [n for n in names(tmp_path / "out") if n.startswith(".dst.partial-")]
    assert len(left) == 1 and os.listdir(tmp_path / "out" / left[0])  # a shard in it
    assert run(*argv).returncode == 0
    assert [n for n in names(tmp_path / "out") if n.startswith(".dst")] == []


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()  # reaped: no zombie holds the id
    return child.pid


LEFTOVERS = {  # name of a directory next to DST -> whether the next copy removes it
    "dead writer": (".dst.partial-{dead}-0123456789abcdef", True),
    "live writer": (".dst.partial-{live}-0123456789abcdef", False),
    "dead pid, lock held": (".dst.partial-{dead}-fedcba9876543210", False),
    "no pid (older release)": (".dst.partial-0123456789abcdef", False),
    "another destination": (".dst2.partial-{dead}-0123456789abcdef", False),
    "not hex": (".dst.partial-{dead}-0123456789abcdeg", False),
}


@pytest.mark.parametrize("case", LEFTOVERS)
def test_only_partials_of_gone_writers_are_removed(tmp_path, case):
    src = small(tmp_path / "src")
    template, removed = LEFTOVERS[case]
    leftover = tmp_path / template.format(dead=dead_pid(), live=os.getppid())
    leftover.mkdir()
    (leftover / "shard").write_bytes(b"x" * 100)
    fd = os.open(leftover, os.O_RDONLY)
    try:
        if case == "dead pid, lock held":  # a writer on another host (another pid namespace)
            fcntl.flock(fd, fcntl.LOCK_EX)
        assert migrate(src, tmp_path / "dst") == 4
    finally:
        os.close(fd)
    assert leftover.exists() is not removed
    assert len(dataset_info(tmp_path / "dst").episodes) == 4


# ----------------------------------------------------------------------- a closed stdout
@pytest.mark.parametrize("command", ["record", "info", "validate", "migrate"])
def test_a_closed_stdout_drops_the_output(tmp_path, command):
    src = small(tmp_path / "src")
    argv = {
        "record": ["record", "CartPole-v1", "--steps", "10", "--out", tmp_path / "rec"],
        "info": ["info", src],
        "validate": ["validate", src],
        "migrate": ["migrate", src, tmp_path / "mig"],
    }[command]
    proc = run(*argv, preexec_fn=lambda: os.close(1))
    assert (proc.returncode, proc.stderr) == (0, "")
    if command in ("record", "migrate"):
        assert dataset_info(argv[-1]).num_episodes > 0


def test_a_closed_stdout_keeps_errors_and_their_code(tmp_path):
    proc = run("info", tmp_path / "missing", preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("episodes: error: ")


# ------------------------------------------------------- export: the system's write failure
def test_export_into_an_unwritable_root_names_the_path(tmp_path):
    pytest.importorskip("minari")
    from episodes.io import export_minari

    src = small(tmp_path / "ds")
    blocker = tmp_path / "afile"
    blocker.write_text("")
    root = blocker / "sub"
    with pytest.raises(NotADirectoryError) as caught:
        export_minari(src, "me/x-v0", root=root)
    assert str(root) in str(caught.value)
    proc = run("export", src, "--to", "minari", "--dataset-id", "me/x-v0", "--root", root)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "Not a directory" in proc.stderr and str(root) in proc.stderr
    assert "Minari refused" not in proc.stderr
    assert names(tmp_path) == ["afile", "ds"]

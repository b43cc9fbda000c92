"""Leftovers of a killed save whose pid this process has now, ``remove_stale`` of a str path,
and the CLI's warning format when commands run in several threads (a review of session 45)."""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.cli.errors import warnings_as_lines
from episodes.io.staging import remove_stale, stage
from episodes.replay import EpisodeReplayBuffer


def _leftover(parent: Path, stem: str, pid: int) -> Path:
    """What a save killed midway leaves: a staged directory holding some of its files."""
    path = parent / f".{stem}.partial-{pid}-0123456789abcdef"
    (path / "episodes").mkdir(parents=True)
    (path / "episodes" / "part").write_bytes(b"x" * 100)
    return path


def _buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
        )
    )
    return buf


# name: (how the leftover is cleaned, given the destination)
CLEANERS = {
    "the retried save": lambda final: _buffer().save(final),
    "remove_stale of a Path": lambda final: remove_stale(final),
    "remove_stale of a str": lambda final: remove_stale(str(final)),
}


@pytest.mark.parametrize("clean", CLEANERS.values(), ids=CLEANERS)
def test_a_leftover_under_this_processs_own_pid_is_removed(tmp_path, clean):
    # A restarted container's training process is often pid 1 again: the killed save's pid.
    leftover = _leftover(tmp_path, "replay-000002", os.getpid())
    clean(tmp_path / "replay-000002")
    assert not leftover.exists()


def test_a_live_stage_of_this_process_is_kept(tmp_path):
    live = stage(tmp_path / "dst")
    try:
        assert remove_stale(tmp_path / "dst") == []
        assert remove_stale(str(tmp_path / "dst")) == []
        assert live.path.is_dir()
    finally:
        live.drop()


def test_threads_staging_and_cleaning_one_destination_never_remove_a_live_stage(tmp_path):
    final = tmp_path / "dst"
    lost: list[Path] = []

    def stager() -> None:
        for _ in range(40):
            staged = stage(final)
            if not staged.path.is_dir():
                lost.append(staged.path)
            staged.drop()

    def cleaner() -> None:
        for _ in range(200):
            remove_stale(final)

    threads = [threading.Thread(target=f) for f in (stager, stager, cleaner)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert lost == []


def test_a_leftover_of_another_live_pid_is_kept(tmp_path):
    leftover = _leftover(tmp_path, "dst", os.getppid())  # the parent: alive, not this process
    assert remove_stale(tmp_path / "dst") == []
    assert leftover.exists()


def test_commands_in_two_threads_put_pythons_warning_format_back():
    original = warnings.formatwarning
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with warnings_as_lines():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with warnings_as_lines():
            second_in.set()
            first_out.wait(10)
            assert warnings.formatwarning is not original  # still one command running

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.formatwarning is original
    with warnings_as_lines(), warnings_as_lines():
        pass
    assert warnings.formatwarning is original

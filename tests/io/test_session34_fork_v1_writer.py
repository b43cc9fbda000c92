"""A format v1 ``EpisodeWriter`` belongs to the process that opened it, as a v2 writer does.

A forked child used the inherited writer as a second writer outside the dataset's lock: after
the parent closed, a new writer took the lock and removed the child's chunk as unlisted while
the child went on to list it (a manifest naming a missing chunk), and parent and child wrote
at once through one writer that the lock was meant to keep alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetError, EpisodeWriter, read_episodes, validate_dataset

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")


def ep(name: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name, observations=[0, 1], actions=[1], rewards=[1.0], len_lookback_buffer=0
    )


def _refused(call: Callable[[], object]) -> bool:
    try:
        call()
    except DatasetError as err:
        return "forked child" in str(err) and "open a new EpisodeWriter" in str(err)
    return False


CHILD_ACTIONS: dict[str, Callable[[EpisodeWriter], bool]] = {
    "write": lambda w: _refused(lambda: w.write(ep("c1"))),
    "write_many": lambda w: _refused(lambda: w.write_many([ep("c1"), ep("c2")])),
    "close": lambda w: w.close() is None and _refused(lambda: w.write(ep("c1"))) is False,
}


def _run_in_child(action: Callable[[EpisodeWriter], bool], w: EpisodeWriter) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = 0 if action(w) else 2
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("child", sorted(CHILD_ACTIONS))
def test_a_forked_child_cannot_write_through_the_parents_writer(tmp_path: Path, child) -> None:
    path = tmp_path / "d"
    w = EpisodeWriter(path, sync=False)
    w.write(ep("p1"))
    assert _run_in_child(CHILD_ACTIONS[child], w) == 0
    w.write(ep("p2"))
    w.close()
    assert [e.id_ for e in read_episodes(path)] == ["p1", "p2"]
    assert validate_dataset(path).problems == []
    assert not [p for p in (path / "chunks").iterdir() if p.name.startswith(".tmp")]


def test_a_new_writer_in_the_child_waits_for_the_lock_as_another_process(tmp_path: Path) -> None:
    path = tmp_path / "d"
    parent = EpisodeWriter(path, sync=False)

    def fresh(_: EpisodeWriter) -> bool:
        try:
            EpisodeWriter(path, sync=False)
        except DatasetError as err:  # the parent holds the dataset: one writer at a time
            return "locked" in str(err).lower() or "another" in str(err).lower()
        return False

    assert _run_in_child(fresh, parent) == 0
    parent.close()
    with EpisodeWriter(path, sync=False) as again:  # the parent released it
        again.write(ep("p1"))
    assert [e.id_ for e in read_episodes(path)] == ["p1"]

"""A writer dropped without ``close()`` (an error path without a ``with`` block) gives back its
descriptors and locks when it is collected, as a Python file does, with a ``ResourceWarning``.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, read_episodes

WRITERS = {"v1": EpisodeWriter, "v2": DatasetWriter}


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _drop_one(writer_cls: type, path: Path) -> None:
    writer = writer_cls(path)
    writer.write(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0]))
    # No close: the caller hit an error and let go of the writer.


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@pytest.mark.parametrize("version", list(WRITERS))
def test_dropped_writers_close_their_descriptors(tmp_path: Path, version: str) -> None:
    writer_cls = WRITERS[version]
    _drop_one(writer_cls, tmp_path / "d")  # the first creates the dataset
    gc.collect()
    before = _open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            _drop_one(writer_cls, tmp_path / "d")
            gc.collect()
    assert _open_fds() == before
    assert any("unclosed" in str(w.message) and w.category is ResourceWarning for w in caught)
    # The lock went with them: a writer of this process opens the dataset again.
    with writer_cls(tmp_path / "d") as writer:
        writer.write(SingleAgentEpisode(observations=[5], len_lookback_buffer=0))
    # v1 commits each write, v2 what a writer flushes or closes: the dropped ones' buffers are
    # lost, as an uncommitted write is.
    read = list(read_episodes(tmp_path / "d"))
    assert len(read) == (22 if version == "v1" else 1)
    assert read[-1].get_observations() == [5] or read[-1].get_observations().tolist() == [5]


@pytest.mark.parametrize("version", list(WRITERS))
def test_closed_writers_warn_of_nothing(tmp_path: Path, version: str) -> None:
    # The warning would come from a weakref.finalize callback, where an "error" filter cannot
    # raise: record the warnings (and anything raised unraisably) and look at them instead.
    unraisable: list[object] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "unraisablehook", unraisable.append)
            with WRITERS[version](tmp_path / "d") as writer:
                writer.write(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0]))
            del writer
            gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    assert unraisable == []

"""Episodes, datasets and fixtures shared by the index-cache tests
(tests/io/test_session54_index_cache.py, test_session54_cache_review.py,
test_session55_cache_mutants.py).

pytest finds a fixture among a test module's names, so a module using the fixtures here
names them at its top level (``settled_now = _cache_datasets.settled_now``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, index_cache, shard_reader


def episode(id_: Any, n: int = 2, start: float = 0) -> SingleAgentEpisode:
    """``n`` steps of episode ``id_``; observations ``[start + t] * 3`` as float32."""
    obs = [np.full(3, start + i, np.float32) for i in range(n + 1)]
    return SingleAgentEpisode(
        id_, observations=obs, actions=list(range(n)), rewards=[1.0] * n, len_lookback_buffer=0
    )


def write_dataset(path: Path, fmt: str, episodes: list[SingleAgentEpisode], **kw: Any) -> None:
    """Writes (or appends) ``episodes`` to a ``"v1"`` or ``"v2"`` dataset; ``kw`` goes to v2's."""
    if fmt == "v1":
        with EpisodeWriter(path, sync=False) as w:
            w.write_many(episodes)
    else:
        with DatasetWriter(path, sync=False, **kw) as w:
            w.write_many(episodes)


@pytest.fixture(autouse=True)
def nothing_kept() -> Any:
    """Each test starts and ends with nothing kept, whatever the test before it kept."""
    index_cache.forget_datasets()
    yield
    index_cache.forget_datasets()


@pytest.fixture
def settled_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled at once: a shard opened once is reused by the next call."""
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    time.sleep(0.02)  # past the timestamp granularity of the files just written


@pytest.fixture
def index_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The shard indexes the v2 reader parses (a reused shard parses none)."""
    seen: list[str] = []
    real = shard_reader.read_index

    def counted(raw: bytes, entry: Any, where: str, **kw: Any) -> Any:
        seen.append(entry.name)
        return real(raw, entry, where, **kw)

    monkeypatch.setattr(shard_reader, "read_index", counted)
    return seen


def fds_under(root: Path) -> int:
    """Descriptors this process holds open on files under ``root``.

    Only those: in a whole-suite run other libraries' threads (Ray's, a collector's) open and
    close descriptors of their own at any time, so a count of all of them is not this test's.
    """
    prefix = os.path.realpath(root) + os.sep
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since listed
            continue
        held += target.startswith(prefix)
    return held

"""Random sequences of writes, appends, deletions and loads: a kept load is a fresh load.

``episodes.io.index_cache`` keeps, per process, a v1 dataset's parsed manifest and a v2
dataset's open ``Dataset``. The claim checked here: whatever happened to the files in
between, a ``load_episode``/``load_episodes`` call that may reuse what was kept gives what a
fresh read (nothing kept) gives, field by field, and raises exactly when the fresh read
raises, with the same exception type.

A shard is reused only once its files last changed ``SETTLED_NS`` before it was opened. A
file's ctime cannot be set back (``os.utime`` into the past sets it to now), so the machine
settles files by moving the clock ``index_cache`` reads forward instead, and a write moves
it back: what was written after a settling is recent again, as it would be for real.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    index_cache,
    load_episode,
    load_episodes,
)
from episodes.io.values import id_key

SLOTS = ["p0", "p1", "p2"]
FORMATS = ["v1", "v2", "v2-parquet"]
IDS: list[Any] = ["a", "b", 1, (1, "x")]
LOOKUPS: list[Any] = [*IDS, 1.0, "zz"]  # 1.0: not the id 1; "zz": never written
#: How far a settling moves the clock: past SETTLED_NS.
SETTLE_NS = index_cache.SETTLED_NS + 1_000_000_000


class _Clock:
    """``index_cache``'s ``time``: the real clock, ``offset`` nanoseconds ahead."""

    def __init__(self) -> None:
        self.offset = 0

    def time_ns(self) -> int:
        return time.time_ns() + self.offset


def _outcome(call: Any) -> Any:
    """What a load gives: its episodes, or the type of what it raised."""
    try:
        return call()
    except (DatasetError, OSError, ValueError, TypeError) as err:
        return type(err)


def _fresh(call: Any) -> Any:
    """``call``'s outcome with nothing kept; what was kept is kept as it was."""
    v2, v1 = index_cache._v2.copy(), index_cache._v1._kept.copy()
    index_cache._v2.clear()
    index_cache._v1.drop()
    try:
        return _outcome(call)
    finally:
        index_cache.forget_datasets()  # what the fresh load kept
        index_cache._v2.update(v2)
        index_cache._v1._kept.update(v1)


def _fields(ep: SingleAgentEpisode) -> tuple[Any, ...]:
    return (
        id_key(ep.id_),
        ep.t_started,
        ep.t,
        len(ep),
        ep.is_numpy,
        ep.is_terminated,
        ep.is_truncated,
        np.asarray(ep.get_observations()).tolist(),
        np.asarray(ep.get_actions()).tolist(),
        np.asarray(ep.get_rewards()).tolist(),
    )


def assert_same(kept: Any, fresh: Any) -> None:
    """``kept`` and ``fresh`` are the same outcome: equal episodes or the same error type."""
    if isinstance(fresh, type) or isinstance(kept, type):
        assert kept is fresh, (kept, fresh)
        return
    assert len(kept) == len(fresh)
    for a, b in zip(kept, fresh):
        assert _fields(a) == _fields(b)
        assert a == b


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="cache-props-"))
        self.clock = _Clock()
        self.real_time = index_cache.time
        index_cache.time = self.clock  # type: ignore[assignment]
        index_cache.forget_datasets()
        self.formats: dict[str, str] = {}  # slot -> format, for slots holding a dataset
        self.last: dict[tuple[str, str], SingleAgentEpisode] = {}  # (slot, id_key) -> last piece
        self.start = 0

    def teardown(self) -> None:
        index_cache.time = self.real_time  # type: ignore[assignment]
        index_cache.forget_datasets()
        shutil.rmtree(self.base, ignore_errors=True)

    # ---------------------------------------------------------------- changes
    def _episode(self, id_: Any, n: int) -> SingleAgentEpisode:
        self.start += 1
        obs = [np.full(2, self.start * 10 + i, np.float32) for i in range(n + 1)]
        return SingleAgentEpisode(
            id_, observations=obs, actions=list(range(n)), rewards=[0.5] * n, len_lookback_buffer=0
        )

    def _write(self, slot: str, episodes: list[SingleAgentEpisode]) -> None:
        fmt = self.formats[slot]
        path = self.base / slot
        if fmt == "v1":
            with EpisodeWriter(path, sync=False) as w:
                w.write_many(episodes)
        else:
            data_format = "parquet" if fmt == "v2-parquet" else "arrow"
            with DatasetWriter(path, sync=False, data_format=data_format) as w:
                w.write_many(episodes)
        for ep in episodes:
            self.last[(slot, id_key(ep.id_))] = ep
        self.clock.offset = 0  # what was just written is recent
        time.sleep(0.02)  # past the file system's timestamp granularity of the write

    def _create(self, slot: str, fmt: str, ids: list[Any], n: int) -> None:
        shutil.rmtree(self.base / slot, ignore_errors=True)
        self.last = {k: v for k, v in self.last.items() if k[0] != slot}
        self.formats[slot] = fmt
        self._write(slot, [self._episode(x, n) for x in ids])

    @rule(
        slot=st.sampled_from(SLOTS),
        fmt=st.sampled_from(FORMATS),
        ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique_by=id_key),
        n=st.integers(0, 3),
    )
    def write_new(self, slot: str, fmt: str, ids: list[Any], n: int) -> None:
        """A new dataset at ``slot`` (whatever was there removed first)."""
        self._create(slot, fmt, ids, n)

    @precondition(lambda self: bool(self.formats))
    @rule(
        data=st.data(),
        ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=2, unique_by=id_key),
        n=st.integers(0, 2),
    )
    def append(self, data: Any, ids: list[Any], n: int) -> None:
        """Appends pieces: the next piece of an id written before, else a new episode.

        A new episode under an id already written starts at t=0 again: both reads refuse
        the id's pieces as not joining.
        """
        slot = data.draw(st.sampled_from(sorted(self.formats)))
        pieces = []
        for x in ids:
            last = self.last.get((slot, id_key(x)))
            if last is not None and not last.is_done and data.draw(st.booleans()):
                piece = last.cut()
                for _ in range(n + 1):
                    self.start += 1
                    end = data.draw(st.booleans())
                    piece.add_env_step(
                        np.full(2, self.start, np.float32), 1, 2.0, terminated=end and _ == n
                    )
                pieces.append(piece)
            else:
                pieces.append(self._episode(x, n))
        self._write(slot, pieces)

    @precondition(lambda self: bool(self.formats))
    @rule(data=st.data(), recreate=st.booleans(), fmt=st.sampled_from(FORMATS))
    def delete(self, data: Any, recreate: bool, fmt: str) -> None:
        """Removes a dataset, and maybe writes another at once at the same path."""
        slot = data.draw(st.sampled_from(sorted(self.formats)))
        shutil.rmtree(self.base / slot)
        del self.formats[slot]
        self.last = {k: v for k, v in self.last.items() if k[0] != slot}
        if recreate:
            self._create(slot, fmt, [data.draw(st.sampled_from(IDS))], 1)

    @rule()
    def settle(self) -> None:
        """Every file written so far has last changed more than SETTLED_NS ago."""
        self.clock.offset = SETTLE_NS

    @precondition(lambda self: bool(self.formats))
    @rule(data=st.data())
    def touch_into_the_past(self, data: Any) -> None:
        """``os.utime`` into the past on every file of a dataset (its ctime becomes now)."""
        slot = data.draw(st.sampled_from(sorted(self.formats)))
        past = time.time_ns() - 10 * SETTLE_NS
        for f in (self.base / slot).rglob("*"):
            if f.is_file() and not f.is_symlink():
                os.utime(f, ns=(past, past))
        self.clock.offset = 0
        time.sleep(0.02)

    @rule()
    def forget(self) -> None:
        index_cache.forget_datasets()

    # ---------------------------------------------------------------- loads
    @rule(
        slot=st.sampled_from(SLOTS),
        ids=st.lists(st.sampled_from(LOOKUPS), min_size=1, max_size=3),
        numpy=st.sampled_from([None, True, False]),
    )
    def load(self, slot: str, ids: list[Any], numpy: bool | None) -> None:
        path = self.base / slot
        if len(ids) == 1:
            call: Any = lambda: [load_episode(path, ids[0], numpy=numpy)]  # noqa: E731
        else:
            call = lambda: load_episodes(path, ids, numpy=numpy)  # noqa: E731
        assert_same(_outcome(call), _fresh(call))

    @invariant()
    def every_id_loads_as_a_fresh_read_loads_it(self) -> None:
        for slot in SLOTS:
            path = self.base / slot
            for x in LOOKUPS:
                call = lambda: [load_episode(path, x)]  # noqa: E731, B023
                # Twice: the first may keep (or settle) what the second reuses.
                for _ in range(2):
                    assert_same(_outcome(call), _fresh(call))
        assert index_cache.kept_datasets() <= 2 * index_cache.MAX_DATASETS


CacheMachine.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCacheMachine = CacheMachine.TestCase


def test_the_machine_reuses_what_it_kept_at_all() -> None:
    """(The machine could pass with nothing ever reused: a settled shard is reused.)"""
    machine = CacheMachine()
    try:
        machine.write_new("p0", "v2", ["a", "b"], 2)
        machine.settle()
        load_episode(machine.base / "p0", "a")
        (lent,) = index_cache._v2.values()
        ds = lent.ds
        assert len(ds.open_shards()) == 1
        got = load_episode(machine.base / "p0", "b")
        (lent,) = index_cache._v2.values()
        assert lent.ds is ds and lent.reused
        assert_same([got], _fresh(lambda: [load_episode(machine.base / "p0", "b")]))
    finally:
        machine.teardown()


@pytest.fixture(autouse=True)
def _clean() -> Any:
    index_cache.forget_datasets()
    yield
    index_cache.forget_datasets()

"""Behaviour that hand-made mutants of ``episodes.io.shard_writer``, ``episodes.io.shard_reader``
and ``episodes.io.dataset_dir`` showed no test pinned (session 45, third batch).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Datasets are written with ``DatasetWriter`` and read back with ``Dataset``; what is read is
compared against the episodes written (their steps sliced in plain Python). A full disk is an
``os.fsync`` that fails; a Ctrl-C between an episode reaching the shard's file and its buffering
comes from ``interrupt_after_streaming`` (tests.io.test_hunt_fixes_writer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    NotADatasetError,
)
from tests.io.test_hunt_fixes_writer import interrupt_after_streaming


def _episode(id_: str, steps: int, end: str = "terminated", t0: int = 0) -> SingleAgentEpisode:
    """Observation ``t`` at step ``t``, action ``t % 3``, reward ``t + 0.5``, logp ``-t``."""
    return SingleAgentEpisode(
        id_,
        observations=[np.float32(t) for t in range(t0, t0 + steps + 1)],
        actions=[t % 3 for t in range(t0, t0 + steps)],
        rewards=[t + 0.5 for t in range(t0, t0 + steps)],
        extra_model_outputs={"logp": [np.float32(-t) for t in range(t0, t0 + steps)]},
        terminated=end == "terminated",
        truncated=end == "truncated",
        t_started=t0,
        len_lookback_buffer=0,
    )


def _write(path: Path, episodes: list[SingleAgentEpisode], **kwargs: Any) -> Path:
    with DatasetWriter(path, sync=False, **kwargs) as writer:
        writer.write_many(episodes)
    return path


# ------------------------------------------------------------------ writer arguments


@pytest.mark.parametrize("compression", ["lz4", "gzip", "ZSTD", ""])
def test_only_none_and_zstd_are_compressions(tmp_path: Path, compression: str) -> None:
    # mutant: the accepted compressions gained "lz4"
    with pytest.raises(ValueError, match="compression"):
        DatasetWriter(tmp_path / "ds", compression=compression)
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    "leftovers",
    [
        pytest.param(["shards/"], id="an empty shards folder"),
        pytest.param([".tmp-manifest"], id="a temporary file"),
        pytest.param(["shards/", ".tmp-x"], id="both"),
    ],
)
def test_a_folder_holding_only_what_a_starting_writer_makes_is_a_new_dataset(
    tmp_path: Path, leftovers: list[str]
) -> None:
    # mutant: an existing shards/ folder counted as a foreign file (NotADatasetError)
    path = tmp_path / "ds"
    path.mkdir()
    for name in leftovers:
        if name.endswith("/"):
            (path / name).mkdir()
        else:
            (path / name).write_text("")
    episodes = [_episode("a", 3), _episode("b", 1, "truncated")]
    _write(path, episodes)
    assert list(Dataset(path)) == episodes


def test_a_relative_path_names_the_folder_the_writer_was_opened_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: the writer keeps the path relative, so a chdir sends later shards elsewhere
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    writer = DatasetWriter("ds", shard_bytes=1, sync=False)
    monkeypatch.chdir(tmp_path / "there")
    episodes = [_episode("a", 2), _episode("b", 3)]
    with writer:
        writer.write_many(episodes)
    assert list(Dataset(tmp_path / "here" / "ds")) == episodes
    assert not (tmp_path / "there" / "ds").exists()


def _snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _damage_header(path: Path) -> None:
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b'"version"', b'"versioN"')
    manifest.write_bytes(b"\n".join(lines))


def _damage_a_shard_line(path: Path) -> None:
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"shard"', b'"sharD"')  # its CRC no longer matches
    manifest.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize(
    ("damage", "error"),
    [
        pytest.param(_damage_header, CorruptDatasetError, id="header line changed"),
        pytest.param(_damage_a_shard_line, CorruptDatasetError, id="a shard line changed"),
        pytest.param(
            lambda p: (p / "manifest.jsonl").write_text("hello\n"),
            NotADatasetError,
            id="not a manifest, no shards folder",
        ),
    ],
)
def test_a_writer_refuses_a_damaged_manifest_when_it_opens(
    tmp_path: Path, damage: Any, error: type[Exception], clean: bool
) -> None:
    # mutants: the manifest not read when the writer opens (a cleaning writer reads it
    # anyway, one with clean=False did not); the v2 look-up skipped
    path = _write(tmp_path / "ds", [_episode("a", 2), _episode("b", 1)], shard_bytes=1)
    damage(path)
    if error is NotADatasetError:
        for name in ("shards",):
            for p in sorted((path / name).iterdir()):
                p.unlink()
            (path / name).rmdir()
    before = _snapshot(path)
    with pytest.raises(error) as info:
        DatasetWriter(path, sync=False, clean=clean)
    assert type(info.value) is error
    assert _snapshot(path) == before


def test_a_writer_refuses_a_symlinked_manifest(tmp_path: Path) -> None:
    # mutant: the symlink check dropped (then the open through it fails with ELOOP)
    path = _write(tmp_path / "ds", [_episode("a", 2)])
    real = tmp_path / "elsewhere.jsonl"
    (path / "manifest.jsonl").rename(real)
    (path / "manifest.jsonl").symlink_to(real)
    before = real.read_bytes()
    with pytest.raises(NotADatasetError, match="symlink"):
        DatasetWriter(path, sync=False)
    assert real.read_bytes() == before


def test_a_dataset_copied_without_its_empty_shards_folder_takes_episodes(
    tmp_path: Path,
) -> None:
    # mutant: the writer no longer makes shards/ when it is missing (as a copy that keeps no
    # empty folder leaves it): "not a plain directory"
    path = tmp_path / "ds"
    DatasetWriter(path, sync=False).close()
    (path / "shards").rmdir()
    episodes = [_episode("a", 2), _episode("b", 4, "truncated")]
    _write(path, episodes)
    assert list(Dataset(path)) == episodes


# ------------------------------------------------------------------ shard size


def _commits(path: Path, shard_bytes: int, count: int) -> list[int]:
    """How many shards are committed after each of ``count`` same-size writes."""
    with DatasetWriter(path, shard_bytes=shard_bytes, sync=False) as writer:
        out = []
        for k in range(count):
            writer.write(_episode(f"e{k}", 2))
            out.append(len(writer.committed))
    return out


def test_a_shard_commits_once_its_pending_bytes_reach_shard_bytes(
    tmp_path: Path,
) -> None:
    # mutant: the commit waits for pending bytes to pass shard_bytes (> instead of >=)
    runs = iter(range(10**6))
    lo, hi = 1, 1 << 16  # the largest shard_bytes one episode fills alone
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _commits(tmp_path / str(next(runs)), mid, 1) == [1]:
            lo = mid
        else:
            hi = mid - 1
    size = lo  # one episode's bytes: two of them reach 2 * size exactly, not 2 * size + 1
    assert _commits(tmp_path / str(next(runs)), 2 * size, 3) == [0, 1, 1]
    assert _commits(tmp_path / str(next(runs)), 2 * size + 1, 3) == [0, 0, 1]


# ------------------------------------------------------------------ reading


def _one_per_shard(path: Path, count: int, **kwargs: Any) -> Dataset:
    _write(path, [_episode(f"e{k}", 2) for k in range(count)], shard_bytes=1)
    return Dataset(path, **kwargs)


def test_the_shard_used_least_recently_is_the_one_closed(tmp_path: Path) -> None:
    # mutant: a shard read again is not moved to the recent end (first opened, first closed)
    ds = _one_per_shard(tmp_path / "ds", 3, max_open_shards=2)
    first, second = ds.locate(0)[0], ds.locate(1)[0]
    assert ds.episode(0) == _episode("e0", 2)  # read again: the most recently used now
    third = ds.locate(2)[0]
    assert ds.open_shards() == [first, third] and ds.evictions == 1
    assert second not in ds.open_shards()


# Episodes of 0 to 5 steps ending every way, and one not reset yet (no observations).
_STORED = [
    _episode("t5", 5, "terminated"),
    _episode("u4", 4, "truncated", t0=7),
    _episode("o3", 3, "ongoing"),
    _episode("t0", 0, "terminated"),
    _episode("o1", 1, "ongoing", t0=2),
    SingleAgentEpisode("new"),
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return Dataset(_write(tmp_path_factory.mktemp("steps") / "ds", _STORED, shard_bytes=20000))


def _bound(value: int | None, length: int, default: int) -> int:
    if value is None:
        return default
    return value + length if value < 0 else value


_BOUNDS = st.one_of(st.none(), st.integers(-7, 7))


@given(i=st.integers(-len(_STORED), len(_STORED) - 1), start=_BOUNDS, stop=_BOUNDS)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_steps_are_the_written_steps_sliced(stored: Dataset, i: int, start: Any, stop: Any) -> None:
    # mutants: bounds checked with < for <=, a None stop read as length - 1, a negative
    # bound of 0 read from the end, one extra extra-model-output step, terminated/truncated
    # swapped or set away from the episode's end, an episode with no observations given one
    episode = _STORED[i]
    length = len(episode)
    first, last = _bound(start, length, 0), _bound(stop, length, length)
    if not 0 <= first <= last <= length:
        with pytest.raises(IndexError):
            stored.steps(i, start, stop)
        return
    got = stored.steps(i, start, stop)
    observations = episode.get_observations()
    want_obs = [float(o) for o in observations[first : last + 1]] if len(observations) else []
    assert [float(o) for o in got["observations"]] == want_obs
    assert list(got["actions"]) == list(episode.get_actions())[first:last]
    assert list(got["rewards"]) == list(episode.get_rewards())[first:last]
    if episode.is_reset:
        logp = list(episode.get_extra_model_outputs("logp"))[first:last]
        assert list(got["extra_model_outputs"]["logp"]) == logp
    assert got["terminated"] is (last == length and episode.is_terminated)
    assert got["truncated"] is (last == length and episode.is_truncated)


@pytest.mark.parametrize("i", range(-len(_STORED), len(_STORED)))
def test_negative_episode_indices_count_from_the_end(stored: Dataset, i: int) -> None:
    # mutants: -len(self) refused, an index of 0 read from the end
    assert stored.episode(i).id_ == _STORED[i].id_
    assert stored.summaries[i].id_ == _STORED[i].id_


@pytest.mark.parametrize("i", [len(_STORED), -len(_STORED) - 1, 100])
def test_episode_indices_past_either_end_are_index_errors(stored: Dataset, i: int) -> None:
    # mutant: len(self) accepted as an index (then failing further on, another message)
    message = f"episode index {i} out of range for {len(_STORED)} episodes"
    with pytest.raises(IndexError, match=message):
        stored.episode(i)
    with pytest.raises(IndexError, match=message):
        stored.steps(i, None, None)


def _large(id_: str, seed: int, steps: int = 3) -> SingleAgentEpisode:
    """Observations of 2 x 192 x 192 float32: 288 KiB each, a leaf of 1.1 MiB for 3 steps
    (mapped, not copied, when read)."""
    rng = np.random.default_rng(seed)
    observations = list(rng.standard_normal((steps + 1, 2, 192, 192), dtype=np.float32))
    return SingleAgentEpisode(
        id_,
        observations=observations,
        actions=[t % 2 for t in range(steps)],
        rewards=[t + 0.5 for t in range(steps)],
        terminated=True,
        len_lookback_buffer=0,
    ).to_numpy()


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_large_leaves_read_back_as_written_and_owned_by_the_episode(
    tmp_path: Path, compression: str | None
) -> None:
    # mutants: the map taken from the unaligned offset, the view's offset in the map or its
    # shape dropped, a decompressed buffer (outside the file) mapped from the file
    episodes = [_large("a", 0), _large("b", 1), _large("c", 2)]
    path = _write(tmp_path / "ds", episodes, compression=compression, shard_bytes=1 << 30)
    ds = Dataset(path)
    for order in ([0, 1, 2], [2, 0, 1]):
        for i in order:
            got = ds.episode(i)
            assert got == episodes[i]
            observations = got.get_observations()
            assert observations.shape == (4, 2, 192, 192) and observations.flags.writeable
            observations[...] = -1.0  # the episode's own: the file and later reads keep theirs
    assert list(ds.iter_episodes()) == episodes
    assert list(Dataset(path)) == episodes


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p: p.write_text("not a folder"), id="a file"),
        pytest.param(lambda p: None, id="nothing"),
        pytest.param(lambda p: p.symlink_to(p.parent / "nowhere"), id="a dangling symlink"),
    ],
)
def test_a_dataset_path_that_is_no_folder_says_so(tmp_path: Path, make: Any) -> None:
    # mutant: only a missing path was refused as such (a file went on to the manifest look-up)
    path = tmp_path / "ds"
    make(path)
    with pytest.raises(NotADatasetError, match="does not exist or is not a directory"):
        Dataset(path)


@pytest.mark.parametrize("index", [True, False, 1.0, np.float64(0.0), "0"])
def test_an_episode_index_must_be_an_integer(stored: Dataset, index: Any) -> None:
    # mutant: the index converted with int(), so True read episode 1 and 1.0 episode 1
    with pytest.raises(TypeError):
        stored.episode(index)
    with pytest.raises(TypeError):
        stored.steps(index, None, None)
    assert stored.episode(np.int64(1)).id_ == _STORED[1].id_


@pytest.mark.parametrize("indices", ["01", b"\x00\x01", 3])
def test_iter_episodes_refuses_text_and_non_iterables_at_the_call(
    stored: Dataset, indices: Any
) -> None:
    # mutant: a str or bytes taken as an iterable of indices (its characters)
    with pytest.raises(TypeError, match="indices must be None or an iterable of episode indices"):
        stored.iter_episodes(indices)
    ids = [episode.id_ for episode in stored.iter_episodes(iter([1, -1]))]
    assert ids == [_STORED[1].id_, _STORED[-1].id_]


@pytest.mark.parametrize("setting", [0, -1, 1.5, None, True, "all"])
def test_max_open_shards_is_checked_before_the_path(tmp_path: Path, setting: Any) -> None:
    # mutant: the setting checked after the path, so a missing dataset said so instead
    with pytest.raises(ValueError, match="max_open_shards"):
        Dataset(tmp_path / "missing", max_open_shards=setting)


def test_closing_a_dataset_closes_its_open_shards_files(tmp_path: Path) -> None:
    # mutant: close() only forgot the open shards, their data files stayed open
    ds = _one_per_shard(tmp_path / "ds", 3)
    opened = [ds.locate(i)[0] for i in range(3)]
    steps = ds.steps(1, 0, 2)
    assert not any(shard.parts.closed for shard in opened)
    ds.close()
    assert all(shard.parts.closed for shard in opened) and ds.open_shards() == []
    assert steps["observations"].tolist() == [0.0, 1.0, 2.0]  # views read stay valid


# ------------------------------------------------------------------ failures while writing


def test_a_write_after_an_interrupted_one_stores_its_own_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: write() no longer moves a shard holding an unbuffered episode into memory, so
    # the next episode took that episode's rows when the shard was committed
    episodes = [_episode("e0", 2), _episode("e1", 3, "truncated"), _episode("e2", 4)]
    interrupt_after_streaming(monkeypatch, 2)  # e1 reaches the shard's file, not the buffer
    writer = DatasetWriter(tmp_path / "ds", sync=False)
    writer.write(episodes[0])
    with pytest.raises(KeyboardInterrupt):
        writer.write(episodes[1])
    writer.write(episodes[2])
    writer.close()
    assert list(Dataset(tmp_path / "ds")) == [episodes[0], episodes[2]]


def test_a_write_that_failed_to_commit_no_longer_counts_toward_the_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: the failed episode's bytes stayed pending, so the next episode committed early
    path = tmp_path / "ds"
    writer = DatasetWriter(path, sync=True, shard_bytes=2 << 20)
    small = [
        _large("e0", 0, steps=1),
        _large("e1", 1, steps=1),
        _large("e3", 3, steps=1),
    ]
    writer.write_many(small[:2])  # 1.1 MiB pending

    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        writer.write(_large("e2", 2))  # 1.1 MiB more: the shard commits, and fails
    monkeypatch.undo()
    writer.write(small[2])  # 1.7 MiB pending with it: under 2 MiB
    assert writer.committed == []
    writer.close()
    assert list(Dataset(path)) == small


# ------------------------------------------------------------------ writers side by side


def test_a_writer_opened_beside_another_keeps_its_shard_from_a_later_cleaner(
    tmp_path: Path,
) -> None:
    # mutant: a writer that found another open holds no lock of its own, so once the other
    # closed, a third writer opened "alone" and removed its shard file being written
    path = tmp_path / "ds"
    first = DatasetWriter(path, sync=False)
    second = DatasetWriter(path, sync=False)
    second.write(_episode("kept", 3))  # in second's temporary shard file
    first.close()
    DatasetWriter(path, sync=False).close()  # cleans only if it is alone
    second.close()
    assert list(Dataset(path)) == [_episode("kept", 3)]


@pytest.mark.parametrize("clean", [False, True])
def test_a_commit_after_a_torn_manifest_line_is_read(tmp_path: Path, clean: bool) -> None:
    # mutant: the commit no longer cuts a killed writer's torn last line before appending (a
    # writer that opens alone with clean=True cut it already; one with clean=False did not)
    path = _write(tmp_path / "ds", [_episode("a", 2)])
    with (path / "manifest.jsonl").open("ab") as manifest:
        manifest.write(b'{"v": 2, "shard": "0123')  # what a writer killed mid-line leaves
    _write(path, [_episode("b", 3, "truncated")], clean=clean)
    assert list(Dataset(path)) == [_episode("a", 2), _episode("b", 3, "truncated")]
    assert not Dataset(path).torn_manifest

"""Work and memory that grew with a dataset: v1 writer opens, torch plans, passes in order.

- Opening an ``EpisodeWriter`` parsed every manifest line at every open, so a writer per
  appended episode cost N squared lines; now a process parses only the lines appended since
  it last opened a writer there (``episodes.io.v1_manifest``), with the same recovery.
- The torch datasets kept their 16,384 column plans and each open shard kept up to 4096
  more of its own (64 shards open): the plans held now stay within the dataset's bound.
- A pass over a v2 dataset (``for ep in Dataset(p)``) kept every shard it had passed open,
  each with its whole index parsed; now it keeps the shard it is in only.

Work is counted (lines parsed, plans held, shards open), never timed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _gen import make_episode

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    read_episodes,
)
from episodes.io.format import ManifestEntry


# ----------------------------------------------------------------- v1: a writer per episode
@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifest lines parsed into entries (their ``where``), in order."""
    seen: list[str] = []
    real = ManifestEntry.from_json

    def counting(cls: type, obj: Any, where: str) -> ManifestEntry:
        seen.append(where)
        return real(obj, where)

    monkeypatch.setattr(ManifestEntry, "from_json", classmethod(counting))
    return seen


def _v1(path: Path, n: int) -> list[str]:
    with EpisodeWriter(path, sync=False) as w:
        return w.write_many(make_episode(i, id_=f"e{i}") for i in range(n))


def test_a_writer_per_episode_parses_only_the_lines_appended_since(
    tmp_path: Path, parsed: list[str]
) -> None:
    path = tmp_path / "ds"
    _v1(path, 30)
    for k in range(5):  # one writer per appended episode, as a callback would
        with EpisodeWriter(path, sync=False) as w:
            w.write(make_episode(100 + k, id_=f"more{k}"))
    # The first open parsed the 30 lines; each later one the line the writer before it added.
    # Before: every open parsed every line (30 + 31 + 32 + 33 + 34).
    assert len(parsed) == 30 + 4
    assert parsed[-4:] == [f"manifest.jsonl line {n}" for n in range(31, 35)]
    assert [e.id_ for e in read_episodes(path)][-5:] == [f"more{k}" for k in range(5)]


def test_a_resumed_open_still_refuses_a_damaged_earlier_line(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    _v1(path, 3)
    EpisodeWriter(path, sync=False).close()  # its lines are kept now
    manifest = path / "manifest.jsonl"
    raw = manifest.read_bytes()
    manifest.write_bytes(raw.replace(b'"v": 1', b'"v": !', 1))  # line 1, same length
    with pytest.raises(CorruptDatasetError, match="line 1 is not valid JSON"):
        EpisodeWriter(path, sync=False)


def test_a_resumed_open_still_refuses_a_chunk_listed_twice(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    _v1(path, 2)
    EpisodeWriter(path, sync=False).close()
    manifest = path / "manifest.jsonl"
    raw = manifest.read_bytes()
    manifest.write_bytes(raw + raw.split(b"\n")[0] + b"\n")  # line 1 again, as line 3
    with pytest.raises(CorruptDatasetError, match="twice"):
        EpisodeWriter(path, sync=False)


def test_a_resumed_open_still_cuts_a_torn_tail_and_removes_leftovers(
    tmp_path: Path, parsed: list[str]
) -> None:
    path = tmp_path / "ds"
    names = _v1(path, 2)
    EpisodeWriter(path, sync=False).close()  # the two lines are kept
    manifest = path / "manifest.jsonl"
    whole = manifest.read_bytes()
    manifest.write_bytes(whole + b'{"v": 1, "chunk": "chu')  # a killed writer's torn line
    leftovers = ["00000002-deadbeef", ".tmp-00000003-deadbeef"]
    for name in leftovers:
        (path / "chunks" / name).mkdir()
    (path / "chunks" / "notes").mkdir()  # neither a chunk name nor a temporary one: kept
    parsed.clear()
    with EpisodeWriter(path, sync=False) as w:
        assert manifest.read_bytes() == whole
        assert parsed == []  # nothing parsed again: the torn line is no line
        name = w.write(make_episode(9, id_="after"))
    assert name.startswith("chunks/00000002-") and name != "chunks/00000002-deadbeef"
    on_disk = sorted(p.name for p in (path / "chunks").iterdir())
    assert on_disk == sorted([*(n.split("/")[1] for n in names), name.split("/")[1], "notes"])
    assert [e.id_ for e in read_episodes(path)] == ["e0", "e1", "after"]


def test_a_dataset_replaced_under_the_same_path_is_parsed_from_its_start(
    tmp_path: Path, parsed: list[str]
) -> None:
    path = tmp_path / "ds"
    _v1(path, 3)
    EpisodeWriter(path, sync=False).close()
    other = tmp_path / "other"
    (chunk,) = _v1(other, 1)
    shutil.rmtree(path)
    shutil.copytree(other, path)
    parsed.clear()
    with EpisodeWriter(path, sync=False) as w:
        assert w.write(make_episode(5, id_="x")).startswith("chunks/00000001-")
    assert parsed == ["manifest.jsonl line 1"]  # not taken for the 3 lines kept before
    assert [e.id_ for e in read_episodes(path)] == ["e0", "x"]
    assert dataset_info(path).num_chunks == 2 and (path / chunk).is_dir()


# ------------------------------------------------------------ torch: one bound on plans held
def _sharded(path: Path, shards: int, per_shard: int) -> Path:
    with DatasetWriter(path, sync=False) as w:
        for s in range(shards):
            for i in range(per_shard):
                w.write(
                    SingleAgentEpisode(
                        f"s{s}e{i}",
                        observations=np.arange(4 * 4, dtype=np.float32).reshape(4, 4) + i,
                        actions=[0, 1, 0],
                        rewards=[1.0, 2.0, 3.0],
                        len_lookback_buffer=0,
                        terminated=True,
                    ).to_numpy()
                )
            w.flush()
    return path


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
def test_the_torch_datasets_hold_no_more_plans_than_their_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    torch_data = pytest.importorskip("episodes.io.torch_data")
    monkeypatch.setattr(torch_data, "_PLAN_CACHE", 4)
    path = _sharded(tmp_path / "ds", shards=3, per_shard=10)
    if kind == "transitions":
        data = torch_data.TransitionDataset(path)
    else:
        data = torch_data.SequenceDataset(path, length=2)
    for idx in np.random.default_rng(0).permutation(len(data)):  # shuffled, as a DataLoader
        data[int(idx)]
    shards = data._reader.open_shards()
    assert len(shards) == 3
    held = len(data._plans) + sum(len(shard._plans) for shard in shards)
    assert held <= 4  # before: each shard kept its own plans too (34 here)


# ---------------------------------------------------------- a pass keeps the shard it is in
def test_a_pass_over_a_dataset_keeps_one_shard_open(tmp_path: Path) -> None:
    path = _sharded(tmp_path / "ds", shards=4, per_shard=3)
    ds = Dataset(path)
    open_during = []
    ids = []
    for episode in ds:
        ids.append(episode.id_)
        open_during.append(len(ds.open_shards()))
    assert ids == [f"s{s}e{i}" for s in range(4) for i in range(3)]
    assert open_during == [1] * 12  # before: 1, 1, 1, 2, 2, 2, 3, ...
    assert ds.open_shards() == []  # the pass ended: the last shard's whole index went too
    assert ds.evictions == 0  # no shard was closed to stay within max_open_shards


def test_a_pass_left_midway_keeps_only_the_shard_it_was_in(tmp_path: Path) -> None:
    path = _sharded(tmp_path / "ds", shards=3, per_shard=2)
    ds = Dataset(path)
    ds.episode(5)  # a random read opens the last shard first
    it = iter(ds)
    got = [next(it).id_ for _ in range(3)]  # into the second shard
    assert got == ["s0e0", "s0e1", "s1e0"]
    held = {shard.entry.name for shard in ds.open_shards()}
    assert held == {ds.shards[1].name, ds.shards[2].name}  # not the first, passed
    assert [e.id_ for e in ds.iter_episodes([0, 4])] == ["s0e0", "s2e0"]  # still readable

"""Manifest lines are chained: a lost or moved middle line of a v2 manifest is corruption.

Each line carries its own CRC-32, so before the chain a deleted middle line left a valid
manifest that silently lacked a shard (and a writer opening alone then deleted that shard's
files as leftovers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, Dataset, DatasetWriter, read_episodes
from episodes.io.manifest_lines import line_crc, seal_line, unseal_line


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}", observations=[i, i + 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


def _dataset(path: Path, shards: int = 3) -> Path:
    with DatasetWriter(path, sync=False) as w:
        for i in range(shards):
            w.write(_episode(i))
            w.flush()  # one shard each
    return path


def _lines(path: Path) -> list[bytes]:
    return (path / "manifest.jsonl").read_bytes().splitlines(keepends=True)


def _unchained(line: bytes) -> bytes:
    """The line as a writer before the chain wrote it (no ``prev``)."""
    obj = unseal_line(line, "test")
    obj.pop("prev", None)
    return seal_line(obj)


EDITS = {
    "middle line deleted": lambda lines: lines[:2] + lines[3:],
    "first shard line deleted": lambda lines: lines[:1] + lines[2:],
    "two lines swapped": lambda lines: [lines[0], lines[2], lines[1], lines[3]],
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_a_lost_or_moved_line_is_corruption_on_every_reader(tmp_path, edit):
    path = _dataset(tmp_path / "d")
    (path / "manifest.jsonl").write_bytes(b"".join(edit(_lines(path))))
    for read in (Dataset, read_episodes, lambda p: DatasetWriter(p, sync=False)):
        with pytest.raises(CorruptDatasetError, match="missing or out of order"):
            read(path)


def test_a_writer_refusing_a_broken_chain_removes_no_shard_files(tmp_path):
    path = _dataset(tmp_path / "d")
    before = sorted(p.name for p in (path / "shards").iterdir())
    lines = _lines(path)
    (path / "manifest.jsonl").write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(CorruptDatasetError):
        DatasetWriter(path, sync=False)
    assert sorted(p.name for p in (path / "shards").iterdir()) == before


def test_every_appended_line_names_the_line_before_it(tmp_path):
    path = _dataset(tmp_path / "d")
    lines = _lines(path)
    for before, line in zip(lines, lines[1:]):
        assert unseal_line(line, "test")["prev"] == line_crc(before)


def test_a_manifest_written_before_the_chain_reads_and_takes_chained_appends(tmp_path):
    path = _dataset(tmp_path / "d")
    lines = _lines(path)
    (path / "manifest.jsonl").write_bytes(lines[0] + b"".join(map(_unchained, lines[1:])))
    assert [e.id_ for e in Dataset(path)] == ["e0", "e1", "e2"]
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode(3))
    new = _lines(path)
    assert unseal_line(new[-1], "test")["prev"] == line_crc(new[-2])
    assert [e.id_ for e in read_episodes(path)] == ["e0", "e1", "e2", "e3"]


def test_a_torn_last_line_is_mended_before_the_next_line_chains_to_it(tmp_path):
    path = _dataset(tmp_path / "d", shards=1)
    whole = (path / "manifest.jsonl").read_bytes()
    (path / "manifest.jsonl").write_bytes(whole + b'{"v": 2, "shard": "01')  # a killed append
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode(1))
    lines = _lines(path)
    assert len(lines) == 3 and unseal_line(lines[2], "t")["prev"] == line_crc(lines[1])
    assert [e.id_ for e in Dataset(path)] == ["e0", "e1"]


def test_the_chain_is_no_key_of_the_shard_entry(tmp_path):
    path = _dataset(tmp_path / "d", shards=1)
    info = json.loads(_lines(path)[1])
    assert "prev" in info  # on disk, for the reader's check; not part of what it returns
    assert Dataset(path).summaries[0].id_ == "e0"

"""A writer that opens alone deletes no committed shard file that a lost manifest line left.

Written to fail on the code before the quarantine (which deleted them) with an assertion,
not an import error: it uses only names that existed then.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, validate_dataset


def _shard_files(path: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in path.rglob("*")
        if p.is_file() and p.suffix in (".arrow", ".parquet", ".json")
    }


@pytest.mark.parametrize(
    ("keep", "data_format"),
    [(1, "arrow"), (3, "arrow"), (2, "parquet")],
    ids=["all lines lost", "last two lost", "parquet"],
)
def test_no_committed_shard_file_is_deleted(tmp_path: Path, keep: int, data_format: str) -> None:
    path = tmp_path / "d"
    with DatasetWriter(path, shard_bytes=1, sync=False, data_format=data_format) as w:
        w.write_many(
            SingleAgentEpisode(x, observations=[0, 1], actions=[0], rewards=[1.0]) for x in "abcd"
        )
    files = _shard_files(path)
    assert len(files) == 8
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:keep]))
    DatasetWriter(path, sync=False).close()  # opens alone
    assert _shard_files(path) == files  # every byte still in the dataset
    assert validate_dataset(path).ok

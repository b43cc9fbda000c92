"""``DatasetWriter(clean=False)`` opens without listing ``shards/`` for dead writers' files.

Every writer that opened alone listed ``shards/`` to remove leftovers, so N writers opened one
after another over an N-shard dataset (a Ray sink's write tasks) cost N squared entries.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes


def _episode(id_: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=[0, 1], actions=[1], rewards=[1.0], len_lookback_buffer=0
    )


def _dataset_with_leftovers(path: Path) -> list[Path]:
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode("kept"))
    left = [path / "shards" / ".tmp-dead.arrow", path / "shards" / "0123456789abcdef.arrow"]
    for p in left:
        p.write_bytes(b"left by a writer that died")
    return left


@pytest.mark.parametrize(
    ("clean", "removed"), [(True, True), (False, False)], ids=["clean", "no clean"]
)
def test_a_writer_alone_removes_leftovers_only_when_it_cleans(
    tmp_path: Path, clean: bool, removed: bool
) -> None:
    left = _dataset_with_leftovers(tmp_path)
    with DatasetWriter(tmp_path, sync=False, clean=clean) as w:
        w.write(_episode("new"))
    assert all(not p.exists() for p in left) if removed else all(p.exists() for p in left)
    assert sorted(ep.id_ for ep in read_episodes(tmp_path)) == ["kept", "new"]


def test_a_writer_that_does_not_clean_still_keeps_a_cleaning_writer_off_its_files(
    tmp_path: Path,
) -> None:
    _dataset_with_leftovers(tmp_path)
    with DatasetWriter(tmp_path, sync=False, clean=False) as quiet:
        quiet.write(_episode("quiet"))
        with DatasetWriter(tmp_path, sync=False) as other:  # not alone: removes nothing
            other.write(_episode("other"))
        assert (tmp_path / "shards" / ".tmp-dead.arrow").exists()
    ids = sorted(ep.id_ for ep in read_episodes(tmp_path))
    assert ids == ["kept", "other", "quiet"]


@pytest.mark.parametrize("clean", [1, "no", None])
def test_clean_must_be_a_bool_and_nothing_is_made(tmp_path: Path, clean: object) -> None:
    with pytest.raises(TypeError, match="clean"):
        DatasetWriter(tmp_path / "new", clean=clean)  # type: ignore[arg-type]
    assert not os.path.exists(tmp_path / "new")

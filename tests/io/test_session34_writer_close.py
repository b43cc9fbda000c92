"""``close()`` after a Ctrl-C that left a shard's file holding only an unbuffered episode.

The episode reached the temporary shard file, the interrupt came before it was buffered: with
nothing buffered, ``close()`` had nothing to commit and kept the file open (a ``ResourceWarning``
at garbage collection) and on disk (``shards/.tmp-*``) until a writer opened the dataset alone.
"""

from __future__ import annotations

import gc
import warnings

import pytest

from episodes.io import DatasetWriter, read_episodes, validate_dataset
from tests.io.test_hunt_fixes_writer import episode, interrupt_after_streaming


@pytest.mark.parametrize(("nth", "kept"), [(1, []), (2, ["e0"])], ids=["first", "second"])
def test_close_after_an_interrupted_write_leaves_no_open_or_temporary_shard(
    tmp_path, monkeypatch, nth, kept
):
    interrupt_after_streaming(monkeypatch, nth)
    writer = DatasetWriter(tmp_path / "ds", sync=False)
    with pytest.raises(KeyboardInterrupt):
        writer.write_many([episode(0), episode(1)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer.close()
        del writer
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert sorted(p.name for p in (tmp_path / "ds" / "shards").iterdir() if "tmp" in p.name) == []
    assert validate_dataset(tmp_path / "ds").ok
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == kept


def test_a_with_block_interrupted_the_same_way_leaves_nothing_either(tmp_path, monkeypatch):
    interrupt_after_streaming(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt), DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write(episode(0))
    assert [p.name for p in (tmp_path / "ds" / "shards").iterdir()] == []

"""A DatasetWriter belongs to the process that opened it: a forked child cannot use it.

The child inherits the parent's buffered episodes, the open shard file and its name: a commit
from the child stored them twice (Parquet), or the parent's failed commit then renamed the
child's committed data file away and removed it (Arrow). Now the child's write/flush raise,
its close() only drops its copies, and the parent commits as if no fork had happened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetError, DatasetWriter, read_episodes, validate_dataset
from episodes.io.shard_codec import encode_rows
from episodes.io.shard_commit import publish_shard
from episodes.io.shard_stream import write_episodes

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")


def ep(name: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name, observations=[0, 1], actions=[1], rewards=[1.0], len_lookback_buffer=0
    )


def _refused(call: Callable[[], object]) -> bool:
    try:
        call()
    except DatasetError as err:
        return "forked child" in str(err) and "open a new DatasetWriter" in str(err)
    return False


def _child_close(w: DatasetWriter) -> bool:
    return w.close() is None and w.close() is None


def _child_write(w: DatasetWriter) -> bool:
    return _refused(lambda: w.write(ep("c1"))) and _child_close(w)


def _child_write_many(w: DatasetWriter) -> bool:
    return _refused(lambda: w.write_many([ep("c1")])) and _child_close(w)


def _child_flush(w: DatasetWriter) -> bool:
    return _refused(w.flush) and _child_close(w)


def _child_with_error(w: DatasetWriter) -> bool:
    try:
        with w:
            raise RuntimeError("child fails")
    except RuntimeError:
        return True
    return False


def _child_with_block(w: DatasetWriter) -> bool:
    with w:
        pass
    return True


CHILD_ACTIONS = {
    "close": _child_close,
    "write": _child_write,
    "write_many": _child_write_many,
    "flush": _child_flush,
    "with_error": _child_with_error,
    "with_block": _child_with_block,
}


def _run_in_child(action: Callable[[DatasetWriter], bool], w: DatasetWriter) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = 0 if action(w) else 2
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize("flushed", [False, True], ids=["pending", "flushed"])
@pytest.mark.parametrize("child", sorted(CHILD_ACTIONS))
def test_a_forked_child_neither_destroys_nor_duplicates(
    tmp_path: Path, data_format: str, flushed: bool, child: str
) -> None:
    path = tmp_path / "d"
    w = DatasetWriter(path, data_format=data_format, sync=False)
    w.write(ep("p1"))
    if flushed:
        w.flush()
        w.write(ep("p2"))
    assert _run_in_child(CHILD_ACTIONS[child], w) == 0
    w.write(ep("p3"))
    w.close()  # the parent's commit works as if no fork had happened
    expected = ["p1", "p2", "p3"] if flushed else ["p1", "p3"]
    assert [e.id_ for e in read_episodes(path)] == expected
    assert validate_dataset(path).problems == []
    assert len(w.committed) == (2 if flushed else 1)
    assert sorted(p.name for p in (path / "shards").iterdir() if p.name.startswith(".tmp")) == []


def test_a_new_writer_in_the_child_still_writes(tmp_path: Path) -> None:
    path = tmp_path / "d"
    DatasetWriter(path, sync=False).close()

    def fresh(_: DatasetWriter) -> bool:
        with DatasetWriter(path, sync=False) as mine:
            mine.write(ep("c1"))
        return True

    parent = DatasetWriter(path, sync=False)
    parent.write(ep("p1"))
    assert _run_in_child(fresh, parent) == 0
    parent.close()
    assert sorted(e.id_ for e in read_episodes(path)) == ["c1", "p1"]


def _other_shard_under_the_name(shards: Path, tmp: Path, final: Path) -> None:
    # Another process committed a file under the final name; ours is gone from its temp name.
    tmp.unlink()
    final.write_bytes(b"another process's shard")


@pytest.mark.parametrize(
    ("setup", "final_left", "tmp_left"),
    [(_other_shard_under_the_name, b"another process's shard", False), (None, None, True)],
    ids=["another_file_stays", "own_file_moved_back"],
)
def test_a_failed_commit_moves_back_only_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup, final_left, tmp_left
) -> None:
    shards = tmp_path
    enc = encode_rows(ep("a"))
    tmp, final = shards / ".tmp-s.arrow", shards / ("0" * 16 + ".arrow")
    data = write_episodes(tmp, [enc.columns], "arrow", compression=None, sync=False)
    if setup is not None:
        setup(shards, tmp, final)
    else:  # the index's rename fails once the data file is in place
        real = os.rename

        def failing(src, dst, *args, **kwargs):
            if str(dst).endswith(".json"):
                raise OSError(28, "No space left on device")
            return real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError):
        publish_shard(shards, "0" * 16, data, [enc], [], "arrow", None, sync=False)
    monkeypatch.undo()
    if final_left is None:
        assert not final.exists()
    else:
        assert final.read_bytes() == final_left
    assert tmp.exists() == tmp_left

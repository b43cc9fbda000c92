"""A writer's shards/ that cannot be opened: a link is refused as one, the system named."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from episodes.io import DatasetWriter
from episodes.io.errors import DatasetIOError, NotADatasetError

CASES = {
    # errno os.open fails with on shards/ -> (error type, words)
    "no permission": (errno.EACCES, DatasetIOError, r"cannot open the directory .*shards: "),
    "an I/O error": (errno.EIO, DatasetIOError, r"cannot open the directory .*shards: "),
    "a symlink": (errno.ELOOP, NotADatasetError, r"is not a plain directory \(a symlink\?\)"),
    "no directory": (errno.ENOTDIR, NotADatasetError, r"is not a plain directory \(a symlink\?\)"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_shards_directory_that_cannot_be_opened_says_why(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, kind, words = CASES[case]
    DatasetWriter(tmp_path).close()
    real_open = os.open

    def refusing_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(os.fsdecode(path)) == tmp_path / "shards":  # type: ignore[arg-type]
            raise OSError(code, os.strerror(code), os.fsdecode(path))  # type: ignore[arg-type]
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(kind, match=words) as caught:
        DatasetWriter(tmp_path)
    if kind is DatasetIOError:
        assert caught.value.errno == code and os.strerror(code) in str(caught.value)
        assert "symlink" not in str(caught.value)


def test_a_symlinked_shards_directory_is_still_refused_as_one(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    dataset = tmp_path / "ds"
    DatasetWriter(dataset).close()
    os.rmdir(dataset / "shards")
    (dataset / "shards").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotADatasetError, match=r"is not a plain directory \(a symlink\?\)"):
        DatasetWriter(dataset)

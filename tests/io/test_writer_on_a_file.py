"""A DatasetWriter (and so a runner group's ``write_to``) given a file is NotADatasetError.

Before, it raised the raw ``FileExistsError`` / ``NotADirectoryError`` of ``mkdir``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from episodes.io import DatasetWriter, NotADatasetError

CASES = {  # name -> path below tmp_path, relative; "file" is a regular file
    "the path is a file": "file",
    "a parent is a file": "file/dataset",
}


@pytest.mark.parametrize("relative", CASES.values(), ids=CASES.keys())
def test_a_file_in_the_way_is_not_a_dataset(tmp_path: Path, relative: str) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADatasetError, match="is a file or lies under one"):
        DatasetWriter(tmp_path / relative)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert (tmp_path / "file").read_bytes() == b"x"

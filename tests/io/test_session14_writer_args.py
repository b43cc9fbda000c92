"""The writers check shard_bytes and their flags before anything is made."""

from __future__ import annotations

import math

import numpy as np
import pytest

from episodes.io import DatasetWriter
from episodes.io.writer import EpisodeWriter

BAD = {
    "nan bytes": ({"shard_bytes": math.nan}, TypeError),
    "inf bytes": ({"shard_bytes": math.inf}, TypeError),
    "float bytes": ({"shard_bytes": 1.5}, TypeError),
    "bool bytes": ({"shard_bytes": True}, TypeError),
    "zero bytes": ({"shard_bytes": 0}, ValueError),
    "string sync": ({"sync": "no"}, TypeError),
    "None sync": ({"sync": None}, TypeError),
}


@pytest.mark.parametrize("kwargs, error", BAD.values(), ids=BAD.keys())
def test_bad_writer_arguments_are_refused_before_any_file(tmp_path, kwargs, error):
    with pytest.raises(error, match="shard_bytes|sync"):
        DatasetWriter(tmp_path / "d", **kwargs)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("kwargs", [{"sync": "no"}, {"checksums": 1}], ids=["sync", "checksums"])
def test_the_v1_writer_checks_its_flags(tmp_path, kwargs):
    with pytest.raises(TypeError, match="must be a bool"):
        EpisodeWriter(tmp_path / "d", **kwargs)


def test_numpy_ints_and_bools_are_taken(tmp_path):
    with DatasetWriter(tmp_path / "d", shard_bytes=np.int64(10), sync=np.False_) as w:
        w.flush()
    assert (tmp_path / "d" / "manifest.jsonl").exists()

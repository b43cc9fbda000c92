"""A blob hands out at most the bytes it holds: repeated or overlapping entries are refused.

A dataset's writers store every array once, in entries that never overlap. A forged table whose
entries (or the values' references to them) repeat bytes would otherwise make a copy per
reference: a 1 MiB file could ask for gigabytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, DatasetWriter, EpisodeWriter, read_episodes
from episodes.io.values import BlobReader, BlobWriter


def _blob() -> tuple[np.ndarray, list]:
    blob = BlobWriter()
    blob.add(np.arange(4, dtype=np.int64), "a")
    blob.add(np.ones(2, np.float32), "b")
    return blob.finish()


TABLES = {
    "each entry once": ([0, 1], None),
    "an entry referenced twice": ([0, 1, 0], "entry 0 reads bytes already read"),
    "two entries over the same bytes": ([0, 2], "entry 2 reads bytes already read"),
}


@pytest.mark.parametrize("case", list(TABLES))
def test_reads_add_up_to_the_blob_at_most(case: str) -> None:
    data, table = _blob()
    table = [*table, list(table[0])]  # entry 2: entry 0's bytes again
    reads, refusal = TABLES[case]
    reader = BlobReader(data, table, "blob")
    if refusal is None:
        assert [reader.get(i, scalar=False).tolist() for i in reads] == [[0, 1, 2, 3], [1, 1]]
        return
    *fine, last = reads
    for i in fine:
        reader.get(i, scalar=False)
    with pytest.raises(CorruptDatasetError, match=refusal):
        reader.get(last, scalar=False)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_datasets_with_array_infos_read_back(tmp_path: Path, version: str) -> None:
    ep = SingleAgentEpisode(
        "a",
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        infos=[{"x": np.arange(3)}, {"x": np.arange(3), "y": np.zeros(2)}, {}],
    )
    writer = EpisodeWriter if version == "v1" else DatasetWriter
    with writer(tmp_path / "d") as w:
        w.write(ep)
    (back,) = read_episodes(tmp_path / "d")
    assert back.get_infos(1)["x"].tolist() == [0, 1, 2]
    assert back.get_infos(1)["y"].tolist() == [0.0, 0.0]

"""A manifest without its header line says what to do, not only what is wrong."""

from __future__ import annotations

import pytest

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, DatasetWriter, dataset_info, read_episodes

pytest.importorskip("pyarrow")

CASES = {
    "empty manifest": b"",
    "cut inside the header": b'{"format": "episodes-dataset"',
}


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("reader", [dataset_info, lambda p: list(read_episodes(p))])
def test_missing_header_names_the_remedy(tmp_path, raw, reader):
    path = tmp_path / "ds"
    with DatasetWriter(path) as writer:
        writer.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
    (path / "manifest.jsonl").write_bytes(raw)
    with pytest.raises(CorruptDatasetError, match="no header line") as info:
        reader(path)
    message = str(info.value)
    assert "shards are intact" in message
    assert "put the manifest back from a copy" in message

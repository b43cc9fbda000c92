"""The torch datasets' column types, read from each shard's index head, in any valid layout.

The head was parsed only in the writer's layout (``spaces`` before ``episodes``); an index the
reader accepts in another key order (a tool's ``json.dumps(sort_keys=True)``) gave no types, so
a ``DataLoader`` worker wrapped int64 actions into int32 again, or a valid dataset was refused
at read time. And a damaged index read unchecked was refused as data of other types.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, DatasetWriter
from episodes.io.manifest_lines import seal_lines
from episodes.io.torch_data import TransitionDataset


def _piece(id_, actions):
    return SingleAgentEpisode(
        id_,
        observations=[np.float32(0)] * 3,
        actions=actions,
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()


def _dataset(path: Path) -> Path:
    with DatasetWriter(path, shard_bytes=1) as writer:
        writer.write(_piece("a", np.array([1, 2], np.int32)))
        writer.write(_piece("b", np.array([2**40, 3], np.int64)))
    return path


def _lines(path: Path) -> list[dict]:
    out = []
    for line in (path / "manifest.jsonl").read_bytes().splitlines():
        obj = json.loads(line)
        obj.pop("crc32")
        out.append(obj)
    return out


def _index(path: Path, k: int) -> Path:
    return path / "shards" / f"{_lines(path)[1 + k]['shard']}.json"


def _rewrite(path: Path, k: int, dumps, reseal: bool = True) -> None:
    index = _index(path, k)
    raw = dumps(json.loads(index.read_text())).encode()
    index.write_bytes(raw)
    if reseal:
        lines = _lines(path)
        lines[1 + k].update(index_sha256=hashlib.sha256(raw).hexdigest(), index_size=len(raw))
        (path / "manifest.jsonl").write_bytes(seal_lines(lines))


LAYOUTS = {
    "sorted-keys-both": ([0, 1], lambda o: json.dumps(o, sort_keys=True)),
    "sorted-keys-second": ([1], lambda o: json.dumps(o, sort_keys=True)),
    "sorted-keys-first": ([0], lambda o: json.dumps(o, sort_keys=True)),
    "indented": ([0, 1], lambda o: json.dumps(o, indent=2)),
}


@pytest.mark.parametrize("shards,dumps", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_index_in_another_layout_still_joins_the_types(tmp_path, shards, dumps):
    path = _dataset(tmp_path / "d")
    for k in shards:
        _rewrite(path, k, dumps)
    data = TransitionDataset(path)
    actions = [data[i]["actions"] for i in range(len(data))]
    assert [a.dtype for a in actions] == [np.dtype(np.int64)] * 4
    assert [int(a) for a in actions] == [1, 2, 2**40, 3]
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    assert next(iter(loader))["actions"].tolist() == [1, 2, 2**40, 3]


def test_a_damaged_index_is_corrupt_not_data_of_other_types(tmp_path):
    path = _dataset(tmp_path / "d")
    # Same size, other dtype, not resealed: the head read unchecked says float32 actions.
    _rewrite(path, 1, lambda o: json.dumps(o).replace('"<i8"', '"<f8"'), reseal=False)
    with pytest.raises(CorruptDatasetError, match="manifest checksum"):
        TransitionDataset(path)


def test_an_index_too_deep_to_parse_is_left_to_the_reader(tmp_path):
    path = _dataset(tmp_path / "d")
    index = _index(path, 1)
    size = index.stat().st_size
    index.write_text("[" * (size // 2) + "]" * (size - size // 2))  # same size, not resealed
    data = TransitionDataset(path)  # made: the shard is reported when it is read
    with pytest.raises(CorruptDatasetError):
        [data[i] for i in range(len(data))]

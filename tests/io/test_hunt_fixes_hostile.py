"""Pins for a bug hunt's findings on damaged and forged manifests, indexes and metadata.

Each test failed before its fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    UnsupportedVersionError,
    dataset_info,
    load_episode,
    read_episodes,
    shards,
    validate_dataset,
)
from episodes.io.format import ManifestEntry
from episodes.io.shards import EpisodeRow, ShardEntry, seal_line, unseal_line


def episode(name: str, **kwargs: Any) -> SingleAgentEpisode:
    fields: dict[str, Any] = {
        "observations": [0, 1],
        "actions": [0],
        "rewards": [1.0],
        "terminated": True,
        "len_lookback_buffer": 0,
    }
    return SingleAgentEpisode(name, **{**fields, **kwargs})


def write(root: Path, version: int, episodes: list[SingleAgentEpisode], **kwargs: Any) -> Path:
    writer = EpisodeWriter(root) if version == 1 else DatasetWriter(root, shard_bytes=1, **kwargs)
    with writer:
        for ep in episodes:
            writer.write(ep)
    return root


def pieces_on_disk(root: Path, version: int) -> int:
    return len(list((root / ("chunks" if version == 1 else "shards")).iterdir()))


def v2_lines(root: Path) -> list[dict[str, Any]]:
    lines = (root / "manifest.jsonl").read_bytes().split(b"\n")[:-1]
    objs = [json.loads(line) for line in lines]
    for obj in objs:
        obj.pop("crc32")
    return objs


def seal_v2(root: Path, objs: list[dict[str, Any]]) -> None:
    """Writes v2 manifest lines with their CRC-32s recomputed (a forger's edit)."""
    out = b""
    for obj in objs:
        prefix = json.dumps(obj).encode()[:-1]
        out += prefix + b',"crc32":"%08x"}\n' % zlib.crc32(prefix)
    (root / "manifest.jsonl").write_bytes(out)


def forge_index(root: Path, edit: Any) -> None:
    """Edits the first shard's index with its SHA-256, its size and the line's CRC recomputed."""
    objs = v2_lines(root)
    path = root / "shards" / f"{objs[1]['shard']}.json"
    index = json.loads(path.read_text())
    edit(index)
    raw = json.dumps(index).encode()
    path.write_bytes(raw)
    objs[1]["index_sha256"], objs[1]["index_size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    seal_v2(root, objs)


def flip_last_line(data: bytearray, version: int) -> None:
    if version == 1:
        data[data.rindex(b"true")] ^= 0x01  # 't' -> 'u': the line ends in "\n" but fails JSON
    else:
        data[data.rindex(b'"crc32"') - 3] ^= 0x01  # a byte before the seal: the CRC fails


# -------------------------------------------------------------------- 1: the last manifest line
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    "damage",
    ["bit flip inside the last line", "last newline flipped to another byte"],
)
def test_damaged_last_manifest_line_is_corruption_and_no_writer_deletes_its_piece(
    tmp_path, version, damage
):
    root = write(tmp_path / "d", version, [episode(f"ep{i}") for i in range(3)])
    manifest = root / "manifest.jsonl"
    data = bytearray(manifest.read_bytes())
    if damage.startswith("bit flip"):
        flip_last_line(data, version)
    else:
        data[-1] ^= 0x40  # "\n" -> "J"
    manifest.write_bytes(bytes(data))
    on_disk = pieces_on_disk(root, version)
    with pytest.raises(CorruptDatasetError):
        list(read_episodes(root))
    with pytest.raises(CorruptDatasetError):
        validate_dataset(root)
    with pytest.raises(CorruptDatasetError):
        write(root, version, [episode("new")])
    assert pieces_on_disk(root, version) == on_disk
    assert manifest.read_bytes() == bytes(data)


def test_single_line_v1_manifest_with_a_bit_flip_is_corruption_not_empty(tmp_path):
    root = write(tmp_path / "d", 1, [episode("only")])
    manifest = root / "manifest.jsonl"
    data = bytearray(manifest.read_bytes())
    flip_last_line(data, 1)
    manifest.write_bytes(bytes(data))
    with pytest.raises(CorruptDatasetError, match="line 1 is not valid JSON"):
        validate_dataset(root)


def test_v2_last_line_that_only_lost_its_newline_is_read_and_completed(tmp_path):
    root = write(tmp_path / "d", 2, [episode(f"ep{i}") for i in range(3)])
    manifest = root / "manifest.jsonl"
    manifest.write_bytes(manifest.read_bytes()[:-1])
    report = validate_dataset(root)
    assert report.ok and report.pieces == 3 and not report.torn_manifest
    write(root, 2, [episode("new")])  # opens alone: puts the newline back, deletes nothing
    assert [e.id_ for e in read_episodes(root)] == ["ep0", "ep1", "ep2", "new"]
    assert validate_dataset(root).ok


@pytest.mark.parametrize("version", [1, 2])
def test_torn_tail_is_still_ignored_and_cut_by_the_next_writer(tmp_path, version):
    root = write(tmp_path / "d", version, [episode("a"), episode("b")])
    manifest = root / "manifest.jsonl"
    data = manifest.read_bytes()
    manifest.write_bytes(data[:-25])  # a writer killed mid-append
    report = validate_dataset(root)
    assert report.ok and report.torn_manifest and report.pieces == 1
    write(root, version, [episode("c")])
    assert [e.id_ for e in read_episodes(root)] == ["a", "c"]


@pytest.mark.parametrize(
    ("tail", "after"),
    [
        (b"", b""),
        (b'{"v": 2, "sh', b""),  # torn: cut off
        (seal_line({"v": 2})[:-1], seal_line({"v": 2})),  # whole: the newline put back
    ],
    ids=["complete", "torn", "whole line without its newline"],
)
def test_mend_tail(tmp_path, tail, after):
    path = tmp_path / "m"
    path.write_bytes(b"{}\n" + tail)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        shards.mend_tail(fd, sync=False)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"{}\n" + after


# ------------------------------------------------------------ 5: a Text space's max_length
@pytest.mark.parametrize(
    "max_length", [10**8, 10**20], ids=["2 GB for 5 strings", "beyond numpy's widest"]
)
def test_text_space_with_a_huge_max_length_is_refused_before_numpy_allocates(tmp_path, max_length):
    root = write(
        tmp_path / "d",
        1,
        [
            episode(
                "a",
                observations=list("abcde"),
                actions=[0] * 4,
                rewards=[0.0] * 4,
                observation_space=gym.spaces.Text(5),
            )
        ],
    )
    line = json.loads((root / "manifest.jsonl").read_text())
    meta_path = root / line["chunk"] / "meta.json"
    meta = json.loads(meta_path.read_text())
    for space in (meta["observation_space"], meta["columns"]["observations"]["space"]):
        space["max_length"] = max_length  # 5 strings x 4 bytes x max_length characters
    raw = json.dumps(meta).encode()
    line["nbytes"] += len(raw) - meta_path.stat().st_size
    meta_path.write_bytes(raw)
    line["meta_sha256"] = hashlib.sha256(raw).hexdigest()
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(DatasetError, match="Text spaces' max_length"):
        next(read_episodes(root, numpy=True))
    assert next(read_episodes(root, numpy=False)).get_observations(slice(None)) == list("abcde")


def test_text_space_of_a_sane_max_length_is_still_numpyd(tmp_path):
    root = write(
        tmp_path / "d",
        2,
        [episode("a", observations=["x", "yy"], observation_space=gym.spaces.Text(1000))],
    )
    observations = next(read_episodes(root, numpy=True)).get_observations(slice(None))
    assert observations.dtype == np.dtype("<U1000") and observations.tolist() == ["x", "yy"]


# ------------------------------------------------------------------ 6: blob entries in steps
@pytest.mark.parametrize(
    "entry",
    [[0, "<U0", [2]], [0, "<f4", [0, 2**70]]],
    ids=["zero itemsize", "shape numpy refuses"],
)
def test_steps_wraps_bad_blob_entries_in_corrupt_dataset_error(tmp_path, entry):
    ep = episode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={"m": [np.zeros(2, np.float32), np.zeros(3, np.float32)]},
    )
    root = write(tmp_path / "d", 2, [ep])

    def edit(index: dict[str, Any]) -> None:
        index["episodes"][0]["meta"]["blob"] = [entry, [16, "<f4", [3]]]

    forge_index(root, edit)
    with pytest.raises(CorruptDatasetError, match="blob entry 0"):
        Dataset(root).steps(0, 0, 2)
    with pytest.raises(CorruptDatasetError, match="blob entry 0"):
        list(read_episodes(root))


# ------------------------------------------------------ 8: v1 manifest values not checksummed
def test_v1_manifest_return_flip_is_found_by_validate(tmp_path):
    root = write(
        tmp_path / "d",
        1,
        [episode("low", observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 1.0])],
    )
    manifest = root / "manifest.jsonl"
    data = bytearray(manifest.read_bytes())
    data[data.index(b'"return": 2.0') + len(b'"return": ')] ^= 0x01  # 2.0 -> 3.0
    manifest.write_bytes(bytes(data))
    report = validate_dataset(root)
    assert not report.ok
    assert "return 3.0 is not the sum of its rewards 2.0" in report.problems[0]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("nbytes", 1, "nbytes disagrees with its files"),
        ("terminated", False, "terminated/truncated disagree with the manifest"),
        ("truncated", True, "terminated/truncated disagree with the manifest"),
    ],
)
def test_v1_manifest_edits_are_found(tmp_path, key, value, problem):
    root = write(tmp_path / "d", 1, [episode("a")])
    line = json.loads((root / "manifest.jsonl").read_text())
    line[key] = line[key] + value if key == "nbytes" else value
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    if key != "nbytes":  # the flags are checked on every read, nbytes by validate
        with pytest.raises(CorruptDatasetError, match=problem):
            list(read_episodes(root))
    report = validate_dataset(root)
    assert not report.ok and problem in report.problems[0]


def test_v2_manifest_return_edit_is_found_by_validate(tmp_path):
    root = write(tmp_path / "d", 2, [episode("a")])
    objs = v2_lines(root)
    objs[1]["episodes"][0][3] = 1e9
    seal_v2(root, objs)
    report = validate_dataset(root)
    assert not report.ok and "return 1000000000.0" in report.problems[0]


# ------------------------------------------------- v2 manifest rows against the shard index
@pytest.mark.parametrize(
    "row",
    [
        ["zzz", 0, 1, 1.0, True, False],
        ["a", 0, 1, 1.0, False, True],
        ["a", 1, 2, 1.0, True, False],
    ],
    ids=["id", "flags", "time range"],
)
def test_v2_forged_manifest_row_is_refused_not_read_under_its_id(tmp_path, row):
    root = write(tmp_path / "d", 2, [episode("a")])
    objs = v2_lines(root)
    objs[1]["episodes"][0] = row
    seal_v2(root, objs)
    with pytest.raises(CorruptDatasetError, match="disagree with the manifest"):
        load_episode(root, row[0])
    with pytest.raises(CorruptDatasetError):
        Dataset(root).steps(0, 0, 1)
    assert not validate_dataset(root).ok


# --------------------------------------------------------- 9: ints beyond int64 in manifests
@pytest.mark.parametrize(
    ("key", "value"),
    [("nbytes", 10**400 // 10**300), ("t", 2**63), ("nbytes", -1), ("t_started", -1)],
    ids=["nbytes 10**100", "t past int64 from 0", "negative nbytes", "negative t_started"],
)
def test_v1_manifest_counts_outside_int64_are_corruption(tmp_path, key, value):
    root = write(tmp_path / "d", 1, [episode("a")])
    line = json.loads((root / "manifest.jsonl").read_text())
    line[key] = value
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(CorruptDatasetError, match="out of range"):
        dataset_info(root)


def test_v1_time_steps_beyond_int64_with_a_small_length_still_read(tmp_path):
    entry = ManifestEntry("chunks/c", "ep", 2**70, 2**70 + 3, 1.5, True, False, "0" * 64, 100)
    assert ManifestEntry.from_json(entry.to_json(), "line 1") == entry


@pytest.mark.parametrize(
    "change",
    ["row t", "index_size", "data_size"],
)
def test_v2_manifest_ints_outside_int64_are_corruption(tmp_path, change):
    root = write(tmp_path / "d", 2, [episode("a")])
    objs = v2_lines(root)
    if change == "row t":
        objs[1]["episodes"][0][2] = 10**400 // 10**300
    else:
        objs[1][change] = 2**63
    seal_v2(root, objs)
    with pytest.raises(CorruptDatasetError):
        dataset_info(root)


# ------------------------------------------------------------ 10: header metadata not plain
@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
def test_v2_header_metadata_with_nan_is_corruption_when_read(tmp_path, token):
    root = write(tmp_path / "d", 2, [episode("a")], metadata=DatasetMetadata(user={"x": 1.0}))
    raw = (root / "manifest.jsonl").read_bytes().split(b"\n")
    prefix = raw[0][: raw[0].rindex(b',"crc32"')].replace(b'"x": 1.0', b'"x": ' + token)
    raw[0] = prefix + b',"crc32":"%08x"}' % zlib.crc32(prefix)
    # A forger chains the next line to the edited header too.
    shard_line = unseal_line(raw[1], "line 2")
    raw[1] = seal_line({**shard_line, "prev": f"{zlib.crc32(prefix):08x}"})[:-1]
    (root / "manifest.jsonl").write_bytes(b"\n".join(raw))
    with pytest.raises(CorruptDatasetError, match="metadata is not plain JSON"):
        Dataset(root)
    with pytest.raises(CorruptDatasetError, match="metadata is not plain JSON"):
        dataset_info(root)


# ------------------------------------------------------------------- float versions in v2
@pytest.mark.parametrize("where", ["header", "shard line", "index"])
def test_v2_float_version_is_refused(tmp_path, where):
    root = write(tmp_path / "d", 2, [episode("a")])
    if where == "index":

        def edit(index: dict[str, Any]) -> None:
            index["version"] = 2.0

        forge_index(root, edit)
        with pytest.raises(CorruptDatasetError, match="index version 2.0"):
            list(read_episodes(root))
        return
    objs = v2_lines(root)
    objs[0 if where == "header" else 1]["version" if where == "header" else "v"] = 2.0
    seal_v2(root, objs)
    with pytest.raises(UnsupportedVersionError, match="2.0"):
        Dataset(root)


def test_shard_entry_and_row_from_json_bounds():
    row = EpisodeRow("a", 0, 2**63 - 1, 0.0, False, False)
    assert EpisodeRow.from_json(row.to_json(), "row") == row
    with pytest.raises(CorruptDatasetError):
        EpisodeRow.from_json(["a", 0, 2**63, 0.0, False, False], "row")
    entry = ShardEntry("0123456789abcdef", "arrow", "0" * 64, 2**63 - 1, 0, ())
    assert ShardEntry.from_json(entry.to_json(), "line") == entry
    with pytest.raises(CorruptDatasetError, match="int64"):
        ShardEntry.from_json({**entry.to_json(), "index_size": 2**63}, "line")


def test_an_open_writer_completes_a_committed_line_that_lost_its_newline(tmp_path):
    """A writer already holding the dataset mends the tail as one opening it does: no cut."""
    root = tmp_path / "ds"
    with DatasetWriter(root, shard_bytes=1) as writer:
        writer.write(episode("first"))
        writer.flush()
        manifest = root / "manifest.jsonl"
        data = manifest.read_bytes()
        assert data.endswith(b"\n")
        manifest.write_bytes(data[:-1])  # the line is whole and sealed, only its newline went
        writer.write(episode("second"))
    assert sorted(ep.id_ for ep in read_episodes(root)) == ["first", "second"]
    assert validate_dataset(root).ok

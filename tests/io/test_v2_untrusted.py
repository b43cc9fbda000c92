"""Format v2 read from damaged or hostile directories: every failure is a DatasetError."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest
from _gen import make_episode

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetWriter,
    UnsafeDataError,
    UnsupportedVersionError,
    dataset_info,
    read_episodes,
)
from episodes.io.manifest_lines import seal_lines


@pytest.fixture
def ds(tmp_path):
    path = tmp_path / "ds"
    with DatasetWriter(path, shard_bytes=1) as w:
        w.write(make_episode(1, obs_space="box_u8", numpy=True))
        w.write(make_episode(2, obs_space="dict", numpy=False))
    return path


def manifest_lines(path: Path) -> list[dict]:
    out = []
    for line in (path / "manifest.jsonl").read_bytes().splitlines():
        obj = json.loads(line)
        obj.pop("crc32")
        out.append(obj)
    return out


def write_manifest(path: Path, objs: list[dict]) -> None:
    """Writes the manifest as a forger would: every seal and the chain recomputed."""
    (path / "manifest.jsonl").write_bytes(seal_lines(objs))


def shard(path: Path, k: int = 0) -> tuple[Path, Path]:
    name = manifest_lines(path)[1 + k]["shard"]
    return path / "shards" / f"{name}.arrow", path / "shards" / f"{name}.json"


def reseal_index(path: Path, k: int, change) -> None:
    """Edits shard k's index and updates the manifest so the checksums match again."""
    _, index_path = shard(path, k)
    index = json.loads(index_path.read_text())
    change(index)
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines = manifest_lines(path)
    lines[1 + k].update(index_sha256=hashlib.sha256(raw).hexdigest(), index_size=len(raw))
    write_manifest(path, lines)


def read_all(path, **kw):
    return list(read_episodes(path, **kw))


def expect(path, error, match, **kw):
    with pytest.raises(error, match=match):
        read_all(path, **kw)


def test_edited_index_fails_its_checksum(ds):
    _, index = shard(ds)
    index.write_text(index.read_text().replace('"lookback": 2', '"lookback": 1', 1))
    expect(ds, CorruptDatasetError, "manifest checksum")


def test_truncated_data_file(ds):
    data, _ = shard(ds)
    data.write_bytes(data.read_bytes()[:-100])
    expect(ds, CorruptDatasetError, "truncated or altered")


def test_flipped_data_byte_caught_by_verify(ds):
    data, _ = shard(ds)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))
    expect(ds, CorruptDatasetError, "CRC-32 mismatch", verify=True)


def test_damaged_manifest_line(ds):
    raw = bytearray((ds / "manifest.jsonl").read_bytes())
    at = raw.index(b'"data_size": ') + len(b'"data_size": ')
    raw[at] = ord("9") if raw[at] != ord("9") else ord("8")
    (ds / "manifest.jsonl").write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError, match="CRC-32 mismatch"):
        dataset_info(ds)


def test_torn_manifest_tail_is_ignored_and_repaired(ds):
    before = len(Dataset(ds))
    with open(ds / "manifest.jsonl", "ab") as f:
        f.write(b'{"v": 2, "shard": "00')
    assert len(Dataset(ds)) == before and Dataset(ds).torn_manifest
    with DatasetWriter(ds) as w:
        w.write(make_episode(3))
    assert len(Dataset(ds)) == before + 1 and not Dataset(ds).torn_manifest


@pytest.mark.parametrize("bad", ["../../etc", "0123456789ABCDEF", "x" * 16, ""])
def test_shard_names_are_checked(ds, bad):
    lines = manifest_lines(ds)
    lines[1]["shard"] = bad
    write_manifest(ds, lines)
    with pytest.raises(UnsafeDataError, match="not a plain shard name"):
        dataset_info(ds)


@pytest.mark.parametrize("which", ["data", "index"])
def test_symlinks_and_fifos_are_refused(ds, tmp_path, which):
    data, index = shard(ds)
    target = data if which == "data" else index
    outside = tmp_path / "outside"
    shutil.copy(target, outside)
    target.unlink()
    target.symlink_to(outside)
    expect(ds, UnsafeDataError, "symlink|not a regular file|outside")
    target.unlink()
    os.mkfifo(target)
    expect(ds, UnsafeDataError, "not a regular file")


def test_manifest_fifo_does_not_block(ds):
    (ds / "manifest.jsonl").unlink()
    os.mkfifo(ds / "manifest.jsonl")
    with pytest.raises(UnsafeDataError, match="not a regular file"):
        dataset_info(ds)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda ix: ix["episodes"][0].update(rows=[1, 5]), "row range"),
        (lambda ix: ix["data"].update(rows=3), "add up"),
        (
            lambda ix: ix["episodes"][0]["meta"].update(observation_space={"space_ref": 99}),
            "space reference",
        ),
        (
            lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(dtype="|O"),
            "plain dtype|bad dtype",
        ),
        (
            lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(count=10**6),
            "out of range",
        ),
        (
            lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(path=["nope"]),
            "missing from the shard",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"]["observations"].update(layout="pickle"),
            "unknown column layout",
        ),
        (lambda ix: ix.update(version=3), "version"),
        (lambda ix: ix["episodes"][0]["meta"].update(columns=[]), "malformed episode metadata"),
        (
            lambda ix: ix["episodes"][0]["meta"].update(extra_model_outputs={"a": 1}),
            "malformed episode metadata",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["extra_model_outputs"].append([1, {}]),
            "malformed extra_model_outputs entry",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"].update(actions="pickle"),
            "column actions metadata is malformed",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"]["rewards"].update(lookback=-1),
            "bad lookback/size",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"]["rewards"].update(size=True),
            "bad lookback/size",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"]["actions"]["leaves"].append({}),
            "leaf list does not match",
        ),
        (
            lambda ix: ix["episodes"][0]["meta"]["columns"]["actions"]["leaves"][0].update(
                file=["a", "list"]
            ),
            "malformed leaf entry",
        ),
        (
            lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(
                path=["rewards", "x"]
            ),
            "missing from the shard",
        ),
        (
            lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(path=[10**20]),
            "cannot rebuild",
        ),
    ],
)
def test_malformed_index_with_matching_checksum(ds, change, match):
    reseal_index(ds, 0, change)
    expect(ds, CorruptDatasetError, match)


def test_foreign_arrow_file_with_wrong_types(ds):
    data, _ = shard(ds)
    table = pa.ipc.open_file(str(data)).read_all()
    bad = table.set_column(
        table.schema.get_field_index("observations"),
        "observations",
        pa.array(["x"] * table.num_rows),
    )
    with pa.OSFile(str(data), "wb") as f, pa.ipc.new_file(f, bad.schema) as w:
        w.write_table(bad)
    raw = data.read_bytes()

    def fix(index):
        index["data"].update(size=len(raw), crc32=zlib.crc32(raw))

    reseal_index(ds, 0, fix)
    lines = manifest_lines(ds)
    lines[1]["data_size"] = len(raw)
    write_manifest(ds, lines)
    expect(ds, CorruptDatasetError, "Arrow type", verify=True)


def test_unsupported_header_version(ds):
    lines = manifest_lines(ds)
    lines[0]["version"] = 3
    write_manifest(ds, lines)
    with pytest.raises(UnsupportedVersionError):
        dataset_info(ds)
    with pytest.raises(UnsupportedVersionError):
        DatasetWriter(ds)


def test_random_damage_only_raises_dataset_errors(ds):
    rng = np.random.default_rng(1)
    files = sorted(p for p in ds.rglob("*") if p.is_file())
    originals = {p: p.read_bytes() for p in files}
    for _ in range(80):
        f = files[rng.integers(len(files))]
        raw = bytearray(originals[f])
        at = int(rng.integers(len(raw)))
        raw[at] ^= 1 << int(rng.integers(8))
        f.write_bytes(bytes(raw))
        try:
            dataset_info(ds)
            read_all(ds, verify=True)
            for i in range(len(Dataset(ds))):
                Dataset(ds).steps(i, 0, 1)
        except DatasetError:
            pass
        else:
            pytest.fail(f"a flipped bit in {f.name} at byte {at} went unnoticed")
        f.write_bytes(originals[f])


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda lines: lines.append(dict(lines[1])), CorruptDatasetError, "twice"),
        (lambda lines: lines[0].update(format="pickle"), CorruptDatasetError, "header"),
        (lambda lines: lines[1].update(v=True), UnsupportedVersionError, "not 2"),
        (lambda lines: lines[1].update(data_size=-1), CorruptDatasetError, "non-negative int"),
        (lambda lines: lines[1].update(index_size="3107"), CorruptDatasetError, "non-negative int"),
        (lambda lines: lines[1]["episodes"].append(["x", 0]), CorruptDatasetError, "summary"),
        (lambda lines: lines[1].update(shard="../../x"), UnsafeDataError, "plain shard name"),
    ],
    ids=[
        "shard_listed_twice",
        "not_a_header",
        "bool_version",
        "negative_size",
        "size_a_string",
        "short_summary",
        "path_in_the_name",
    ],
)
def test_hostile_manifest_lines_with_valid_seals(ds, change, error, match):
    """Each line's CRC is right (a hostile writer can compute it): the content is checked."""
    lines = manifest_lines(ds)
    change(lines)
    write_manifest(ds, lines)
    with pytest.raises(error, match=match):
        dataset_info(ds)
        read_all(ds)


def test_manifest_without_a_complete_line(ds):
    (ds / "manifest.jsonl").write_bytes(b'{"format": "episodes-dataset"')  # torn, no newline
    with pytest.raises(CorruptDatasetError, match="no header line"):
        dataset_info(ds)


def _forge_data(path: Path, data: bytes) -> None:
    """Replaces shard 0's data file and recomputes every checksum that covers it."""
    data_path, _ = shard(path)
    data_path.write_bytes(data)
    reseal_index(path, 0, lambda ix: ix["data"].update(crc32=zlib.crc32(data)))
    lines = manifest_lines(path)
    lines[1].update(data_size=len(data))
    write_manifest(path, lines)


def test_forged_invalid_utf8_in_a_text_column_is_corrupt_data(tmp_path):
    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        w.write(
            SingleAgentEpisode(
                "a",
                observations=[np.zeros(2, np.float32)] * 3,
                actions=[0, 1],
                rewards=[1.0, 2.0],
                infos=[{"k": "abc"}, {}, {}],
                len_lookback_buffer=0,
            )
        )
    data = bytearray(shard(path)[0].read_bytes())
    data[data.index(b'"abc"') + 2] = 0xFF
    _forge_data(path, bytes(data))
    expect(path, CorruptDatasetError, "UTF8", verify=True)


_FLIP_EVERY_BYTE = """
import os, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_v2_untrusted import _forge_data
from episodes.io import Dataset, DatasetError
root = Path({root!r})
original = (root / "original.arrow").read_bytes()
for pos in range(0, len(original), {stride}):
    data = bytearray(original)
    data[pos] ^= 0x01
    _forge_data(root / "ds", bytes(data))
    try:
        ds = Dataset(root / "ds", verify=True)
        for i in range(len(ds)):
            ds.episode(i)
            ds.steps(i, 0, 1)
    except DatasetError:
        pass
print("survived")
"""


def test_forged_bit_flips_in_the_data_file_raise_dataset_errors_only(tmp_path):
    # With every checksum recomputed a flip reaches Arrow's reader: it must not crash the
    # interpreter (SIGBUS / SIGABRT in C++) nor leak another exception. Run in a child so a
    # crash fails this test instead of killing pytest.
    import subprocess
    import sys

    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        w.write(make_episode(1, obs_space="box_u8", numpy=True))
    (tmp_path / "original.arrow").write_bytes(shard(path)[0].read_bytes())
    code = _FLIP_EVERY_BYTE.format(tests=str(Path(__file__).parent), root=str(tmp_path), stride=1)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "survived" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize(
    "change",
    [
        lambda ix: ix["episodes"][0]["meta"]["columns"]["rewards"]["leaves"][0].update(
            file=["a", "list"]
        ),
        lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(path=["rewards", "x"]),
        lambda ix: next(iter(ix["episodes"][0]["leaves"].values())).update(path=[10**20]),
    ],
    ids=["leaf file is a list", "path through a non-struct column", "huge int in a path"],
)
def test_malformed_leaves_with_matching_checksum_on_every_read_path(ds, change):
    from episodes.io import Dataset, dataset_info

    reseal_index(ds, 0, change)
    for read in (
        lambda: Dataset(ds).steps(0, 0, 1),
        lambda: Dataset(ds).episode(0),
        lambda: dataset_info(ds),
        lambda: read_all(ds),
    ):
        try:
            read()
        except CorruptDatasetError:
            pass  # any DatasetError subclass is the promise; no other exception may escape


@pytest.fixture
def alike_ds(tmp_path):
    # Two shards of one column type each: a torch dataset joins them when it is made.
    path = tmp_path / "alike"
    with DatasetWriter(path, shard_bytes=1) as w:
        w.write_many([make_episode(k, obs_space="box_u8", numpy=True) for k in (1, 2)])
    return path


def test_torch_datasets_refuse_an_episode_without_a_rewards_column(alike_ds):
    from episodes.io.torch_data import TransitionDataset

    ds = alike_ds

    reseal_index(ds, 0, lambda ix: ix["episodes"][0]["meta"]["columns"].pop("rewards"))
    with pytest.raises(CorruptDatasetError):
        TransitionDataset(ds)[0]


def _fewer_actions(index):
    entry = index["episodes"][0]
    column = entry["meta"]["columns"]["actions"]
    column["size"] -= 1
    for spec in column["leaves"]:
        entry["leaves"][spec["file"]]["count"] -= 1


@pytest.mark.parametrize("read", ["steps", "episode", "transitions"])
def test_column_sizes_that_disagree_with_the_steps_are_corrupt_on_every_read(alike_ds, read):
    # Each leaf matched its column's size, but the size was not checked against the steps:
    # steps() and the torch datasets raised a bare IndexError.
    ds = alike_ds
    reseal_index(ds, 0, _fewer_actions)
    data = Dataset(ds)
    with pytest.raises(CorruptDatasetError, match="disagree"):
        if read == "steps":
            data.steps(0, 0, 1)
        elif read == "episode":
            data.episode(0)
        else:
            from episodes.io.torch_data import TransitionDataset

            TransitionDataset(ds)[0]


def test_a_damaged_shard_is_read_and_reported_once(tmp_path, monkeypatch):
    # Its data file was read and checksummed again for every piece, each a report line.
    from episodes.io import shard_reader, validate_dataset

    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        w.write_many([make_episode(k, obs_space="box_u8", numpy=True) for k in range(20)])
    data, _ = shard(path)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    data.write_bytes(bytes(raw))
    opened = []
    real = shard_reader.Shard

    def counting(*args, **kwargs):
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(shard_reader, "Shard", counting)
    report = validate_dataset(path)
    assert len(opened) == 1 and len(report.problems) == 1 and "CRC" in report.problems[0]

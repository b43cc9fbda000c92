"""Issue #14's integrity holes, each reproduced as a user would hit it (v1 datasets)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _gen import make_episode

from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    EpisodeWriter,
    UnsafeDataError,
    dataset_info,
    read_episodes,
)


@pytest.fixture
def ds(tmp_path):
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(make_episode(1, obs_space="box_f64", numpy=True))
        w.write(make_episode(2, obs_space="box_i32", numpy=True))
    return path


def chunks(path: Path) -> list[Path]:
    lines = (path / "manifest.jsonl").read_text().splitlines()
    return [path / json.loads(line)["chunk"] for line in lines]


def flip_header(f: Path, old: bytes, new: bytes) -> None:
    raw = f.read_bytes()
    assert old in raw[:128]
    f.write_bytes(raw.replace(old, new, 1))


@pytest.mark.parametrize(
    ("chunk", "name", "old", "new"),
    [
        pytest.param(0, "obs.0.npy", b"'<f8'", b"'>f8'", id="byte-order"),
        pytest.param(1, "act.0.npy", b"'<i8'", b"'<m8'", id="int-to-timedelta"),
        pytest.param(0, "obs.0.npy", b"(8, 2, 2)", b"(8, 4, 1)", id="shape"),
    ],
)
def test_flipped_npy_header_is_caught(ds, chunk, name, old, new):
    flip_header(chunks(ds)[chunk] / name, old, new)
    for verify in (False, True):
        with pytest.raises(CorruptDatasetError, match="header CRC-32"):
            list(read_episodes(ds, verify=verify))


def test_damaged_header_brace_is_a_dataset_error(ds):
    f = chunks(ds)[0] / "obs.0.npy"
    raw = bytearray(f.read_bytes())
    end = raw.index(b"}")
    raw[end] = ord(" ")
    f.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError):
        list(read_episodes(ds))


def test_damaged_header_brace_from_old_writer_is_a_dataset_error(ds):
    """Chunks written before header CRCs existed: the header parser's errors are wrapped."""
    chunk = chunks(ds)[0]
    meta = json.loads((chunk / "meta.json").read_text())
    for entry in meta["files"].values():
        entry.pop("hcrc32")
    raw_meta = json.dumps(meta).encode()
    (chunk / "meta.json").write_bytes(raw_meta)
    line = json.loads((ds / "manifest.jsonl").read_text().splitlines()[0])
    line["meta_sha256"] = hashlib.sha256(raw_meta).hexdigest()
    rest = (ds / "manifest.jsonl").read_text().splitlines()[1:]
    (ds / "manifest.jsonl").write_text("\n".join([json.dumps(line), *rest]) + "\n")
    assert len(list(read_episodes(ds, verify=True))) == 2  # old chunks stay readable
    f = chunk / "obs.0.npy"
    raw = bytearray(f.read_bytes())
    raw[raw.index(b"}")] = ord(" ")
    f.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError, match="not a valid .npy"):
        list(read_episodes(ds))


def test_info_checks_meta_checksum(ds):
    meta_path = chunks(ds)[0] / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["observation_space"] = {"type": "Discrete", "n": -1, "start": 0}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CorruptDatasetError, match="manifest checksum"):
        dataset_info(ds)


def test_info_with_invalid_space_and_matching_checksum(ds):
    meta_path = chunks(ds)[0] / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["observation_space"] = {"type": "Discrete", "n": -1, "start": 0}
    raw = json.dumps(meta).encode()
    meta_path.write_bytes(raw)
    lines = (ds / "manifest.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["meta_sha256"] = hashlib.sha256(raw).hexdigest()
    (ds / "manifest.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(CorruptDatasetError, match="invalid space"):
        dataset_info(ds)


@pytest.mark.parametrize("target", ["meta", "manifest", "format"])
def test_symlink_to_dev_zero_is_refused(ds, target):
    path = {
        "meta": chunks(ds)[0] / "meta.json",
        "manifest": ds / "manifest.jsonl",
        "format": ds / "format.json",
    }[target]
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(UnsafeDataError, match="symlink|not a regular file"):
        dataset_info(ds)
        list(read_episodes(ds))


@pytest.mark.parametrize("target", ["meta", "manifest", "format", "npy"])
def test_fifo_is_refused_without_blocking(ds, target):
    path = {
        "meta": chunks(ds)[0] / "meta.json",
        "manifest": ds / "manifest.jsonl",
        "format": ds / "format.json",
        "npy": chunks(ds)[0] / "obs.0.npy",
    }[target]
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(UnsafeDataError, match="not a regular file"):
        dataset_info(ds)
        list(read_episodes(ds))


@pytest.mark.parametrize(
    ("key", "value"),
    [("return", True), ("return", False), ("t", True), ("nbytes", False), ("terminated", 1)],
)
def test_manifest_rejects_bools_as_numbers(ds, key, value):
    lines = (ds / "manifest.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first[key] = value
    (ds / "manifest.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(CorruptDatasetError, match="wrong type"):
        dataset_info(ds)


def test_info_fails_on_a_deleted_chunk(ds):
    import shutil

    shutil.rmtree(chunks(ds)[1])
    with pytest.raises(CorruptDatasetError, match="missing on disk"):
        dataset_info(ds)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodes", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_info_fails_on_a_deleted_chunk(ds):
    import shutil

    shutil.rmtree(chunks(ds)[1])
    proc = run_cli("info", str(ds))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("episodes: error:")


def test_cli_validate_header_damage_is_one_line_per_chunk(ds):
    f = chunks(ds)[0] / "obs.0.npy"
    raw = bytearray(f.read_bytes())
    raw[raw.index(b"}")] = ord(" ")
    f.write_bytes(bytes(raw))
    proc = run_cli("validate", str(ds))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "BAD chunks/" in proc.stderr


def test_cli_info_into_closed_pipe_is_quiet(ds):
    """``episodes info DIR | head -1``: the reader is gone before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "episodes", "info", str(ds)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == 141


def test_every_reader_failure_is_a_dataset_error(ds):
    """A random byte flip anywhere in any file never escapes as a foreign exception."""
    rng = np.random.default_rng(0)
    files = sorted(p for p in ds.rglob("*") if p.is_file() and p.name != ".lock")
    originals = {p: p.read_bytes() for p in files}
    for _ in range(60):
        f = files[rng.integers(len(files))]
        raw = bytearray(originals[f])
        if not raw:
            continue
        raw[rng.integers(len(raw))] ^= 1 << int(rng.integers(8))
        f.write_bytes(bytes(raw))
        try:
            dataset_info(ds)
            list(read_episodes(ds, verify=True))
        except DatasetError:
            pass
        f.write_bytes(originals[f])


def _bad_code_point(raw: bytes, text: str) -> bytes:
    """Replaces the UTF-32 encoding of ``text``'s first character by U+110000 (invalid)."""
    needle = text.encode("utf-32-le")
    assert needle in raw
    at = raw.index(needle)
    return raw[:at] + (0x110000).to_bytes(4, "little") + raw[at + 4 :]


def test_invalid_code_point_in_a_blob_string(tmp_path):
    """Found by the fuzz test: numpy raised SystemError turning such an item into a str."""
    from episodes import SingleAgentEpisode

    ep = SingleAgentEpisode(
        "s",
        observations=[0, 1],
        infos=[{}, {"names": np.array(["qqqq", "rrrr"])}],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(ep)
    blob = chunks(path)[0] / "blob.npy"
    blob.write_bytes(_bad_code_point(blob.read_bytes(), "qqqq"))
    with pytest.raises(CorruptDatasetError, match="invalid code point"):
        list(read_episodes(path))


def test_invalid_code_point_in_a_v2_string_column(tmp_path):
    import gymnasium as gym

    from episodes import SingleAgentEpisode
    from episodes.io import Dataset, DatasetWriter

    ep = SingleAgentEpisode(
        "t",
        observations=["wwww", "xxxx"],
        observation_space=gym.spaces.Text(4),
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        w.write(ep)
    (data,) = (path / "shards").glob("*.arrow")
    data.write_bytes(_bad_code_point(data.read_bytes(), "xxxx"))
    with pytest.raises(CorruptDatasetError, match="invalid code point"):
        Dataset(path).episode(0)
    with pytest.raises(CorruptDatasetError, match="CRC-32"):
        list(read_episodes(path, verify=True))

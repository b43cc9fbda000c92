from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _gen import make_episode

from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    EpisodeWriter,
    NotADatasetError,
    UnsafeDataError,
    UnsupportedVersionError,
    dataset_info,
    load_episode,
    read_episodes,
)

MARKER = Path("/tmp") / f"episodes-pwned-{os.getpid()}"


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


@pytest.fixture
def ds(tmp_path):
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(make_episode(1, obs_space="box_u8", numpy=True))
        w.write(make_episode(2, obs_space="dict", numpy=False))
    return path


def chunk_dirs(path):
    return [
        path / json.loads(line)["chunk"]
        for line in (path / "manifest.jsonl").read_text().splitlines()
    ]


def read_all(path, **kw):
    return [ep for ep in read_episodes(path, **kw)]


def rewrite_meta(chunk: Path, path: Path, change):
    meta = json.loads((chunk / "meta.json").read_text())
    change(meta)
    raw = json.dumps(meta).encode()
    (chunk / "meta.json").write_bytes(raw)
    lines = (path / "manifest.jsonl").read_text().splitlines()
    out = []
    for line in lines:
        entry = json.loads(line)
        if entry["chunk"] == f"chunks/{chunk.name}":
            entry["meta_sha256"] = hashlib.sha256(raw).hexdigest()
        out.append(json.dumps(entry))
    (path / "manifest.jsonl").write_text("\n".join(out) + "\n")


def expect(path, error, match, **kw):
    with pytest.raises(error, match=match) as info:
        read_all(path, **kw)
    assert isinstance(info.value, DatasetError)
    assert not MARKER.exists()


def test_truncated_npy(ds):
    f = chunk_dirs(ds)[0] / "obs.0.npy"
    f.write_bytes(f.read_bytes()[:-10])
    expect(ds, CorruptDatasetError, "truncated")


def test_truncated_npy_with_matching_size_entry(ds):
    chunk = chunk_dirs(ds)[0]
    f = chunk / "obs.0.npy"
    f.write_bytes(f.read_bytes()[:-10])
    rewrite_meta(chunk, ds, lambda m: m["files"]["obs.0.npy"].update(size=f.stat().st_size))
    expect(ds, CorruptDatasetError, "header and file size disagree")


def test_corrupted_npy_header(ds):
    f = chunk_dirs(ds)[0] / "obs.0.npy"
    data = bytearray(f.read_bytes())
    data[12:30] = b"X" * 18
    f.write_bytes(bytes(data))
    expect(ds, CorruptDatasetError, "not a valid .npy")


def test_flipped_data_bytes_caught_by_verify(ds):
    f = chunk_dirs(ds)[0] / "obs.0.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    read_all(ds)  # without verify the size/header checks pass
    expect(ds, CorruptDatasetError, "CRC-32 mismatch", verify=True)


def test_truncated_and_corrupted_json(ds):
    chunk = chunk_dirs(ds)[1]
    (chunk / "meta.json").write_bytes((chunk / "meta.json").read_bytes()[:50])
    expect(ds, CorruptDatasetError, "manifest checksum")


def test_malformed_meta_with_matching_checksum(ds):
    chunk = chunk_dirs(ds)[1]
    rewrite_meta(chunk, ds, lambda m: m["columns"]["observations"].update(layout="pickle"))
    expect(ds, CorruptDatasetError, "unknown column layout")
    rewrite_meta(
        chunk, ds, lambda m: m["columns"]["observations"].update(layout="arrays", lookback=999)
    )
    expect(ds, CorruptDatasetError, "lookback")
    rewrite_meta(
        chunk,
        ds,
        lambda m: (m["columns"]["observations"].update(lookback=2), m["columns"].pop("actions")),
    )
    expect(ds, CorruptDatasetError, "'actions' is missing")


def test_invalid_json_bytes(ds):
    chunk = chunk_dirs(ds)[1]
    raw = b'{"format": "episodes-dataset", "version": 1, '
    (chunk / "meta.json").write_bytes(raw)
    lines = (ds / "manifest.jsonl").read_text().splitlines()
    entry = json.loads(lines[1])
    entry["meta_sha256"] = hashlib.sha256(raw).hexdigest()
    (ds / "manifest.jsonl").write_text(lines[0] + "\n" + json.dumps(entry) + "\n")
    expect(ds, CorruptDatasetError, "not valid JSON")
    (ds / "manifest.jsonl").write_text("{not json\n" + json.dumps(entry) + "\n")
    expect(ds, CorruptDatasetError, "manifest.jsonl line 1 is not valid JSON")


def test_object_dtype_npy_with_pickle_never_runs(ds):
    chunk = chunk_dirs(ds)[0]
    f = chunk / "obs.0.npy"
    np.save(f, np.array([Evil()] * 3, dtype=object), allow_pickle=True)
    rewrite_meta(chunk, ds, lambda m: m["files"]["obs.0.npy"].update(size=f.stat().st_size))
    expect(ds, UnsafeDataError, "object")
    expect(ds, UnsafeDataError, "object", verify=True)
    assert not MARKER.exists()


def test_raw_pickle_payload_never_runs(ds):
    import pickle

    chunk = chunk_dirs(ds)[0]
    f = chunk / "obs.0.npy"
    f.write_bytes(pickle.dumps(Evil()))
    rewrite_meta(chunk, ds, lambda m: m["files"]["obs.0.npy"].update(size=f.stat().st_size))
    expect(ds, CorruptDatasetError, "not a valid .npy")
    assert not MARKER.exists()


def test_npz_is_refused(ds):
    chunk = chunk_dirs(ds)[0]
    f = chunk / "obs.0.npy"
    with open(f, "wb") as fh:
        np.savez(fh, a=np.array([Evil()], dtype=object))
    rewrite_meta(chunk, ds, lambda m: m["files"]["obs.0.npy"].update(size=f.stat().st_size))
    expect(ds, CorruptDatasetError, "not a valid .npy")


def test_structured_dtype_is_refused(ds):
    chunk = chunk_dirs(ds)[0]
    f = chunk / "obs.0.npy"
    np.save(f, np.zeros(3, dtype=[("a", "i4"), ("b", "O")]), allow_pickle=True)
    rewrite_meta(chunk, ds, lambda m: m["files"]["obs.0.npy"].update(size=f.stat().st_size))
    expect(ds, UnsafeDataError, "refused")


def test_manifest_pointing_outside(ds, tmp_path):
    lines = (ds / "manifest.jsonl").read_text().splitlines()
    for bad in ["../outside", "/etc", "chunks/../../x", "chunks/00000000-abcdefab/../..", "meta"]:
        entry = json.loads(lines[0])
        entry["chunk"] = bad
        (ds / "manifest.jsonl").write_text(json.dumps(entry) + "\n" + lines[1] + "\n")
        expect(ds, UnsafeDataError, "not a plain chunks/NAME")


def test_symlinked_chunk_escaping_dataset(ds, tmp_path):
    outside = tmp_path / "outside"
    chunk = chunk_dirs(ds)[0]
    chunk.rename(outside)
    chunk.symlink_to(outside)
    expect(ds, UnsafeDataError, "outside the dataset")


def test_symlinked_file_is_refused(ds, tmp_path):
    chunk = chunk_dirs(ds)[0]
    target = chunk / "real.bin"
    (chunk / "obs.0.npy").rename(target)
    (chunk / "obs.0.npy").symlink_to(target)
    expect(ds, UnsafeDataError, "not a regular file")


def test_meta_listing_unsafe_file_names(ds):
    chunk = chunk_dirs(ds)[0]
    rewrite_meta(
        chunk, ds, lambda m: m["files"].update({"../../etc/passwd": {"size": 1, "crc32": 0}})
    )
    expect(ds, UnsafeDataError, "not a plain .npy name")


@pytest.mark.parametrize("where", ["format", "manifest", "meta"])
def test_wrong_format_versions(ds, where):
    if where == "format":
        (ds / "format.json").write_text(json.dumps({"format": "episodes-dataset", "version": 99}))
    elif where == "manifest":
        lines = (ds / "manifest.jsonl").read_text().splitlines()
        entry = json.loads(lines[0])
        entry["v"] = 2
        (ds / "manifest.jsonl").write_text(json.dumps(entry) + "\n" + lines[1] + "\n")
    else:
        rewrite_meta(chunk_dirs(ds)[0], ds, lambda m: m.update(version=7))
    expect(ds, UnsupportedVersionError, "not supported")
    if where != "meta":
        with pytest.raises(UnsupportedVersionError):
            dataset_info(ds)
        with pytest.raises(UnsupportedVersionError):
            EpisodeWriter(ds)


@pytest.mark.parametrize(
    "missing", ["format.json", "manifest.jsonl", "chunk", "meta", "npy", "blob"]
)
def test_missing_files(ds, missing):
    chunk = chunk_dirs(ds)[1]
    if missing == "chunk":
        import shutil

        shutil.rmtree(chunk)
    elif missing == "meta":
        (chunk / "meta.json").unlink()
    elif missing == "npy":
        (chunk / "obs.pos.npy" if False else chunk / "obs.0.npy").unlink()
    elif missing == "blob":
        (chunk / "blob.npy").unlink()
    else:
        (ds / missing).unlink()
    error = NotADatasetError if missing == "format.json" else CorruptDatasetError
    expect(ds, error, "missing|not an episodes dataset")


def test_errors_from_load_episode(ds):
    (chunk_dirs(ds)[0] / "meta.json").write_text("{}")
    with pytest.raises(CorruptDatasetError):
        load_episode(ds, "ep-1")
    assert load_episode(ds, "ep-2").id_ == "ep-2"


def test_tagged_values_are_checked(ds):
    chunk = chunk_dirs(ds)[1]

    def bad_info(m):
        m["columns"]["infos"]["items"][1] = {"__ep_nd__": 10_000}

    rewrite_meta(chunk, ds, bad_info)
    expect(ds, CorruptDatasetError, "blob index")

    def bad_dtype(m):
        m["columns"]["infos"]["items"][1] = {"__ep_nd__": 0}
        m["blob"][0][1] = "|O8"

    rewrite_meta(chunk, ds, bad_dtype)
    expect(ds, CorruptDatasetError, "bad dtype")

    def bad_tag(m):
        m["blob"][0][1] = "<f4"
        m["custom_data"] = {"__ep_eval__": "os.system('x')"}

    rewrite_meta(chunk, ds, bad_tag)
    expect(ds, CorruptDatasetError, "unknown or malformed tag")

"""Hunt fixes for saved replay buffers: the files of a save are checked before they are trusted.

Each case loaded a buffer with other data, hung, or escaped as an error other than the
documented ``ValueError``: a FIFO or a symlink for ``replay.json`` or ``priorities.npy``, a
damaged ``.npy`` header (``TokenError``, an 8 TiB allocation), a flipped bit (another capacity,
batch size or priority), a ``true`` or ``1.0`` version, unknown counters, and episodes the
buffer cannot store (``TypeError``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

STEPS = 6  # stored steps of the saved buffer, so priorities.npy holds 6 float64


def _episode(id_: str, n: int = 3) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
    )


def _saved(tmp_path: Path, prioritized: bool = True) -> Path:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(100, seed=0)
    buf.add([_episode("a"), _episode("b")])
    buf.sample(4)
    if isinstance(buf, PrioritizedEpisodeReplayBuffer):
        order = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
        buf.update_priorities([0.5, 1.0, 2.0, 3.0, 4.0, 1.5], order)
    buf.save(tmp_path / "saved")
    return tmp_path / "saved"


def _edit(path: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    meta = json.loads((path / "replay.json").read_text())
    change(meta)
    (path / "replay.json").write_text(json.dumps(meta))


def _legacy(path: Path) -> None:
    """Turns a save into one written before checksums were recorded (version 1, no crc32)."""

    def change(meta: dict[str, Any]) -> None:
        meta.pop("crc32", None)
        meta.pop("priorities_crc32", None)
        meta["version"] = 1

    _edit(path, change)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and (a.dtype, a.shape) == (b.dtype, b.shape)
            and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        )
    return type(a) is type(b) and a == b


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


# --------------------------------------------- 2: FIFOs, symlinks and directories are refused
@pytest.mark.timeout(20)  # a FIFO blocked the load forever
@pytest.mark.parametrize("kind", ["fifo", "symlink out of the save", "directory"])
@pytest.mark.parametrize("name", ["replay.json", "priorities.npy", "episodes"])
def test_a_save_entry_of_the_wrong_kind_is_refused(tmp_path, name, kind):
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("FIFOs need POSIX")
    if kind == "directory" and name == "episodes":
        pytest.skip("episodes/ is a directory")
    path = _saved(tmp_path)
    outside = tmp_path / f"outside-{name}"  # an intact copy, outside the save
    shutil.move(path / name, outside)
    if kind == "fifo":
        os.mkfifo(path / name)
    elif kind == "directory":
        (path / name).mkdir()
    else:
        (path / name).symlink_to(outside)
    if kind.startswith("symlink"):
        refusal = "is a symlink"
    else:  # episodes/ is to be a directory, the others regular files
        refusal = "is no directory" if name == "episodes" else "is not a regular file"
    with pytest.raises(ValueError, match=rf"/{re.escape(name)} {refusal}[ ,(]+refused"):
        EpisodeReplayBuffer.load(path)


def test_a_replay_json_beyond_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    from episodes.replay import saved_files

    path = _saved(tmp_path)
    monkeypatch.setattr(saved_files, "MAX_META_BYTES", 64)
    with pytest.raises(ValueError, match="large"):
        EpisodeReplayBuffer.load(path)


# ------------------------------------ 3 and 4: a damaged priorities.npy is a ValueError
def _npy(descr: str, shape: tuple[int, ...], payload: bytes, tail: bytes = b"}") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, ".encode() + tail
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


_F8 = np.arange(1, STEPS + 1, dtype="<f8").tobytes()
PRIORITY_FILES = {
    "closing brace flipped (TokenError)": _npy("<f8", (STEPS,), _F8, tail=b"u"),
    "2**40 items in 48 bytes (MemoryError)": _npy("<f8", (2**40,), _F8),
    "shape and size agree, one item more": _npy("<f8", (STEPS + 1,), _F8 + _F8[:8]),
    "two-dimensional": _npy("<f8", (STEPS, 1), _F8),
    "float32": _npy("<f4", (STEPS,), np.ones(STEPS, "<f4").tobytes()),
    "int64": _npy("<i8", (STEPS,), np.ones(STEPS, "<i8").tobytes()),
    "object dtype": _npy("|O", (STEPS,), b"\x80\x04N." * STEPS),
    "truncated": _npy("<f8", (STEPS,), _F8[:-3]),
    "trailing bytes": _npy("<f8", (STEPS,), _F8 + b"\0" * 8),
    "not a .npy file": b"PK\x03\x04 a zip file",
    "empty": b"",
    "header longer than the file": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
    "header a list": b"\x93NUMPY\x01\x00\x10\x00[1, 2, 3]      \n" + _F8,
    "unknown .npy version": b"\x93NUMPY\x09\x00" + _npy("<f8", (STEPS,), _F8)[8:],
}


@pytest.mark.parametrize("legacy", [False, True], ids=["checksummed", "legacy save"])
@pytest.mark.parametrize("data", PRIORITY_FILES.values(), ids=PRIORITY_FILES.keys())
def test_a_damaged_priorities_file_is_a_value_error(tmp_path, data, legacy):
    # A legacy save records no CRC-32 of its priorities: its header parser is what refuses.
    path = _saved(tmp_path)
    if legacy:
        _legacy(path)
    (path / "priorities.npy").write_bytes(data)
    with pytest.raises(ValueError, match="priorities"):
        EpisodeReplayBuffer.load(path)


# ---------------------------------------- 7: a flipped bit is refused, not loaded as other data
SILENT_FLIPS = {  # the flips the hunt found loading silently: (file, needle, offset, bit)
    "capacity 100 -> 120": ("replay.json", b'"capacity": 100', 13, 0x02),
    "batch_size_B 16 -> 17": ("replay.json", b'"batch_size_B": 16', 17, 0x01),
    "alpha 1.0 -> 3.0": ("replay.json", b'"alpha": 1.0', 9, 0x02),
    "a counter 6 -> 7": ("replay.json", b'"added_timesteps": 6', 19, 0x01),
    "last priority's exponent": ("priorities.npy", b"", -2, 0x01),
}


@pytest.mark.parametrize("flip", SILENT_FLIPS.values(), ids=SILENT_FLIPS.keys())
def test_the_reported_silent_flips_are_refused(tmp_path, flip):
    name, needle, offset, bit = flip
    path = _saved(tmp_path)
    data = bytearray((path / name).read_bytes())
    data[(data.index(needle) if needle else 0) + offset] ^= bit
    (path / name).write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum|CRC"):
        EpisodeReplayBuffer.load(path)


@pytest.mark.parametrize("prioritized", [True, False], ids=["prioritized", "uniform"])
def test_every_flipped_byte_is_refused_or_harmless(tmp_path, prioritized):
    # One bit of every byte of both files (bit i % 8 of byte i): a ValueError, or the same
    # buffer (a flip in the JSON's white space changes nothing that is read).
    path = _saved(tmp_path, prioritized)
    want = EpisodeReplayBuffer.load(path).get_state()
    silent = []
    for name in ("replay.json", "priorities.npy") if prioritized else ("replay.json",):
        original = (path / name).read_bytes()
        for i in range(len(original)):
            data = bytearray(original)
            data[i] ^= 1 << (i % 8)
            (path / name).write_bytes(bytes(data))
            try:
                got = EpisodeReplayBuffer.load(path)
            except ValueError:
                continue
            if not _same(got.get_state(), want):
                silent.append((name, i, bytes(data[max(0, i - 12) : i + 4])))
        (path / name).write_bytes(original)
    assert silent == []


def test_a_refused_load_changes_neither_the_save_nor_the_saved_buffer(tmp_path):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add([_episode("a"), _episode("b")])
    before = buf.get_state()
    buf.save(tmp_path / "saved")
    path = tmp_path / "saved"
    _edit(path, lambda m: m.update(capacity=120))
    files = _files(path)
    with pytest.raises(ValueError, match="checksum"):
        EpisodeReplayBuffer.load(path)
    assert _same(buf.get_state(), before) and _files(path) == files


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda m: m.pop("crc32"), "crc32"),
        (lambda m: m.update(crc32="0"), "crc32"),
        (lambda m: m.update(crc32=True), "crc32"),
        (lambda m: m.pop("priorities_crc32"), "priorities_crc32"),
        (lambda m: m.update(priorities_crc32=-1), "priorities_crc32|CRC"),
    ],
    ids=["no checksum", "a string", "a bool", "no priorities checksum", "a wrong one"],
)
def test_a_checksummed_save_must_carry_its_checksums(tmp_path, change, match):
    path = _saved(tmp_path)
    _edit(path, change)
    with pytest.raises(ValueError, match=match):
        EpisodeReplayBuffer.load(path)


@pytest.mark.parametrize("prioritized", [True, False], ids=["prioritized", "uniform"])
def test_a_save_written_before_checksums_still_loads(tmp_path, prioritized):
    path = _saved(tmp_path, prioritized)
    want = EpisodeReplayBuffer.load(path).get_state()
    _legacy(path)
    assert _same(EpisodeReplayBuffer.load(path).get_state(), want)


# ------------------------------------------- a version, counters and keys replay.json cannot hold
@pytest.mark.parametrize(
    "version", [True, 1.0, 2.0, "1", None, 0, 3], ids=lambda v: f"{type(v).__name__} {v!r}"
)
@pytest.mark.parametrize("legacy", [False, True], ids=["checksummed", "legacy save"])
def test_a_version_that_is_no_known_int_is_refused(tmp_path, version, legacy):
    path = _saved(tmp_path)
    if legacy:
        _legacy(path)
    _edit(path, lambda m: m.update(version=version))
    with pytest.raises(ValueError, match="version"):
        EpisodeReplayBuffer.load(path)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda m: m["counters"].update(added_steps=6), "counters.*added_steps"),
        (lambda m: m.update(colour="red"), "colour"),
        (lambda m: m.update(crc32=0), "crc32"),  # a checksum in a version 1 save
        (lambda m: m.update(alpha=0.5, kind="uniform"), "alpha"),
    ],
    ids=["unknown counter", "unknown key", "checksum in version 1", "alpha of a uniform"],
)
def test_keys_a_save_does_not_write_are_refused(tmp_path, change, match):
    path = _saved(tmp_path)
    _legacy(path)
    _edit(path, change)
    with pytest.raises(ValueError, match=match):
        EpisodeReplayBuffer.load(path)


def test_episodes_the_buffer_cannot_store_are_a_value_error_naming_the_save(tmp_path):
    path = _saved(tmp_path, prioritized=False)
    shutil.rmtree(path / "episodes")
    # Text observations: replay refuses them (nested actions, once used here, are stored
    # since session 43).
    with EpisodeWriter(path / "episodes") as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=["x", "y"],
                actions=[0],
                rewards=[1.0],
                len_lookback_buffer=0,
            )
        )
    with pytest.raises(ValueError, match="numeric arrays only") as info:
        EpisodeReplayBuffer.load(path)
    assert str(path) in str(info.value) and isinstance(info.value.__cause__, TypeError)

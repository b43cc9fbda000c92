"""Tests that pin behaviour hand-made mutants of session-50 modules got past: each one fails
on a small change to the code it names (a dropped check, a mask not applied, a nested leaf
read from the wrong side) and passes on the real code."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, discard_unlisted, relist_shards
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.world_model import NEEDED, dreamer_steps

# --- episodes.replay.world_model.dreamer_steps ------------------------------------------


def _flat_episode(id_: str, n: int, **flags: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(10 * t + 1) for t in range(n + 1)],
        actions=[t + 1 for t in range(n)],
        rewards=[float(t + 1) for t in range(n)],
        len_lookback_buffer=0,
        **flags,
    )


def _padded_batch() -> dict[str, Any]:
    buf = EpisodeReplayBuffer(100, seed=3)
    buf.add(_flat_episode("done", 2, terminated=True))
    buf.add(_flat_episode("cut", 3, truncated=True))
    buf.add(_flat_episode("running", 1))
    batch = buf.sample(24, batch_length_T=4, lookback=1, pad=True)
    assert (~batch["mask"]).any()  # the point of the test: rows with padded cells
    return batch


def test_dreamer_steps_reads_nothing_from_padded_cells() -> None:
    """Padding is zeros in a sampled batch, but a batch the caller transformed (normalised
    observations, scaled rewards) holds other values there: the steps must not change."""
    batch = _padded_batch()
    junk = dict(batch)
    pad = ~batch["mask"]
    for key in NEEDED:
        column = batch[key].copy()
        column[pad] = True if column.dtype == bool else 7
        junk[key] = column
    clean, dirty = dreamer_steps(batch), dreamer_steps(junk)
    for key in clean:
        np.testing.assert_array_equal(dirty[key], clean[key], err_msg=key)
    off = ~clean["mask"]
    assert off.any() and not clean["obs"][off].any() and not clean["is_last"][off].any()
    assert not dirty["rewards"][clean["is_first"]].any()
    assert not dirty["actions"][clean["is_first"]].any()


def _broken(change: str) -> dict[str, Any]:
    batch = dict(_padded_batch())
    if change == "no-mask":
        del batch["mask"]
    elif change == "no-is-lookback":
        del batch["is_lookback"]
    elif change == "one-column":
        batch = {
            k: v[:, :1] if isinstance(v, np.ndarray) and v.ndim >= 2 else v
            for k, v in batch.items()
        }
    elif change == "flat-is-lookback":
        batch["is_lookback"] = batch["is_lookback"][0]
    elif change == "row-without-lookback":
        lookback = batch["is_lookback"].copy()
        lookback[1, 0] = False
        batch["is_lookback"] = lookback
    return batch


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("no-mask", "lacks the sequence columns \\['mask'\\]"),
        ("no-is-lookback", "lacks the sequence columns \\['is_lookback'\\]"),
        ("one-column", "no lookback=1 sequences"),
        ("flat-is-lookback", "no lookback=1 sequences"),
        ("row-without-lookback", "was sampled with lookback="),
    ],
)
def test_dreamer_steps_refuses_a_batch_that_is_not_lookback_1_sequences(
    change: str, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        dreamer_steps(_broken(change))


def test_dreamer_steps_of_tuple_observations_and_actions() -> None:
    n = 3
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "t",
            observations=[(np.float32(10 * t), np.int64(t)) for t in range(n + 1)],
            actions=[(t + 1, -(t + 1)) for t in range(n)],
            rewards=[float(t + 1) for t in range(n)],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    firsts = 0
    for _ in range(10):
        d = dreamer_steps(buf.sample(4, batch_length_T=3, lookback=1, pad=True))
        mask = d["mask"]
        k = d["obs"][1][mask]
        np.testing.assert_array_equal(d["obs"][0][mask], 10 * k)
        np.testing.assert_array_equal(d["actions"][0][mask], k)  # a_{t-1} = t, 0 at o_0
        np.testing.assert_array_equal(d["actions"][1][mask], -k)
        np.testing.assert_array_equal(d["obs"][1][d["is_first"]], 0)
        firsts += int(d["is_first"].sum())
    assert firsts  # the first observation, read from the obs side, was sampled


# --- episodes.connectors.given_batch.check_batch ----------------------------------------


def test_check_batch_message_stays_short_for_a_huge_value() -> None:
    """A rollout-sized list passed as the batch must not be printed whole in the error."""
    from episodes.connectors.given_batch import check_batch

    with pytest.raises(TypeError, match=r"^FrameStack: batch must be .* \(list\)$") as info:
        check_batch(list(range(100_000)), "FrameStack")
    assert len(str(info.value)) < 300


# --- episodes.cli.relist -----------------------------------------------------------------


def _dataset_with_one_good_and_one_damaged_unlisted_shard(path: Path) -> Path:
    """Three shards, the manifest cut to its first; a lone writer quarantines the other two,
    and one of those gets a flipped data byte."""
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for i, id_ in enumerate("abc"):
            writer.write(_flat_episode(id_, 1 + i))
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:2]))
    DatasetWriter(path, sync=False).close()
    quarantine = path / "unlisted" / "shards"
    data = sorted(quarantine.glob("*.arrow"))
    assert len(data) == 2
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    return quarantine


def test_cli_relist_summary_discard_dry_run_and_file_counts(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "d"
    quarantine = _dataset_with_one_good_and_one_damaged_unlisted_shard(path)
    assert main(["relist", str(path)]) == 1
    assert capsys.readouterr().out.endswith("relisted 1 of 2 unlisted shards; 1 kept\n")

    left = sorted(p.name for p in quarantine.iterdir())
    assert len(left) == 2  # the damaged shard's data and index
    assert main(["relist", str(path), "--discard", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [f"would remove unlisted/shards/{name}" for name in left] + [
        "would remove 2 files of unlisted/shards/"
    ]
    assert sorted(p.name for p in quarantine.iterdir()) == left  # a dry run removes nothing

    (quarantine / left[0]).unlink()
    assert main(["relist", str(path), "--discard"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"removed unlisted/shards/{left[1]}",
        "removed 1 file of unlisted/shards/",
    ]
    assert not quarantine.exists() or not any(quarantine.iterdir())


# --- episodes.io.relist_mend: quarantined files a manifest line lists --------------------


def _listed_shard_moved_out(path: Path) -> tuple[Path, Path, str, str]:
    """Two listed shards; the first's files moved to ``unlisted/shards/`` as a lone writer
    does with the shards of lost lines (here the manifest was put back whole)."""
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for i, id_ in enumerate("ab"):
            writer.write(_flat_episode(id_, 1 + i))
    shards, quarantine = path / "shards", path / "unlisted" / "shards"
    quarantine.mkdir(parents=True)
    (data,) = sorted(shards.glob("*.arrow"))[:1]
    stem = data.name.split(".")[0]
    data_name, index_name = f"{stem}.arrow", f"{stem}.json"
    for name in (data_name, index_name):
        os.rename(shards / name, quarantine / name)
    return shards, quarantine, data_name, index_name


def _flip(file: Path) -> None:
    raw = bytearray(file.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    file.write_bytes(bytes(raw))


def _data_link(shards: Path, quarantine: Path, data: str, index: str, tmp: Path) -> None:
    os.rename(quarantine / data, tmp / "real.arrow")
    os.symlink(tmp / "real.arrow", quarantine / data)


_UNLIKE = {
    "data-is-a-link": (_data_link, "is no plain file"),
    "index-same-size-other-bytes": (
        lambda s, q, d, i, t: _flip(q / i),
        "index differs from",
    ),
    "index-other-bytes-data-in-shards": (
        lambda s, q, d, i, t: (_flip(q / i), os.rename(q / d, s / d)),
        "index differs from",
    ),
    "data-other-size": (
        lambda s, q, d, i, t: (q / d).write_bytes((q / d).read_bytes() + b"\0"),
        "data file differs in size",
    ),
}


@pytest.mark.parametrize(("damage", "words"), list(_UNLIKE.values()), ids=list(_UNLIKE))
def test_relist_keeps_quarantined_files_unlike_their_line(
    tmp_path: Path, damage: Any, words: str
) -> None:
    path = tmp_path / "d"
    shards, quarantine, data, index = _listed_shard_moved_out(path)
    damage(shards, quarantine, data, index, tmp_path)
    before = {p.name: p.is_symlink() for p in quarantine.iterdir()}
    in_shards = sorted(p.name for p in shards.iterdir())
    (found,) = [s for s in relist_shards(path, sync=False) if s.problem is not None]
    assert words in found.problem and not found.relisted
    assert {p.name: p.is_symlink() for p in quarantine.iterdir()} == before
    assert sorted(p.name for p in shards.iterdir()) == in_shards


def test_relist_moves_back_a_quarantined_index_whose_data_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "d"
    shards, quarantine, data, index = _listed_shard_moved_out(path)
    (quarantine / data).unlink()
    (restored,) = [s for s in relist_shards(path, sync=False) if s.place != "shards"]
    assert restored.problem is None and (shards / index).is_file()


def test_relist_leaves_a_listed_name_taken_in_shards_dir(tmp_path: Path) -> None:
    """A listed file whose name in shards/ is taken (a twin, or a link) is not replaced."""
    path = tmp_path / "d"
    shards, quarantine, data, index = _listed_shard_moved_out(path)
    shutil.copyfile(quarantine / index, shards / index)  # a twin of the quarantined index
    os.symlink(tmp_path / "nowhere", shards / data)  # a dangling link
    relist_shards(path, sync=False)
    assert (shards / data).is_symlink() and (quarantine / data).is_file()
    assert (quarantine / index).is_file()


_STRAYS = {
    "no-shard-suffix": ("0123456789abcdef.arrow", "0123456789abcdef.txt"),
    "no-shard-name": ("notes.arrow", "notes.json"),
}


@pytest.mark.parametrize(("in_shards", "stray"), list(_STRAYS.values()), ids=list(_STRAYS))
def test_relist_moves_no_stray_file_out_of_quarantine(
    tmp_path: Path, in_shards: str, stray: str
) -> None:
    path = tmp_path / "d"
    shards, quarantine, _, _ = _listed_shard_moved_out(path)
    (shards / in_shards).write_bytes(b"x")
    (quarantine / stray).write_bytes(b"y")
    relist_shards(path, sync=False)
    assert (quarantine / stray).read_bytes() == b"y" and not (shards / stray).exists()


def test_relist_moves_no_directory_named_as_a_shard_file(tmp_path: Path) -> None:
    path = tmp_path / "d"
    shards, quarantine, _, _ = _listed_shard_moved_out(path)
    (shards / "0123456789abcdef.arrow").write_bytes(b"x")
    (quarantine / "0123456789abcdef.json").mkdir()
    relist_shards(path, sync=False)
    assert (quarantine / "0123456789abcdef.json").is_dir()
    assert not (shards / "0123456789abcdef.json").exists()


# --- episodes.io.unlisted -----------------------------------------------------------------


def _one_listed_one_quarantined(path: Path) -> tuple[str, str]:
    """Shards of "a" (listed) and "b" (its line lost, quarantined by a lone writer)."""
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for i, id_ in enumerate("ab"):
            writer.write(_flat_episode(id_, 1 + i))
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().splitlines(keepends=True)
    manifest.write_bytes(b"".join(lines[:2]))
    DatasetWriter(path, sync=False).close()
    (listed,) = {p.name.split(".")[0] for p in (path / "shards").iterdir()}
    (lost,) = {p.name.split(".")[0] for p in (path / "unlisted" / "shards").iterdir()}
    return listed, lost


def test_relist_refuses_a_quarantined_shard_whose_name_shards_dir_holds(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _, lost = _one_listed_one_quarantined(path)
    (path / "shards" / f"{lost}.arrow").write_bytes(b"someone else's")
    (found,) = [s for s in relist_shards(path, sync=False) if s.place != "shards"]
    assert found.problem == "shards/ holds a file of its name" and not found.relisted
    assert (path / "shards" / f"{lost}.arrow").read_bytes() == b"someone else's"


def test_relist_refuses_a_quarantined_file_named_as_a_listed_shard(tmp_path: Path) -> None:
    path = tmp_path / "d"
    listed, _ = _one_listed_one_quarantined(path)
    (path / "unlisted" / "shards" / f"{listed}.parquet").write_bytes(b"x")
    problems = {s.name: s.problem for s in relist_shards(path, dry_run=True)}
    assert problems[listed] == "a listed shard has its name"


def test_discard_keeps_links_and_takes_a_listed_name_shards_dir_holds(tmp_path: Path) -> None:
    """Only plain files go; a listed file is kept only where shards/ lacks its name (the
    rule relist uses to move it back: a name taken, even by a dangling link, is not)."""
    path = tmp_path / "d"
    listed, lost = _one_listed_one_quarantined(path)
    quarantine = path / "unlisted" / "shards"
    os.symlink(tmp_path / "nowhere", quarantine / "0123456789abcdef.arrow")
    os.rename(path / "shards" / f"{listed}.arrow", quarantine / f"{listed}.arrow")
    os.rename(path / "shards" / f"{listed}.json", quarantine / f"{listed}.json")
    os.symlink(tmp_path / "nowhere", path / "shards" / f"{listed}.arrow")
    names = discard_unlisted(path, dry_run=True)
    assert names == sorted([f"{lost}.arrow", f"{lost}.json", f"{listed}.arrow"])
    discard_unlisted(path, sync=False)
    assert sorted(p.name for p in quarantine.iterdir()) == [
        "0123456789abcdef.arrow",
        f"{listed}.json",
    ]


def test_relist_refuses_a_piece_around_a_listed_zero_step_piece(tmp_path: Path) -> None:
    path = tmp_path / "d"
    point = SingleAgentEpisode("x", observations=[5.0], t_started=5, len_lookback_buffer=0)
    around = SingleAgentEpisode(
        "x",
        observations=[float(t) for t in range(3, 9)],
        actions=[0] * 5,
        rewards=[0.0] * 5,
        t_started=3,
        len_lookback_buffer=0,
    )
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        writer.write(point)
        writer.write(around)
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:2]))
    DatasetWriter(path, sync=False).close()
    (found,) = relist_shards(path, sync=False)
    assert found.problem is not None and "a listed piece (5 to 5)" in found.problem


def test_relist_checks_the_oldest_index_first_wherever_it_lies(tmp_path: Path) -> None:
    """Two unlisted copies of one piece: the one with the older index is listed, the other
    refused, even where the older lies in shards/ and the newer in the quarantine."""
    path = tmp_path / "d"
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for id_ in "zaa":
            writer.write(_flat_episode(id_, 2))
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().splitlines(keepends=True)
    manifest.write_bytes(b"".join(lines[:2]))
    older, newer = (json.loads(line)["shard"] for line in lines[2:])
    shards, quarantine = path / "shards", path / "unlisted" / "shards"
    quarantine.mkdir(parents=True)
    for suffix in (".arrow", ".json"):
        os.rename(shards / f"{newer}{suffix}", quarantine / f"{newer}{suffix}")
    os.utime(shards / f"{older}.json", ns=(10**18, 10**18))
    os.utime(quarantine / f"{newer}.json", ns=(2 * 10**18, 2 * 10**18))
    found = relist_shards(path, sync=False)
    assert [(s.name, s.place, s.relisted) for s in found] == [
        (older, "shards", True),
        (newer, "unlisted/shards", False),
    ]
    assert found[1].problem is not None and "the same steps as" in found[1].problem


def _piece(t0: int, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "x",
        observations=[float(t) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[0.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
    )


def test_relist_names_a_listed_piece_that_really_overlaps(tmp_path: Path) -> None:
    """Listed pieces 0..10 and 2..5; an unlisted 5..8 overlaps the first only (the second
    ends where it starts), so the first is the one named."""
    path = tmp_path / "d"
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for t0, n in ((0, 10), (2, 3), (5, 3)):
            writer.write(_piece(t0, n))
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:3]))
    (found,) = relist_shards(path, dry_run=True)
    assert found.problem is not None and found.problem.endswith("a listed piece (0 to 10)")


def _edit_index(index: Path, edit: Any) -> None:
    obj = json.loads(index.read_bytes())
    edit(obj)
    index.write_text(json.dumps(obj))


_BAD_INDEX = {
    "size-is-a-bool": (
        lambda obj: obj["data"].__setitem__("size", True),
        "the index has no data file size",
    ),
}


@pytest.mark.parametrize(("edit", "words"), list(_BAD_INDEX.values()), ids=list(_BAD_INDEX))
def test_relist_refuses_an_index_unlike_its_data(tmp_path: Path, edit: Any, words: str) -> None:
    path = tmp_path / "d"
    _, lost = _one_listed_one_quarantined(path)
    _edit_index(path / "unlisted" / "shards" / f"{lost}.json", edit)
    (found,) = [s for s in relist_shards(path, sync=False) if s.place != "shards"]
    assert found.problem is not None and words in found.problem and not found.relisted


@pytest.mark.parametrize("reward", [1.5, math.inf, -math.inf, math.nan], ids=str)
def test_relist_appends_the_very_line_that_was_lost(tmp_path: Path, reward: float) -> None:
    path = tmp_path / "d"
    with DatasetWriter(path, shard_bytes=1, sync=False) as writer:
        for id_ in "za":
            writer.write(
                SingleAgentEpisode(
                    id_,
                    observations=[0.0, 1.0, 2.0],
                    actions=[0, 1],
                    rewards=[1.0, reward],
                    len_lookback_buffer=0,
                )
            )
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().splitlines(keepends=True)
    manifest.write_bytes(b"".join(lines[:2]))
    (found,) = relist_shards(path, sync=False)
    assert found.relisted
    assert manifest.read_bytes() == b"".join(lines)

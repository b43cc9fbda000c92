"""The command line's side of what foreign readers of ``shards/`` need.

- ``episodes merge``, ``split`` and ``filter`` keep the source's data format and compression
  (they wrote uncompressed Arrow), and take ``--data-format`` / ``--compression``.
- ``episodes record`` takes them too (``DatasetWriter`` did; the command did not).
- ``episodes validate`` notes files in ``shards/`` that no manifest line lists (exit 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, data_files, read_episodes


def _source(path: Path, data_format: str, compression: str | None) -> Path:
    with DatasetWriter(path, data_format=data_format, compression=compression, sync=False) as w:
        w.write_many(
            SingleAgentEpisode(
                f"ep-{i}",
                observations=[0, 1],
                actions=[1],
                rewards=[float(i)],
                terminated=True,
                len_lookback_buffer=0,
            )
            for i in range(6)
        )
    return path


def _storage(*paths: Path) -> set[tuple[str, str | None]]:
    found = set()
    for path in paths:
        for f in data_files(path):
            data = json.loads(f.with_suffix(".json").read_text())["data"]
            found.add((data["format"], data["compression"]))
    return found


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], ("parquet", "zstd")),
        (["--data-format", "arrow"], ("arrow", "zstd")),
        (["--compression", "none"], ("parquet", None)),
        (["--data-format", "arrow", "--compression", "none"], ("arrow", None)),
    ],
    ids=["kept", "format given", "compression given", "both given"],
)
@pytest.mark.parametrize("command", ["merge", "split", "filter"])
def test_copies_keep_or_take_the_storage(
    tmp_path: Path, command: str, flags: list[str], expected: tuple[str, str | None]
) -> None:
    src = str(_source(tmp_path / "src", "parquet", "zstd"))
    out = tmp_path / "out"
    args = {
        "merge": ["merge", src, "--out", str(out)],
        "split": ["split", src, "--train", f"{out}/t", "--val", f"{out}/v", "--fraction", "0.5"],
        "filter": ["filter", src, "--out", str(out), "--min-return", "1"],
    }[command]
    assert main(args + flags) == 0
    outs = [out / "t", out / "v"] if command == "split" else [out]
    assert _storage(*outs) == {expected}
    kept = sorted(e.id_ for o in outs for e in read_episodes(o))
    assert kept == [f"ep-{i}" for i in range(1 if command == "filter" else 0, 6)]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], ("arrow", None)),
        (["--data-format", "parquet", "--compression", "zstd"], ("parquet", "zstd")),
        (["--compression", "zstd"], ("arrow", "zstd")),
    ],
    ids=["default", "parquet zstd", "arrow zstd"],
)
def test_record_takes_the_storage(
    tmp_path: Path, flags: list[str], expected: tuple[str, str | None]
) -> None:
    out = tmp_path / "rec"
    args = ["record", "CartPole-v1", "--steps", "20", "--seed", "0", "--out", str(out)]
    assert main(args + flags) == 0
    assert _storage(out) == {expected}


def test_record_refuses_the_storage_flags_for_format_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rec"
    args = ["record", "CartPole-v1", "--steps", "5", "--out", str(out), "--format", "1"]
    assert main([*args, "--data-format", "parquet"]) == 1
    assert "--data-format and --compression apply to --format 2" in capsys.readouterr().err
    assert not out.exists()


def test_validate_notes_an_unlisted_shard_file_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _source(tmp_path / "src", "arrow", None)
    (src / "shards" / "0123456789abcdef.arrow").write_bytes(b"an interrupted commit's")
    (src / "shards" / ".tmp-0123456789abcdef.arrow").write_bytes(b"a killed writer's")
    assert main(["validate", str(src)]) == 0
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if line.startswith("note: shards/")]
    assert [n.split(":")[1].strip() for n in notes] == [
        "shards/.tmp-0123456789abcdef.arrow",
        "shards/0123456789abcdef.arrow",
    ]
    assert out[-1].startswith("ok: 6 episode pieces")

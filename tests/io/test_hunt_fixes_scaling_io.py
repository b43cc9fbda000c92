"""Reading one episode of a v2 dataset costs what that episode costs, not the whole shard's.

Before, opening a shard fetched, bounds-checked and validated every record batch of its data
file and parsed its whole index into Python objects, so one ``episode(i)`` / ``load_episode``
/ ``read_episodes(start, stop)`` of a 32k-piece shard took seconds. Now a read touches only
its own record batch, and the index is checked entry by entry and kept as text. These tests
pin what a read touches and that every check and error is as before (no timing asserted).
"""

from __future__ import annotations

import gc
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    load_episode,
    read_episodes,
    validate_dataset,
)
from episodes.io.shards import EpisodeRow, ShardEntry, seal_line


def _episode(i: int, steps: int = 3, info: str | None = None) -> SingleAgentEpisode:
    infos: list[dict[str, Any]] = [{} for _ in range(steps + 1)]
    if info is not None:
        infos[0] = {"k": info}
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.full(2, i, np.float32)] * (steps + 1),
        actions=[i % 2] * steps,
        rewards=[float(i)] * steps,
        infos=infos,
        terminated=True,
        len_lookback_buffer=0,
    )


def _write(path: Path, episodes: list[SingleAgentEpisode], **kw: Any) -> Path:
    with DatasetWriter(path, shard_bytes=1 << 30, **kw) as w:
        w.write_many(episodes)
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in (path / "manifest.jsonl").read_bytes().splitlines():
        obj = json.loads(line)
        obj.pop("crc32")
        out.append(obj)
    return out


def _files(path: Path) -> tuple[Path, Path]:
    name = _lines(path)[1]["shard"]
    return path / "shards" / f"{name}.arrow", path / "shards" / f"{name}.json"


def _reseal(path: Path, index_text: bytes | None = None, data: bytes | None = None) -> None:
    """Replaces the shard's index text and/or data file, recomputing every checksum."""
    data_path, index_path = _files(path)
    lines = _lines(path)
    if data is not None:
        data_path.write_bytes(data)
        index = json.loads(index_path.read_bytes())
        index["data"].update(crc32=zlib.crc32(data), size=len(data))
        index_text = json.dumps(index).encode() if index_text is None else index_text
        lines[1]["data_size"] = len(data)
    if index_text is not None:
        index_path.write_bytes(index_text)
        lines[1].update(
            index_sha256=hashlib.sha256(index_text).hexdigest(), index_size=len(index_text)
        )
    (path / "manifest.jsonl").write_bytes(b"".join(seal_line(o) for o in lines))


@pytest.fixture
def fetches(monkeypatch):
    """Counts the record batches fetched from Arrow shard files."""
    got: list[int] = []
    real = pa.ipc.RecordBatchFileReader.get_batch

    def counting(self, i):
        got.append(i)
        return real(self, i)

    monkeypatch.setattr(pa.ipc.RecordBatchFileReader, "get_batch", counting, raising=False)
    return got


def _same(a: SingleAgentEpisode, b: SingleAgentEpisode) -> bool:
    return (
        a.id_ == b.id_
        and np.array_equal(np.asarray(a.get_observations()), np.asarray(b.get_observations()))
        and list(a.get_rewards()) == list(b.get_rewards())
        and list(a.get_infos()) == list(b.get_infos())
    )


# --------------------------------------------------------------- a read touches its batch only
READS = {
    "Dataset.episode": (lambda p: Dataset(p).episode(25), [25]),
    "Dataset.steps": (lambda p: Dataset(p).steps(30, 0, 2), [30]),
    "load_episode": (lambda p: load_episode(p, "e7"), [7]),
    "read_episodes(start, stop)": (lambda p: list(read_episodes(p, start=10, stop=12)), [10, 11]),
    "read_episodes(ids=...)": (lambda p: list(read_episodes(p, ids=["e40", "e3"])), [3, 40]),
}


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_one_read_fetches_only_the_record_batches_of_its_pieces(
    tmp_path, fetches, read, compression
):
    # Before: every read opened the shard by fetching and validating all 50 batches.
    path = _write(tmp_path / "ds", [_episode(i) for i in range(50)], compression=compression)
    run, touched = READS[read]
    run(path)
    assert sorted(set(fetches)) == touched


def test_a_whole_read_still_fetches_each_batch_once(tmp_path, fetches):
    path = _write(tmp_path / "ds", [_episode(i) for i in range(20)])
    ds = Dataset(path)
    got = [ds.episode(i) for i in range(20)] + [ds.episode(i) for i in range(20)]
    # Each pass fetches each batch once (an open shard keeps only its last few batches), and
    # each batch is checked once.
    assert sorted(fetches) == sorted(list(range(20)) * 2)
    assert ds.locate(0)[0].parts.fetched == 20
    assert all(_same(a, _episode(i % 20)) for i, a in enumerate(got))


def test_an_open_shard_does_not_hold_its_whole_index_as_objects(tmp_path):
    # A parsed index is ~40 container objects per piece: held by every open shard, every
    # later pass of the cyclic collector walked them all (0.5 s each at 32k pieces).
    n = 2000
    path = _write(tmp_path / "ds", [_episode(i, steps=1) for i in range(n)])
    ds = Dataset(path)
    gc.collect()
    before = len(gc.get_objects())
    ds.episode(n // 2)
    gc.collect()
    assert len(gc.get_objects()) - before < 5 * n


# ------------------------------------------------------------- damage: what each read checks
def _with_a_bad_string_in_piece(tmp_path: Path, bad: int, n: int = 6) -> Path:
    path = _write(tmp_path / "ds", [_episode(i, info=f"marker{i}x") for i in range(n)])
    data_path, _ = _files(path)
    data = bytearray(data_path.read_bytes())
    data[data.index(f"marker{bad}x".encode()) + 2] = 0xFF  # not UTF-8: validate() refuses it
    _reseal(path, data=bytes(data))
    return path


def test_a_damaged_batch_is_refused_by_every_read_that_touches_it(tmp_path):
    path = _with_a_bad_string_in_piece(tmp_path, bad=3)
    ds = Dataset(path)
    assert _same(ds.episode(0), _episode(0, info="marker0x"))  # before: the shard was refused
    for read in (
        lambda: ds.episode(3),
        lambda: ds.episode(3),  # refused again, from the cache, not a crash
        lambda: load_episode(path, "e3"),
        lambda: list(read_episodes(path)),
    ):
        with pytest.raises(CorruptDatasetError, match="UTF8|UTF-8|utf"):
            read()


@pytest.mark.parametrize(
    "read",
    [
        lambda p: Dataset(p, verify=True).episode(0),
        lambda p: load_episode(p, "e0", verify=True),
        lambda p: list(read_episodes(p, start=0, stop=1, verify=True)),
    ],
    ids=["Dataset(verify=True)", "load_episode(verify=True)", "read_episodes(verify=True)"],
)
def test_a_verifying_read_still_checks_every_batch_of_the_shard(tmp_path, read):
    path = _with_a_bad_string_in_piece(tmp_path, bad=4)
    with pytest.raises(CorruptDatasetError, match="UTF8|UTF-8|utf"):
        read(path)


def test_validate_still_reports_a_damaged_batch_of_a_piece_nobody_read(tmp_path):
    path = _with_a_bad_string_in_piece(tmp_path, bad=5)
    report = validate_dataset(path)
    assert len(report.problems) == 1 and "UTF" in report.problems[0].upper()


# ------------------------------------------------------ files not in the writer's batch layout
def _rebatched(path: Path, sizes: list[int] | None) -> None:
    """Rewrites the shard's Arrow file with the same rows in batches of ``sizes`` rows."""
    data_path, _ = _files(path)
    table = pa.ipc.open_file(str(data_path)).read_all().combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        if sizes is None:
            w.write_table(table)  # one batch
        else:
            start = 0
            for size in sizes:
                w.write_batch(table.slice(start, size).to_batches()[0])
                start += size
    _reseal(path, data=sink.getvalue().to_pybytes())


def test_a_shard_written_as_one_batch_reads_as_before(tmp_path, fetches):
    path = _write(tmp_path / "ds", [_episode(i, steps=i + 1) for i in range(5)])
    _rebatched(path, None)
    got = list(read_episodes(path))
    assert all(_same(a, _episode(i, steps=i + 1)) for i, a in enumerate(got))
    assert _same(Dataset(path).episode(3), _episode(3, steps=4))


def test_as_many_batches_as_pieces_but_split_elsewhere_reads_as_before(tmp_path):
    # Pieces of 2, 3, 4, 5 rows; batches of 4, 3, 4, 3: piece 0 lies inside batch 0 (read),
    # piece 1 (rows 2-4) straddles batches 0 and 1 (refused), as the reader always did.
    path = _write(tmp_path / "ds", [_episode(i, steps=i + 1) for i in range(4)])
    _rebatched(path, [4, 3, 4, 3])
    ds = Dataset(path)
    assert _same(ds.episode(0), _episode(0, steps=1))
    with pytest.raises(CorruptDatasetError, match="straddles"):
        ds.episode(1)


def test_a_file_whose_rows_do_not_add_up_is_refused(tmp_path):
    path = _write(tmp_path / "ds", [_episode(i) for i in range(3)])
    _rebatched(path, [4, 4])  # 8 of the 12 rows, in 2 batches for 3 pieces
    with pytest.raises(CorruptDatasetError, match="wrong number of rows"):
        Dataset(path).episode(0)


# ---------------------------------------------------- the index: same checks, same precedence
def _index(path: Path) -> dict[str, Any]:
    return json.loads(_files(path)[1].read_bytes())


def _forge(index: dict[str, Any], change) -> bytes:
    change(index)
    return json.dumps(index).encode()


def _rows(k: int, value: Any):
    return lambda ix: ix["episodes"][k].update(rows=value)


INDEX_TEXTS = {
    # name: (new index text from the written one, expected error or None)
    "indented": (lambda ix: json.dumps(ix, indent=2).encode(), None),
    "no spaces": (lambda ix: json.dumps(ix, separators=(",", ":")).encode(), None),
    "whitespace around": (lambda ix: b" \n\t" + json.dumps(ix).encode() + b"\r\n ", None),
    "episodes twice, the last wins": (
        lambda ix: (
            json.dumps(ix).encode()[:-1]
            + b', "episodes": '
            + json.dumps(ix["episodes"]).encode()
            + b"}"
        ),
        None,
    ),
    "episodes first as junk": (
        lambda ix: b'{"episodes": 7, ' + json.dumps(ix).encode()[1:],
        None,
    ),
    "trailing comma": (
        lambda ix: json.dumps(ix).encode().replace(b"}]", b"},]"),
        "not valid JSON",
    ),
    "extra data": (lambda ix: json.dumps(ix).encode() + b"{}", "not valid JSON"),
    "utf-8 BOM": (lambda ix: b"\xef\xbb\xbf" + json.dumps(ix).encode(), "not valid JSON"),
    "not UTF-8": (lambda ix: json.dumps(ix).encode().replace(b'"e1"', b'"e\xff"'), "JSON"),
    "a list": (lambda ix: json.dumps([ix]).encode(), "not an 'episodes-dataset' shard index"),
    "episodes not a list": (
        lambda ix: _forge(ix, lambda i: i.update(episodes={})),
        "lacks 'data' or 'episodes'",
    ),
    "no episodes": (
        lambda ix: _forge(ix, lambda i: i.pop("episodes")),
        "lacks 'data' or 'episodes'",
    ),
    "one entry too many": (
        lambda ix: _forge(ix, lambda i: i["episodes"].append(i["episodes"][0])),
        "disagrees with the manifest",
    ),
    "a gap in the rows": (lambda ix: _forge(ix, _rows(2, [13, 4])), "episode 2 has a malformed"),
    "a bool row count": (lambda ix: _forge(ix, _rows(0, [0, True])), "episode 0 has a malformed"),
    "a float first row": (lambda ix: _forge(ix, _rows(1, [4.0, 4])), "episode 1 has a malformed"),
    "rows short of the file": (
        lambda ix: _forge(ix, _rows(3, [12, 3])),
        "do not add up to the shard's rows",
    ),
    "another id": (
        lambda ix: _forge(ix, lambda i: i["episodes"][1]["meta"].update(id="e9")),
        "episode 1's id, t_started/t or flags disagree",
    ),
    "format first, before a bad entry": (
        lambda ix: _forge(ix, lambda i: (i.update(format="x"), _rows(2, "x")(i))),
        "not an 'episodes-dataset' shard index",
    ),
    "version before a bad entry": (
        lambda ix: _forge(ix, lambda i: (i.update(version=2.0), _rows(2, "x")(i))),
        "index version 2.0 is not 2",
    ),
    "first bad entry reported": (
        lambda ix: _forge(
            ix, lambda i: (i["episodes"][3]["meta"].update(id="zz"), _rows(1, [0, 0])(i))
        ),
        "episode 1 has a malformed",
    ),
    "NaN inside an entry is JSON here": (
        lambda ix: json.dumps(ix).encode().replace(b'"wall_start": null', b'"wall_start": NaN'),
        None,
    ),
}


@pytest.mark.parametrize("case", list(INDEX_TEXTS), ids=list(INDEX_TEXTS))
def test_a_shard_index_is_checked_as_a_whole_parse_checks_it(tmp_path, case):
    path = _write(tmp_path / "ds", [_episode(i) for i in range(4)])
    make, error = INDEX_TEXTS[case]
    _reseal(path, index_text=make(_index(path)))
    if error is None:
        got = list(read_episodes(path))
        assert all(_same(a, _episode(i)) for i, a in enumerate(got))
        assert Dataset(path).locate(2)[0].entry_of(2)["meta"]["id"] == "e2"
    else:
        with pytest.raises(CorruptDatasetError, match=error):
            Dataset(path).episode(0)


def test_index_entries_read_back_as_the_whole_parse_has_them(tmp_path):
    path = _write(tmp_path / "ds", [_episode(i, info=f"i{i}") for i in range(300)])
    whole = _index(path)["episodes"]
    shard, _ = Dataset(path).locate(0)
    entries = shard.index["episodes"]
    assert len(entries) == len(whole) == 300
    assert all(entries[j] == whole[j] for j in [*range(300), *range(299, -1, -7)])
    assert entries[-1] == whole[-1] and entries[5:8] == whole[5:8]
    for out_of_range in (300, -301):
        with pytest.raises(IndexError):
            entries[out_of_range]


# ------------------------------------------------------------- manifest rows: same checks
ROWS = [
    ["a", 0, 3, 1.5, True, False],
    ["a", 0, 3, None, False, True],
    ["a", 0, 3, 2, True, False],  # an int return
    [{"__ep_tuple__": [1, 2]}, 4, 4, -0.0, False, False],
    [7, 0, 2**63 - 1, 1e308, False, False],
]
BAD_ROWS = [
    ["a", 0, 3, 1.5, True],
    ("a", 0, 3, 1.5, True, False),
    ["a", True, 3, 1.5, True, False],
    ["a", 0, 3.0, 1.5, True, False],
    ["a", 4, 3, 1.5, True, False],
    ["a", -1, 3, 1.5, True, False],
    ["a", 0, 2**63, 1.5, True, False],
    ["a", 0, 3, True, True, False],
    ["a", 0, 3, "1.5", True, False],
    ["a", 0, 3, 10**400, True, False],
    ["a", 0, 3, 1.5, 1, False],
    ["a", 0, 3, 1.5, True, None],
]


@pytest.mark.parametrize("row", ROWS, ids=[repr(r) for r in ROWS])
def test_manifest_rows_parse_as_before(row):
    got = EpisodeRow.from_json(row, "row")
    ret = float("nan") if row[3] is None else float(row[3])
    assert (got.id_, got.t_started, got.t, got.terminated, got.truncated) == (
        row[0],
        row[1],
        row[2],
        row[4],
        row[5],
    )
    assert got.ret == ret or (np.isnan(got.ret) and np.isnan(ret))
    entry = ShardEntry.from_json(
        {
            "v": 2,
            "shard": "0123456789abcdef",
            "data_format": "arrow",
            "index_sha256": "0" * 64,
            "index_size": 1,
            "data_size": 1,
            "episodes": [row, row],
        },
        "line 2",
    )
    assert entry.episodes == (got, got) or np.isnan(got.ret)


@pytest.mark.parametrize("row", BAD_ROWS, ids=[repr(r) for r in BAD_ROWS])
def test_malformed_manifest_rows_are_still_refused(row):
    with pytest.raises(CorruptDatasetError, match="malformed episode summary"):
        EpisodeRow.from_json(row, "row")
    line = {
        "v": 2,
        "shard": "0123456789abcdef",
        "data_format": "arrow",
        "index_sha256": "0" * 64,
        "index_size": 1,
        "data_size": 1,
        "episodes": [["ok", 0, 1, 1.0, True, False], row],
    }
    with pytest.raises(CorruptDatasetError, match="line 2 episode 1: malformed episode summary"):
        ShardEntry.from_json(line, "line 2")


# ------------------------------------------------------------- episodes found by id, as before
def test_ids_are_matched_by_type_and_value_as_before(tmp_path):
    ids: list[Any] = ["1", 1, 1.0, True, ("1",), "x"]
    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        for k, id_ in enumerate(ids):
            w.write(
                SingleAgentEpisode(
                    id_, observations=[k, k + 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
                )
            )
    for k, id_ in enumerate(ids):  # 1, 1.0 and True are three ids (== would make them one)
        assert load_episode(path, id_).get_observations()[0] == k
    assert load_episode(path, np.str_("x")).id_ == "x"
    got = [e.id_ for e in read_episodes(path, ids=[np.str_("1"), 1.0, ("1",)], start=1)]
    assert got == [1.0, ("1",)]


# ------------------------------------------------------- a full pass keeps bounded caches
def test_a_pass_over_every_episode_keeps_a_bounded_number_of_plans_and_views(tmp_path, monkeypatch):
    """Caching every episode's column plans made the cyclic GC walk them all, again and again."""
    import episodes.io.shard_reader as shard_reader

    monkeypatch.setattr(shard_reader, "_CACHED_PLANS", 8)
    monkeypatch.setattr(shard_reader, "_CACHED_VIEWS", 16)
    path = _write(tmp_path / "d", [_episode(i) for i in range(40)])
    ds = Dataset(path)
    first = ds.steps(0, 0, 3)
    for i in range(len(ds)):
        ds.steps(i, 0, 3)
    shard, j = ds.locate(0)
    assert len(shard._plans) <= 8 and len(shard._views) <= 16
    again = ds.steps(0, 0, 3)  # planned afresh: the same steps
    assert j == 0 and np.array_equal(first["observations"], again["observations"])
    assert list(first["rewards"]) == list(again["rewards"])
    assert shard.columns(5) is shard.columns(5)  # still a cache for repeated reads


def test_random_reads_keep_their_plans_and_reads_in_order_keep_none(tmp_path, monkeypatch):
    """A warm random pass re-planned every piece past 256 (17x slower); a pass in order caches
    nothing, so the GC has no plans to walk."""
    import episodes.io.shard_reader as shard_reader

    planned: list[int] = []
    real = shard_reader.plan_columns
    monkeypatch.setattr(
        shard_reader, "plan_columns", lambda shard, j: planned.append(j) or real(shard, j)
    )
    path = _write(tmp_path / "d", [_episode(i) for i in range(300)])
    ds = Dataset(path)
    for i in range(len(ds)):  # in order
        ds.steps(i, 0, 3)
    shard, _ = ds.locate(0)
    assert len(shard._plans) == 0 and len(planned) == 300
    order = list(reversed(range(300)))  # out of order (no piece right after the one before)
    for _ in range(2):  # twice: the second pass plans nothing
        for i in order:
            ds.steps(i, 0, 3)
    assert len(planned) == 600 and len(shard._plans) == 300

"""Reading a v2 manifest again parses only its new lines, and gives what a fresh parse gives.

Before, every open (``Dataset``, ``DatasetWriter``, each Ray Data read or write task) parsed
every manifest line, so N tasks over an N-shard dataset cost N squared lines (1,000 one-shard
writers on one dataset: 10 s, 1,000 read tasks: 10.6 s).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetMetadata,
    DatasetWriter,
    dataset_info,
    read_episodes,
)
from episodes.io import manifest_prefix as prefix
from episodes.io.manifest_lines import seal_line, seal_lines
from episodes.io.shards import ShardEntry, read_v2_manifest

HEADER = {"format": "episodes-dataset", "version": 2, "metadata": {}}


def _header(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("format") != "episodes-dataset":
        raise CorruptDatasetError(f"{where}: no header")
    return obj


class Counting:
    """A shard-line parser that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obj: Any, where: str) -> tuple[Any, str, bool]:
        self.calls += 1
        if not isinstance(obj.get("name"), str):
            raise CorruptDatasetError(f"{where}: no name")
        return dict(obj), obj["name"], True


def _manifest(count: int, first: int = 0) -> bytes:
    return seal_lines([HEADER] + [{"name": f"s{i}"} for i in range(first, first + count)])


def _fresh(raw: bytes) -> Any:
    """What a parse from the start gives: the result, or the error's type and text."""
    prefix.forget("fresh")
    try:
        return prefix.parse_manifest("fresh", raw, _header, Counting())
    except CorruptDatasetError as err:
        return type(err), str(err)
    finally:
        prefix.forget("fresh")


def _resumed(key: str, raw: bytes, parser: Any = None) -> Any:
    try:
        return prefix.parse_manifest(key, raw, _header, parser or Counting())
    except CorruptDatasetError as err:
        return type(err), str(err)


@pytest.fixture(autouse=True)
def _clean() -> Any:
    prefix.forget()
    yield
    prefix.forget()


def _damaged(raw: bytes, at: int) -> bytes:
    flipped = raw[at] ^ 0x01
    return raw[:at] + bytes([flipped]) + raw[at + 1 :]


WHOLE = _manifest(6)
NO_NEWLINE = WHOLE[:-1]  # a whole last line whose newline is missing: read
TORN = WHOLE[: len(WHOLE) - 20]  # a torn last line: ignored

# (name, bytes read first, bytes read next): the second read resumes after the first's lines.
CASES = [
    ("lines appended", _manifest(3), WHOLE),
    ("nothing new", WHOLE, WHOLE),
    ("a torn tail, then completed", TORN, WHOLE),
    ("a torn tail, then cut back", TORN, WHOLE[: WHOLE.rindex(b"\n", 0, len(TORN)) + 1]),
    ("a last line without its newline, then with it", NO_NEWLINE, WHOLE),
    ("a line without its newline, then more", NO_NEWLINE, WHOLE + _manifest(7)[len(WHOLE) :]),
    ("damage inside the prefix read before", WHOLE, _damaged(WHOLE, 150)),
    ("damage in the header", WHOLE, _damaged(WHOLE, 20)),
    ("another dataset at the same path", WHOLE, seal_lines([HEADER, {"name": "other"}])),
    ("a shorter manifest (a line lost)", WHOLE, _manifest(4)),
    ("the header alone, then lines", _manifest(0), WHOLE),
]


@pytest.mark.parametrize("first, then", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_resumed_read_gives_what_a_fresh_parse_gives(first: bytes, then: bytes) -> None:
    _resumed("ds", first)
    assert _resumed("ds", then) == _fresh(then)


def test_a_new_line_repeating_a_kept_shard_name_is_refused() -> None:
    three = _manifest(3)
    _resumed("ds", three)
    repeat = seal_lines([HEADER] + [{"name": f"s{i}"} for i in range(3)] + [{"name": "s1"}])
    assert repeat.startswith(three)
    with pytest.raises(CorruptDatasetError, match="lists shard 's1' twice"):
        prefix.parse_manifest("ds", repeat, _header, Counting())


def test_a_new_line_that_does_not_follow_the_kept_last_line_is_refused() -> None:
    three = _manifest(3)
    _resumed("ds", three)
    stray = three + seal_line({"name": "s9", "prev": "00000000"})
    with pytest.raises(CorruptDatasetError, match="line 5"):
        prefix.parse_manifest("ds", stray, _header, Counting())


def test_each_line_is_parsed_once_over_many_growing_reads() -> None:
    parser = Counting()
    for count in range(1, 41):
        _resumed("ds", _manifest(count), parser)
    assert parser.calls == 40  # 40 reads of up to 40 lines: each line once, not 820 times


def test_a_damaged_prefix_is_parsed_again_and_its_damage_raised() -> None:
    _resumed("ds", WHOLE)
    parser = Counting()
    result = _resumed("ds", _damaged(WHOLE, len(WHOLE) - 30), parser)
    assert result[0] is CorruptDatasetError
    assert parser.calls >= 5  # parsed from the start, not trusted


def test_the_header_is_the_callers_copy() -> None:
    header, _, _, _ = prefix.parse_manifest("ds", WHOLE, _header, Counting())
    header["metadata"]["changed"] = True
    again, _, _, _ = prefix.parse_manifest("ds", WHOLE, _header, Counting())
    assert again == HEADER


def test_at_most_max_kept_manifests_are_kept() -> None:
    for i in range(prefix.MAX_KEPT + 3):
        _resumed(f"ds{i}", WHOLE)
    kept = [i for i in range(prefix.MAX_KEPT + 3) if prefix.known_lines(f"ds{i}")]
    assert kept == list(range(3, prefix.MAX_KEPT + 3))  # the least recently read went


def test_a_manifest_beyond_the_byte_bound_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix, "MAX_KEPT_BYTES", len(WHOLE) - 1)
    _resumed("ds", WHOLE)
    assert prefix.known_lines("ds") == 0


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("tear"), st.integers(1, 60)),
        st.tuples(st.just("unnewline"), st.just(0)),
        st.tuples(st.just("damage"), st.integers(0, 10_000)),
        st.tuples(st.just("cut"), st.integers(1, 3)),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_any_sequence_of_manifest_states_reads_as_a_fresh_parse(ops: list[Any]) -> None:
    prefix.forget()
    count, raw = 0, _manifest(0)
    for op, arg in ops:
        if op == "append":
            count += arg
            raw = _manifest(count)
        elif op == "tear":
            whole = _manifest(count + 1)
            raw = whole[: max(len(_manifest(count)), len(whole) - arg)]
        elif op == "unnewline":
            raw = _manifest(count)[:-1]
        elif op == "damage":
            raw = _damaged(raw, arg % len(raw))
        else:
            count = max(0, count - arg)
            raw = _manifest(count)
        assert _resumed("ds", raw) == _fresh(raw)


# --------------------------------------------------------------------------- on datasets


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}", observations=[i, i + 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


def _count_shard_lines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    parse = ShardEntry.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ShardEntry], obj: Any, where: str) -> ShardEntry:
        calls[0] += 1
        return parse(cls, obj, where)

    monkeypatch.setattr(ShardEntry, "from_json", classmethod(counted))
    return calls


def test_writers_opened_one_after_another_parse_each_shard_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_shard_lines(monkeypatch)
    for i in range(30):  # as a Ray sink's write tasks do: one writer, one shard each
        with DatasetWriter(tmp_path, sync=False) as w:
            w.write(_episode(i))
    assert calls[0] == 29  # each open parses the lines committed since the last; not 435
    prefix.forget()
    assert [ep.id_ for ep in read_episodes(tmp_path)] == [f"e{i}" for i in range(30)]


def test_datasets_opened_per_shard_parse_each_shard_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DatasetWriter(tmp_path, shard_bytes=1, sync=False) as w:
        w.write_many(_episode(i) for i in range(20))
    prefix.forget()
    calls = _count_shard_lines(monkeypatch)
    ids = [next(iter(read_episodes(tmp_path, start=i, stop=i + 1))).id_ for i in range(20)]
    assert ids == [f"e{i}" for i in range(20)]
    assert calls[0] == 20


def test_a_manifest_changed_in_place_is_refused_though_read_before(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path, shard_bytes=1, sync=False) as w:
        w.write_many(_episode(i) for i in range(3))
    assert len(Dataset(tmp_path)) == 3
    manifest = tmp_path / "manifest.jsonl"
    raw = manifest.read_bytes()
    at = raw.index(b'"shard": "') + 12
    manifest.write_bytes(_damaged(raw, at))
    with pytest.raises(CorruptDatasetError):
        Dataset(tmp_path)
    with pytest.raises(CorruptDatasetError):
        DatasetWriter(tmp_path)


def test_the_same_dataset_by_a_relative_path_resumes_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DatasetWriter(tmp_path / "d", shard_bytes=1, sync=False) as w:
        w.write_many(_episode(i) for i in range(4))
    read_v2_manifest(tmp_path / "d")
    monkeypatch.chdir(tmp_path)
    calls = _count_shard_lines(monkeypatch)
    assert len(read_v2_manifest(Path("d"))[1]) == 4
    assert calls[0] == 0
    assert os.path.abspath("d") == str(tmp_path / "d")


def test_an_unshareable_entry_is_parsed_again_for_every_read() -> None:
    calls = [0]

    def private(obj: Any, where: str) -> tuple[Any, str, bool]:
        calls[0] += 1
        return dict(obj), obj["name"], obj["name"] == "s0"  # only s0's entry may be shared

    first = prefix.parse_manifest("ds", WHOLE, _header, private)[1]
    first[1]["changed"] = True  # the caller's own object
    again = prefix.parse_manifest("ds", WHOLE, _header, private)[1]
    assert again == prefix.parse_manifest("fresh", WHOLE, _header, private)[1]
    assert again[0] is first[0] and again[1] is not first[1]
    assert calls[0] == 6 + 5 + 6  # the second read parsed the five unshareable lines only


@pytest.mark.parametrize("id_", [["run", 1], ("run", 1), {"k": [1]}], ids=["list", "tuple", "dict"])
def test_a_caller_changing_its_rows_ids_changes_no_later_read(tmp_path: Path, id_: Any) -> None:
    ep = SingleAgentEpisode(id_, observations=[0, 1], actions=[0], rewards=[1.0])
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write(ep)
    stored = Dataset(tmp_path).summaries[0].id_
    stored.append("x") if isinstance(stored, list) else stored.clear()
    assert Dataset(tmp_path).summaries[0].id_ != stored
    assert dataset_info(tmp_path).episodes[0].id_ == id_
    assert [e.id_ for e in read_episodes(tmp_path)] == [id_]


def test_a_deeply_nested_header_reads_as_a_fresh_parse_reads_it(tmp_path: Path) -> None:
    user: dict[str, Any] = {}
    for _ in range(500):  # deep, yet within what json reads
        user = {"a": user}
    DatasetWriter(tmp_path, metadata=DatasetMetadata(user=user)).close()
    for _ in range(2):  # a fresh parse, then a resumed one
        assert Dataset(tmp_path).metadata.user == user


def test_a_child_forked_while_the_lock_is_held_reads(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write(_episode(0))
    with prefix._kept._lock:  # as another thread of the parent may hold it at the fork
        pid = os.fork()
        if pid == 0:  # the child: read within 10 s, or be killed by the alarm
            signal.alarm(10)
            ok = len(Dataset(tmp_path)) == 1
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert threading.active_count() >= 1


@pytest.mark.parametrize("kept_before", [False, True], ids=["fresh", "read before"])
def test_a_header_seal_with_a_non_ascii_byte_is_corruption(tmp_path: Path, kept_before) -> None:
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write(_episode(0))
    if kept_before:
        Dataset(tmp_path)
    manifest = tmp_path / "manifest.jsonl"
    raw = bytearray(manifest.read_bytes())
    raw[raw.index(b"\n") - 4] = 0xC0  # a hex digit of the header's CRC-32
    manifest.write_bytes(bytes(raw))
    for opening in (Dataset, DatasetWriter):
        with pytest.raises(CorruptDatasetError, match="line 1"):
            opening(tmp_path)

"""Session 15 write-side fixes: values that were lost, padded, or refused with a raw error.

Each refusal leaves the writer usable: a plain episode written after it is the only one read.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.cli import main
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    EpisodeWriter,
    UnstorableValueError,
    migrate,
    read_episodes,
)
from episodes.io.column_codec import encode_column
from episodes.io.values import BlobReader, BlobWriter, decode_value, encode_value

WRITERS = {
    "v1": EpisodeWriter,
    "v2 arrow": DatasetWriter,
    "v2 parquet": lambda path: DatasetWriter(path, data_format="parquet"),
}


def _episode(id_="a", *, numpy=False, **fields):
    fields.setdefault("observations", [0, 1])
    n = len(fields["observations"]) - 1
    fields.setdefault("actions", [0] * n)
    fields.setdefault("rewards", [1.0] * n)
    ep = SingleAgentEpisode(id_, len_lookback_buffer=0, **fields)
    if numpy:
        ep.to_numpy()
    return ep


def _refused_then_usable(make, path, episode, match):
    """The write is refused by name; a plain episode written next is all the dataset holds."""
    w = make(path)
    with pytest.raises(UnstorableValueError, match=match):
        w.write(episode)
    w.write(_episode("ok"))
    w.close()
    assert [e.id_ for e in read_episodes(path)] == ["ok"]


def _round_trip(make, path, episode):
    with make(path) as w:
        w.write(episode)
    (back,) = read_episodes(path)
    return back


# ------------------------------------------------------- 1. lone-surrogate keys in v2 columns
SUR = "\udc80"
SURROGATE_KEYS = {
    "list-mode dict observation": dict(observations=[{SUR: 1}, {SUR: 2}]),
    "numpy'd dict observation": dict(observations=[{SUR: 1}, {SUR: 2}], numpy=True),
    "nested dict action": dict(actions=[{"a": {SUR: 1.0}}]),
    "extra model output key": dict(extra_model_outputs={SUR: [1.0]}),
}


@pytest.mark.parametrize("fields", SURROGATE_KEYS.values(), ids=SURROGATE_KEYS.keys())
@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
def test_v2_refuses_a_lone_surrogate_column_key_by_name(tmp_path, fields, fmt):
    make = lambda p: DatasetWriter(p, data_format=fmt)  # noqa: E731
    _refused_then_usable(make, tmp_path / "d", _episode(**fields), r"key '\\udc80'.*surrogate")


@pytest.mark.parametrize("fields", SURROGATE_KEYS.values(), ids=SURROGATE_KEYS.keys())
def test_v1_still_stores_a_lone_surrogate_column_key(tmp_path, fields):
    ep = _episode(**fields)
    assert _round_trip(EpisodeWriter, tmp_path / "d", ep) == ep


def test_v2_stores_a_lone_surrogate_key_inside_infos(tmp_path):
    ep = _episode(infos=[{"k": {SUR: 1}}, {}])
    assert _round_trip(DatasetWriter, tmp_path / "d", ep).get_infos()[0] == {"k": {SUR: 1}}


def test_migrating_a_lone_surrogate_key_to_v2_is_refused_and_writes_nothing(tmp_path, capsys):
    with EpisodeWriter(tmp_path / "v1") as w:
        w.write(_episode(observations=[{SUR: 1}, {SUR: 2}]))
    with pytest.raises(UnstorableValueError, match="surrogate"):
        migrate(tmp_path / "v1", tmp_path / "v2")
    assert not (tmp_path / "v2").exists()
    assert main(["migrate", str(tmp_path / "v1"), str(tmp_path / "v2")]) == 1
    err = capsys.readouterr().err
    assert "episodes: error: observations: the key" in err and "Traceback" not in err
    assert not (tmp_path / "v2").exists()


# ---------------------------------------------------------- 2. masked arrays (and matrices)
MASKED = np.ma.masked_array([1.0, -999.0], mask=[False, True])
with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)  # numpy discourages matrix
    MATRIX = np.matrix([[1, 2]])
SUBCLASSES = {
    "masked observation": (dict(observations=[MASKED, MASKED]), "masked array"),
    "masked info value": (dict(infos=[{"m": MASKED}, {}]), "masked array"),
    "masked action": (dict(actions=[MASKED]), "masked array"),
    "masked extra model output": (dict(extra_model_outputs={"k": [MASKED]}), "masked array"),
    "masked constant in an info": (dict(infos=[{"m": np.ma.masked}, {}]), "masked array"),
    "matrix observation": (dict(observations=[MATRIX, MATRIX]), "matrix"),
    "matrix info value": (dict(infos=[{"m": MATRIX}, {}]), "matrix"),
}


@pytest.mark.parametrize("fields, match", SUBCLASSES.values(), ids=SUBCLASSES.keys())
@pytest.mark.parametrize("make", WRITERS.values(), ids=WRITERS.keys())
def test_masked_arrays_and_matrices_are_refused(tmp_path, make, fields, match):
    _refused_then_usable(make, tmp_path / "d", _episode(**fields), match)


@pytest.mark.parametrize("make", WRITERS.values(), ids=WRITERS.keys())
def test_a_memmap_is_stored_as_the_array_it_holds(tmp_path, make):
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(2,))
    mm[:] = [1.5, 2.5]
    back = _round_trip(make, tmp_path / "d", _episode(infos=[{"m": mm}, {}]))
    got = back.get_infos()[0]["m"]
    assert type(got) is np.ndarray and got.tolist() == [1.5, 2.5]


# ------------------------------------------------------------- 3. padded str list columns
def _disk_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


@pytest.mark.parametrize("make", WRITERS.values(), ids=WRITERS.keys())
def test_one_long_str_does_not_pad_a_list_column(tmp_path, make):
    obs = ["x"] * 2000
    obs[0] = "y" * 20000
    obs[5] = "é\x00z"
    ep = _episode(observations=obs)
    back = _round_trip(make, tmp_path / "d", ep)
    assert _disk_bytes(tmp_path / "d") < 2 << 20  # was 153 MiB: every item 20,000 wide
    got = back.get_observations()
    assert got == obs and all(type(o) is str for o in got)


PADDING = {
    "one long among short": (["y" * 20000] + ["x"] * 2000, "json"),
    "same lengths": (["ab", "cd"] * 1000, "arrays"),
    "short column": (["y" * 100, "x"], "arrays"),
    "long but a lone surrogate": (["y" * 20000 + SUR] + ["x"] * 2000, "arrays"),
}


@pytest.mark.parametrize("items, layout", PADDING.values(), ids=PADDING.keys())
def test_a_str_column_is_json_only_when_padding_would_dominate(items, layout):
    meta = encode_column(InfiniteLookbackBuffer(items), "obs", {}, BlobWriter(), "obs")
    assert meta["layout"] == layout


def test_a_long_padded_str_with_a_lone_surrogate_still_round_trips_in_v1(tmp_path):
    obs = ["y" * 20000 + SUR] + ["x"] * 2000
    assert _round_trip(EpisodeWriter, tmp_path / "d", _episode(observations=obs)) == (
        _episode(observations=obs)
    )


# ------------------------------------------------------------- 4. deeply nested items
def _nest(depth, kind):
    v = 0
    for _ in range(depth):
        v = {"k": v} if kind == "dict" else ([v] if kind == "list" else (v,))
    return v


@pytest.mark.parametrize("depth", [200, 1500, 5000])
@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
@pytest.mark.parametrize("field", ["observations", "actions", "extra_model_outputs"])
@pytest.mark.parametrize("make", WRITERS.values(), ids=WRITERS.keys())
def test_deep_nesting_is_refused_by_name_not_with_recursion_error(
    tmp_path, make, field, kind, depth
):
    item = _nest(depth, kind)
    fields = {
        "observations": dict(observations=[item, item]),
        "actions": dict(actions=[item]),
        "extra_model_outputs": dict(extra_model_outputs={"k": [item]}),
    }[field]
    _refused_then_usable(make, tmp_path / "d", _episode(**fields), "deeper than 64 levels")


# ------------------------------------------------------ 5. numpy strings ending in NUL
NUL_VALUES = {
    "str_": np.str_("a\x00"),
    "bytes_": np.bytes_(b"x\x00"),
    "only NULs": np.str_("\x00\x00"),
    "one NUL byte": np.bytes_(b"\x00"),
    "astral then NUL": np.str_("\U0001f600\x00"),
    "lone surrogate then NUL": np.str_("\udc80\x00"),
}


def _same(got, want):
    return type(got) is type(want) and len(got) == len(want) and got == want


@pytest.mark.parametrize("value", NUL_VALUES.values(), ids=NUL_VALUES.keys())
@pytest.mark.parametrize("make", WRITERS.values(), ids=WRITERS.keys())
def test_numpy_strings_ending_in_nul_keep_their_nuls(tmp_path, make, value):
    other = type(value)(value[:0] + value[:1])  # a same-typed item without trailing NUL
    ep = _episode(
        observations=[value, other],
        actions=[value],
        infos=[{"v": value, "t": (value,)}, {}],
        extra_model_outputs={"k": [value]},
    )
    back = _round_trip(make, tmp_path / "d", ep)
    assert _same(back.get_observations()[0], value)
    assert _same(back.get_observations()[1], other)
    assert _same(back.get_actions()[0], value)
    assert _same(back.get_infos()[0]["v"], value) and _same(back.get_infos()[0]["t"][0], value)
    assert _same(back.get_extra_model_outputs("k")[0], value)


def test_numpy_strings_without_nul_keep_their_old_encoding():
    blob = BlobWriter()
    assert encode_value(np.str_("a"), blob=blob, where="x") == {"__ep_np__": 0}


@pytest.mark.parametrize("array", [np.zeros(2, "S2"), np.zeros((), np.int32)], ids=["1-d", "int"])
def test_a_malformed_nul_string_entry_is_corrupt(array):
    blob = BlobWriter()
    blob.add(array, "x")
    with pytest.raises(CorruptDatasetError, match="NUL-ended"):
        decode_value({"__ep_npstr__": 0}, blob=BlobReader(*blob.finish(), "b"), where="x")


# ----------------------------------------------------------- 6. `episodes info` statistics
def _info_lines(tmp_path, rewards, capsys):
    with DatasetWriter(tmp_path / "d") as w:
        for i, r in enumerate(rewards):
            w.write(_episode(i, rewards=[r]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["info", str(tmp_path / "d")]) == 0
    out, err = capsys.readouterr()
    return [line for line in out.splitlines() if line.startswith("return")], err, caught


STATS = {
    "huge equal": ([1e308, 1e308], "mean 1e+308  std 0  min 1e+308  max 1e+308"),
    "huge opposite": ([1e308, -1e308], "mean 0  std 1e+308  min -1e+308  max 1e+308"),
    "largest float": ([1.7976931348623157e308] * 3, "mean 1.798e+308  std 0"),
    "ordinary": ([1.0, 2.0, 3.0], "mean 2  std 0.8165  min 1  max 3"),
    "subnormal": ([5e-324, 5e-324], "mean 4.941e-324  std 0"),
    "nan return": ([1.0, float("nan")], "mean nan  std nan  min nan  max nan"),
}


@pytest.mark.parametrize("rewards, want", STATS.values(), ids=STATS.keys())
def test_info_statistics_do_not_overflow_or_warn(tmp_path, capsys, rewards, want):
    lines, err, caught = _info_lines(tmp_path, rewards, capsys)
    assert len(lines) == 1 and want in lines[0]
    assert err == "" and not caught

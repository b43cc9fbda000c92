"""The stored-schema check (round 24) refuses extension types only, at bounded cost.

Its first build (a regression hunt found):
- refused our own datasets whose Dict keys read ``ARROW:extension:name``: the text in the
  footer was taken for the metadata key;
- walked a forged footer listing one field and one key-value pair thousands of times
  quadratically (8 s at 2,048, hours at 65,536);
- left Parquet's logical types (GEOMETRY) free to build a registered extension type, with no
  ``ARROW:schema`` stored to look at first.
"""

from __future__ import annotations

import struct

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.stored_schema import ipc_file_extension, parquet_read_options

KEYS = ["ARROW:extension:name", "x ARROW:extension:name y", "ARROW:schema"]


@pytest.mark.parametrize("fmt", [("arrow", None), ("arrow", "zstd"), ("parquet", None)])
def test_a_key_that_reads_like_the_metadata_key_is_no_extension(tmp_path, fmt) -> None:
    space = gym.spaces.Dict({key: gym.spaces.Box(-1, 1, (1,), np.float32) for key in KEYS})
    obs = [{key: np.full(1, t / 4, np.float32) for key in KEYS} for t in range(3)]
    episode = SingleAgentEpisode(
        "a",
        observations=obs,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=space,
        infos=[{"note": "ARROW:extension:name"}] * 3,
        len_lookback_buffer=0,
    )
    data_format, compression = fmt
    with DatasetWriter(tmp_path / "d", data_format=data_format, compression=compression) as w:
        w.write(episode)
    (back,) = read_episodes(tmp_path / "d")
    assert back == episode


def _footer(copies: int, key: bytes) -> bytes:
    """An IPC footer whose one Field, holding one key-value pair, is listed ``copies`` times
    and whose metadata lists that pair ``copies`` times."""
    b = bytearray(b"\0\0\0\0")

    def u16(v: int) -> bytes:
        return struct.pack("<H", v)

    fvt = len(b)
    b += u16(8) + u16(8) + u16(0) + u16(4)
    ft = len(b)
    b += struct.pack("<i", ft - fvt) + b"\0\0\0\0"
    svt = len(b)
    b += u16(8) + u16(8) + u16(0) + u16(4)
    st = len(b)
    b += struct.pack("<i", st - svt) + b"\0\0\0\0"
    vec = len(b)
    b += struct.pack("<I", copies) + b"\0" * (4 * copies)
    fvt2 = len(b)
    b += u16(18) + u16(8) + u16(0) * 6 + u16(4)
    field = len(b)
    b += struct.pack("<i", field - fvt2) + b"\0\0\0\0"
    mv = len(b)
    b += struct.pack("<I", copies) + b"\0" * (4 * copies)
    kvt = len(b)
    b += u16(6) + u16(8) + u16(4)
    pair = len(b)
    b += struct.pack("<i", pair - kvt) + b"\0\0\0\0"
    text = len(b)
    b += struct.pack("<I", len(key)) + key + b" ARROW:extension:name"
    struct.pack_into("<I", b, 0, ft)
    struct.pack_into("<I", b, ft + 4, st - (ft + 4))
    struct.pack_into("<I", b, st + 4, vec - (st + 4))
    for k in range(copies):
        at = vec + 4 + 4 * k
        struct.pack_into("<I", b, at, field - at)
        at = mv + 4 + 4 * k
        struct.pack_into("<I", b, at, pair - at)
    struct.pack_into("<I", b, field + 4, mv - (field + 4))
    struct.pack_into("<I", b, pair + 4, text - (pair + 4))
    return bytes(b)


@pytest.mark.parametrize(("key", "named"), [(b"k", False), (b"ARROW:extension:name", True)])
def test_a_footer_listing_one_table_many_times_is_walked_once(key, named) -> None:
    footer = _footer(4096, key)  # 4,096 x 4,096 pairs walked by the first build
    data = b"ARROW1\0\0" + footer + struct.pack("<i", len(footer)) + b"ARROW1"
    assert (ipc_file_extension(data) is not None) is named


def test_parquet_reads_build_no_registered_extension_for_a_logical_type(tmp_path) -> None:
    if not parquet_read_options():
        pytest.skip("this pyarrow builds no extension types from Parquet logical types")
    calls: list[bytes] = []

    class Wkb(pa.ExtensionType):
        def __init__(self, meta: bytes = b"{}") -> None:
            self.meta = meta
            super().__init__(pa.binary(), "geoarrow.wkb")

        def __arrow_ext_serialize__(self) -> bytes:
            return self.meta

        @classmethod
        def __arrow_ext_deserialize__(cls, storage, serialized):
            calls.append(serialized)
            return cls(serialized)

    try:
        pa.register_extension_type(Wkb())
    except pa.ArrowKeyError:
        pytest.skip("geoarrow.wkb is registered already in this process")
    try:
        column = pa.ExtensionArray.from_storage(Wkb(b'{"crs": "x"}'), pa.array([b"x"]))
        pq.write_table(pa.table({"geo": column}), tmp_path / "g.parquet", store_schema=False)
        calls.clear()
        table = pq.read_table(tmp_path / "g.parquet", **parquet_read_options())
        assert calls == [] and not isinstance(table.schema.field("geo").type, pa.ExtensionType)
    finally:
        pa.unregister_extension_type("geoarrow.wkb")


class _Recording(pa.ExtensionType):
    """An extension type whose deserializer records each call (as Ray's would unpickle)."""

    calls: list[bytes] = []

    def __init__(self) -> None:
        super().__init__(pa.int64(), "episodes-test.recording")

    def __arrow_ext_serialize__(self) -> bytes:
        return b"payload"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage, serialized):
        cls.calls.append(serialized)
        return cls()


def _parquet_with_extension(path, metadata=None) -> bytes:
    pa.register_extension_type(_Recording())
    try:
        column = pa.ExtensionArray.from_storage(_Recording(), pa.array([1, 2], pa.int64()))
        table = pa.table({"x": column})
        if metadata:
            table = table.replace_schema_metadata(metadata)
        pq.write_table(table, path)
    finally:
        pa.unregister_extension_type("episodes-test.recording")
    return path.read_bytes()


def _found_in(data: bytes):
    from episodes.io.stored_schema import parquet_file_extension

    return parquet_file_extension(pa.BufferReader(data), len(data))


def test_a_decoy_entry_does_not_hide_the_real_schema(tmp_path) -> None:
    # An entry whose key holds the text, valued with a schema whose field is only *named* like
    # the key, listed before the real ARROW:schema: the first build stopped at it.
    decoy = pa.schema([pa.field("ARROW:extension:name", pa.int64())]).serialize().to_pybytes()
    import base64

    data = _parquet_with_extension(
        tmp_path / "d.parquet", {b"zARROW:schema": base64.b64encode(decoy)}
    )
    assert _found_in(data) == ("x", "episodes-test.recording")


def test_a_long_form_field_header_does_not_hide_the_schema(tmp_path) -> None:
    data = bytearray(_parquet_with_extension(tmp_path / "l.parquet"))
    length = int.from_bytes(data[-8:-4], "little")
    footer_at = len(data) - 8 - length
    at = data.index(b"ARROW:schema", footer_at) + len(b"ARROW:schema")
    assert data[at] == 0x18  # the value's short-form header: field 2, binary
    data[at : at + 1] = b"\x08\x04"  # the long form: binary, then field id 2 (zigzag 4)
    data[-8:-4] = (length + 1).to_bytes(4, "little")
    assert _found_in(bytes(data)) == ("x", "episodes-test.recording")


def test_a_parquet_file_naming_an_extension_is_refused_before_pyarrow_builds_it(tmp_path) -> None:
    import base64

    decoy = pa.schema([pa.field("ARROW:extension:name", pa.int64())]).serialize().to_pybytes()
    data = _parquet_with_extension(
        tmp_path / "r.parquet", {b"zARROW:schema": base64.b64encode(decoy)}
    )
    pa.register_extension_type(_Recording())
    try:
        _Recording.calls.clear()
        assert _found_in(data) is not None
        assert _Recording.calls == []
    finally:
        pa.unregister_extension_type("episodes-test.recording")

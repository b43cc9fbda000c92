"""The module helpers round 24 added, each on its own (their callers have tests elsewhere)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from episodes.buffer.set_items import one_pass_items
from episodes.io.arrow_types import extension_refused
from episodes.io.errors import CorruptDatasetError, UnsafeDataError
from episodes.io.fork_lock import ForkLock
from episodes.io.minari_checks import extension_unsafe
from episodes.io.parquet_footer import footer_key_values
from episodes.io.shards import EpisodeRow, ShardEntry, holds_immutable_ids
from episodes.runner.backlog import BACKLOG_CALLS, MIN_BACKLOG, warn_backlog


@pytest.mark.parametrize(
    ("items", "one_pass"),
    [
        ((x for x in [1]), True),
        ({1, 2}, True),
        (range(3), True),
        (iter([1]), True),
        ([1], False),
        ((1, 2), False),
        ({"a": 1}, False),
        ("ab", False),
        (b"ab", False),
        (np.arange(2), False),
        (5, False),
    ],
    ids=[
        "generator",
        "set",
        "range",
        "iterator",
        "list",
        "tuple",
        "dict",
        "str",
        "bytes",
        "array",
        "int",
    ],
)
def test_one_pass_items(items, one_pass) -> None:
    assert one_pass_items(items) is one_pass


@pytest.mark.parametrize(
    ("ids", "immutable"),
    [(["a", 1, 1.5, True, None], True), (["a", ["b", 1]], False), ([{"k": 1}], False), ([], True)],
    ids=["plain", "list-id", "dict-id", "none"],
)
def test_holds_immutable_ids(ids, immutable) -> None:
    rows = tuple(EpisodeRow(i, 0, 1, 0.0, True, False) for i in ids)
    entry = ShardEntry("0123456789abcdef", "arrow", "0" * 64, 2, 0, rows)
    assert holds_immutable_ids(entry) is immutable


def test_fork_lock_is_a_lock() -> None:
    lock = ForkLock()
    assert not lock.locked()
    with lock:
        assert lock.locked()
    assert not lock.locked()


@pytest.mark.parametrize(
    ("carried", "num_steps", "warns"),
    [
        (MIN_BACKLOG, 1, False),
        (MIN_BACKLOG + 1, 1, True),
        (BACKLOG_CALLS * 64, 64, False),
        (BACKLOG_CALLS * 64 + 1, 64, True),
    ],
    ids=["floor", "past-floor", "calls", "past-calls"],
)
def test_warn_backlog_bounds(carried, num_steps, warns) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert warn_backlog(carried=carried, num_steps=num_steps, warned=False) is warns
        assert warn_backlog(carried=carried, num_steps=num_steps, warned=True) is True
    assert len(seen) == int(warns)


def _binary(field_header: bytes, value: bytes) -> bytes:
    return field_header + bytes([len(value)]) + value


@pytest.mark.parametrize(
    ("footer", "pairs"),
    [
        (bytes(1), []),
        # field 5 (list of structs, short header 0x59), one KeyValue: key, value, stop; stop.
        (
            b"\x59\x1c" + _binary(b"\x18", b"k") + _binary(b"\x18", b"v") + b"\x00\x00",
            [(b"k", b"v")],
        ),
        # the value before the key (field ids 2 then 1), and long-form headers
        (
            b"\x59\x1c" + _binary(b"\x08\x04", b"v") + _binary(b"\x08\x02", b"k") + b"\x00\x00",
            [(b"k", b"v")],
        ),
        # an i32 field 1 before the list is skipped
        (b"\x15\x04\x49\x1c" + _binary(b"\x18", b"k") + b"\x00\x00", [(b"k", b"")]),
    ],
    ids=["empty", "one-pair", "reordered-long-form", "skipped-field"],
)
def test_footer_key_values(footer, pairs) -> None:
    assert footer_key_values(footer) == pairs


@pytest.mark.parametrize(
    "footer", [b"", b"\x59\x1c\x18\x7f", b"\x0d"], ids=["empty", "short", "type"]
)
def test_footer_key_values_refuses_malformed_bytes(footer) -> None:
    with pytest.raises(ValueError):
        footer_key_values(footer)


def test_extension_errors_name_the_column() -> None:
    shard = extension_refused(("x/y", "evil"), "shard s")
    minari = extension_unsafe(("obs", "evil"), "episode 0")
    assert isinstance(shard, CorruptDatasetError) and "column x/y" in str(shard)
    assert isinstance(minari, UnsafeDataError) and "'obs'" in str(minari)


def test_check_device() -> None:
    torch = pytest.importorskip("torch")
    from episodes.replay.errors import DeviceError
    from episodes.replay.sampling import check_device

    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")  # the second time: kept
    with pytest.raises(TypeError):
        check_device(3.5)
    with pytest.raises(DeviceError):
        check_device("abc")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="not available"):
            check_device("cuda")

"""The writer's promise as a property: an episode is either written and read back equal, or
refused at write time with UnstorableValueError, leaving the dataset as it was. Drawn values go
where users put odd things: infos, custom_data, extra-model-outputs and list-mode columns.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter, UnstorableValueError, read_episodes


class _Opaque:
    """An object no pickle-free format can store."""


_ODD = [
    None,
    True,
    0,
    -(2**70),
    2**63,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "ünïcode",
    "\x00",
    b"bytes",
    (1, 2),
    [1, [2, 3]],
    {"nested": {"k": [1.0, None]}},
    {1: "int key"},
    {("a",): "tuple key"},
    {1.5, 2.5},
    np.float32(0.5),
    np.int64(7),
    np.bool_(True),
    np.zeros(3, np.float32),
    np.zeros((2, 0)),
    np.array(["a", "bc"]),
    np.array([1 + 2j]),
    np.array([_Opaque()], dtype=object),
    np.datetime64("2026-01-01"),
    _Opaque(),
    print,
]


def odd_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.sampled_from(_ODD),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.integers(),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.text(max_size=3), inner, max_size=3),
        ),
        max_leaves=6,
    )


@st.composite
def odd_episodes(draw: st.DrawFn) -> SingleAgentEpisode:
    n = draw(st.integers(0, 3))
    infos = [
        draw(st.dictionaries(st.text(max_size=3), odd_values(), max_size=2)) for _ in range(n + 1)
    ]
    ep = SingleAgentEpisode(
        draw(st.sampled_from(["a", "b-1", "x" * 40])),
        observations=[np.full(2, i, np.float32) for i in range(n + 1)],
        infos=infos,
        actions=list(range(n)),
        rewards=[float(i) for i in range(n)],
        extra_model_outputs={"odd": [draw(odd_values()) for _ in range(n)]} if n else None,
        len_lookback_buffer=0,
    )
    for key in draw(st.lists(st.text(max_size=3), max_size=2)):
        ep.custom_data[key] = draw(odd_values())
    if draw(st.booleans()):
        try:
            ep.to_numpy()
        except ValueError:
            pass  # items that cannot be stacked stay in list mode
    return ep


def _same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to itself and checks container kinds and dtypes."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ep=odd_episodes())
def test_written_and_read_back_equal_or_refused_at_write_time(ep):
    root = Path(tempfile.mkdtemp())
    try:
        path = root / "ds"
        with EpisodeWriter(path, sync=False) as writer:
            writer.write(SingleAgentEpisode("anchor", observations=[0]))
            try:
                writer.write(ep)
            except UnstorableValueError as error:
                assert str(error)
                stored = list(read_episodes(path, verify=True))
                assert [e.id_ for e in stored] == ["anchor"]  # nothing of the refused one
                return
        anchor, back = list(read_episodes(path, verify=True))
        assert back.id_ == ep.id_ and len(back) == len(ep)
        assert _same(back.get_infos(), ep.get_infos())
        assert _same(back.custom_data, ep.custom_data)
        for key, column in ep.extra_model_outputs.items():
            assert _same(list(back.extra_model_outputs[key].data), list(column.data)) or _same(
                back.extra_model_outputs[key].data, column.data
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)

"""Session 18: list-mode columns of one flat kind are stacked in numpy calls when written.

Writing a list-mode episode (what ``add_env_step`` records) flattened and classified every item
in Python (about 39 calls a step). Columns whose items are all arrays of one dtype, Python
numbers of one type or numpy scalars of one type now stack in a few numpy calls. The tests pin
that the shortcut gives exactly what the item-by-item walk gives (kinds, dtypes, values, and
the columns it declines) and that it calls no per-item helper.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, column_codec, read_episodes

COLUMNS: dict[str, list[Any]] = {
    "float32 arrays": [np.full(3, t, np.float32) for t in range(5)],
    "big-endian arrays": [np.full(2, t, ">f8") for t in range(4)],
    "uint8 images": [np.full((2, 2, 3), t, np.uint8) for t in range(3)],
    "0-d arrays": [np.array(t, np.int16) for t in range(4)],
    "ragged arrays": [np.zeros(2), np.zeros(3)],
    "mixed dtypes": [np.zeros(2, np.float32), np.zeros(2, np.float64)],
    "array subclass": [np.ma.masked_array([1.0, 2.0]), np.ma.masked_array([3.0, 4.0])],
    "object arrays": [np.array([1, "a"], dtype=object)] * 2,
    "floats": [0.5, 1.0, -2.0],
    "ints": [1, 2, 3],
    "ints past int64": [1, 2**70],
    "bools": [True, False, True],
    "complex": [1j, 2 + 0j],
    "strings": ["a", "bc"],
    "int and float": [1, 0.5],
    "np.float32 scalars": [np.float32(t) for t in range(4)],
    "np.int64 scalars": [np.int64(t) for t in range(4)],
    "np.bool_ scalars": [np.bool_(t % 2) for t in range(4)],
    "np.str_ scalars": [np.str_("a"), np.str_("b")],
    "mixed numpy scalars": [np.float32(1), np.float64(2)],
    "dicts": [{"a": np.zeros(2)}, {"a": np.ones(2)}],
    "tuples": [(1, np.zeros(2)), (2, np.ones(2))],
    "one item": [np.arange(3)],
}


def _walked(items: list[Any]) -> Any:
    """What the item-by-item walk gives, the shortcut switched off."""
    real = column_codec._stack_flat
    column_codec._stack_flat = lambda items: column_codec._GENERAL
    try:
        return column_codec._stack_list(items, "x")
    finally:
        column_codec._stack_flat = real


def _same(got: Any, want: Any) -> None:
    if want is None:
        assert got is None
        return
    assert got[0] == want[0]
    assert [name for name, _ in got[1]] == [name for name, _ in want[1]]
    for (_, a), (_, b) in zip(got[1], want[1]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_the_shortcut_gives_what_the_walk_gives(name: str) -> None:
    items = COLUMNS[name]
    _same(column_codec._stack_list(items, "x"), _walked(items))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=False, width=32),
            st.integers(-(2**64), 2**64),
            st.booleans(),
            st.sampled_from([np.float32(1.5), np.int8(3), np.zeros(2), np.ones(2, np.float32)]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_mixture_gives_what_the_walk_gives(items: list[Any]) -> None:
    _same(column_codec._stack_list(items, "x"), _walked(items))


@pytest.mark.parametrize("name", ["float32 arrays", "floats", "np.int64 scalars"])
def test_a_flat_column_calls_no_per_item_helper(monkeypatch, name: str) -> None:
    calls = []
    for helper in ("flatten", "_leaf_kind"):
        real = getattr(column_codec, helper)
        monkeypatch.setattr(
            column_codec, helper, lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k)
        )
    assert column_codec._stack_list(COLUMNS[name] * 50, "x") is not None
    assert calls == []


def test_list_mode_episodes_round_trip_with_their_item_types(tmp_path) -> None:
    ep = SingleAgentEpisode(
        "flat",
        observations=[np.full(3, t, np.float32) for t in range(4)],
        actions=[np.int64(t % 2) for t in range(3)],
        rewards=[0.5, 1.0, 2.0],
        extra_model_outputs={"vf": [np.float32(t) for t in range(3)], "k": [1, 2, 3]},
        len_lookback_buffer=1,
    )
    with EpisodeWriter(tmp_path / "ds") as writer:
        writer.write(ep)
    (back,) = read_episodes(tmp_path / "ds", verify=True)
    assert back == ep
    assert [type(x) for x in back.get_rewards(slice(-3, None), neg_index_as_lookback=True)] == [
        float
    ] * 3
    assert [type(x) for x in back.actions.data] == [np.int64] * 3
    assert back.get_observations()[0].dtype == np.float32
    assert [type(x) for x in back.extra_model_outputs["k"].data] == [int] * 3


@pytest.mark.parametrize(
    "infos",
    [
        pytest.param([{}] * 4, id="all-empty"),
        pytest.param([{}, {"a": 1}, {}, {"b": [1, 2]}], id="some"),
        pytest.param([{}, {}, {}, {"a": {}}], id="nested-empty"),
    ],
)
def test_v2_infos_columns_round_trip(tmp_path, infos: list[dict[str, Any]]) -> None:
    ep = SingleAgentEpisode(
        "i",
        observations=[0, 1, 2, 3],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        infos=infos,
        extra_model_outputs={"falsy": [0, "", []]},  # one JSON item each, all falsy
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(ep)
    (back,) = read_episodes(tmp_path / "ds", verify=True)
    assert back == ep and back.get_infos() == infos
    assert back.get_extra_model_outputs("falsy") == [0, "", []]


def test_timedelta_scalars_of_several_units_keep_their_values(tmp_path) -> None:
    """Scalars of one numpy type may differ in dtype (timedelta64 units): not one column."""
    spans = [np.timedelta64(1, "s"), np.timedelta64(1, "ms"), np.timedelta64(2, "m")]
    ep = SingleAgentEpisode(
        "t",
        observations=[*spans, np.timedelta64(5, "us")],
        actions=[np.timedelta64(1, "Y"), np.timedelta64(3, "D"), np.timedelta64(1, "D")],
        rewards=[0.0, 0.0, 0.0],
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(ep)
    (back,) = read_episodes(tmp_path / "ds", verify=True)
    assert back == ep
    assert [x.dtype for x in back.get_observations()] == [x.dtype for x in ep.get_observations()]

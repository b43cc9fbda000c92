"""The cost of an image space, paid once, not per piece and column (an image-observation hunt).

- A Box bound the same for every entry (``Box(0, 255, (84, 84, 4), uint8)``) is written as its
  one value, not as a list of 28,224: a v1 ``meta.json`` was 453 KB a chunk, and every piece
  and column re-encoded, interned and decoded the lists. Boxes of fewer than 64 entries, and
  bounds that differ anywhere (bit for bit), are listed as before.
- The decoder reads one value as a list of it would be read (the same checks, the same
  errors); it stands for at most ``MAX_SCALAR_BOUND`` entries, so a few bytes of a file cannot
  make a reader fill gigabytes.
- A space dict met before is found by its marshal bytes: no JSON text is made for it again,
  neither when a shard interns it nor when it is decoded.

Work is counted (JSON texts made, bytes written), never timed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, read_episodes, shard_codec
from episodes.spaces import decoding, space_from_dict, space_to_dict
from episodes.spaces.decoding import MAX_SCALAR_BOUND

IMAGE = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
I64 = np.iinfo(np.int64)


def _listed(d: dict[str, Any]) -> dict[str, Any]:
    """The dict with one-value bounds written out as lists (what older builds write)."""
    size = math.prod(d["shape"])
    out = dict(d)
    for key in ("low", "high"):
        if not isinstance(d[key], list):
            out[key] = [d[key]] * size
    return out


def _same_box(a: gym.spaces.Box, b: gym.spaces.Box) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    for x, y in ((a.low, b.low), (a.high, b.high)):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()  # -0.0 is not 0.0
    assert np.array_equal(a.bounded_below, b.bounded_below)
    assert np.array_equal(a.bounded_above, b.bounded_above)


@pytest.mark.parametrize(
    ("space", "low", "high"),
    [
        (IMAGE, 0, 255),
        (gym.spaces.Box(-np.inf, np.inf, (3, 70), np.float32), "-inf", "inf"),
        (gym.spaces.Box(-np.inf, 5, (2, 70), np.int64), "-inf", 5),
        (gym.spaces.Box(0, 1, (200,), bool), False, True),
        (gym.spaces.Box(-0.0, 1.5, (64,), ">f4"), -0.0, 1.5),
        (gym.spaces.Box(0.1, 1.0, (8, 8), np.float16), float(np.float16(0.1)), 1.0),
    ],
)
def test_a_bound_the_same_everywhere_is_written_once(space, low, high):
    d = space_to_dict(space)
    assert (d["low"], d["high"]) == (low, high)
    assert type(d["low"]) is type(low) and json.loads(json.dumps(d)) == d
    _same_box(space_from_dict(d), space)
    _same_box(space_from_dict(_listed(d)), space)  # what older builds wrote reads the same


@pytest.mark.parametrize(
    ("space", "high_listed"),
    [
        (gym.spaces.Box(0, 1, (63,), np.float32), True),  # small: older builds read it
        (gym.spaces.Box(0, 1, (), np.float32), True),
        (gym.spaces.Box(0, 1, (0, 80), np.float32), True),
        (gym.spaces.Box(np.array([0.0, -0.0] * 40, np.float32), 1.0), False),  # not same bits
        (gym.spaces.Box(np.arange(100), 200, (100,), np.int64), False),
        (gym.spaces.Box(np.array([-np.inf] * 99 + [I64.min]), 0, (100,), np.int64), False),
        (gym.spaces.Box(0, 1, (MAX_SCALAR_BOUND + 1,), np.uint8), True),
    ],
)
def test_bounds_that_differ_or_small_boxes_stay_lists(space, high_listed):
    d = space_to_dict(space)
    assert isinstance(d["low"], list) and isinstance(d["high"], list) == high_listed
    _same_box(space_from_dict(d), space)


_ODD = [
    0,
    1,
    -1,
    255,
    256,
    -129,
    2**63 - 1,
    -(2**63),
    2**64,
    0.0,
    -0.0,
    0.5,
    1e-45,
    1e300,
    -1e300,
    3.4e38,
    6.5e4,
    True,
    False,
    "inf",
    "-inf",
    "nan",
    "x",
    "",
]
_DTYPES = ["uint8", "int8", "int64", "uint64", "float16", "float32", ">f8", "bool"]


def _decode(d: dict[str, Any]) -> Any:
    try:
        return space_from_dict(d)
    except ValueError as err:
        return str(err)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_DTYPES),
    st.sampled_from(_ODD),
    st.sampled_from(_ODD),
    st.sampled_from([(64,), (8, 9), (3, 0), (1, 1, 70)]),
)
def test_one_value_decodes_as_the_list_of_it(dtype, low, high, shape):
    d = {"type": "Box", "shape": list(shape), "dtype": dtype, "low": low, "high": high}
    one, listed = _decode(d), _decode(_listed(d))
    if isinstance(listed, str):  # the same error, word for word
        assert one == listed
    else:
        _same_box(one, listed)


@pytest.mark.parametrize(
    ("low", "shape", "message"),
    [
        (0, [MAX_SCALAR_BOUND + 1], "one value for"),
        (0, [2**40, 2**40], "one-value bounds stand for"),
        (None, [100], "expected a flat list"),
        ({"x": 1}, [100], "expected a flat list"),
    ],
)
def test_a_one_value_bound_is_refused_where_it_would_fill_too_much(low, shape, message):
    d = {"type": "Box", "shape": shape, "dtype": "uint8", "low": low, "high": 1}
    with pytest.raises(ValueError, match=message):
        space_from_dict(d)


def _image_episodes(n: int) -> list[SingleAgentEpisode]:
    return [
        SingleAgentEpisode(
            f"e{i}",
            observations=np.zeros((3, 84, 84, 4), np.uint8),
            actions=[0, 1],
            rewards=[1.0, 2.0],
            terminated=True,
            len_lookback_buffer=0,
            observation_space=IMAGE,
        ).to_numpy()
        for i in range(n)
    ]


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter])
def test_an_image_space_costs_a_dataset_a_few_bytes(tmp_path: Path, writer):
    with writer(tmp_path / "d", sync=False) as w:
        for episode in _image_episodes(3):
            w.write(episode)
    indexes = [p for p in (tmp_path / "d").rglob("*.json") if p.name != "format.json"]
    assert indexes and all(p.stat().st_size < 20_000 for p in indexes)  # was 453 KB a chunk
    read = list(read_episodes(tmp_path / "d"))
    assert len(read) == 3 and all(e.observation_space == IMAGE for e in read)
    assert read[0].observation_space is read[2].observation_space  # equal dicts: one space


class _CountingJson:
    """``json`` whose ``dumps`` counts its calls."""

    def __init__(self) -> None:
        self.dumps_calls = 0

    def dumps(self, *args: Any, **kwargs: Any) -> str:
        self.dumps_calls += 1
        return json.dumps(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


def test_a_space_dict_met_before_makes_no_json_text(monkeypatch):
    uneven = gym.spaces.Box(np.arange(5000, dtype=np.float32), 1e6)  # listed bounds
    counting = _CountingJson()
    monkeypatch.setattr(decoding, "json", counting)
    first = space_from_dict(space_to_dict(uneven))
    calls = counting.dumps_calls
    assert all(space_from_dict(space_to_dict(uneven)) is first for _ in range(5))
    assert counting.dumps_calls == calls
    bad = space_to_dict(uneven)
    bad["shape"] = tuple(bad["shape"])  # a tuple is no JSON list: refused whatever is cached
    with pytest.raises(ValueError):
        space_from_dict(bad)


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [
        ({"type": "X", "n": 1, "m": [2]}, {"m": [2], "type": "X", "n": 1}, True),
        ({"n": 1}, {"n": 1.0}, False),
        ({"n": 1}, {"n": True}, False),
        ({"n": 0.0}, {"n": -0.0}, False),
        ({"n": [1]}, {"n": (1,)}, True),  # JSON writes both as [1]
        (None, None, True),
    ],
)
def test_interning_shares_exactly_the_values_with_one_json_text(monkeypatch, a, b, shared):
    counting = _CountingJson()
    monkeypatch.setattr(shard_codec, "json", counting)
    spaces: list[Any] = []
    lookup: dict[str, int] = {}
    ref_a = shard_codec._intern(a, spaces, lookup)
    assert shard_codec._intern(a, spaces, lookup) == ref_a
    ref_b = shard_codec._intern(b, spaces, lookup)
    assert (ref_a == ref_b) is shared and spaces[ref_a["space_ref"]] is a
    assert len(spaces) == (1 if shared else 2)
    if not isinstance(a, dict) or not isinstance(a.get("n"), np.integer):
        calls = counting.dumps_calls
        shard_codec._intern(a, spaces, lookup)
        assert counting.dumps_calls == calls  # met before: found by its marshal bytes


def test_an_episode_state_holds_the_space_once_and_small():
    episode = _image_episodes(1)[0]
    state = episode.get_state()
    assert len(json.dumps(state["observations"]["space"])) < 200
    again = SingleAgentEpisode.from_state(state)
    assert again.observation_space == IMAGE
    assert again.observations.space is SingleAgentEpisode.from_state(state).observations.space

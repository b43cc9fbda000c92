"""``MeanStdFilter``: running observation statistics, each observation counted once.

- named cases: the rows written, what is counted (chunks, a chunk given again, learner and
  inference pipelines sharing one filter), frozen filters, clipping, Dict/Tuple spaces;
- refusals leave the filter and the batch as they were (other spaces, shapes, NaN, states);
- hypothesis: a stream fed in random batch splits gives numpy's mean and variance, and merging
  two filters equals one filter fed both streams;
- the connector contract suite, counting and frozen.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import ConnectorPipeline, FrameStack, MeanStdFilter
from episodes.testing import check_connector

BOX = gym.spaces.Box(-100.0, 100.0, (3,), np.float32)
NESTED = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-5.0, 5.0, (2,), np.float32),
        "img": gym.spaces.Tuple((gym.spaces.Box(0, 255, (2, 2), np.uint8),)),
    }
)


def _episode(obs, *, id_="e", space=BOX, lookback=0):
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_=id_,
        observations=list(obs),
        actions=[0] * n,
        rewards=[0.0] * n,
        observation_space=space,
        len_lookback_buffer=lookback,
    )


def _stream(seed, rows, shape=(3,)):
    return np.random.default_rng(seed).normal(2.0, 3.0, (rows, *shape)).astype(np.float32)


def _normalized(x, seen, eps=1e-6, clip=10.0):
    seen = np.asarray(seen, np.float64)
    std = seen.std(0, ddof=1) if len(seen) > 1 else np.zeros(seen.shape[1:])
    out = (np.asarray(x, np.float64) - seen.mean(0)) / (std + eps)
    return np.clip(out, -clip, clip).astype(np.float32)


# --- named cases -------------------------------------------------------------------------


def _learner_rows():
    obs = _stream(0, 6)
    filt = MeanStdFilter()
    got = filt([_episode(obs)], {})["obs"]
    return got, _normalized(obs[:5], obs), filt.count, 6


def _inference_row():
    obs = _stream(1, 4)
    filt = MeanStdFilter(inference=True)
    got = filt([_episode(obs)], {})["obs"]
    return got, _normalized(obs[-1:], obs), filt.count, 4


def _chunks_counted_once():
    # An env runner's chunks: the second starts at the first's last observation (its lookback).
    obs = _stream(2, 9)
    whole = _episode(obs)
    first = whole.slice(slice(0, 4))
    second = whole.slice(slice(4, 8), len_lookback_buffer=2)
    filt = MeanStdFilter()
    filt([first], {})
    got = filt([second], {})["obs"]
    return got, _normalized(obs[4:8], obs), filt.count, 9


def _same_chunk_twice():
    obs = _stream(3, 5)
    filt = MeanStdFilter()
    filt([_episode(obs)], {})
    got = filt([_episode(obs)], {})["obs"]
    return got, _normalized(obs[:4], obs), filt.count, 5


def _inference_then_learner():
    # The policy's pipeline each step, then the learner's on the whole chunk: shared counts.
    obs = _stream(4, 6)
    learner = MeanStdFilter()
    acting = learner.shared(inference=True)
    for t in range(6):
        acting([_episode(obs[: t + 1])], {})
    got = learner([_episode(obs)], {})["obs"]
    return got, _normalized(obs[:5], obs), learner.count, 6


def _two_episodes_one_call():
    a, b = _stream(5, 4), _stream(6, 3)
    filt = MeanStdFilter()
    got = filt([_episode(a, id_="a"), _episode(b, id_="b")], {})["obs"]
    both = np.concatenate([a, b])
    return got, _normalized(np.concatenate([a[:3], b[:2]]), both), filt.count, 7


def _frozen():
    obs = _stream(7, 5)
    trained = MeanStdFilter()
    trained([_episode(obs[:3], id_="train")], {})
    frozen = MeanStdFilter(update=False)
    frozen.set_state(trained.get_state())
    got = frozen([_episode(obs)], {})["obs"]
    return got, _normalized(obs[:4], obs[:3]), frozen.count, 3


def _clip_small():
    obs = _stream(8, 6) * 10
    filt = MeanStdFilter(clip=0.5)
    got = filt([_episode(obs)], {})["obs"]
    return got, _normalized(obs[:5], obs, clip=0.5), filt.count, 6


def _single_observation():
    # One observation: a variance of zero (n - 1 = 0), so the output is (x - x) / eps = 0.
    obs = _stream(9, 1)
    filt = MeanStdFilter(inference=True)
    got = filt([_episode(obs)], {})["obs"]
    return got, np.zeros((1, 3), np.float32), filt.count, 1


def _numpy_lookback_chunk():
    # A numpy'd chunk with lookback counts only its own observations (ts >= 0).
    obs = _stream(10, 7)
    ep = _episode(obs, lookback=2)
    ep.to_numpy()
    filt = MeanStdFilter()
    got = filt([ep], {})["obs"]
    return got, _normalized(obs[2:6], obs[2:]), filt.count, 5


CASES = {
    "learner rows, all observations counted": _learner_rows,
    "inference row is the latest observation": _inference_row,
    "a chunk's lookback observation is not counted again": _chunks_counted_once,
    "the same chunk given twice counts once": _same_chunk_twice,
    "inference each step, then the learner": _inference_then_learner,
    "two episodes in one call share the statistics": _two_episodes_one_call,
    "frozen filter counts nothing": _frozen,
    "clip": _clip_small,
    "one observation normalizes to zero": _single_observation,
    "numpy'd chunk with lookback": _numpy_lookback_chunk,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_named_case(case):
    got, want, count, want_count = CASES[case]()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert count == want_count


def test_nested_space_keeps_structure_and_normalizes_each_element():
    rng = np.random.default_rng(0)
    obs = [
        {
            "pos": rng.normal(size=2).astype(np.float32),
            "img": (rng.integers(0, 255, (2, 2), np.uint8),),
        }
        for _ in range(5)
    ]
    out = MeanStdFilter()([_episode(obs, space=NESTED)], {})["obs"]
    pos = np.stack([o["pos"] for o in obs])
    img = np.stack([o["img"][0] for o in obs])
    assert set(out) == {"img", "pos"} and isinstance(out["img"], tuple)
    np.testing.assert_allclose(out["pos"], _normalized(pos[:4], pos), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["img"][0], _normalized(img[:4], img), rtol=1e-5, atol=1e-5)
    assert out["img"][0].shape == (4, 2, 2) and out["img"][0].dtype == np.float32


def test_episodes_are_not_changed():
    obs = _stream(11, 4)
    ep = _episode(obs)
    MeanStdFilter()([ep], {})
    np.testing.assert_array_equal(np.asarray(ep.get_observations()), obs)


def test_episode_without_steps_counts_its_observation_and_gives_no_rows():
    filt = MeanStdFilter()
    out = filt([_episode(_stream(12, 1))], {"given": 1})
    assert out == {"given": 1} and filt.count == 1


def test_older_chunk_after_a_later_one_adds_nothing():
    obs = _stream(13, 9)
    whole = _episode(obs)
    filt = MeanStdFilter()
    filt([whole.slice(slice(4, 8))], {})
    filt([whole.slice(slice(0, 4))], {})
    assert filt.count == 5  # documented: chunks in time order


def test_pipeline_state_round_trip():
    obs = _stream(14, 6)
    pipe = ConnectorPipeline([FrameStack(1), MeanStdFilter()])
    pipe([_episode(obs)], {})
    fresh = ConnectorPipeline([FrameStack(1), MeanStdFilter(update=False)])
    fresh.set_state(pipe.get_state())
    assert list(pipe.get_state()) == ["1:MeanStdFilter"]
    assert fresh[1].count == 6
    np.testing.assert_allclose(fresh[1].mean, obs.astype(np.float64).mean(0), rtol=1e-12)


def test_get_state_is_a_copy():
    filt = MeanStdFilter()
    filt([_episode(_stream(15, 4))], {})
    state = filt.get_state()
    state["mean"][:] = 99.0
    assert not np.any(filt.mean == 99.0)


def test_reset_forgets_statistics_and_episodes():
    obs = _stream(16, 4)
    filt = MeanStdFilter()
    filt([_episode(obs)], {})
    filt.reset()
    assert filt.count == 0 and np.all(filt.mean == 0)
    filt([_episode(obs)], {})
    assert filt.count == 4


# --- refusals ----------------------------------------------------------------------------


def _snapshot(filt):
    state = filt.get_state()
    return state["count"], repr(state["mean"]), repr(state["m2"]), dict(filt._s.counted)


REFUSED_CALLS = {
    "Discrete space": (
        lambda: _episode([0, 1, 2], space=gym.spaces.Discrete(3), id_="d"),
        ValueError,
        "Box observations",
    ),
    "other shape": (
        lambda: _episode(_stream(0, 3, (4,)), space=gym.spaces.Box(-9, 9, (4,)), id_="w"),
        ValueError,
        "leaf shapes",
    ),
    "NaN observation": (
        lambda: _episode(np.array([[0.0, 1, 2], [np.nan, 0, 0]], np.float32), id_="n"),
        ValueError,
        "NaN or inf",
    ),
    "unhashable episode id": (
        lambda: _episode(_stream(0, 3), id_=["a", "list"]),
        TypeError,
        "not hashable",
    ),
    "masked entries": (
        lambda: _episode([np.zeros(3), np.ma.masked_array(np.ones(3), mask=[1, 0, 0])], id_="m"),
        ValueError,
        "mask",
    ),
    "squares overflow": (
        lambda: _episode(
            np.array([[0.0, 1, 2], [1e300, 0, 0]]), space=gym.spaces.Box(-np.inf, np.inf, (3,))
        ),
        ValueError,
        "overflow",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_CALLS))
def test_refused_call_leaves_filter_and_batch(case):
    make, error, words = REFUSED_CALLS[case]
    filt = MeanStdFilter()
    filt([_episode(_stream(17, 3), id_="first")], {})
    before = _snapshot(filt)
    batch = {"given": 1}
    with pytest.raises(error, match=words):
        filt([_episode(_stream(18, 3), id_="ok"), make()], batch)
    assert _snapshot(filt) == before and batch == {"given": 1}


BAD_STATES = {
    "wrong shape": ({"count": 3, "mean": np.zeros(4), "m2": np.zeros(4)}, ValueError, "shaped"),
    "negative count": ({"count": -1, "mean": np.zeros(3), "m2": np.zeros(3)}, ValueError, "count"),
    "float count": ({"count": 2.0, "mean": np.zeros(3), "m2": np.zeros(3)}, ValueError, "count"),
    "negative m2": ({"count": 2, "mean": np.zeros(3), "m2": -np.ones(3)}, ValueError, "negative"),
    "NaN mean": ({"count": 2, "mean": np.full(3, np.nan), "m2": np.ones(3)}, ValueError, "NaN"),
    "missing key": ({"count": 2, "mean": np.zeros(3)}, TypeError, "'m2'"),
    "not a dict": ([1, 2, 3], TypeError, "get_state"),
    "nested for a Box": (
        {"count": 2, "mean": {"a": np.zeros(3)}, "m2": {"a": np.zeros(3)}},
        ValueError,
        "shaped",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_STATES))
def test_bad_state_is_refused_and_filter_unchanged(case):
    state, error, words = BAD_STATES[case]
    filt = MeanStdFilter()
    filt([_episode(_stream(19, 3))], {})
    before = _snapshot(filt)
    with pytest.raises(error, match=words):
        filt.set_state(state)
    with pytest.raises(error, match=words):
        filt.merge(filt.get_state(), state)
    assert _snapshot(filt) == before


BAD_ARGS = {
    "clip zero": ({"clip": 0}, ValueError, "clip"),
    "clip string": ({"clip": "1"}, TypeError, "clip"),
    "eps negative": ({"eps": -1e-6}, ValueError, "eps"),
    "eps nan": ({"eps": float("nan")}, ValueError, "eps"),
    "update not a flag": ({"update": "no"}, TypeError, "update"),
    "out_key not a str": ({"out_key": 3}, TypeError, "out_key"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_bad_arguments(case):
    kwargs, error, words = BAD_ARGS[case]
    with pytest.raises(error, match=words):
        MeanStdFilter(**kwargs)


# --- hypothesis --------------------------------------------------------------------------


@st.composite
def _split_stream(draw):
    rows = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e4]))
    data = np.random.default_rng(seed).normal(5.0, 1.0, (rows, 2)) * scale
    cuts = sorted(draw(st.lists(st.integers(1, rows), max_size=6)))
    return data, [0, *cuts, rows]


def _feed(filt, data, bounds, id_):
    # Each split a chunk of one episode: the observations of ts 0..len, the next chunk
    # starting at the last (its lookback), as an env runner cuts them.
    whole = _episode(list(data), id_=id_, space=gym.spaces.Box(-np.inf, np.inf, (2,)))
    for a, b in zip(bounds, bounds[1:]):
        filt([whole.slice(slice(max(a - 1, 0), max(b - 1, 0)), len_lookback_buffer=0)], {})


@settings(max_examples=60, deadline=None, database=None)
@given(_split_stream())
def test_stream_statistics_equal_numpys(stream):
    data, bounds = stream
    filt = MeanStdFilter()
    _feed(filt, data, bounds, "s")
    assert filt.count == len(data)
    np.testing.assert_allclose(filt.mean, data.mean(0), rtol=1e-9, atol=1e-12 * np.abs(data).max())
    want_var = data.var(0, ddof=1) if len(data) > 1 else np.zeros(2)
    np.testing.assert_allclose(filt.var, want_var, rtol=1e-9, atol=1e-300)


@settings(max_examples=60, deadline=None, database=None)
@given(_split_stream(), _split_stream())
def test_merge_equals_one_filter_fed_both(first, second):
    a, b, both = MeanStdFilter(), MeanStdFilter(), MeanStdFilter()
    _feed(a, *first, "a")
    _feed(b, *second, "b")
    _feed(both, *first, "a")
    _feed(both, *second, "b")
    a.merge(b)
    assert a.count == both.count
    scale = max(np.abs(first[0]).max(), np.abs(second[0]).max())
    np.testing.assert_allclose(a.mean, both.mean, rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(a.var, both.var, rtol=1e-9, atol=1e-300)


def test_merge_of_states_and_empty_filters():
    a, b = MeanStdFilter(), MeanStdFilter()
    _feed(a, np.arange(6.0).reshape(3, 2), [0, 3], "a")
    before = a.get_state()
    a.merge(MeanStdFilter(), b.get_state())  # nothing counted: nothing changes
    np.testing.assert_array_equal(a.mean, before["mean"])
    fresh = MeanStdFilter()
    fresh.merge(a.get_state())
    assert fresh.count == 3
    np.testing.assert_array_equal(fresh.var, a.var)


# --- the contract suite ------------------------------------------------------------------


@pytest.mark.parametrize("space", [BOX, NESTED], ids=["box", "nested"])
@pytest.mark.parametrize("update", [True, False], ids=["counting", "frozen"])
@pytest.mark.parametrize("inference", [False, True], ids=["learner", "inference"])
def test_contracts(space, update, inference):
    filt = MeanStdFilter(update=update, inference=inference)
    check_connector(
        filt,
        observation_space=space,
        lookback=0,
        max_examples=15,
        row_keys=None if inference else ["obs"],
    )


def test_shared_filters_share_statistics_and_settings():
    learner = MeanStdFilter(clip=2.0, out_key="x")
    acting = learner.shared(inference=True, update=False)
    acting([_episode(_stream(20, 4))], {})
    assert learner.count == 0  # the frozen one counted nothing
    learner([_episode(_stream(20, 4))], {})
    assert acting.count == 4 and (acting.clip, acting.out_key, acting.update) == (2.0, "x", False)
    assert "count=4" in repr(acting)


def test_normalize_gives_a_calls_rows_and_counts_nothing():
    obs = _stream(21, 6)
    filt = MeanStdFilter(clip=1.5)
    rows = filt([_episode(obs)], {})["obs"]
    np.testing.assert_array_equal(filt.normalize(obs[:5]), rows)
    np.testing.assert_array_equal(filt.normalize(obs[2]), rows[2])  # one observation
    assert filt.normalize(obs[:4].reshape(2, 2, 3)).shape == (2, 2, 3)  # any leading dims
    assert filt.count == 6


def test_normalize_nested():
    rng = np.random.default_rng(1)
    obs = [
        {"pos": rng.normal(size=2).astype(np.float32), "img": (rng.integers(0, 9, (2, 2)),)}
        for _ in range(4)
    ]
    filt = MeanStdFilter()
    rows = filt([_episode(obs, space=NESTED)], {})["obs"]
    given = {
        "pos": np.stack([o["pos"] for o in obs[:3]]),
        "img": (np.stack([o["img"][0] for o in obs[:3]]),),
    }
    out = filt.normalize(given)
    np.testing.assert_array_equal(out["pos"], rows["pos"])
    np.testing.assert_array_equal(out["img"][0], rows["img"][0])


NORMALIZE_REFUSED = {
    "no statistics": (MeanStdFilter(), np.zeros(3), "no statistics"),
    "other width": (None, np.zeros((2, 4)), "not \\[..., \\*shape\\]"),
    "nested for a Box": (None, {"a": np.zeros(3)}, "not \\[..., \\*shape\\]"),
}


@pytest.mark.parametrize("case", sorted(NORMALIZE_REFUSED))
def test_normalize_refusals(case):
    filt, value, words = NORMALIZE_REFUSED[case]
    if filt is None:
        filt = MeanStdFilter()
        filt([_episode(_stream(22, 3))], {})
    with pytest.raises(ValueError, match=words):
        filt.normalize(value)

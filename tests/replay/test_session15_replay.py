"""Replay fixes of session 15: bad input refused whole, settings without effect reported.

- a chunk whose times leave int64 is a ``ValueError`` before anything is stored (it was an
  ``OverflowError`` half-way through the write, leaving a ghost episode registered);
- the buffer's spaces come from stored chunks only, each space from the first that has one;
- extra-model-output keys must be str (``0`` and ``"0"`` were merged into one column);
- only None and ``{}`` are empty infos (``0``, ``[]`` and ``""`` became ``{}``, an array
  info was refused with numpy's ambiguous-truth error);
- ``get_transitions`` takes one index or a 1-d sequence, and on a buffer that never stored a
  step it is an ``EmptyBufferError`` (a bare ``assert`` before);
- integers beyond int64 are not wrapped around (``locate(id, 2**64 - 3)`` found ``t=-3``);
- ``beta`` with episodes, and ``include_infos`` / ``include_extra_model_outputs`` with
  ``sample_episodes``, are refused: they had no effect there (``beta`` with sequences weights
  them since session 45: tests/replay/test_session45_prioritized_sequences.py).
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _episode(id_: Any = "a", n: int = 5, t0: int = 0, **kwargs: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=kwargs.pop("observations", [np.full(2, t, np.float32) for t in range(n + 1)]),
        actions=kwargs.pop("actions", [1] * n),
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        **kwargs,
    )


def _snapshot(buf: EpisodeReplayBuffer) -> tuple[Any, ...]:
    state = buf.get_state()
    return (
        buf.get_episode_ids(),
        buf.get_num_timesteps(),
        buf.get_added_timesteps(),
        state["spaces"],
        state["steps"]["t"].tolist(),
        sorted(state["steps"]["extras"]) if "extras" in state["steps"] else None,
    )


# ----------------------------------------------------------------------- times beyond int64
@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    ("t0", "n"),
    [(2**63 - 3, 5), (2**63, 1), (2**64, 1), (-(2**63) - 1, 1), (-(2**64), 3)],
    ids=["end-past-max", "start-at-2**63", "start-at-2**64", "below-min", "far-below-min"],
)
def test_a_chunk_whose_times_leave_int64_is_refused_whole(cls, t0, n):
    buf = cls(100, seed=0)
    buf.add(_episode("ok", 1))
    before = _snapshot(buf)
    with pytest.raises(ValueError, match="leave int64"):
        buf.add([_episode("b", 2), _episode("a", n, t0)])
    assert _snapshot(buf) == before  # no ghost episode, "b" not stored either
    buf.add(_episode("a", 2))  # "a" is a new episode as before
    assert buf.get_episode_ids() == ["ok", "a"]


def test_an_ending_chunk_whose_time_leaves_int64_is_refused():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 2))
    before = _snapshot(buf)
    end = _episode("a", 0, 2**64, observations=[np.full(2, 2, np.float32)], terminated=True)
    with pytest.raises(ValueError, match="leave int64"):
        buf.add(end)
    assert _snapshot(buf) == before


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("t0", [2**63 - 1 - 5, -(2**63)], ids=["top", "bottom"])
def test_times_at_the_edges_of_int64_are_stored_and_read(cls, t0):
    buf = cls(100, seed=0)
    buf.add(_episode("a", 5, t0, truncated=True))
    assert buf.locate("a", [t0, t0 + 4]).tolist() == [0, 4]
    batch = buf.get_transitions([0, 4], n_step=3, gamma=0.5)
    assert batch["n_step"].tolist() == [3, 1] and batch["truncateds"].tolist() == [False, True]
    chunk = buf.sample(2, sample_episodes=True, batch_length_T=2, lookback=1)[0]
    assert t0 <= chunk.t_started <= t0 + 3
    copy = cls(100)
    copy.set_state(buf.get_state())
    assert copy.get_episodes()[0].t_started == t0


# --------------------------------------------------------------------------------- spaces
BOX2 = gym.spaces.Box(-100, 100, (2,), np.float32)
BOX5 = gym.spaces.Box(-1, 1, (5,), np.float32)


def test_an_ignored_chunk_sets_no_spaces():
    buf = EpisodeReplayBuffer(100, seed=0)
    # A reset-only chunk of another env: no steps, not done, so ignored.
    buf.add(
        _episode(
            "z",
            0,
            observations=[np.zeros(5, np.float32)],
            observation_space=BOX5,
            action_space=gym.spaces.Discrete(7),
        )
    )
    assert buf.get_episode_ids() == [] and buf.get_state()["spaces"] == [None, None]
    buf.add(_episode("a", 5, observation_space=BOX2, action_space=gym.spaces.Discrete(2)))
    for ep in [*buf.sample(2, sample_episodes=True, batch_length_T=2), *buf.get_episodes()]:
        assert ep.observation_space == BOX2 and ep.action_space == gym.spaces.Discrete(2)


def test_an_ending_chunk_of_an_unknown_id_sets_no_spaces():
    buf = EpisodeReplayBuffer(100, seed=0)
    end = _episode("z", 0, observations=[np.zeros(2, np.float32)], terminated=True)
    end.observation_space = BOX5
    buf.add([end, _episode("a", 2, observation_space=BOX2)])
    assert buf.get_episodes()[0].observation_space == BOX2


def test_each_space_comes_from_the_first_stored_chunk_that_has_one():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 2, action_space=gym.spaces.Discrete(2)))  # no observation space
    buf.add(_episode("b", 2, observation_space=BOX2, action_space=gym.spaces.Discrete(9)))
    for ep in buf.get_episodes():
        assert ep.observation_space == BOX2 and ep.action_space == gym.spaces.Discrete(2)


def test_a_refused_add_sets_no_spaces():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 2))
    bad = _episode("a", 2, 7, observation_space=BOX2)  # a gap in time
    with pytest.raises(ValueError, match="holds it up to"):
        buf.add(bad)
    assert buf.get_state()["spaces"] == [None, None]


# ------------------------------------------------------------------- extra-model-output keys
@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    "keys",
    [[0, "0"], [0], [("a", 1)], [b"vf"]],
    ids=["int-and-str", "int", "tuple", "bytes"],
)
@pytest.mark.parametrize("stored", [False, True], ids=["empty-buffer", "after-a-vf-column"])
def test_extra_model_output_keys_must_be_str(cls, keys, stored):
    buf = cls(100, seed=0)
    if stored:
        buf.add(_episode("ok", 2, extra_model_outputs={"vf": [0.0, 1.0]}))
    before = _snapshot(buf)
    bad = _episode("a", 2, extra_model_outputs={k: [10.0, 11.0] for k in keys})
    with pytest.raises(TypeError, match=re.escape(f"key {keys[0]!r} must be a str")):
        buf.add(bad)
    assert _snapshot(buf) == before


# -------------------------------------------------------------------------------- infos
INFOS = {
    "falsy": [{"k": 1}, 0, [], "", False, None],
    "array": [{}, np.array([1, 2]), {}, np.array([[3]]), {}, np.array([4, 5])],
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return type(a) is type(b) and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name", list(INFOS))
def test_infos_other_than_none_and_empty_dicts_are_kept(cls, name):
    infos = INFOS[name]
    expected = [{} if info is None else info for info in infos]
    buf = cls(100, seed=0)
    buf.add(_episode("a", 5, infos=infos))
    got = list(buf.get_episodes()[0].get_infos())
    assert all(map(_same, got, expected)), got
    restored = cls(100)
    restored.set_state(buf.get_state())
    assert all(map(_same, restored.get_episodes()[0].get_infos(), expected))
    row = buf.sample(4, batch_length_T=5, include_infos=True)["infos"][0]
    assert all(map(_same, row, expected[1:]))  # the infos of next_obs


def test_transition_infos_keep_falsy_values():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 3, infos=[{}, 0, [], ""]))
    infos = buf.sample(64, include_infos=True)["infos"]
    assert {repr(i) for i in infos} == {"0", "[]", "''"}  # the info of next_obs


# ------------------------------------------------------------------------ get_transitions
@pytest.mark.parametrize("indices", [[], np.zeros(0, np.int64)], ids=["list", "array"])
def test_no_transitions_of_a_buffer_that_never_stored_a_step(indices):
    with pytest.raises(EmptyBufferError, match="never stored a step"):
        EpisodeReplayBuffer(10).get_transitions(indices)


def test_transitions_of_an_empty_buffer_are_not_stored():
    with pytest.raises(KeyError, match="not stored"):
        EpisodeReplayBuffer(10).get_transitions([0])


@pytest.mark.parametrize(
    "index", [1, np.int64(1), np.array(1), [1]], ids=["int", "numpy-int", "0-d-array", "list"]
)
def test_get_transitions_takes_one_index(index):
    buf = EpisodeReplayBuffer(10)
    buf.add(_episode("a", 3))
    batch = buf.get_transitions(index)
    assert batch["obs"].tolist() == [[1.0, 1.0]] and batch["indices"].tolist() == [1]


@pytest.mark.parametrize("indices", [np.array([[0]]), [[0, 1]], np.zeros((0, 2), np.int64)])
def test_get_transitions_refuses_indices_that_are_not_1d(indices):
    buf = EpisodeReplayBuffer(10)
    buf.add(_episode("a", 3))
    with pytest.raises(ValueError, match="1-d"):
        buf.get_transitions(indices)


# ------------------------------------------------------------------- integers beyond int64
BEYOND = [
    ("uint64", np.array([2**64 - 3], np.uint64)),
    ("python-list", [2**64 - 3]),
    ("python-scalar", 2**64 - 5),
    ("above-python", [2**64]),
    ("below-int64", [-(2**63) - 1]),
    ("mixed", [-1, 2**63]),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("times", [v for _, v in BEYOND], ids=[k for k, _ in BEYOND])
def test_locate_does_not_wrap_times_beyond_int64(cls, times):
    buf = cls(100, seed=0)
    buf.add(_episode("a", 5, -5))
    with pytest.raises(KeyError, match="beyond int64"):
        buf.locate("a", times)


@pytest.mark.parametrize("indices", [v for _, v in BEYOND], ids=[k for k, _ in BEYOND])
def test_get_transitions_does_not_wrap_indices_beyond_int64(indices):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 5))
    with pytest.raises(KeyError, match="beyond int64"):
        buf.get_transitions(indices)


def test_priorities_of_indices_beyond_int64_are_refused():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 5))
    with pytest.raises(ValueError, match="beyond int64"):
        buf.update_priorities([2.0], np.array([2**64 - 1], np.uint64))
    assert buf.get_priorities([0, 1, 2, 3, 4]).tolist() == [1.0] * 5


# ------------------------------------------------------------- settings that have no effect
NO_EFFECT = [
    ("beta-chunks", dict(beta=0.4, batch_length_T=2, sample_episodes=True), "beta applies"),
    ("beta-episodes", dict(beta=1.0, sample_episodes=True), "beta applies to transitions"),
    ("infos-episodes", dict(include_infos=True, sample_episodes=True), "include_infos"),
    (
        "extras-chunks",
        dict(include_extra_model_outputs=True, sample_episodes=True, batch_length_T=2),
        "include_extra_model_outputs",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "match"), [v[1:] for v in NO_EFFECT], ids=[v[0] for v in NO_EFFECT]
)
def test_a_setting_without_effect_is_refused(kwargs, match):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    with pytest.raises(ValueError, match=match):  # checked before the (empty) contents
        buf.sample(4, **kwargs)
    buf.add(_episode("a", 5, extra_model_outputs={"vf": [0.0] * 5}))
    last = buf.sample(4, beta=0.5)["indices"]
    rng = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match=match):
        buf.sample(4, **kwargs)
    assert buf.rng.bit_generator.state == rng and buf.get_sampled_timesteps() == 4
    buf.update_priorities(np.full(4, 3.0))  # still the last transition sample's items
    assert set(buf.get_priorities(last).tolist()) == {3.0}


@pytest.mark.parametrize(
    ("kwargs", "out"),
    [
        (dict(beta=0.0, batch_length_T=2), dict),
        (dict(beta=0, sample_episodes=True), list),
        (dict(include_infos=True, batch_length_T=2), dict),
        (dict(include_extra_model_outputs=True, batch_length_T=2), dict),
        (dict(include_infos=False, include_extra_model_outputs=False, sample_episodes=True), list),
    ],
    ids=["beta-0-sequences", "beta-0-episodes", "infos-sequences", "extras-sequences", "off"],
)
def test_the_settings_where_they_apply_are_taken(kwargs, out):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 5, extra_model_outputs={"vf": [0.0] * 5}))
    got = buf.sample(3, **kwargs)
    assert isinstance(got, out) and len(got[0] if out is list else got["obs"]) in (3, 5)
    if kwargs.get("include_extra_model_outputs"):
        assert got["vf"].shape == (3, 2)
    if out is list:  # episodes carry their infos and extra model outputs unasked
        assert list(got[0].extra_model_outputs) == ["vf"] and len(got[0].get_infos()) == 6

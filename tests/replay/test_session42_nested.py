"""Nested (Dict / Tuple) observations in the replay buffers: stored per leaf, given back nested.

Every sampled transition, sequence and episode is checked leaf by leaf against a plain-Python
reference built from the added chunks' getters (``tests/replay/reference.py``), and against the
same chunks stored flattened (``gymnasium.spaces.flatten`` of each nested item).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import flatten_episode_observations
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, EvictedEpisodeError, PrioritizedEpisodeReplayBuffer
from tests.replay import _nested as nest
from tests.replay._nested import (
    interleaved_pieces,
    nested_spaces,
)
from tests.replay.reference import RefBuffer

Box, Discrete, Dict, Tuple = gym.spaces.Box, gym.spaces.Discrete, gym.spaces.Dict, gym.spaces.Tuple
MultiBinary, MultiDiscrete = gym.spaces.MultiBinary, gym.spaces.MultiDiscrete
BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]

SPACES = {
    "her_goal_dict": Dict(
        {
            "observation": Box(-1, 1, (3,), np.float32),
            "achieved_goal": Box(-1, 1, (2,), np.float32),
            "desired_goal": Box(-1, 1, (2,), np.float32),
        }
    ),
    "image_and_vector": Dict(
        {"image": Box(0, 255, (4, 4, 3), np.uint8), "vector": Box(-1, 1, (2,), np.float64)}
    ),
    "tuple_of_leaves": Tuple(
        (Discrete(4), MultiBinary(3), MultiDiscrete([2, 5]), Box(-1, 1, (), np.float32))
    ),
    "deep": Dict(
        {
            "a": Tuple((Dict({"x": Box(-1, 1, (2,)), "y": Discrete(3, start=-1)}), Discrete(2))),
            "b": Box(-5, 5, (1, 2), np.int32),
        }
    ),
}


# ------------------------------------------------------------------------------- helpers
def _chunk(space, id_, obs, t0=0, *, term=False, trunc=False, numpy=False, declare=True):
    n = len(obs) - 1
    ep = SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=list(range(n)),
        rewards=[float(t0 + i) for i in range(n)],
        t_started=t0,
        terminated=term,
        truncated=trunc,
        observation_space=space if declare else None,
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    return ep


def _stored(buf: Any) -> np.ndarray:
    """Which item indices below ``next_uid`` the buffer holds (oldest first)."""
    held = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    return np.isin(np.arange(buf._store.next_uid), held)


def _check_all(buf: Any, ref: RefBuffer, seed: int = 0) -> None:
    """Transitions, sequences and episodes of ``buf`` equal the reference, leaf by leaf."""
    assert buf.get_episode_ids() == list(ref.episodes)
    assert buf.get_num_timesteps() == ref.num_timesteps
    for ep in buf.get_episodes():
        want = ref.episodes[ep.id_]
        assert len(ep) == len(want) and ep.t_started == want.t_begin
        assert (ep.is_terminated, ep.is_truncated) == (want.terminated, want.truncated)
        for i, obs in enumerate(want.obs):
            nest.leaf_equal(ep.get_observations(i), obs, f"episode {ep.id_!r} obs {i}")
    for n_step in (1, 3):
        batch = buf.sample(16, n_step=n_step, gamma=0.5)
        for i, (ep, k) in enumerate(nest.places(buf, ref, batch["indices"])):
            m = int(batch["n_step"][i])
            assert m == min(n_step, len(ep) - k)
            nest.leaf_equal(nest.row(batch["obs"], i), ep.obs[k], "transition obs")
            nest.leaf_equal(nest.row(batch["next_obs"], i), ep.obs[k + m], "transition next_obs")
    seq = buf.sample(8, batch_length_T=3, lookback=1, pad=True)
    mask = seq["mask"]
    places = iter(nest.places(buf, ref, seq["indices"][mask]))
    for b in range(8):
        for t in range(4):
            if not mask[b, t]:
                assert seq["indices"][b, t] == -1
                zero = nest.zeros_like(nest.row(seq["obs"], b, t))
                nest.leaf_equal(nest.row(seq["obs"], b, t), zero, "padded obs")
                nest.leaf_equal(nest.row(seq["next_obs"], b, t), zero, "padded next_obs")
                continue
            ep, k = next(places)
            nest.leaf_equal(nest.row(seq["obs"], b, t), ep.obs[k], "sequence obs")
            nest.leaf_equal(nest.row(seq["next_obs"], b, t), ep.obs[k + 1], "sequence next_obs")
    for whole in buf.sample(3, sample_episodes=True):
        want = ref.episodes[whole.id_]
        assert len(whole) == len(want)
        nest.leaf_equal(whole.get_observations(-1), want.obs[-1], "sampled episode obs")
    if max(len(ep) for ep in ref.episodes.values()) < 2:
        return
    for chunk in buf.sample(4, sample_episodes=True, batch_length_T=2, lookback=1):
        want = ref.episodes[chunk.id_]
        lookback = chunk.observations.lookback
        start = chunk.t_started - want.t_begin - lookback
        for i in range(len(chunk) + 1 + lookback):
            got = chunk.get_observations(i - lookback, neg_index_as_lookback=True)
            nest.leaf_equal(got, want.obs[start + i], "sampled chunk obs")


def _added(space, chunks_spec, capacity, cls, seed=0):
    """Adds the chunks one add each to a buffer and the reference; refusals must agree."""
    buf, ref = cls(capacity, seed=seed), RefBuffer(capacity)
    for chunk in chunks_spec:
        try:
            ref.add([chunk])
        except ValueError:
            with pytest.raises(EvictedEpisodeError):
                buf.add(chunk)
            continue
        buf.add(chunk)
    return buf, ref


def _split_episodes(space, lengths, cuts, modes, seed, ends):
    """Chunks of episodes of ``lengths`` steps, cut at ``cuts``, interleaved round robin."""
    obs = [nest.samples(space, length + 1, seed + e) for e, length in enumerate(lengths)]

    def piece(e, lo, hi, numpy, declare, last):
        term, trunc = last and ends[e] == "term", last and ends[e] == "trunc"
        return _chunk(
            space,
            f"e{e}",
            obs[e][lo : hi + 1],
            lo,
            term=term,
            trunc=trunc,
            numpy=numpy,
            declare=declare,
        )

    return interleaved_pieces(lengths, cuts, modes, piece)


MODES = {
    "list": [(False, True)],
    "numpy": [(True, True)],
    "no_space": [(False, False), (True, False)],
    "mixed": [(False, True), (True, False), (True, True), (False, False)],
}


# ------------------------------------------------------------------------- table cases
@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
@pytest.mark.parametrize("modes", list(MODES), ids=list(MODES))
@pytest.mark.parametrize("name", list(SPACES), ids=list(SPACES))
def test_nested_observations_come_back_as_added(name, modes, cls):
    space = SPACES[name]
    chunks = _split_episodes(
        space, [5, 7, 4, 6], [[2], [3, 5], [], [1, 4]], MODES[modes], 7, ["term", "", "trunc", ""]
    )
    buf, ref = _added(space, chunks, 14, cls)  # evicts: compaction on the way
    assert buf.get_num_episodes_evicted() > 0
    _check_all(buf, ref)


@pytest.mark.parametrize("name", list(SPACES), ids=list(SPACES))
def test_leaves_keep_their_dtypes_and_tensors_nest(name):
    torch = pytest.importorskip("torch")
    space = SPACES[name]
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk(space, "a", nest.samples(space, 5, 1), numpy=True))
    want = buf.get_episodes()[0].get_observations()
    batch = buf.sample(3, device="cpu")
    seq = buf.sample(2, batch_length_T=2, device="cpu")

    def same_dtypes(got, ref, lead):
        if isinstance(ref, dict):
            for key in ref:
                same_dtypes(got[key], ref[key], lead)
        elif isinstance(ref, tuple):
            for g, r in zip(got, ref):
                same_dtypes(g, r, lead)
        else:
            assert isinstance(got, torch.Tensor)
            assert got.dtype == torch.from_numpy(ref[:1]).dtype
            assert tuple(got.shape) == (*lead, *ref.shape[1:])

    same_dtypes(batch["obs"], want, (3,))
    same_dtypes(batch["next_obs"], want, (3,))
    same_dtypes(seq["obs"], want, (2, 2))


@pytest.mark.parametrize("name", list(SPACES), ids=list(SPACES))
def test_flattened_then_stored_equals_stored_nested(name):
    space = SPACES[name]
    chunks = _split_episodes(space, [6, 5], [[3], [2]], MODES["mixed"], 3, ["term", ""])
    nested, flat = EpisodeReplayBuffer(100, seed=5), EpisodeReplayBuffer(100, seed=5)
    for chunk in chunks:
        declared = copy.deepcopy(chunk)
        declared.observation_space = space  # flatten with the space: one-hot as gymnasium's
        nested.add(chunk)
        flat.add(flatten_episode_observations(declared))
    a, b = nested.sample(20, n_step=2), flat.sample(20, n_step=2)
    assert a["indices"].tolist() == b["indices"].tolist()
    for key in ("obs", "next_obs"):
        rows = [gym.spaces.flatten(space, nest.row(a[key], i)) for i in range(20)]
        np.testing.assert_array_equal(np.asarray(rows, np.float32), b[key])
    s, f = nested.sample(4, batch_length_T=3, pad=True), flat.sample(4, batch_length_T=3, pad=True)
    for i in range(4):
        for t in range(3):
            if s["mask"][i, t]:
                row = gym.spaces.flatten(space, nest.row(s["obs"], i, t))
                np.testing.assert_array_equal(row.astype(np.float32), f["obs"][i, t])


# ------------------------------------------------------------------- property (hypothesis)
_NESTS = nested_spaces(["a", "b", "goal", "x y"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    space=_NESTS,
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    cuts=st.lists(st.lists(st.integers(0, 6), max_size=2), min_size=4, max_size=4),
    modes=st.sampled_from(list(MODES)),
    ends=st.lists(st.sampled_from(["term", "trunc", ""]), min_size=4, max_size=4),
    capacity=st.integers(4, 30),
    prioritized=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_nested_samples_match_the_reference(
    space, lengths, cuts, modes, ends, capacity, prioritized, seed
):
    chunks = _split_episodes(space, lengths, cuts, MODES[modes], seed, ends)
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf, ref = _added(space, chunks, capacity, cls, seed)
    _check_all(buf, ref, seed)
    # The same chunks flattened (gymnasium's rows) and stored flat: the same numbers.
    declared = [copy.deepcopy(chunk) for chunk in chunks]
    for chunk in declared:
        chunk.observation_space = space  # flattened as gymnasium does (one-hot Discrete)
    flat, _ = _added(space, [flatten_episode_observations(c) for c in declared], capacity, cls)
    a = buf.get_transitions(np.flatnonzero(_stored(buf)), n_step=2)
    b = flat.get_transitions(np.flatnonzero(_stored(flat)), n_step=2)
    assert a["indices"].tolist() == b["indices"].tolist()
    for key in ("obs", "next_obs"):
        rows = [gym.spaces.flatten(space, nest.row(a[key], i)) for i in range(len(a["indices"]))]
        np.testing.assert_array_equal(np.asarray(rows, np.float32).reshape(b[key].shape), b[key])
    restored = cls(capacity, seed=seed)
    restored.set_state(buf.get_state())
    nest.same_state(restored.get_state(), buf.get_state())
    _check_all(restored, ref, seed)


# ------------------------------------------------------------------ state and persistence
@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
def test_state_and_save_load_round_trip(cls, tmp_path):
    space = SPACES["deep"]
    chunks = _split_episodes(space, [5, 6, 3], [[2], [4], []], MODES["mixed"], 11, ["term", "", ""])
    buf, ref = _added(space, chunks, 12, cls)
    if cls is PrioritizedEpisodeReplayBuffer:
        batch = buf.sample(5)
        buf.update_priorities(np.arange(1.0, 6.0), batch["indices"])
    restored = cls(12)
    restored.set_state(buf.get_state())
    nest.same_state(restored.get_state(), buf.get_state())
    buf.save(tmp_path / "buf")
    loaded = cls.load(tmp_path / "buf")
    assert loaded.get_evicted_ids() == buf.get_evicted_ids()
    for got, want in zip(loaded.get_episodes(), buf.get_episodes()):
        nest.leaf_equal(got.get_observations(), want.get_observations(), f"loaded {got.id_!r}")
    assert loaded.get_state()["steps"]["obs"].dtype == buf.get_state()["steps"]["obs"].dtype
    if cls is PrioritizedEpisodeReplayBuffer:
        idx = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
        jdx = np.concatenate([loaded.get_episode_indices(i) for i in loaded.get_episode_ids()])
        np.testing.assert_array_equal(loaded.get_priorities(jdx), buf.get_priorities(idx))
    _check_all(loaded, ref)


def test_from_dataset_with_a_dict_observation_space(tmp_path):
    space = SPACES["her_goal_dict"]
    obs = nest.samples(space, 8, 2)
    with DatasetWriter(tmp_path / "ds") as writer:  # the later piece first: waits for its turn
        writer.write(_chunk(space, "g", obs[4:], 4, term=True, numpy=True))
        writer.write(_chunk(space, "g", obs[:5], 0, numpy=True))
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds", seed=0)
    (ep,) = buf.get_episodes()
    assert (len(ep), ep.is_terminated) == (7, True)
    for i, item in enumerate(obs):
        nest.leaf_equal(ep.get_observations(i), item, f"obs {i}")
    batch = buf.sample(4)
    assert set(batch["obs"]) == {"observation", "achieved_goal", "desired_goal"}


@pytest.mark.parametrize("declare", [True, False], ids=["space", "no_space"])
def test_continuing_chunks_join_leaf_by_leaf_with_nans_equal(declare):
    space = Dict({"a": Box(-1, 1, (2,), np.float32), "b": Discrete(3)})
    head = [{"a": np.array([np.nan, 0.5], np.float32), "b": 1}] * 3
    tail = [head[-1], {"a": np.zeros(2, np.float32), "b": 2}]
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(space, "x", head, declare=declare))
    buf.add(_chunk(space, "x", tail, 2, numpy=True, declare=declare))
    assert buf.get_num_timesteps() == 3
    before = buf.get_state()
    other = {"a": np.array([np.nan, 0.25], np.float32), "b": 2}
    with pytest.raises(ValueError, match="observation that differs"):
        buf.add(_chunk(space, "x", [other, other], 3, declare=declare))
    nest.same_state(buf.get_state(), before)


def test_dict_keys_in_another_order_are_the_same_structure():
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(None, "a", [{"x": 1.0, "y": 2}] * 3, declare=False))
    buf.add(_chunk(None, "b", [{"y": 5, "x": 4.0}] * 2, declare=False))
    assert buf.get_episodes()[1].get_observations(0) == {"x": 4.0, "y": 5}
    assert list(buf.sample(2)["obs"]) == ["x", "y"]


def test_an_ending_chunk_without_steps_ends_a_nested_episode():
    space = SPACES["tuple_of_leaves"]
    obs = nest.samples(space, 4, 0)
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(space, "a", obs))
    buf.add(_chunk(space, "a", obs[-1:], 3, trunc=True, numpy=True))
    (ep,) = buf.get_episodes()
    assert ep.is_truncated and len(ep) == 3
    nest.leaf_equal(ep.get_observations(-1), obs[-1])


# ------------------------------------------------------------------------------- refusals
_A, _B = np.zeros(2, np.float32), np.zeros(3, np.int8)
_FIRST = {"a": _A, "b": (1, _B)}
_ERRORS = {  # a later chunk's item -> the refusal's words
    "other_dict_keys": ({"a": _A, "c": (1, _B)}, "nested as"),
    "missing_key": ({"a": _A}, "nested as"),
    "tuple_longer": ({"a": _A, "b": (1, _B, 2)}, "nested as"),
    "tuple_order_swapped": ({"a": _A, "b": (_B, 1)}, r"\['b'\]\[0\]"),
    "flat_rows": (_A, "do not fit the buffer's nested observations"),
    "leaf_shape": ({"a": np.zeros(3, np.float32), "b": (1, _B)}, r"\['a'\] of shape"),
    "leaf_kind": ({"a": _A, "b": (1.5, _B)}, r"\['b'\]\[0\] of shape"),
    "leaf_values_wrap": ({"a": _A, "b": (1, np.full(3, 300))}, "hold values"),
}


@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
@pytest.mark.parametrize("case", list(_ERRORS), ids=list(_ERRORS))
def test_a_chunk_of_another_structure_is_refused_and_changes_nothing(case, cls):
    bad, match = _ERRORS[case]
    buf = cls(100, seed=0)
    buf.add(_chunk(None, "a", [_FIRST] * 3, declare=False))
    before = buf.get_state()
    with pytest.raises(ValueError, match=match):
        buf.add(
            [
                _chunk(None, "b", [_FIRST] * 2, declare=False),
                _chunk(None, "c", [bad] * 2, declare=False),
            ]
        )
    nest.same_state(buf.get_state(), before)


def test_nested_observations_into_a_flat_buffer_are_refused():
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(None, "a", [np.zeros(2)] * 3, declare=False))
    with pytest.raises(ValueError, match=r"nested as \{'a': float64 \(2,\)\} do not fit"):
        buf.add(_chunk(None, "b", [{"a": np.zeros(2)}] * 2, declare=False))
    assert buf.get_num_timesteps() == 2


_TYPE_ERRORS = {
    "non_str_key": ([{1: np.zeros(2)}] * 2, "Dict key 1 must be a str"),
    "empty_dict": ([{}] * 2, "empty Dict"),
    "empty_tuple_in_dict": ([{"a": ()}] * 2, "empty Tuple"),
    "text_leaf": ([{"a": "text"}] * 2, "numeric arrays only"),
    "items_differ": ([{"a": 1.0}, {"b": 1.0}], "differ in structure"),
}


@pytest.mark.parametrize("case", list(_TYPE_ERRORS), ids=list(_TYPE_ERRORS))
def test_unstorable_nested_items_are_type_errors(case):
    items, match = _TYPE_ERRORS[case]
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError, match=match):
        buf.add(_chunk(None, "a", items, declare=False))
    assert buf.get_num_timesteps() == 0


def test_nested_actions_and_extras_are_stored_nested_rewards_refused():
    # Nested actions and extra model outputs are stored since session 43
    # (tests/replay/test_session43_nested_actions.py); rewards stay scalars.
    obs = [{"a": np.zeros(2)}] * 2
    buf = EpisodeReplayBuffer(100)
    buf.add(
        SingleAgentEpisode(
            observations=obs,
            actions=[{"u": 1}],
            rewards=[1.0],
            extra_model_outputs={"h": [(np.zeros(2), np.ones(2))]},
            len_lookback_buffer=0,
        )
    )
    batch = buf.sample(1, include_extra_model_outputs=True)
    assert batch["actions"]["u"].tolist() == [1] and batch["h"][1].tolist() == [[1.0, 1.0]]
    with pytest.raises(TypeError, match=r"rewards: .*rewards are real scalars"):
        buf.add(
            SingleAgentEpisode(
                observations=obs, actions=[{"u": 1}], rewards=[{"r": 1.0}], len_lookback_buffer=0
            )
        )
    assert buf.get_num_timesteps() == 1


def test_set_state_refuses_records_that_name_no_structure():
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(None, "a", [{"a": np.zeros(2)}] * 3, declare=False))
    state = buf.get_state()
    crafted = copy.deepcopy(state)
    bad = np.dtype([("x", "f8", (2,))])
    crafted["steps"]["obs"] = state["steps"]["obs"].view(bad)
    crafted["episodes"]["final_obs"] = state["episodes"]["final_obs"].view(bad)
    other = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match="no Dict keys or Tuple places"):
        other.set_state(crafted)
    assert other.get_num_timesteps() == 0


@pytest.mark.parametrize("numpy", [False, True], ids=["list-mode", "numpy"])
@pytest.mark.parametrize("form", [tuple, list], ids=["tuples", "lists"])
def test_tuple_space_items_given_as_lists_come_back_as_tuples(form, numpy):
    pair = Tuple((Discrete(3), Box(0, 9, (), np.float32)))
    items = [form((k % 3, np.float32(k))) for k in range(4)]
    ep = _chunk(pair, "a", items, term=True, numpy=numpy)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(ep)
    batch = buf.get_transitions(buf.locate("a", [0, 1, 2]))
    assert isinstance(batch["obs"], tuple)
    assert batch["obs"][0].tolist() == [0, 1, 2] and batch["obs"][1].dtype == np.float32
    assert batch["next_obs"][1].tolist() == [1.0, 2.0, 3.0]
    assert buf.get_episodes()[0].get_observations(3) == (0, np.float32(3.0))


@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
def test_compaction_and_growth_move_nested_rows_whole(cls):
    space = SPACES["deep"]
    chunks = _split_episodes(
        space, [5] * 40, [[2]] * 40, MODES["mixed"], 1, ["term", "trunc", ""] * 14
    )
    buf, ref = _added(space, chunks, 23, cls)
    assert buf._store.moves > 0  # compacted: the live rows moved to the front
    _check_all(buf, ref)
    grown, ref_grown = _added(space, chunks, 1000, cls)  # grows past 64 rows, by half
    assert grown._store.size > 64
    _check_all(grown, ref_grown)

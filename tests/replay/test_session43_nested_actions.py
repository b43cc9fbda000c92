"""Nested (Dict / Tuple) actions and extra model outputs in replay: records, given back nested.

Hybrid action spaces (P-DQN's ``Dict(discrete, params)``, ``Tuple(Discrete, Box)``), multi-head
robot actions, an LSTM's ``(h, c)`` state as an extra model output, and random nests: every
sampled transition, sequence and episode action (and extra) is checked leaf by leaf against a
plain-Python reference built from the added chunks' getters (``tests/replay/reference.py``),
and against the same chunks with their actions flattened (``gymnasium.spaces.flatten``) and
stored flat.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyarrow import ipc

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
    loaded_shards,
    saved_shards,
)
from episodes.replay.nested import is_records
from tests.replay import _nested as nest
from tests.replay._nested import (
    interleaved_pieces,
    nested_spaces,
)
from tests.replay.reference import RefBuffer

Box, Discrete, Dict, Tuple = gym.spaces.Box, gym.spaces.Discrete, gym.spaces.Dict, gym.spaces.Tuple
MultiBinary, MultiDiscrete = gym.spaces.MultiBinary, gym.spaces.MultiDiscrete
BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]

ACTION_SPACES = {
    "pdqn_hybrid": Dict({"discrete": Discrete(3), "params": Box(-1, 1, (3, 2), np.float32)}),
    "tuple_hybrid": Tuple((Discrete(4), Box(-2, 2, (2,), np.float32))),
    "robot_heads": Dict(
        {
            "arm": Box(-1, 1, (7,), np.float32),
            "gripper": Discrete(2),
            "base": Box(-1, 1, (2,), np.float64),
            "lights": MultiBinary(3),
        }
    ),
    "deep": Dict(
        {
            "a": Tuple((Dict({"x": MultiDiscrete([2, 5]), "y": Discrete(3, start=-1)}),)),
            "b": Box(-5, 5, (), np.int32),
        }
    ),
}
EXTRA_SPACES = {  # an extra model output recorded per step: a recurrent model's state
    "lstm_tuple": Tuple((Box(-1, 1, (3,), np.float32), Box(-1, 1, (3,), np.float32))),
    "lstm_dict": Dict({"h": Box(-1, 1, (2, 2), np.float32), "c": Box(-1, 1, (4,), np.float64)}),
    "deep": Dict({"gru": Tuple((Box(-1, 1, (2,), np.float32),)), "step": Discrete(9)}),
}
OBS_SPACES = {
    "flat_obs": Box(-1, 1, (2,), np.float32),
    "dict_obs": Dict({"pos": Box(-1, 1, (2,), np.float32), "id": Discrete(5)}),
}


# ------------------------------------------------------------------------------- helpers
def _chunk(
    spaces, id_, obs, acts, t0=0, *, term=False, trunc=False, numpy=False, declare=True, extras=None
):
    ep = SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=list(acts),
        rewards=[float(t0 + i) for i in range(len(acts))],
        t_started=t0,
        terminated=term,
        truncated=trunc,
        observation_space=spaces[0] if declare else None,
        action_space=spaces[1] if declare else None,
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    return ep


def _stored(buf: Any) -> np.ndarray:
    return np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])


def _check_all(buf: Any, ref: RefBuffer) -> None:
    """Transitions, sequences and episodes of ``buf``: actions (and obs) as the reference's."""
    assert buf.get_episode_ids() == list(ref.episodes)
    assert buf.get_num_timesteps() == ref.num_timesteps
    for ep in buf.get_episodes():
        want = ref.episodes[ep.id_]
        assert len(ep) == len(want) and ep.t_started == want.t_begin
        for i, action in enumerate(want.actions):
            nest.leaf_equal(ep.get_actions(i), action, f"episode {ep.id_!r} action {i}")
        nest.leaf_equal(ep.get_observations(-1), want.obs[-1], f"episode {ep.id_!r} last obs")
    for n_step in (1, 3):
        batch = buf.sample(16, n_step=n_step, gamma=0.5)
        for i, (ep, k) in enumerate(nest.places(buf, ref, batch["indices"])):
            nest.leaf_equal(nest.row(batch["actions"], i), ep.actions[k], "transition action")
            nest.leaf_equal(nest.row(batch["obs"], i), ep.obs[k], "transition obs")
            nest.leaf_equal(
                nest.row(batch["next_obs"], i), ep.obs[k + int(batch["n_step"][i])], "next"
            )
    seq = buf.sample(8, batch_length_T=3, lookback=1, pad=True)
    mask = seq["mask"]
    places = iter(nest.places(buf, ref, seq["indices"][mask]))
    for b in range(8):
        for t in range(4):
            got = nest.row(seq["actions"], b, t)
            if not mask[b, t]:
                nest.leaf_equal(got, nest.zeros_like(got), "padded action")
                continue
            ep, k = next(places)
            nest.leaf_equal(got, ep.actions[k], "sequence action")
            nest.leaf_equal(nest.row(seq["obs"], b, t), ep.obs[k], "sequence obs")
    for whole in buf.sample(3, sample_episodes=True):
        want = ref.episodes[whole.id_]
        for i, action in enumerate(want.actions):
            nest.leaf_equal(whole.get_actions(i), action, "sampled episode action")
    if max(len(ep) for ep in ref.episodes.values()) < 2:
        return
    for chunk in buf.sample(4, sample_episodes=True, batch_length_T=2, lookback=1):
        want = ref.episodes[chunk.id_]
        lookback = chunk.actions.lookback
        start = chunk.t_started - want.t_begin - lookback
        for i in range(len(chunk) + lookback):
            got = chunk.get_actions(i - lookback, neg_index_as_lookback=True)
            nest.leaf_equal(got, want.actions[start + i], "sampled chunk action")


def _check_extras(buf: Any, chunks: list[Any]) -> None:
    """The extra model output "state" of transitions, sequences and episodes, as added."""
    want = {
        (chunk.id_, chunk.t_started + i): chunk.get_extra_model_outputs("state", i)
        for chunk in chunks
        for i in range(len(chunk))
    }
    batch = buf.sample(16, n_step=2, include_extra_model_outputs=True)
    ids, times = buf.episode_steps(batch["indices"])
    for i, (id_, t) in enumerate(zip(ids, times)):
        nest.leaf_equal(nest.row(batch["state"], i), want[id_, int(t)], "transition extra")
    seq = buf.sample(4, batch_length_T=3, lookback=1, pad=True, include_extra_model_outputs=True)
    for b in range(4):
        for t in range(4):
            got = nest.row(seq["state"], b, t)
            if not seq["mask"][b, t]:
                nest.leaf_equal(got, nest.zeros_like(got), "padded extra")
                continue
            (id_,), (at,) = buf.episode_steps(seq["indices"][b, t : t + 1])
            nest.leaf_equal(got, want[id_, int(at)], "sequence extra")
    for ep in buf.get_episodes():
        for i in range(len(ep)):
            got = ep.get_extra_model_outputs("state", i)
            nest.leaf_equal(got, want[ep.id_, ep.t_started + i], "episode extra")


def _added(chunks: list[Any], capacity: int, cls: type, seed: int = 0) -> tuple[Any, RefBuffer]:
    """Adds the chunks one add each to a buffer and the reference; refusals must agree."""
    buf, ref = cls(capacity, seed=seed), RefBuffer(capacity)
    for chunk in chunks:
        try:
            ref.add([chunk])
        except ValueError:
            with pytest.raises(EvictedEpisodeError):
                buf.add(chunk)
            continue
        buf.add(chunk)
    return buf, ref


def _split_episodes(spaces, lengths, cuts, modes, seed, ends, extra=None):
    """Chunks of episodes of ``lengths`` steps, cut at ``cuts``, interleaved round robin.

    ``extra``: a space whose samples each step records as the extra model output "state".
    """
    obs = [nest.samples(spaces[0], n + 1, seed + e) for e, n in enumerate(lengths)]
    acts = [nest.samples(spaces[1], n, seed + 100 + e) for e, n in enumerate(lengths)]
    states = [
        None if extra is None else nest.samples(extra, n, seed + 200 + e)
        for e, n in enumerate(lengths)
    ]

    def piece(e, lo, hi, numpy, declare, last):
        return _chunk(
            spaces,
            f"e{e}",
            obs[e][lo : hi + 1],
            acts[e][lo:hi],
            lo,
            term=last and ends[e] == "term",
            trunc=last and ends[e] == "trunc",
            numpy=numpy,
            declare=declare,
            extras=None if states[e] is None else {"state": states[e][lo:hi]},
        )

    return interleaved_pieces(lengths, cuts, modes, piece)


MODES = {
    "list": [(False, True)],
    "numpy": [(True, True)],
    "no_space": [(False, False), (True, False)],
    "mixed": [(False, True), (True, False), (True, True), (False, False)],
}


def _flat_actions(chunk: SingleAgentEpisode, space: gym.Space[Any]) -> SingleAgentEpisode:
    """``chunk`` with each action flattened as gymnasium does (one-hot Discretes), as floats."""
    acts = [
        np.asarray(gym.spaces.flatten(space, chunk.get_actions(i)), np.float64)
        for i in range(len(chunk))
    ]
    obs = [chunk.get_observations(i) for i in range(len(chunk) + 1)]
    spaces = (chunk.observation_space, None)
    return _chunk(
        spaces, chunk.id_, obs, acts, chunk.t_started, term=chunk.is_terminated,
        trunc=chunk.is_truncated, declare=chunk.observation_space is not None,
    )  # fmt: skip


def _flat_rows(space: gym.Space[Any], column: Any, count: int) -> np.ndarray:
    return np.array(
        [gym.spaces.flatten(space, nest.row(column, i)) for i in range(count)], np.float64
    )


# ------------------------------------------------------------------------- table cases
@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
@pytest.mark.parametrize("modes", list(MODES), ids=list(MODES))
@pytest.mark.parametrize("obs_name", list(OBS_SPACES), ids=list(OBS_SPACES))
@pytest.mark.parametrize("name", list(ACTION_SPACES), ids=list(ACTION_SPACES))
def test_nested_actions_come_back_as_added(name, obs_name, modes, cls):
    spaces = (OBS_SPACES[obs_name], ACTION_SPACES[name])
    chunks = _split_episodes(
        spaces, [5, 7, 4, 6], [[2], [3, 5], [], [1, 4]], MODES[modes], 7, ["term", "", "trunc", ""]
    )
    buf, ref = _added(chunks, 14, cls)  # evicts: compaction on the way
    assert buf.get_num_episodes_evicted() > 0
    assert is_records(buf.get_state()["steps"]["actions"])
    _check_all(buf, ref)


@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
@pytest.mark.parametrize("modes", list(MODES), ids=list(MODES))
@pytest.mark.parametrize("name", list(EXTRA_SPACES), ids=list(EXTRA_SPACES))
def test_nested_extra_model_outputs_come_back_as_added(name, modes, cls):
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES["tuple_hybrid"])
    chunks = _split_episodes(
        spaces, [5, 7, 4, 6], [[2], [3, 5], [], [1, 4]], MODES[modes], 7,
        ["term", "", "trunc", ""], extra=EXTRA_SPACES[name],
    )  # fmt: skip
    buf, ref = _added(chunks, 14, cls)
    assert buf.get_num_episodes_evicted() > 0
    assert is_records(buf.get_state()["steps"]["extras"]["state"])
    _check_all(buf, ref)
    _check_extras(buf, chunks)


@pytest.mark.parametrize("name", list(ACTION_SPACES), ids=list(ACTION_SPACES))
def test_flattened_then_stored_equals_stored_nested(name):
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES[name])
    chunks = _split_episodes(spaces, [6, 5], [[3], [2]], MODES["mixed"], 3, ["term", ""])
    nested, flat = EpisodeReplayBuffer(100, seed=5), EpisodeReplayBuffer(100, seed=5)
    for chunk in chunks:
        nested.add(chunk)
        flat.add(_flat_actions(chunk, spaces[1]))
    a, b = nested.sample(20, n_step=2), flat.sample(20, n_step=2)
    assert a["indices"].tolist() == b["indices"].tolist()
    np.testing.assert_array_equal(_flat_rows(spaces[1], a["actions"], 20), b["actions"])
    np.testing.assert_array_equal(a["rewards"], b["rewards"])
    s, f = nested.sample(4, batch_length_T=3, pad=True), flat.sample(4, batch_length_T=3, pad=True)
    for i in range(4):
        for t in range(3):
            if s["mask"][i, t]:
                row = gym.spaces.flatten(spaces[1], nest.row(s["actions"], i, t))
                np.testing.assert_array_equal(row.astype(np.float64), f["actions"][i, t])
            else:
                assert not f["mask"][i, t] and not f["actions"][i, t].any()


@pytest.mark.parametrize("name", list(ACTION_SPACES), ids=list(ACTION_SPACES))
def test_action_leaves_keep_their_dtypes_and_tensors_nest(name):
    torch = pytest.importorskip("torch")
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES[name])
    acts = nest.samples(spaces[1], 4, 1)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk(spaces, "a", nest.samples(spaces[0], 5, 1), acts, numpy=True))
    want = buf.get_episodes()[0].get_actions()

    def same(got, ref, lead):
        if isinstance(ref, dict):
            for key in ref:
                same(got[key], ref[key], lead)
        elif isinstance(ref, tuple):
            assert isinstance(got, tuple)
            for g, r in zip(got, ref):
                same(g, r, lead)
        else:
            assert isinstance(got, torch.Tensor)
            assert got.dtype == torch.from_numpy(ref[:1]).dtype
            assert tuple(got.shape) == (*lead, *ref.shape[1:])

    same(buf.sample(3, device="cpu")["actions"], want, (3,))
    same(buf.sample(2, batch_length_T=2, lookback=1, device="cpu")["actions"], want, (2, 3))


# ------------------------------------------------------------------- property (hypothesis)
_NESTS = nested_spaces(["a", "b", "params", "x y"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    action_space=_NESTS,
    obs_space=st.one_of(st.just(OBS_SPACES["flat_obs"]), _NESTS),
    extra=st.one_of(st.none(), _NESTS),
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    cuts=st.lists(st.lists(st.integers(0, 6), max_size=2), min_size=4, max_size=4),
    modes=st.sampled_from(list(MODES)),
    ends=st.lists(st.sampled_from(["term", "trunc", ""]), min_size=4, max_size=4),
    capacity=st.integers(4, 30),
    prioritized=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_nested_actions_match_the_reference(
    action_space, obs_space, extra, lengths, cuts, modes, ends, capacity, prioritized, seed
):
    spaces = (obs_space, action_space)
    chunks = _split_episodes(spaces, lengths, cuts, MODES[modes], seed, ends, extra)
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf, ref = _added(chunks, capacity, cls, seed)
    _check_all(buf, ref)
    if extra is not None:
        _check_extras(buf, chunks)
    # The same chunks with their actions flattened (gymnasium's rows), stored flat.
    flat, _ = _added([_flat_actions(c, action_space) for c in chunks], capacity, cls)
    a = buf.get_transitions(_stored(buf), n_step=2)
    b = flat.get_transitions(_stored(flat), n_step=2)
    assert a["indices"].tolist() == b["indices"].tolist()
    count = len(a["indices"])
    rows = _flat_rows(action_space, a["actions"], count).reshape(b["actions"].shape)
    np.testing.assert_array_equal(rows, b["actions"])
    restored = cls(capacity, seed=seed)
    restored.set_state(buf.get_state())
    nest.same_state(restored.get_state(), buf.get_state())
    _check_all(restored, ref)
    if extra is not None:
        _check_extras(restored, chunks)


# ------------------------------------------------------------------ state and persistence
def _persisted(cls: type, extra: Any = None) -> tuple[Any, RefBuffer, list[Any]]:
    spaces = (OBS_SPACES["dict_obs"], ACTION_SPACES["deep"])
    chunks = _split_episodes(spaces, [5, 6, 3, 4], [[2], [4], [], []], MODES["mixed"], 11,
                             ["term", "", "", "trunc"], extra)  # fmt: skip
    buf, ref = _added(chunks, 14, cls)
    if cls is PrioritizedEpisodeReplayBuffer:
        batch = buf.sample(5)
        buf.update_priorities(np.arange(1.0, 6.0), batch["indices"])
    return buf, ref, chunks


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise saved_shards.BatchMismatch("one by one")

    monkeypatch.setattr(saved_shards, "write_stored", refuse)
    monkeypatch.setattr(loaded_shards, "read_stored", lambda path: None)


@pytest.mark.parametrize("extra", [None, "lstm_tuple"], ids=["actions", "actions_and_extras"])
@pytest.mark.parametrize("path", ["batched", "one_by_one"])
@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
def test_state_and_save_load_round_trip(cls, path, extra, tmp_path, monkeypatch):
    buf, ref, chunks = _persisted(cls, extra and EXTRA_SPACES[extra])
    restored = cls(14)
    restored.set_state(buf.get_state())
    nest.same_state(restored.get_state(), buf.get_state())
    _check_all(restored, ref)
    if path == "one_by_one":
        _one_by_one(monkeypatch)
    else:  # the batched save applies (compared with the writer's), and the batched load
        buf.save(tmp_path / "probe")  # gathers nested actions and nested extras, no piece read
        read = loaded_shards.read_stored(tmp_path / "probe" / "episodes")
        assert read is not None
        assert all(not part["chunks"] for part in read._parts)
    buf.save(tmp_path / "buf")
    loaded = cls.load(tmp_path / "buf")
    monkeypatch.undo()
    assert loaded.get_evicted_ids() == buf.get_evicted_ids()
    for got, want in zip(loaded.get_episodes(), buf.get_episodes()):
        nest.leaf_equal(got.get_actions(), want.get_actions(), f"loaded {got.id_!r}")
    mine, theirs = loaded.get_state()["steps"], buf.get_state()["steps"]
    assert mine["actions"].dtype == theirs["actions"].dtype  # the same record dtype
    for id_ in buf.get_episode_ids():  # episode by episode: a load stores them in a run
        a = loaded.get_transitions(loaded.get_episode_indices(id_))["actions"]
        nest.leaf_equal(a, buf.get_transitions(buf.get_episode_indices(id_))["actions"], "loaded")
    if cls is PrioritizedEpisodeReplayBuffer:
        idx = _stored(buf)
        np.testing.assert_array_equal(
            loaded.get_priorities(_stored(loaded)), buf.get_priorities(idx)
        )
    _check_all(loaded, ref)
    if extra is not None:
        _check_extras(restored, chunks)
        _check_extras(loaded, chunks)


@pytest.mark.parametrize("extra", [None, "lstm_dict"], ids=["actions", "actions_and_extras"])
def test_batched_and_one_by_one_saves_write_the_same_files(extra, tmp_path, monkeypatch):
    buf, _, _ = _persisted(EpisodeReplayBuffer, extra and EXTRA_SPACES[extra])
    buf.save(tmp_path / "batched")
    _one_by_one(monkeypatch)
    buf.save(tmp_path / "slow")
    monkeypatch.undo()
    shards = sorted((tmp_path / "batched" / "episodes" / "shards").glob("*.arrow"))
    slow = sorted((tmp_path / "slow" / "episodes" / "shards").glob("*.arrow"))
    assert len(shards) == len(slow) == 1
    # The same columns, values and nulls (record batches cut elsewhere): the nested actions
    # are the writer's struct column, null in the struct and its leaves at each last row.
    batched, written = (ipc.open_file(p).read_all().combine_chunks() for p in (shards[0], slow[0]))
    assert batched.schema.field("actions").type == written.schema.field("actions").type
    assert pa.types.is_struct(batched.schema.field("actions").type)
    assert batched.equals(written)
    episodes = read_episodes(tmp_path / "batched" / "episodes", numpy=True, verify=True)
    for got, want in zip(episodes, buf.get_episodes(), strict=True):
        nest.leaf_equal(got.get_actions(), want.get_actions(), f"read {got.id_!r}")


def test_set_state_refuses_action_records_that_name_no_structure():
    buf, _, _ = _persisted(EpisodeReplayBuffer)
    state = buf.get_state()
    crafted = copy.deepcopy(state)
    crafted["steps"]["actions"] = np.zeros(len(state["steps"]["actions"]), [("x", "f8")])
    other = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match="no Dict keys or Tuple places"):
        other.set_state(crafted)
    assert other.get_num_timesteps() == 0


def test_from_dataset_with_a_dict_action_space(tmp_path):
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES["pdqn_hybrid"])
    obs, acts = nest.samples(spaces[0], 8, 2), nest.samples(spaces[1], 7, 3)
    with DatasetWriter(tmp_path / "ds") as writer:  # the later piece first: waits for its turn
        writer.write(_chunk(spaces, "g", obs[4:], acts[4:], 4, term=True, numpy=True))
        writer.write(_chunk(spaces, "g", obs[:5], acts[:4], 0, numpy=True))
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds", seed=0)
    (ep,) = buf.get_episodes()
    assert (len(ep), ep.is_terminated) == (7, True)
    for i, item in enumerate(acts):
        nest.leaf_equal(ep.get_actions(i), item, f"action {i}")
    batch = buf.sample(4)
    assert set(batch["actions"]) == {"discrete", "params"}
    assert batch["actions"]["params"].shape == (4, 3, 2)


def test_an_ending_chunk_without_steps_ends_a_nested_action_episode():
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES["tuple_hybrid"])
    obs, acts = nest.samples(spaces[0], 4, 0), nest.samples(spaces[1], 3, 0)
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk(spaces, "a", obs, acts))
    buf.add(_chunk(spaces, "a", obs[-1:], [], 3, trunc=True, numpy=True))
    (ep,) = buf.get_episodes()
    assert ep.is_truncated and len(ep) == 3
    nest.leaf_equal(ep.get_actions(-1), acts[-1], "last action")


@pytest.mark.parametrize("numpy", [False, True], ids=["list-mode", "numpy"])
@pytest.mark.parametrize("form", [tuple, list], ids=["tuples", "lists"])
def test_tuple_actions_given_as_lists_come_back_as_tuples(form, numpy):
    pair = Tuple((Discrete(3), Box(0, 9, (), np.float32)))
    acts = [form((k % 3, np.float32(k))) for k in range(3)]
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk((None, pair), "a", [0.0, 1.0, 2.0, 3.0], acts, term=True, numpy=numpy))
    batch = buf.get_transitions(buf.locate("a", [0, 1, 2]))
    assert isinstance(batch["actions"], tuple)
    assert batch["actions"][0].tolist() == [0, 1, 2] and batch["actions"][1].dtype == np.float32
    assert buf.get_episodes()[0].get_actions(2) == (2, np.float32(2.0))


# ------------------------------------------------------------------------------- refusals
_A, _B = np.zeros(2, np.float32), np.zeros(3, np.int8)
_FIRST = {"d": 1, "p": (_A, _B)}
_ERRORS = {  # a later chunk's action -> the refusal's words
    "other_dict_keys": ({"d": 1, "q": (_A, _B)}, r"actions nested as .* do not fit"),
    "missing_key": ({"d": 1}, r"actions nested as \{'d': int64\} do not fit"),
    "tuple_longer": ({"d": 1, "p": (_A, _B, 2)}, "nested as"),
    "tuple_order_swapped": ({"d": 1, "p": (_B, _A)}, r"actions\['p'\]\[0\] of shape"),
    "flat_rows": (1, r"actions of shape \(\) do not fit the buffer's nested actions \{'d'"),
    "leaf_shape": ({"d": 1, "p": (np.zeros(3, np.float32), _B)}, r"\['p'\]\[0\] of shape"),
    "leaf_kind": ({"d": 1.5, "p": (_A, _B)}, r"actions\['d'\] of shape"),
    "leaf_values_wrap": ({"d": 1, "p": (_A, np.full(3, 300))}, "hold values"),
}


@pytest.mark.parametrize("cls", BUFFERS, ids=["uniform", "prioritized"])
@pytest.mark.parametrize("case", list(_ERRORS), ids=list(_ERRORS))
def test_a_chunk_of_another_action_structure_is_refused_and_changes_nothing(case, cls):
    bad, match = _ERRORS[case]
    buf = cls(100, seed=0)
    buf.add(_chunk((None, None), "a", [0.0] * 3, [_FIRST] * 2, declare=False))
    before = buf.get_state()
    with pytest.raises(ValueError, match=match):
        buf.add(
            [
                _chunk((None, None), "b", [0.0] * 2, [_FIRST], declare=False),
                _chunk((None, None), "c", [0.0] * 3, [bad] * 2, declare=False),
            ]
        )
    nest.same_state(buf.get_state(), before)


def test_a_continuing_chunk_with_other_nested_actions_is_refused():
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk((None, None), "a", [0.0, 1.0], [_FIRST], declare=False))
    before = buf.get_state()
    with pytest.raises(ValueError, match=r"chunk 0 \(episode 'a'\): actions nested as"):
        buf.add(_chunk((None, None), "a", [1.0, 2.0], [(1, _A)], 1, declare=False))
    nest.same_state(buf.get_state(), before)


def test_nested_actions_into_a_flat_buffer_are_refused():
    buf = EpisodeReplayBuffer(100)
    buf.add(_chunk((None, None), "a", [0.0] * 3, [0, 1], declare=False))
    with pytest.raises(ValueError, match=r"actions nested as \{'u': int64\} do not fit"):
        buf.add(_chunk((None, None), "b", [0.0] * 2, [{"u": 1}], declare=False))
    assert buf.get_num_timesteps() == 2


_TYPE_ERRORS = {
    "non_str_key": ([{1: np.zeros(2)}], "Dict key 1 must be a str"),
    "empty_dict": ([{}], "empty Dict"),
    "empty_tuple_in_dict": ([{"a": ()}], "empty Tuple"),
    "text_leaf": ([{"a": "text"}], "numeric arrays only"),
    "items_differ": ([{"a": 1.0}, {"b": 1.0}], "differ in structure"),
}


@pytest.mark.parametrize("case", list(_TYPE_ERRORS), ids=list(_TYPE_ERRORS))
def test_unstorable_nested_actions_are_type_errors(case):
    acts, match = _TYPE_ERRORS[case]
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError, match=match):
        buf.add(_chunk((None, None), "a", [0.0] * (len(acts) + 1), acts, declare=False))
    assert buf.get_num_timesteps() == 0


_REWARDS = {
    "dict": [{"r": 1.0}],
    "tuple": [(1.0, 2.0)],
}


@pytest.mark.parametrize("case", list(_REWARDS), ids=list(_REWARDS))
def test_nested_rewards_stay_refused_with_accurate_words(case):
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError) as caught:
        buf.add(
            SingleAgentEpisode(
                observations=[0.0, 1.0],
                actions=[{"u": 1}],
                rewards=_REWARDS[case],
                extra_model_outputs={"h": [(np.zeros(2), np.zeros(2))]},
                len_lookback_buffer=0,
            )
        )
    words = str(caught.value)
    assert words.startswith("chunk 0 (episode ") and "rewards: " in words
    assert "stored for observations, actions and extra model outputs" in words
    assert buf.get_num_timesteps() == 0


def test_a_later_chunk_with_another_nested_extra_is_refused_and_changes_nothing():
    def chunk(id_, state):
        return SingleAgentEpisode(
            id_, observations=[0.0, 1.0], actions=[0], rewards=[1.0],
            extra_model_outputs={"state": [state]}, len_lookback_buffer=0,
        )  # fmt: skip

    good = (np.zeros(2, np.float32), np.zeros(3, np.float32))
    buf = EpisodeReplayBuffer(100)
    buf.add(chunk("a", good))
    before = buf.get_state()
    with pytest.raises(ValueError, match=r"extra_model_outputs\['state'\] nested as \{'h'"):
        buf.add([chunk("b", good), chunk("c", {"h": _A})])
    with pytest.raises(ValueError, match=r"extra_model_outputs\['state'\]\[1\] of shape"):
        buf.add(chunk("c", (np.zeros(2, np.float32), np.zeros(4, np.float32))))
    nest.same_state(buf.get_state(), before)


def test_from_dataset_with_a_nested_extra_model_output(tmp_path):
    spaces = (OBS_SPACES["flat_obs"], ACTION_SPACES["tuple_hybrid"])
    chunks = _split_episodes(spaces, [4, 3], [[2], []], MODES["mixed"], 5, ["term", ""],
                             extra=EXTRA_SPACES["lstm_dict"])  # fmt: skip
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write_many(chunks)
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds", seed=0)
    assert buf.get_num_timesteps() == 7
    _check_extras(buf, chunks)

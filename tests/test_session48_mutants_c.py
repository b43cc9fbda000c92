"""Behaviour that hand-made mutants of ``episodes.replay.buffer``, ``episodes.replay.access``,
``episodes.replay.counters``, ``episodes.replay.sizes``, ``episodes.replay.integers``,
``episodes.connectors.text_fill``, ``episodes.connectors.lookback_reach`` and
``episodes.connectors.given_episodes`` showed no test pinned (session 48, third batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
buffers are driven through ``add`` (continuing chunks, evictions), ``sample``, the ``get_num_*``
counters and ``get_state`` / ``set_state``, and what they give is compared with the plain-list
model of ``tests/replay/reference.py``; the connectors are driven through their public classes
on ``SingleAgentEpisode`` inputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors.lookback_reach import ShortLookbackWarning
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._episodes import chunk, make_episode_data
from tests.replay.reference import RefBuffer

BUFFERS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}


def _ep(id_: str, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------------------------------ add
NOT_CHUNKS = {
    # name: what add() is given
    "a dict of episodes": {"a": _ep("a", 2)},
    "an empty dict": {},
}


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("given", NOT_CHUNKS.values(), ids=NOT_CHUNKS)
def test_add_refuses_a_mapping_and_stores_nothing(kind, given):
    # mutant B1: a Mapping taken as an iterable (its keys read as chunks, {} a silent no-op)
    buf = BUFFERS[kind](10)
    with pytest.raises(TypeError, match=r"add\(\) takes SingleAgentEpisode chunks, got dict"):
        buf.add(given)
    assert buf.get_num_timesteps() == 0 and buf.get_added_timesteps() == 0


# ----------------------------------------------------------------------- evicted ids kept
@pytest.mark.parametrize("kind", BUFFERS)
def test_the_latest_65536_evicted_ids_are_kept(kind):
    # mutant C6: one id fewer kept than the 65,536 get_evicted_ids documents
    buf = BUFFERS[kind](3)
    old = [f"old{i}" for i in range(65_536)]
    counts = {"added_timesteps": 0, "sampled_timesteps": 0, "episodes_evicted": 65_536}
    buf.set_counters(counts, old)
    assert buf.get_evicted_ids() == old
    buf.add([_ep("a", 2), _ep("b", 2)])  # 4 steps > 3: "a" is evicted
    ids = buf.get_evicted_ids()
    assert len(ids) == 65_536 and ids[0] == "old1" and ids[-1] == "a"
    assert buf.get_num_episodes_evicted() == 65_537


@pytest.mark.parametrize("kind", BUFFERS)
def test_set_counters_takes_the_evicted_ids_as_a_tuple(kind):
    # mutant C9: a tuple of evicted ids refused
    buf = BUFFERS[kind](10)
    buf.add(_ep("b", 2))
    counts = {"added_timesteps": 9, "sampled_timesteps": 4, "episodes_evicted": 3}
    buf.set_counters(counts, ("a", 7))
    assert buf.get_counters() == counts and buf.get_evicted_ids() == ["a", 7]
    with pytest.raises(ValueError, match="evicted"):  # a continuing chunk of an evicted one
        buf.add(
            SingleAgentEpisode(
                "a",
                observations=[5.0, 6.0],
                actions=[0],
                rewards=[1.0],
                t_started=3,
                len_lookback_buffer=0,
            )
        )


PLAIN_DICT_CUTS = {
    # name: (ids held before, ids kept after one more: the latest of them)
    "at the bound: kept": (65_536, 65_537),
    "an eighth over: kept": (65_536 + 8_191, 65_536 + 8_192),
    "past an eighth over: cut to the bound": (65_536 + 8_192, 65_536),
}


@pytest.mark.parametrize("held, kept", PLAIN_DICT_CUTS.values(), ids=PLAIN_DICT_CUTS)
def test_a_plain_dict_of_evicted_ids_is_cut_back_in_one_pass(held, kept):
    # mutants C4 (cut at every id past the bound), C5 (one id too few kept)
    from episodes.replay.counters import remember_evicted

    evicted = dict.fromkeys(range(held))
    remember_evicted(evicted, "new")
    everything = [*range(held), "new"]
    assert type(evicted) is dict and list(evicted) == everything[len(everything) - kept :]


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("extra", [1, 5])
def test_set_counters_keeps_the_latest_65536_of_more_evicted_ids(kind, extra):
    # mutants C13 / C14 (one id too many kept), C15 (a plain dict kept: later evictions no
    # longer forget one id each)
    buf = BUFFERS[kind](3)
    old = [("old", i) for i in range(65_536 + extra)]
    counts = {"added_timesteps": 0, "sampled_timesteps": 0, "episodes_evicted": len(old)}
    buf.set_counters(counts, old)
    assert buf.get_evicted_ids() == old[extra:]
    for i in range(3):  # each add evicts the episode before it
        buf.add(_ep(f"e{i}", 2))
        buf.add(_ep(f"f{i}", 2))
    assert buf.get_evicted_ids() == [*old[extra + 5 :], "e0", "f0", "e1", "f1", "e2"]
    assert buf.get_num_episodes_evicted() == len(old) + 5


# ------------------------------------------------------------ connectors: a string fill
def _obs_episode(observations: list, *, finalized: bool = True) -> SingleAgentEpisode:
    n = len(observations) - 1
    ep = SingleAgentEpisode(
        "e", observations=observations, actions=[0] * n, rewards=[0.0] * n, len_lookback_buffer=0
    )
    return ep.to_numpy() if finalized else ep


TEXT_FILLS = {
    # name: (observations, finalized, fill, dtype named)
    "bools, finalized": ([True, False, True], True, "x", "bool"),
    "bools, list mode": ([True, False, True], False, "x", "bool"),
    "ints, list mode": ([1, 2, 3], False, "x", "int64"),
    "arrays, list mode": ([np.zeros(2), np.ones(2), np.ones(2)], False, "x", "float64"),
    "floats, a bytes fill": ([0.0, 1.0, 2.0], True, b"x", "float64"),
    "floats, a bytes array fill": ([0.0, 1.0, 2.0], True, np.array(b"x"), "float64"),
    "floats, a numpy bytes fill": ([0.0, 1.0, 2.0], True, np.bytes_(b"x"), "float64"),
}


@pytest.mark.parametrize(
    "observations, finalized, fill, dtype", TEXT_FILLS.values(), ids=TEXT_FILLS
)
def test_frame_stack_refuses_a_text_fill_for_numbers(observations, finalized, fill, dtype):
    # mutants T1 (bools taken), T2 / T3 (bytes taken), T6 (list-mode arrays), T7 (list-mode ints)
    from episodes.connectors import FrameStack

    ep = _obs_episode(observations, finalized=finalized)
    with pytest.raises(ValueError, match=f"cannot fill a leaf of dtype {dtype} "):
        FrameStack(2, fill=fill)([ep], {})


NUMBER_FILLS = {
    # name: (fill, the rows FrameStack(2) gives for observations 0, 1, 2)
    "a numpy float": (np.float32(-1.0), [[-1.0, 0.0], [0.0, 1.0]]),
    "a 0-d array": (np.array(-1.0), [[-1.0, 0.0], [0.0, 1.0]]),
}


@pytest.mark.parametrize("fill, rows", NUMBER_FILLS.values(), ids=NUMBER_FILLS)
def test_frame_stack_takes_a_numpy_number_fill(fill, rows):
    # mutant T4: every numpy fill checked as text
    from episodes.connectors import FrameStack

    out = FrameStack(2, fill=fill)([_obs_episode([0.0, 1.0, 2.0])], {})["obs"]
    assert out.tolist() == rows


def test_a_text_fill_of_nested_observations_is_left_to_the_read():
    # mutant T10: a dict column's data read as one array
    from episodes.connectors import FrameStack

    ep = _obs_episode([{"a": 0.0}, {"a": 1.0}, {"a": 2.0}])
    with pytest.raises(ValueError, match="cannot pad this buffer's items"):
        FrameStack(2, fill="x")([ep], {})


# ------------------------------------------------------------- connectors: short lookback
def _chunk(n: int, t_started: int, lookback: int, id_: str = "c") -> SingleAgentEpisode:
    k = lookback + n
    return SingleAgentEpisode(
        id_,
        observations=[float(i) for i in range(k + 1)],
        actions=[0] * k,
        rewards=[0.0] * k,
        t_started=t_started,
        len_lookback_buffer=lookback,
    )


def _warnings(connector, episodes) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        connector(episodes, {})
    return [w for w in caught if issubclass(w.category, ShortLookbackWarning)]


def _frame_stack(n):
    from episodes.connectors import FrameStack

    return FrameStack(n)


def _prev(n_actions, n_rewards):
    from episodes.connectors import PrevActionsPrevRewards

    return PrevActionsPrevRewards(n_actions, n_rewards, one_hot_discrete=False)


SHORT_LOOKBACKS = {
    # name: (connector, chunks as (steps, t_started, lookback, id), expected warning: None or
    #        (episode named, column, steps filled that the episode had))
    "keeps exactly what it reads": (_frame_stack(2), [(2, 5, 1, "c")], None),
    "its episode had no more": (_frame_stack(3), [(2, 1, 1, "c")], None),
    "a fresh episode": (_frame_stack(4), [(2, 0, 0, "c")], None),
    "reads two lost steps": (_frame_stack(4), [(2, 2, 0, "c")], ("c", "observations", 2)),
    "reads three lost steps": (_frame_stack(4), [(2, 9, 0, "c")], ("c", "observations", 3)),
    "the first of two short ones": (
        _frame_stack(3),
        [(2, 4, 0, "a"), (2, 4, 0, "b")],
        ("a", "observations", 2),
    ),
    "actions and rewards: one warning": (_prev(2, 2), [(2, 3, 0, "c")], ("c", "actions", 2)),
    "rewards short, actions not": (_prev(1, 3), [(2, 5, 1, "c")], ("c", "rewards", 2)),
}


@pytest.mark.parametrize(
    "connector, chunks, expected", SHORT_LOOKBACKS.values(), ids=SHORT_LOOKBACKS
)
def test_short_lookback_warns_once_naming_what_was_lost(connector, chunks, expected):
    # mutants L3 / L4 / L8 (warned at the boundary), L5 (the lost count), L6 (a second warning
    # for rewards), L7 (rewards left unchecked), L10 (a warning per episode)
    caught = _warnings(connector, [_chunk(*c) for c in chunks])
    if expected is None:
        assert caught == []
        return
    id_, column, lost = expected
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f"episode {id_!r} keeps " in message and f" of {column} lookback" in message
    assert f": {lost} of the episode's {column} were filled" in message


def test_short_lookback_warning_points_at_the_caller():
    # mutant L11: the warning attributed to the connector's module
    caught = _warnings(_frame_stack(4), [_chunk(2, 2, 0)])
    assert len(caught) == 1 and caught[0].filename == __file__


# -------------------------------------------------------------- connectors: given episodes
def _zero_d() -> np.ndarray:
    holder = np.empty((), object)
    holder[()] = _obs_episode([0.0, 1.0])
    return holder


NOT_EPISODE_LISTS = {
    # name: (given, message)
    "a 1-d int array": (lambda: np.array([1, 2]), r"a 1-d numpy array \(int64, shape \(2,\)\)"),
    "a 0-d object array": (_zero_d, r"a 0-d numpy array \(object, shape \(\)\)"),
    "a string": (lambda: "ab", r"got 'ab' \(str\)"),
    "bytes": (lambda: b"ab", r"got b'ab' \(bytes\)"),
    "one episode": (lambda: _obs_episode([0.0, 1.0]), r"one episode \('e'\); wrap it in a list"),
}


@pytest.mark.parametrize("given, message", NOT_EPISODE_LISTS.values(), ids=NOT_EPISODE_LISTS)
def test_connectors_name_what_they_were_given_instead_of_episodes(given, message):
    # mutants G1 (numeric arrays read item by item), G4 (a string read as a sequence), G7,
    # G8 (a 0-d array taken)
    with pytest.raises(TypeError, match=message):
        _frame_stack(2)(given(), {})


@pytest.mark.parametrize("dtype", [float, int, object])
def test_connectors_take_an_empty_array_of_any_dtype(dtype):
    # mutant G2: an empty numeric array refused
    assert _frame_stack(2)(np.array([], dtype), {}) == {}


# ------------------------------------------------------------------ integer indices, times
def _prioritized() -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_ep("a", 3))
    return buf


INTEGER_READS = {
    # name: (call, given, error, message)
    "locate: a negative int beside one past int64": (
        "locate",
        [-1, 2**63],
        KeyError,
        r"times \[9223372036854775808\] lie beyond int64",
    ),
    "locate: int64's least beside a uint64": (
        "locate",
        [np.uint64(1), -(2**63)],
        KeyError,
        "outside episode 'a'",
    ),
    "locate: bools in a tuple": ("locate", (True, 2), ValueError, "got dtype bool"),
    "locate: a bool in a nested list": ("locate", [[0], [True]], ValueError, "got dtype bool"),
    "locate: a bool beside an int past uint64": (
        "locate",
        [True, 2**64],
        ValueError,
        "must be integers, got dtype object",
    ),
    "transitions: uint64 at int64's most": (
        "get_transitions",
        np.array([2**63 - 1], np.uint64),
        KeyError,
        "not stored",
    ),
    "transitions: uint64 past int64": (
        "get_transitions",
        np.array([2**63], np.uint64),
        KeyError,
        "lie beyond int64",
    ),
    "transitions: a 0-d bool array beside an int": (
        "get_transitions",
        [np.array(True), 2],
        ValueError,
        "got dtype bool",
    ),
    "transitions: a float beside an int past uint64": (
        "get_transitions",
        [2**64, 1.5],
        ValueError,
        "must be integers, got dtype object",
    ),
    "priorities: uint64 past int64": (
        "update_priorities",
        np.array([2**63], np.uint64),
        ValueError,
        "lie beyond int64",
    ),
}


@pytest.mark.parametrize("call, given, error, message", INTEGER_READS.values(), ids=INTEGER_READS)
def test_integer_arguments_are_judged_item_by_item(call, given, error, message):
    # mutants I1 / I12 / I14 (int64's bounds), I2 / I11 (non-ints among objects), I3 (tuples),
    # I5 / I8 (0-d bool arrays), I7 (nested bools), I10 (floats beside big ints), I15 (uint64)
    buf = _prioritized()
    before = buf.get_state()
    calls = {
        "locate": lambda: buf.locate("a", given),
        "get_transitions": lambda: buf.get_transitions(given),
        "update_priorities": lambda: buf.update_priorities(np.ones(len(given)), given),
    }
    with pytest.raises(error, match=message):
        calls[call]()
    assert _same(buf.get_state(), before)


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def test_no_indices_give_an_empty_batch():
    # mutant I9: an empty list (a float64 array to numpy) refused
    buf = _prioritized()
    batch = buf.get_transitions([])
    assert batch["obs"].shape == (0,) and batch["weights"].shape == (0,)
    assert buf.locate("a", []).tolist() == []


# ------------------------------------------------------------------------------- reprs
def _interleaved(num: int, length: int, piece: int) -> list[list[SingleAgentEpisode]]:
    """Adds of two interleaved episodes at a time, ``piece`` steps a chunk."""
    datas = [make_episode_data(i, length) for i in range(num)]
    adds = []
    for first in range(0, num, 2):
        for a in range(0, length, piece):
            b = min(a + piece, length)
            adds.append(
                [
                    chunk(f"e{i}", datas[i], a, b, terminated=b == length)
                    for i in range(first, min(first + 2, num))
                ]
            )
    return adds


@pytest.mark.parametrize("kind", BUFFERS)
def test_repr_counts_the_stored_episodes_and_steps(kind):
    # mutants A1 (an episode too many), A2 / A24 (alpha shown wrong or not at all)
    extra = {"prioritized": {"alpha": 0.5}}.get(kind, {})
    buf, ref = BUFFERS[kind](11, **extra), RefBuffer(11)
    more = "" if not extra else ", alpha=0.5"
    assert repr(buf) == f"{type(buf).__name__}(capacity=11, episodes=0, timesteps=0{more})"
    for chunks in _interleaved(5, 4, 3):
        buf.add(chunks)
        ref.add(chunks)
        counts = f"episodes={len(ref.episodes)}, timesteps={ref.num_timesteps}"
        assert repr(buf) == f"{type(buf).__name__}(capacity=11, {counts}{more})"


# ------------------------------------------------------------------------- from_dataset
class _MyUniform(EpisodeReplayBuffer):
    pass


class _MyPrioritized(PrioritizedEpisodeReplayBuffer):
    pass


FROM_DATASET_CLASSES = {
    # name: (class called on, prioritized argument, class built)
    "uniform": (EpisodeReplayBuffer, None, EpisodeReplayBuffer),
    "prioritized": (PrioritizedEpisodeReplayBuffer, None, PrioritizedEpisodeReplayBuffer),
    "a uniform subclass": (_MyUniform, None, _MyUniform),
    "a prioritized subclass": (_MyPrioritized, None, _MyPrioritized),
    "uniform, asked prioritized": (EpisodeReplayBuffer, True, PrioritizedEpisodeReplayBuffer),
}


@pytest.mark.parametrize(
    "cls, prioritized, built", FROM_DATASET_CLASSES.values(), ids=FROM_DATASET_CLASSES
)
def test_from_dataset_builds_the_class_it_is_called_on(tmp_path, cls, prioritized, built):
    # mutant A14: a subclass of the user's built as the library's class
    from episodes.io import EpisodeWriter

    with EpisodeWriter(tmp_path) as writer:
        for id_ in "ab":
            writer.write(_ep(id_, 3))
    extra = {} if prioritized is None else {"prioritized": prioritized}
    buf = cls.from_dataset(tmp_path, seed=0, **extra)
    assert type(buf) is built
    assert buf.get_episode_ids() == ["a", "b"] and buf.get_num_timesteps() == 6


# ------------------------------------------------------------------- an episode's end alone
END_OBSERVATIONS = {
    # name: (the end chunk's observation, refused)
    "the stored one": (np.ones(2), False),
    "one number short": (np.ones(1), True),
    "one number over": (np.ones(3), True),
}


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("obs, refused", END_OBSERVATIONS.values(), ids=END_OBSERVATIONS)
def test_an_end_chunk_is_checked_against_the_columns(kind, obs, refused):
    # mutant B16: an end chunk's observation not fitted (a (1,) row broadcast into (2,))
    buf = BUFFERS[kind](10)
    rows = [np.zeros(2, np.float32), np.ones(2, np.float32)]
    buf.add(
        SingleAgentEpisode(
            "a", observations=rows, actions=[0], rewards=[1.0], len_lookback_buffer=0
        )
    )
    end = SingleAgentEpisode(
        "a", observations=[obs], t_started=1, terminated=True, len_lookback_buffer=0
    )
    if refused:
        with pytest.raises(ValueError, match=r"chunk 0 \(episode 'a'\): observations of shape"):
            buf.add(end)
    else:
        buf.add(end)
    (ep,) = buf.get_episodes()
    assert ep.is_terminated is not refused
    assert np.array_equal(ep.get_observations(-1), [1.0, 1.0])
    assert buf.get_num_timesteps() == buf.get_added_timesteps() == 1


# ------------------------------------------------------------ get_transitions: a bad device
BAD_DEVICES = {
    # name: (device, error)
    "a float": (3.5, TypeError),
    "an unknown name": ("nope", ValueError),  # DeviceError is a ValueError
}


@pytest.mark.parametrize("stored", [False, True], ids=["empty", "stored"])
@pytest.mark.parametrize("device, error", BAD_DEVICES.values(), ids=BAD_DEVICES)
def test_get_transitions_refuses_a_bad_device_before_reading(device, error, stored):
    # mutant A23: the device used unchecked, so a missing index (KeyError) came first
    buf = EpisodeReplayBuffer(10)
    if stored:
        buf.add(_ep("a", 2))
    with pytest.raises(error, match="device must be a torch device"):
        buf.get_transitions([99], device=device)


END_FLAGS = {
    # name: (terminated, truncated)
    "terminated": (True, False),
    "truncated": (False, True),
}


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("terminated, truncated", END_FLAGS.values(), ids=END_FLAGS)
def test_an_end_chunk_ends_its_stored_episode_as_concat_would(kind, terminated, truncated):
    # mutants B18 / B19 (the end's flag dropped), B20 (its info), B21 (its custom_data)
    head = SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        infos=[{"t": 0}, {"t": 1}],
        len_lookback_buffer=0,
    )
    head.custom_data["k"] = 1
    end = SingleAgentEpisode(
        "a",
        observations=[1.0],
        infos=[{"end": True}],
        t_started=1,
        terminated=terminated,
        truncated=truncated,
        len_lookback_buffer=0,
    )
    end.custom_data["j"] = 2
    buf = BUFFERS[kind](10)
    buf.add(head)
    buf.add(end)
    (ep,) = buf.get_episodes()
    assert (ep.is_terminated, ep.is_truncated) == (terminated, truncated)
    assert ep.get_infos(-1) == {"end": True} and ep.get_infos(0) == {"t": 0}
    assert ep.custom_data == {"k": 1, "j": 2} and len(ep) == 1
    batch = buf.get_transitions([0], include_infos=True)
    assert batch["terminateds"].tolist() == [terminated]
    assert batch["truncateds"].tolist() == [truncated]
    assert batch["infos"] == [{"end": True}]


@pytest.mark.parametrize("kind", BUFFERS)
def test_a_continuing_chunk_joins_its_custom_data(kind):
    # mutant B23: a continuing chunk's custom_data dropped
    data = make_episode_data(0, 6)
    pieces = [chunk("a", data, 0, 2), chunk("a", data, 2, 4), chunk("a", data, 4, 6)]
    for i, piece in enumerate(pieces):
        piece.custom_data.update({"seen": i, f"k{i}": i})
    buf = BUFFERS[kind](20)
    for piece in pieces:
        buf.add(piece)
    (ep,) = buf.get_episodes()
    assert ep.custom_data == {"seen": 2, "k0": 0, "k1": 1, "k2": 2} and len(ep) == 6


# ------------------------------------------------------------------------ sample's units
def _filled(kind: str, seed: int = 0):
    buf = BUFFERS[kind](30, seed=seed)
    for chunks in _interleaved(4, 5, 2):
        buf.add(chunks)
    return buf


@pytest.mark.parametrize("kind", BUFFERS)
def test_batch_length_zero_samples_transitions(kind):
    # mutant B33: batch_length_T=0 taken as sequences of no steps
    a, b = _filled(kind), _filled(kind)
    got = a.sample(6, batch_length_T=0, n_step=2, gamma=0.5)
    want = b.sample(6, n_step=2, gamma=0.5)
    assert got.keys() == want.keys() and got["obs"].shape == want["obs"].shape == (6, 2)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert a.get_sampled_timesteps() == 6


EPISODE_DRAWS_REFUSED = {
    # name: sample's arguments besides sample_episodes=True
    "a gamma": {"gamma": 0.5},
    "an n_step of 2": {"n_step": 2},
    "an n_step range": {"n_step": (1, 3)},
}


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("kwargs", EPISODE_DRAWS_REFUSED.values(), ids=EPISODE_DRAWS_REFUSED)
def test_sampled_episodes_take_no_discount_or_horizon(kind, kwargs):
    # mutant B34: sample_episodes read as transitions, so gamma and n_step were taken
    buf = _filled(kind)
    state = buf.rng.bit_generator.state
    for extra in ({}, {"batch_length_T": 2}):
        with pytest.raises(ValueError):
            buf.sample(2, sample_episodes=True, **extra, **kwargs)
    assert buf.rng.bit_generator.state == state and buf.get_sampled_timesteps() == 0


@pytest.mark.parametrize("kind", BUFFERS)
def test_transition_weights_are_float32_as_every_batch_gives_them(kind):
    # mutant B42: a uniform sample's weights in float64, unlike get_transitions' and PER's
    buf = _filled(kind)
    sampled = buf.sample(5)["weights"]
    built = buf.get_transitions([0, 1])["weights"]
    assert sampled.dtype == built.dtype == np.float32 and sampled.shape == (5,)
    if kind == "uniform":
        assert sampled.tolist() == [1.0] * 5

"""Behaviour that hand-made mutants of ``episodes.episode.chunks``, ``episodes.episode.recording``,
``episodes.episode.state``, ``episodes.episode.returns`` and ``episodes.episode.reward_values``
showed no test pinned (session 48).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. Episodes
are driven through the public API (the constructor with lookback data, ``add_env_reset``,
``add_env_step``, ``to_numpy``, ``cut``, ``slice``, ``concat_episode``, ``get_state`` /
``from_state``, ``get_return``), in list and numpy mode, with lookback 0..3, Dict and Tuple
spaces, infos and extra model outputs, and what they give is compared with plain Python lists of
every step kept beside them.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode.returns import reward_sum

BOX = gym.spaces.Box(-50.0, 50.0, (2,), np.float32)
SPACES = {
    # name: (observation space, action space, observation i, action i)
    "plain": (None, None, lambda i: i * 10, lambda i: i % 4),
    "dict": (
        gym.spaces.Dict({"pos": BOX, "id": gym.spaces.Discrete(5)}),
        gym.spaces.Discrete(4),
        lambda i: {"pos": np.array([i, -i], np.float32), "id": i % 5},
        lambda i: i % 4,
    ),
    "tuple": (
        gym.spaces.Box(-50.0, 50.0, (3,), np.float32),
        gym.spaces.Tuple((gym.spaces.Discrete(3), BOX)),
        lambda i: np.array([i, i + 0.5, -i], np.float32),
        lambda i: (i % 3, np.array([i / 2, -i / 2], np.float32)),
    ),
}


def plain(value):
    """``value`` as nested Python lists, dicts and scalars (numpy arrays and scalars read out)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return plain(value.tolist()) if isinstance(value, np.ndarray) else value.item()
    return value


class Ref:
    """The full step lists of one episode: lookback and visible items, per column."""

    def __init__(self, space: str, steps: int, lookback: int, start: int = 0):
        _, _, obs, act = SPACES[space]
        n = lookback + steps
        self.obs = [plain(obs(i)) for i in range(n + 1)]
        self.infos = [{"i": i} for i in range(n + 1)]
        self.actions = [plain(act(i)) for i in range(n)]
        self.rewards = [float(i) + 0.5 for i in range(n)]
        self.extras = {"vf": [i / 4 for i in range(n)], "logp": [-i / 8 for i in range(n)]}
        self.lookback = lookback
        self.raw_obs = [obs(i) for i in range(n + 1)]
        self.raw_actions = [act(i) for i in range(n)]


def build(
    space: str,
    mode: str,
    steps: int,
    lookback: int,
    *,
    recorded: int = 2,
    t_started: int = 5,
    end: str = "ongoing",
):
    """An episode (and its reference) of ``lookback`` + ``steps``, the last ``recorded`` steps
    added with ``add_env_step``."""
    ref = Ref(space, steps, lookback)
    obs_space, act_space, _, _ = SPACES[space]
    recorded = min(recorded, steps)
    given = lookback + steps - recorded  # steps handed to the constructor
    ep = SingleAgentEpisode(
        "ep",
        observations=ref.raw_obs[: given + 1],
        infos=[dict(info) for info in ref.infos[: given + 1]],
        actions=ref.raw_actions[:given],
        rewards=ref.rewards[:given],
        extra_model_outputs={key: values[:given] for key, values in ref.extras.items()},
        observation_space=obs_space,
        action_space=act_space,
        len_lookback_buffer=lookback,
        t_started=t_started,
    )
    if mode == "numpy":
        ep.to_numpy()
    for i in range(given, lookback + steps):
        last = i == lookback + steps - 1
        ep.add_env_step(
            ref.raw_obs[i + 1],
            ref.raw_actions[i],
            ref.rewards[i],
            dict(ref.infos[i + 1]),
            terminated=last and end == "terminated",
            truncated=last and end == "truncated",
            extra_model_outputs={key: values[i] for key, values in ref.extras.items()},
        )
    return ep, ref


def read(ep, column: str, key: str | None = None):
    """``(lookback items, visible items)`` of one column, item by item, as plain values."""
    buffer = ep.extra_model_outputs[key] if key else getattr(ep, column)
    getter = {
        "observations": ep.get_observations,
        "infos": ep.get_infos,
        "actions": ep.get_actions,
        "rewards": ep.get_rewards,
    }.get(column)
    if key:

        def getter(i, **kw):
            return ep.get_extra_model_outputs(key, i, **kw)

    lb = buffer.lookback
    visible = len(ep) + (column in ("observations", "infos"))
    before = [plain(getter(-(lb - j), neg_index_as_lookback=True)) for j in range(lb)]
    return before, [plain(getter(k)) for k in range(visible)]


def expect(ep, ref_columns: dict, lookbacks: dict):
    """Every column of ``ep`` against ``ref_columns`` (name -> full list) and its lookback."""
    for name, full in ref_columns.items():
        column, _, key = name.partition(":")
        before, visible = read(ep, column, key or None)
        lb = lookbacks[name]
        assert before + visible == full, name
        assert len(before) == lb, name


def ref_columns(ref: Ref, lo: int, hi: int, lookback: dict):
    """The reference items ``lo - lookback .. hi`` (visible coords of the full lists)."""
    out = {}
    for name, full, extra in (
        ("observations", ref.obs, 1),
        ("infos", ref.infos, 1),
        ("actions", ref.actions, 0),
        ("rewards", ref.rewards, 0),
        *((f"extra:{k}", v, 0) for k, v in ref.extras.items()),
    ):
        out[name] = full[lo - lookback[name] : hi + extra]
    return out


CASES = [
    pytest.param(space, mode, lb, end, id=f"{space}-{mode}-lookback{lb}-{end}")
    for space in SPACES
    for mode in ("list", "numpy")
    for lb in range(4)
    for end in ("ongoing", "terminated", "truncated")
]
SLICES = [
    (0, 6),
    (1, 4),
    (2, 2),
    (-3, None),
    (None, -2),
    (4, 100),
    (-100, 2),
    (5, 6),
    (6, 6),
    (4, 2),
]


def _columns_all(ref):
    return ["observations", "infos", "actions", "rewards", *(f"extra:{k}" for k in ref.extras)]


@pytest.mark.parametrize(("space", "mode", "lb", "end"), CASES)
def test_slices_match_the_step_lists(space, mode, lb, end):
    """Mutants C09-C25: slice bounds, each column's lookback, t_started/t and the flags."""
    ep, ref = build(space, mode, 6, lb, end=end)
    for a, b in SLICES:
        r = range(6)[a:b]
        lo, hi = r.start, max(r.stop, r.start)
        for wanted in (None, 0, 1, 5):
            part = ep.slice(slice(a, b), len_lookback_buffer=wanted)
            lookback = {
                name: lb if wanted is None else min(wanted, lb + lo) for name in _columns_all(ref)
            }
            expect(part, ref_columns(ref, lb + lo, lb + hi, lookback), lookback)
            assert (part.t_started, part.t, len(part)) == (5 + lo, 5 + hi, hi - lo)
            reaches_end = hi == 6
            assert part.is_terminated == (end == "terminated" and reaches_end)
            assert part.is_truncated == (end == "truncated" and reaches_end)
            assert part.is_numpy == (mode == "numpy")
        assert plain(ep[a:b].get_rewards()) == ref.rewards[lb + lo : lb + hi]


@pytest.mark.parametrize(
    ("space", "mode", "lb"), [c.values[:3] for c in CASES if c.values[3] == "ongoing"]
)
def test_cut_then_concat_matches_the_step_lists(space, mode, lb):
    """Mutants C01-C07, C36-C40, C52: the cut's lookback per column, its t_started, and the
    joined episode, its t, flags and custom data."""
    for keep in range(5):
        ep, ref = build(space, mode, 4, lb)
        ep.custom_data["mine"] = 1
        before = {name: read(ep, *name.partition(":")[::2]) for name in ("observations", "actions")}
        nxt = ep.cut(keep)
        total = lb + 4  # steps held, lookback included
        lookback = {name: min(keep, total) for name in _columns_all(ref)}
        expect(nxt, ref_columns(ref, total, total, lookback), lookback)
        assert (nxt.t_started, nxt.t, len(nxt), nxt.is_done) == (9, 9, 0, False)
        # Three more steps into the successor, from a longer reference of the same steps.
        _, longer = build(space, mode, 7, lb)
        for i in range(total, total + 3):
            nxt.add_env_step(
                longer.raw_obs[i + 1],
                longer.raw_actions[i],
                longer.rewards[i],
                dict(longer.infos[i + 1]),
                truncated=i == total + 2,
                extra_model_outputs={k: v[i] for k, v in longer.extras.items()},
            )
        nxt.custom_data.update(mine=2, theirs=3)
        assert {n: read(ep, *n.partition(":")[::2]) for n in before} == before
        ep.concat_episode(nxt)
        lookback = dict.fromkeys(_columns_all(ref), lb)
        expect(ep, ref_columns(longer, lb, total + 3, lookback), lookback)
        assert (ep.t_started, ep.t, len(ep)) == (5, 12, 7)
        assert (ep.is_truncated, ep.is_terminated) == (True, False)
        assert ep.custom_data == {"mine": 2, "theirs": 3}
        assert ep.get_return() == sum(longer.rewards[lb:])


# --- concat: what it refuses, and what a refusal leaves ------------------------------------


def _list_chunk(id_, observations, rewards, **kwargs):
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=observations,
        actions=kwargs.pop("actions", [0] * n),
        rewards=rewards,
        len_lookback_buffer=0,
        **kwargs,
    )


def _numpy_reset(id_="x", observation=0, **kwargs):
    ep = SingleAgentEpisode(id_, **kwargs)
    ep.add_env_reset(observation)
    return ep.to_numpy()


FIRST_OBS_MISMATCH = {
    # name: (self's last observation, other's first): the same bytes, yet not equal
    "int32 vs float32 of the same bytes (C42)": (
        np.array([1], np.int32),
        np.array([1], np.int32).view(np.float32),
    ),
    "shape (2,) vs (1, 2) (C41)": (np.array([1, 2]), np.array([[1, 2]])),
}


@pytest.mark.parametrize(("mine", "theirs"), FIRST_OBS_MISMATCH.values(), ids=FIRST_OBS_MISMATCH)
def test_concat_refuses_a_first_observation_of_other_dtype_or_shape(mine, theirs):
    ep = SingleAgentEpisode("i", observations=[mine], len_lookback_buffer=0)
    with pytest.raises(AssertionError, match="first observation differs"):
        ep.concat_episode(SingleAgentEpisode("i", observations=[theirs], len_lookback_buffer=0))
    assert len(ep.get_observations()) == 1


UNREAL_REWARDS = {
    # name: rewards of a list-mode successor, refused by a numpy'd episode whose dtype is open
    "vector rewards (V05)": [[1.0, 2.0], [3.0, 4.0]],
    "complex reward (V06)": [1.0, 1j],
    "string reward": ["x"],
}


@pytest.mark.parametrize("rewards", UNREAL_REWARDS.values(), ids=UNREAL_REWARDS)
def test_concat_onto_an_open_numpy_column_refuses_rewards_that_are_no_numbers(rewards):
    ep = _numpy_reset()
    other = _list_chunk("x", list(range(len(rewards) + 1)), rewards)
    with pytest.raises(ValueError, match="rewards do not fit"):
        ep.concat_episode(other)
    assert (len(ep), plain(ep.get_observations()), ep.is_numpy) == (0, [0], True)


def test_concat_in_list_mode_takes_any_reward():
    """Mutant V09 (a list store asks for real numbers): list mode records what it is given."""
    ep = SingleAgentEpisode("x")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, "a")
    nxt = ep.cut()
    nxt.add_env_step(2, 0, None)
    ep.concat_episode(nxt)
    assert ep.get_rewards() == ["a", None]


def test_concat_with_itself_is_refused():
    """Mutant C26: a 0-step chunk joined to itself would pop its own observation."""
    for steps in (0, 1):
        ep = SingleAgentEpisode("x")
        ep.add_env_reset(0)
        for i in range(steps):
            ep.add_env_step(i + 1, 0, 1.0)
        with pytest.raises(AssertionError, match="itself"):
            ep.concat_episode(ep)
        assert ep.get_observations() == list(range(steps + 1))


BOX2 = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
OUT_OF_SPACE = {
    # name: (episode is numpy'd, other is numpy'd, other's observations, actions, refused)
    "list-mode other, observation outside (C43)": (True, False, [[0, 0], [5, 5]], [[0, 0]], True),
    "list-mode other, action outside (C46)": (True, False, [[0, 0], [0, 0]], [[5, 5]], True),
    "numpy'd other keeps what it took (C43)": (True, True, [[0, 0], [5, 5]], [[5, 5]], False),
    "list-mode episode takes anything (C44)": (False, False, [[0, 0], [5, 5]], [[5, 5]], False),
}


@pytest.mark.parametrize(
    ("numpy_self", "numpy_other", "observations", "actions", "refused"),
    OUT_OF_SPACE.values(),
    ids=OUT_OF_SPACE,
)
def test_concat_checks_a_list_mode_successor_against_the_spaces(
    numpy_self, numpy_other, observations, actions, refused
):
    spaces = {"observation_space": BOX2, "action_space": BOX2}
    ep = SingleAgentEpisode("s", observations=[np.zeros(2, np.float32)], **spaces)
    if numpy_self:
        ep.to_numpy()
    other = SingleAgentEpisode(
        "s",
        observations=[np.array(o, np.float32) for o in observations],
        actions=[np.array(a, np.float32) for a in actions],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    if numpy_other:
        other.to_numpy()
    if refused:
        with pytest.raises(ValueError, match="not in this episode's"):
            ep.concat_episode(other)
        assert (len(ep), len(ep.get_observations())) == (0, 1)
    else:
        ep.concat_episode(other)
        assert plain(ep.get_observations()) == observations
        assert plain(ep.get_actions()) == actions


def test_a_refused_concat_leaves_the_episode_as_it_was():
    """Mutants C47-C49: the join refused at the actions puts back the observation and info it
    popped, the column's layout (a ``<U4`` column stays one) and nothing more."""
    ep = SingleAgentEpisode(
        "x",
        observations=["abcd", "ab"],
        infos=[{"i": 0}, {"i": 1}],
        actions=[np.zeros(2)],
        rewards=[1.0],
        len_lookback_buffer=0,
    ).to_numpy()
    nxt = ep.cut()
    other = SingleAgentEpisode(
        "x",
        observations=["ab", "abc"],
        infos=[{"i": 1}, {"i": 2}],
        actions=[np.zeros(3)],
        rewards=[2.0],
        len_lookback_buffer=0,
        t_started=1,
    )
    with pytest.raises(ValueError, match="actions do not fit"):
        nxt.concat_episode(other)
    assert (plain(nxt.get_observations()), nxt.get_infos(), len(nxt)) == (["ab"], [{"i": 1}], 0)
    nxt.add_env_step("abcd", np.ones(2), 3.0, {"i": 9})
    assert plain(nxt.get_observations()) == ["ab", "abcd"]
    assert nxt.get_infos() == [{"i": 1}, {"i": 9}]
    assert plain(nxt.get_actions()) == [[1.0, 1.0]]


def test_concat_of_a_new_extra_output_onto_a_numpy_episode_is_numpy():
    """Mutant C50: a key the successor brings to a 0-step numpy'd chunk is a numpy column."""
    ep = _numpy_reset()
    ep.concat_episode(
        _list_chunk("x", [0, 1, 2], [1.0, 2.0], extra_model_outputs={"vf": [0.5, 0.25]})
    )
    values = ep.get_extra_model_outputs("vf")
    assert isinstance(values, np.ndarray) and values.tolist() == [0.5, 0.25]


class _Noted(SingleAgentEpisode):
    def __init__(self, *args, note="n", **kwargs):
        super().__init__(*args, **kwargs)
        self.note = note


def test_chunks_of_a_subclass_keep_its_own_attributes():
    """Mutant C51: cut and slice of a user's subclass carry the attributes it adds."""
    ep = _Noted(
        "s",
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
        note="kept",
    )
    for chunk in (ep.cut(), ep[0:1], ep.slice(slice(1, None), len_lookback_buffer=1)):
        assert type(chunk) is _Noted and chunk.note == "kept"


@pytest.mark.parametrize("given", [{}, {"tag": [1]}], ids=["empty", "filled"])
def test_chunks_own_their_custom_data(given):
    """Mutant C53: a cut or a slice gets a copy of ``custom_data``, not the episode's dict."""
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    ep.custom_data.update(given)
    for chunk in (ep.cut(), ep[0:1]):
        assert chunk.custom_data == given
        chunk.custom_data["new"] = 1
        for value in chunk.custom_data.values():
            if isinstance(value, list):
                value.append(2)
    assert ep.custom_data == {"tag": [1]} if given else ep.custom_data == {}


# --- recording ------------------------------------------------------------------------------


RESET_REFUSED = {
    # name: (episode, observation): add_env_reset refuses it and records nothing
    "a done empty episode (R02)": (lambda: SingleAgentEpisode(terminated=True), 0),
    "t_started 3 (R03)": (lambda: SingleAgentEpisode(t_started=3), 0),
}


@pytest.mark.parametrize(("make", "observation"), RESET_REFUSED.values(), ids=RESET_REFUSED)
def test_add_env_reset_refuses(make, observation):
    ep = make()
    with pytest.raises(AssertionError, match="add_env_reset needs"):
        ep.add_env_reset(observation)
    assert ep.get_observations() == [] and ep.get_infos() == []


def test_add_env_reset_of_a_numpy_episode_checks_the_space():
    """Mutant R04: an empty numpy'd episode with a space refuses a reset outside it."""
    ep = SingleAgentEpisode(observation_space=gym.spaces.Discrete(3)).to_numpy()
    with pytest.raises(ValueError, match="not in the episode's observation space"):
        ep.add_env_reset(7)
    assert len(ep.get_observations()) == 0
    ep.add_env_reset(2)
    assert plain(ep.get_observations()) == [2]


INFOS = {
    # name: (infos given, infos recorded), as RLlib's ``infos or {}``
    "None": (None, {}),
    "empty list (R05)": ([], {}),
    "zero (R05)": (0, {}),
    "numpy int zero (R30)": (np.int64(0), {}),
    "numpy float32 zero (R30)": (np.float32(0.0), {}),
    "numpy False (R30)": (np.False_, {}),
    "empty string": ("", {}),
    "a dict": ({"a": 1}, {"a": 1}),
    "a non-empty list (R28)": ([1], [1]),
    "numpy two (R28)": (np.float64(2.0), 2.0),
}


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize(("given", "recorded"), INFOS.values(), ids=INFOS)
def test_falsy_infos_are_recorded_as_empty_dicts(given, recorded, mode):
    ep = SingleAgentEpisode()
    ep.add_env_reset(0, infos=given)
    if mode == "numpy":
        ep.to_numpy()
    ep.add_env_step(1, 0, 1.0, given)
    assert ep.get_infos() == [recorded, recorded]


def test_durations_run_from_the_first_record_to_the_last():
    """Mutants R06, R19, R34: the start is the reset (or the first step) and is kept."""
    reset = SingleAgentEpisode()
    reset.add_env_reset(0)
    reset.add_env_step(1, 0, 1.0)
    first = reset.get_duration_s()
    reset.add_env_step(2, 0, 1.0)
    assert 0.0 < first < reset.get_duration_s()
    built = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)
    built.add_env_step(1, 0, 1.0)
    assert built.get_duration_s() == 0.0
    built.add_env_step(2, 0, 1.0)
    assert built.get_duration_s() > 0.0


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_a_lookback_observation_alone_is_no_reset(mode):
    """Mutants R09, R14."""
    ep = SingleAgentEpisode(observations=InfiniteLookbackBuffer([0], lookback=1))
    if mode == "numpy":
        ep.to_numpy()
    with pytest.raises(AssertionError, match="needs add_env_reset"):
        ep.add_env_step(1, 0, 1.0)
    assert (len(ep), plain(ep.get_rewards())) == (0, [])


NUMPY_REWARDS = {
    # name: (reward given to a numpy'd episode whose rewards dtype is still open, accepted)
    "a 0-d bool array (V03)": (np.array(True), True),
    "a float16 (R12)": (np.float16(0.5), True),
    "a one-item list (V04)": ([1.0], False),
    "a string (R32)": ("2.5", False),
}


@pytest.mark.parametrize(("reward", "accepted"), NUMPY_REWARDS.values(), ids=NUMPY_REWARDS)
def test_a_numpy_episode_takes_only_real_rewards_into_an_open_column(reward, accepted):
    ep = _numpy_reset()
    if accepted:
        ep.add_env_step(1, 0, reward)
        assert plain(ep.get_rewards()) == [plain(reward)]
    else:
        with pytest.raises(ValueError, match="no real number"):
            ep.add_env_step(1, 0, reward)
        assert (len(ep), plain(ep.get_observations())) == (0, [0])


def test_an_object_rewards_column_refuses_a_string():
    """Mutant V12: ints beyond int64 make an object column, which would store a string."""
    ep = SingleAgentEpisode(
        observations=[0, 1], actions=[0], rewards=[2**70], len_lookback_buffer=0
    ).to_numpy()
    with pytest.raises(ValueError, match="no real number"):
        ep.add_env_step(2, 0, "x")
    assert plain(ep.get_rewards()) == [2**70]
    ep.add_env_step(2, 0, 1)
    assert ep.get_return() == float(2**70 + 1)


def _lengths(ep):
    return {name: len(column) for name, column in ep.named_columns().items()}


EXTRA_KEYS = {
    # name: (keys recorded so far (None: a first step), keys of the step), refused
    "a new key on the first step (R21)": (None, {"a": 1.0, "b": 2.0}, False),
    "a new key after one step (R23)": ({"a": 1.0}, {"a": 1.0, "b": 2.0}, True),
    "a swapped key (R20)": ({"a": 1.0, "b": 2.0}, {"a": 1.0, "c": 2.0}, True),
    "no outputs where some are recorded (R16)": ({"a": 1.0}, None, True),
}


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize(("first", "step", "refused"), EXTRA_KEYS.values(), ids=EXTRA_KEYS)
def test_extra_output_keys_are_fixed_from_the_first_step(first, step, refused, mode):
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    if first is not None:
        ep.add_env_step(1, 0, 1.0, extra_model_outputs=first)
    if mode == "numpy":
        ep.to_numpy()
    before = _lengths(ep)
    if refused:
        with pytest.raises(AssertionError, match="extra_model_outputs"):
            ep.add_env_step(2, 0, 1.0, extra_model_outputs=step)
        assert _lengths(ep) == before
        ep.validate()
        if first is not None:
            ep.add_env_step(2, 0, 1.0, extra_model_outputs=first)
            assert plain(ep.get_extra_model_outputs("a")) == [1.0, 1.0]
    else:
        ep.add_env_step(2, 0, 1.0, extra_model_outputs=step)
        assert {k: plain(ep.get_extra_model_outputs(k)) for k in step} == {"a": [1.0], "b": [2.0]}


REFUSED_STEPS = {
    # name: (step given to a numpy'd episode recording "a" and "b", error, column the message names)
    "observation of another shape (R27)": (
        dict(observation=np.zeros(3)),
        ValueError,
        "observations",
    ),
    "action of another shape": (dict(action=np.zeros(3)), ValueError, "actions"),
    "extra output of another shape (R24, R25)": (
        dict(extra_model_outputs={"a": 1.0, "b": np.zeros(3)}),
        ValueError,
        "extra_model_outputs\\['b'\\]",
    ),
    "an unfit value under a new key (R26)": (
        dict(extra_model_outputs={"a": np.zeros(3), "c": 1.0}),
        AssertionError,
        "missing keys",
    ),
}


@pytest.mark.parametrize(("change", "error", "column"), REFUSED_STEPS.values(), ids=REFUSED_STEPS)
def test_a_refused_numpy_step_is_taken_back_whole(change, error, column):
    ep = SingleAgentEpisode(
        len_lookback_buffer=0,
        observations=[np.zeros(2), np.ones(2)],
        actions=[np.zeros(2)],
        rewards=[1.0],
        extra_model_outputs={"a": [0.5], "b": [0.25]},
    ).to_numpy()
    step = dict(
        observation=np.ones(2),
        action=np.ones(2),
        reward=2.0,
        extra_model_outputs={"a": 1.0, "b": 2.0},
    )
    before = _lengths(ep)
    with pytest.raises(error, match=column):
        ep.add_env_step(**{**step, **change})
    assert _lengths(ep) == before and ep.t == 1
    ep.validate()
    ep.add_env_step(**step)
    assert plain(ep.get_rewards()) == [1.0, 2.0]
    assert plain(ep.get_extra_model_outputs("b")) == [0.25, 2.0]
    assert plain(ep.get_infos()) == [{}, {}, {}]


def test_a_plain_id_of_64_characters_shows_unquoted():
    """Mutant R31: the repr shows a plain id up to 64 characters as is, a longer one quoted."""
    assert repr(SingleAgentEpisode("a" * 64)).endswith(f"id_={'a' * 64})")
    assert repr(SingleAgentEpisode("a" * 65)).endswith(f"id_='{'a' * 65}')")


# --- state and equality -------------------------------------------------------------------

NAN = float("nan")
N1, N2, N3, N4 = (float("nan") for _ in range(4))
NAT = np.datetime64("NaT")
IDS = {
    # name: (id a, id b, whether episodes with them are one episode)
    "NaN and another NaN": (NAN, float("nan"), True),
    "NaN and a number (S15)": (NAN, 1.0, False),
    "complex NaNs alike": (complex(1, NAN), complex(1, float("nan")), True),
    "complex, other imaginary part (S14)": (complex(1, NAN), complex(1, 2), False),
    "complex NaN and a float NaN (S13)": (complex(1, NAN), float("nan"), False),
    "tuple and list (S16)": (("a", NAN), ["a", float("nan")], False),
    "tuples of other lengths (S17)": (("a", NAN), ("a", float("nan"), 1), False),
    "tuples alike": (("a", NAN), ("a", float("nan")), True),
    "dict with a key more (S18)": ({"a": NAN}, {"a": float("nan"), "b": 1}, False),
    "NaN keys, other values (S19)": ({N1: 1}, {N2: 2}, False),
    "NaN keys paired once each (S20)": ({N1: 1, N2: 1}, {N3: 1, N4: 2}, False),
    "NaN keys alike": ({N1: 1, N2: 2}, {N3: 2, N4: 1}, True),
    "one NaN key, other values (S30)": ({N1: 1}, {N1: 2}, False),
    "one NaT object, unequal to itself by == (S11)": (NAT, NAT, True),
}


@pytest.mark.parametrize(("a", "b", "same"), IDS.values(), ids=IDS)
def test_ids_compare_with_nans_at_the_same_places_equal(a, b, same):
    """Through ``==`` and ``concat_episode``, which both compare ids."""
    assert (SingleAgentEpisode(a) == SingleAgentEpisode(b)) is same
    assert (SingleAgentEpisode(b) == SingleAgentEpisode(a)) is same
    ep = SingleAgentEpisode(a, observations=[0], len_lookback_buffer=0)
    other = SingleAgentEpisode(
        b, observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    if same:
        ep.concat_episode(other)
        assert ep.get_observations() == [0, 1]
    else:
        with pytest.raises(AssertionError, match="different ids"):
            ep.concat_episode(other)


def test_tensor_ids_compare_element_by_element():
    """Mutant S12: a tensor id's ``==`` is a tensor, read element by element."""
    torch = pytest.importorskip("torch")
    a, b, c = torch.tensor([1, 2]), torch.tensor([1, 2]), torch.tensor([1, 3])
    assert SingleAgentEpisode(a) == SingleAgentEpisode(b)
    assert SingleAgentEpisode(a) != SingleAgentEpisode(c)


def _episode(**kwargs):
    return SingleAgentEpisode(
        "e", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0, **kwargs
    )


def test_equality_compares_extra_output_keys_and_custom_arrays():
    """Mutants S22 (extra-output keys), S23 (custom data compared with ``!=``)."""
    one = _episode(extra_model_outputs={"vf": [0.5]})
    two = _episode(extra_model_outputs={"vf": [0.5], "logp": [0.1]})
    assert one != two and two != one
    one.custom_data["w"] = np.array([1.0, NAN])
    copy = SingleAgentEpisode.from_state(one.get_state())
    assert copy == one
    copy.custom_data["w"] = np.array([1.0, 2.0])
    assert copy != one


def test_state_holds_a_copy_of_custom_data():
    """Mutant S01."""
    ep = _episode()
    ep.custom_data["log"] = [1]
    state = ep.get_state()
    state["custom_data"]["log"].append(2)
    state["custom_data"]["new"] = 1
    assert ep.custom_data == {"log": [1]}


def test_state_round_trip_keeps_extra_output_keys_as_they_are():
    """Mutant S31: an int key stays an int."""
    ep = _episode(extra_model_outputs={1: [0.5], "vf": [0.25]})
    back = SingleAgentEpisode.from_state(ep.get_state())
    assert list(back.extra_model_outputs) == [1, "vf"] and back == ep


BAD_STATES = {
    # name: (key, value that replaces it in a state, error, message)
    "a start time of inf (S08)": ("start_time", float("inf"), ValueError, "finite"),
    "a column of the wrong type (S32)": ("rewards", 5, ValueError, "malformed column rewards"),
    "a column lookback of text (S32)": (
        "rewards",
        "lookback-text",
        ValueError,
        "malformed column rewards",
    ),
    "a flag 1 (S02)": ("is_terminated", 1, ValueError, "must be a bool"),
    "a start time of True (S06)": ("start_time", True, ValueError, "must be a number"),
}


@pytest.mark.parametrize(("key", "value", "error", "message"), BAD_STATES.values(), ids=BAD_STATES)
def test_from_state_refuses(key, value, error, message):
    state = _episode().get_state()
    if value == "lookback-text":
        value = dict(state[key], lookback="x")
    state[key] = value
    with pytest.raises(error, match=message):
        SingleAgentEpisode.from_state(state)


BAD_FIELDS = {
    # name: (fields given to from_fields, error, message)
    "extra outputs as lists (S26)": ({"extra_model_outputs": {"vf": [1, 2]}}, TypeError, "dict of"),
    "a t of 1.5 (S27)": ({"t": 1.5}, TypeError, "t must be an integer"),
    "a t of True (S04)": ({"t": True}, TypeError, "t must be an integer"),
}


@pytest.mark.parametrize(("fields", "error", "message"), BAD_FIELDS.values(), ids=BAD_FIELDS)
def test_from_fields_refuses(fields, error, message):
    with pytest.raises(error, match=message):
        SingleAgentEpisode.from_fields(fields)


def test_from_fields_refuses_a_numpy_infos_column_and_fills_none_custom_data():
    """Mutants S28 (numpy'd infos), S29 (None custom data)."""
    infos = InfiniteLookbackBuffer([{"a": 1}, {"a": 2}])
    infos.finalize()
    with pytest.raises(ValueError, match="infos must be a list-mode"):
        SingleAgentEpisode.from_fields({"infos": infos})
    assert SingleAgentEpisode.from_fields({"custom_data": None}).custom_data == {}


# --- returns and reward values ------------------------------------------------------------


def _exact(rewards):
    """The plain reference: the exact sum of the rewards, rounded once (inf beyond range)."""
    if any(
        isinstance(r, (float, Decimal)) and not (r == r and abs(r) != float("inf")) for r in rewards
    ):
        return float(sum(float(r) for r in rewards))
    total = sum(
        Fraction(int(r))
        if isinstance(r, (int, np.integer))
        else Fraction(float(r))
        if isinstance(r, np.floating)
        else Fraction(r)
        for r in rewards
    )
    try:
        return float(total)
    except OverflowError:
        return float("inf") if total > 0 else float("-inf")


RETURNS = {
    # name: rewards whose return is their exact sum, rounded once
    "uint64 beside a negative int (T02, T19, T20)": [np.uint64(2**53 + 1), -1],
    "a float beside an int beyond float range (T21)": [1.0, 2**1100],
    "an int beyond float range, negative (T25)": [-(2**1100), 1],
    "an infinite Decimal (T24)": [Decimal("Infinity"), 1],
    "an infinite float beside a Decimal (T28)": [Decimal(1), float("inf")],
    "Decimals added exactly (T29)": [Decimal("0.1"), Decimal("0.2")],
    "49 ints, one beyond float range (T30)": [2**1100] + [1] * 48,
    "49 ints, one beyond float range, negative (T26, T30)": [-(2**1100)] + [1] * 48,
    "numpy ints that wrap among Python ints (T15)": [
        2**70,
        -(2**70),
        np.int64(2**62),
        np.int64(2**62),
    ],
    "float32 ones beside 2**24 (T16)": [
        np.float32(2**24),
        np.float32(1),
        np.float32(1),
        np.float32(1),
    ],
}


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("rewards", RETURNS.values(), ids=RETURNS)
def test_returns_are_exact_sums(rewards, mode):
    ep = SingleAgentEpisode(
        observations=list(range(len(rewards) + 1)),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    if mode == "numpy":
        try:
            ep.to_numpy()
        except ValueError:  # Decimals and such stay in list mode
            pytest.skip("these rewards do not stack")
    assert ep.get_return() == _exact(rewards)


def test_the_return_of_no_steps_is_positive_zero():
    """Mutant T04."""
    value = SingleAgentEpisode().get_return()
    assert value == 0.0 and np.copysign(1.0, value) == 1.0


def test_an_object_array_holding_a_vector_reward_is_refused():
    """Mutant T13: a vector among ints beyond int64 is no reward of one number."""
    with pytest.raises(ValueError, match="one number per step"):
        reward_sum(np.array([2**70, np.array([1, 2]), 3], dtype=object))


TO_NUMPY_REWARDS = {
    # name: (rewards, whether to_numpy takes them)
    "complex rewards (V14)": ([1 + 2j], True),
    "dict rewards of one leaf (V18)": ([{"a": 1.0}], False),
    "ints beyond int64": ([2**70, 1], True),
    "None beside ints beyond int64": ([2**70, None], False),
}


@pytest.mark.parametrize(("rewards", "taken"), TO_NUMPY_REWARDS.values(), ids=TO_NUMPY_REWARDS)
def test_to_numpy_takes_only_number_rewards(rewards, taken):
    n = len(rewards)
    ep = SingleAgentEpisode(
        observations=list(range(n + 1)), actions=[0] * n, rewards=rewards, len_lookback_buffer=0
    )
    if taken:
        ep.to_numpy()
        assert plain(ep.get_rewards()) == rewards and ep.is_numpy
    else:
        with pytest.raises(ValueError, match="no number"):
            ep.to_numpy()
        assert ep.get_rewards() == rewards and not ep.is_numpy


def test_concat_of_a_stepless_successor_without_the_extra_output_keys():
    """Mutant C29: a 0-step successor need not bring the keys the episode records; one with
    no observation at all is refused (mutant C27)."""
    ep = _list_chunk("x", [0, 1], [1.0], extra_model_outputs={"vf": [0.5]})
    ep.concat_episode(SingleAgentEpisode("x", observations=[1], t_started=1))
    assert (ep.get_observations(), ep.get_extra_model_outputs("vf"), ep.t) == ([0, 1], [0.5], 1)
    with pytest.raises(AssertionError, match="at least one observation"):
        ep.concat_episode(SingleAgentEpisode("x", t_started=1))
    with pytest.raises(AssertionError, match="at least one observation"):
        SingleAgentEpisode("x").concat_episode(SingleAgentEpisode("x", observations=[0]))
    assert (ep.get_observations(), ep.get_rewards(), ep.t) == ([0, 1], [1.0], 1)


class _Interrupting:
    """An action whose conversion to an array is interrupted (Ctrl-C while a join converts)."""

    def __array__(self, dtype=None, copy=None):
        raise KeyboardInterrupt


def test_an_interrupted_concat_is_taken_back_and_stays_an_interrupt():
    """Mutant C54: only a refused value becomes the ValueError; an interrupt goes on as it is."""
    ep = SingleAgentEpisode(
        "x", observations=[0, 1], actions=[np.zeros(2)], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()
    other = _list_chunk("x", [1, 2], [2.0], actions=[_Interrupting()], t_started=1)
    with pytest.raises(KeyboardInterrupt):
        ep.concat_episode(other)
    assert plain(ep.get_observations()) == [0, 1] and plain(ep.get_actions()) == [[0.0, 0.0]]
    assert (ep.get_infos(), ep.t, len(ep)) == ([{}, {}], 1, 1)


def test_concat_compares_the_join_in_the_successors_space_when_the_episode_has_none():
    """Mutant C32: a list of floats equals its float32 row in the successor's float32 Box."""
    ep = SingleAgentEpisode("x", observations=[[0.0, 0.1]], len_lookback_buffer=0)
    other = SingleAgentEpisode(
        "x",
        observations=[np.float32([0.0, 0.1]), np.float32([0.2, 0.3])],
        actions=[0],
        rewards=[1.0],
        observation_space=BOX2,
        len_lookback_buffer=0,
    )
    ep.concat_episode(other)
    assert plain(ep.get_observations()) == plain([np.float32([0.0, 0.1]), np.float32([0.2, 0.3])])


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "built"])
def test_concat_takes_the_successors_clock(reset):
    """Mutants C39, C40: the joined episode runs from its own start (or the successor's, if
    it has none) to the successor's last step."""
    if reset:
        ep = SingleAgentEpisode("x")
        ep.add_env_reset(0)
        ep.add_env_step(1, 0, 1.0)
    else:
        ep = _list_chunk("x", [0, 1], [1.0])
    nxt = ep.cut()
    nxt.add_env_step(2, 0, 1.0)
    nxt.add_env_step(3, 0, 1.0)
    ep.concat_episode(nxt)
    if reset:
        assert ep.get_duration_s() > nxt.get_duration_s() > 0.0
    else:
        assert ep.get_duration_s() == nxt.get_duration_s() > 0.0


def test_from_state_reads_numpy_times_and_flags_as_python_ones():
    """Mutants S03, S05: a state written by numpy (a dataset's row) gives an int ``t`` and
    bool flags."""
    state = _episode(truncated=True).get_state()
    state.update(t=np.int64(1), t_started=np.int64(0), is_truncated=np.True_)
    ep = SingleAgentEpisode.from_state(state)
    assert (type(ep.t), type(ep.t_started), type(ep.is_truncated)) == (int, int, bool)
    assert (ep.t, ep.t_started, ep.is_truncated) == (1, 0, True)


OUTSIDE_SPACES = {
    # name: (observation, action) of a step outside the numpy'd episode's spaces
    "observation outside (R10)": (np.full(2, 5.0, np.float32), np.zeros(2, np.float32)),
    "action outside (R11)": (np.zeros(2, np.float32), np.full(2, 5.0, np.float32)),
}


@pytest.mark.parametrize(("observation", "action"), OUTSIDE_SPACES.values(), ids=OUTSIDE_SPACES)
def test_a_numpy_episode_refuses_steps_outside_its_spaces(observation, action):
    ep = SingleAgentEpisode(observation_space=BOX2, action_space=BOX2)
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.to_numpy()
    with pytest.raises(ValueError, match="is not in the episode's"):
        ep.add_env_step(observation, action, 1.0)
    assert (len(ep), len(ep.get_observations())) == (0, 1)


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_a_cut_chunk_takes_new_extra_output_keys_beside_the_recorded_ones(mode):
    """Mutant R22: on a chunk's first step a new key joins, and the known keys record too."""
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0, extra_model_outputs={"a": 0.5})
    if mode == "numpy":
        ep.to_numpy()
    nxt = ep.cut()
    nxt.add_env_step(2, 0, 1.0, extra_model_outputs={"a": 0.25, "b": 2.0})
    nxt.validate()
    assert plain(nxt.get_extra_model_outputs("a")) == [0.25]
    assert plain(nxt.get_extra_model_outputs("b")) == [2.0]


def _recorded(*, terminated=False):
    ep = SingleAgentEpisode("r")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0, terminated=terminated)
    return ep


def test_equality_leaves_out_the_clocks_and_compares_the_flags():
    """Mutants S21 (clocks compared), S25 (flags left out)."""
    assert _recorded() == _recorded()
    assert _recorded() != _recorded(terminated=True)
    truncated = _recorded()
    truncated.is_truncated = True
    assert truncated != _recorded() and _recorded() != truncated


def _return_of(rewards):
    n = len(rewards)
    return SingleAgentEpisode(
        observations=list(range(n + 1)), actions=[0] * n, rewards=rewards, len_lookback_buffer=0
    ).get_return()


def test_the_return_of_one_number_per_step_held_in_arrays():
    """Mutant T11: rewards of shape (1,) each are one number per step, summed."""
    assert _return_of([np.array([1.5]), np.array([2.0])]) == 3.5


REFUSED_RETURNS = {
    # name: (rewards, error, message)
    "a complex reward (T12)": ([1.0, 1 + 2j], TypeError, "complex"),
    "a string beside a float names the string (T14)": ([1.0, "x"], TypeError, "got 'x'"),
    "vector rewards": ([np.array([1.0, 2.0])] * 2, ValueError, "one number per step"),
}


@pytest.mark.parametrize(
    ("rewards", "error", "message"), REFUSED_RETURNS.values(), ids=REFUSED_RETURNS
)
def test_get_return_refuses(rewards, error, message):
    with pytest.raises(error, match=message):
        _return_of(rewards)

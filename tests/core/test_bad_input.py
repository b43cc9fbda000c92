"""docs/contract.md §8 (and §3-§7): every precondition raises the right type, names the problem, and
leaves the object exactly as it was (check first, then mutate)."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
ZERO = np.zeros(2, np.float32)


def episode(n=3, *, numpy=False, done=False, extra=True):
    ep = SingleAgentEpisode("ep", observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(ZERO)
    for i in range(n):
        ep.add_env_step(
            ZERO,
            i % 2,
            1.0,
            terminated=done and i == n - 1,
            extra_model_outputs={"vf": 0.0} if extra else None,
        )
    return ep.to_numpy() if numpy else ep


def _lookback_only():
    # Every item is lookback: not reset (RLlib's add_env_step appends, then fails validate).
    return SingleAgentEpisode(
        observations=InfiniteLookbackBuffer([ZERO, ZERO], lookback=2),
        infos=InfiniteLookbackBuffer([{}, {}], lookback=2),
        actions=InfiniteLookbackBuffer([0], lookback=1),
        rewards=InfiniteLookbackBuffer([1.0], lookback=1),
    )


def _numpy_without_spaces():
    ep = SingleAgentEpisode("ep")
    ep.add_env_reset(ZERO)
    ep.add_env_step(ZERO, np.zeros(2), 1.0)
    return ep.to_numpy()


def _ragged_actions():
    ep = SingleAgentEpisode("ep")
    ep.add_env_reset(ZERO)
    ep.add_env_step(ZERO, np.zeros(3), 1.0)
    ep.add_env_step(ZERO, np.zeros(4), 1.0)  # observations stack fine, actions do not
    return ep


def _successor_with(ep, action=0, vf=0.0):
    """A list-mode successor of ``ep`` whose action or extra output misfits ``ep``'s columns."""
    nxt = episode(len(ep)).cut()
    nxt.action_space = None  # let the mismatching action in
    nxt.add_env_step(ZERO, action, 1.0, extra_model_outputs={"vf": vf})
    nxt.add_env_step(ZERO, action, 1.0, extra_model_outputs={"vf": vf})
    return nxt


def successor_of(ep, obs=ZERO, **kwargs):
    nxt = ep.cut()
    nxt.add_env_step(obs, 0, 1.0, extra_model_outputs={"vf": 0.0}, **kwargs)
    return nxt


EPISODE_CASES = [
    ("reset_twice", lambda: episode(0), lambda ep: ep.add_env_reset(ZERO), AssertionError, "empty"),
    (
        "reset_nonzero_t",
        lambda: SingleAgentEpisode(t_started=5),
        lambda ep: ep.add_env_reset(ZERO),
        AssertionError,
        "t == t_started == 0",
    ),
    (
        "step_when_done",
        lambda: episode(done=True),
        lambda ep: ep.add_env_step(ZERO, 0, 0.0, extra_model_outputs={"vf": 0.0}),
        AssertionError,
        "done",
    ),
    (
        "step_before_reset",
        lambda: SingleAgentEpisode(),
        lambda ep: ep.add_env_step(ZERO, 0, 0.0),
        AssertionError,
        "add_env_reset",
    ),
    (
        "step_late_new_key",
        lambda: episode(),
        lambda ep: ep.add_env_step(ZERO, 0, 0.0, extra_model_outputs={"vf": 0.0, "new": 1}),
        AssertionError,
        "new",
    ),
    (
        "step_missing_key",
        lambda: episode(),
        lambda ep: ep.add_env_step(ZERO, 0, 0.0),
        AssertionError,
        "missing keys",
    ),
    (
        "step_obs_outside_space_numpy",
        lambda: episode(numpy=True),
        lambda ep: ep.add_env_step(
            np.full(2, 5, np.float32), 0, 0.0, extra_model_outputs={"vf": 0.0}
        ),
        ValueError,
        "observation",
    ),
    (
        "step_action_outside_space_numpy",
        lambda: episode(numpy=True),
        lambda ep: ep.add_env_step(ZERO, 7, 0.0, extra_model_outputs={"vf": 0.0}),
        ValueError,
        "action",
    ),
    ("cut_done", lambda: episode(done=True), lambda ep: ep.cut(), AssertionError, "done"),
    ("cut_negative_lookback", lambda: episode(), lambda ep: ep.cut(-1), ValueError, ">= 0"),
    ("slice_with_step", lambda: episode(), lambda ep: ep[0:2:2], ValueError, "step"),
    ("getitem_int", lambda: episode(), lambda ep: ep[0], TypeError, "slices"),
    (
        "concat_other_id",
        lambda: episode(),
        lambda ep: ep.concat_episode(_renamed(successor_of(ep))),
        AssertionError,
        "different ids",
    ),
    (
        "concat_wrong_t",
        lambda: episode(),
        lambda ep: ep.concat_episode(_shifted(successor_of(ep))),
        AssertionError,
        "t_started",
    ),
    (
        "concat_onto_done",
        lambda: episode(done=True),
        lambda ep: ep.concat_episode(episode(done=True)),
        AssertionError,
        "done",
    ),
    (
        "concat_obs_mismatch",
        lambda: episode(),
        lambda ep: ep.concat_episode(_first_obs_changed(successor_of(ep))),
        AssertionError,
        "first observation",
    ),
    (
        "concat_numpy_extra_output_shape_mismatch",
        lambda: episode(numpy=True),
        lambda ep: ep.concat_episode(_successor_with(ep, vf=np.zeros(2))),
        ValueError,
        r"extra_model_outputs\['vf'\] do not fit.*nothing was changed",
    ),
    (
        "concat_numpy_action_shape_mismatch_numpy_other",
        lambda: episode(numpy=True),
        lambda ep: ep.concat_episode(_successor_with(ep, action=np.zeros(3)).to_numpy()),
        ValueError,
        "actions do not fit",
    ),
    (
        "to_numpy_ragged_actions_stays_in_list_mode",
        lambda: _ragged_actions(),
        lambda ep: ep.to_numpy(),
        ValueError,
        "actions cannot be stacked",
    ),
    (
        "set_unknown_extra_key",
        lambda: episode(),
        lambda ep: ep.set_extra_model_outputs(key="nope", new_data=[1, 2, 3]),
        AssertionError,
        "vf",
    ),
    (
        "get_unknown_extra_key",
        lambda: episode(),
        lambda ep: ep.get_extra_model_outputs("nope"),
        KeyError,
        "known keys",
    ),
    (
        "set_obs_out_of_range",
        lambda: episode(),
        lambda ep: ep.set_observations(new_data=ZERO, at_indices=10),
        IndexError,
        "out of range",
    ),
    (
        "set_actions_size_mismatch",
        lambda: episode(),
        lambda ep: ep.set_actions(new_data=[0], at_indices=slice(0, 3)),
        IndexError,
        "address",
    ),
    (
        "set_rewards_size_mismatch_list_mode",
        lambda: episode(),
        lambda ep: ep.set_rewards(new_data=[1.0, 2.0]),
        IndexError,
        "address",
    ),
    (
        "set_actions_outside_space_numpy",
        lambda: episode(numpy=True),
        lambda ep: ep.set_actions(new_data=5, at_indices=0),
        ValueError,
        "space",
    ),
    (
        "concat_with_itself",  # a 0-step chunk passed every check, then popped its own items
        lambda: episode(0),
        lambda ep: ep.concat_episode(ep),
        AssertionError,
        "itself",
    ),
    (
        "observation_space_not_a_space",  # was stored, then get_state() failed
        lambda: episode(),
        lambda ep: setattr(ep, "observation_space", "x"),
        TypeError,
        "gymnasium Space",
    ),
    (
        "action_space_not_a_space",
        lambda: episode(),
        lambda ep: setattr(ep, "action_space", 3),
        TypeError,
        "gymnasium Space",
    ),
    (
        "numpy_string_reward_on_the_first_step",  # the undecided column took dtype <U1
        lambda: episode(0, numpy=True),
        lambda ep: ep.add_env_step(ZERO, 0, "x"),
        ValueError,
        r"rewards cannot be stored.*nothing was recorded",
    ),
    (
        "numpy_reward_not_a_number",
        lambda: episode(numpy=True),
        lambda ep: ep.add_env_step(ZERO, 0, "high", extra_model_outputs={"vf": 0.0}),
        ValueError,
        r"rewards cannot be stored.*nothing was recorded",
    ),
    (
        "numpy_extra_output_wrong_shape",
        lambda: episode(numpy=True),
        lambda ep: ep.add_env_step(ZERO, 0, 1.0, extra_model_outputs={"vf": np.zeros(3)}),
        ValueError,
        r"extra_model_outputs\['vf'\] cannot be stored",
    ),
    (
        "numpy_action_wrong_shape_without_spaces",
        lambda: _numpy_without_spaces(),
        lambda ep: ep.add_env_step(ZERO, np.zeros(5), 1.0),
        ValueError,
        "actions cannot be stored",
    ),
    (
        "numpy_observation_wrong_shape_without_spaces",
        lambda: _numpy_without_spaces(),
        lambda ep: ep.add_env_step(np.zeros(3), np.zeros(2), 1.0),
        ValueError,
        "observations cannot be stored",
    ),
    (
        "step_on_lookback_only",
        lambda: _lookback_only(),
        lambda ep: ep.add_env_step(ZERO, 0, 1.0),
        AssertionError,
        "needs add_env_reset",
    ),
    (
        "numpy_step_on_lookback_only",
        lambda: _lookback_only().to_numpy(),
        lambda ep: ep.add_env_step(ZERO, 0, 1.0),
        AssertionError,
        "needs add_env_reset",
    ),
    (
        "numpy_step_new_extra_refused",
        lambda: SingleAgentEpisode(observations=[ZERO], len_lookback_buffer=0).to_numpy(),
        lambda ep: ep.add_env_step(ZERO, 0, 1.0, extra_model_outputs={"a": 1.0, "b": {}}),
        ValueError,
        "the value for extra-model-output 'b' cannot be stored",
    ),
    (
        "numpy_step_new_extra_refused_first",
        lambda: SingleAgentEpisode(observations=[ZERO], len_lookback_buffer=0).to_numpy(),
        lambda ep: ep.add_env_step(ZERO, 0, 1.0, extra_model_outputs={"b": {}, "a": 1.0}),
        ValueError,
        "the value for extra-model-output 'b' cannot be stored",
    ),
    (
        "numpy_set_rewards_misfit",
        lambda: episode(numpy=True),
        lambda ep: ep.set_rewards(new_data="x", at_indices=0),
        ValueError,
        "set rewards: ",
    ),
    (
        "numpy_set_observations_misfit",
        lambda: episode(numpy=True),
        lambda ep: ep.set_observations(new_data=np.zeros(3), at_indices=0),
        ValueError,
        "set observations: ",
    ),
    (
        "numpy_set_extra_model_outputs_misfit",
        lambda: episode(numpy=True),
        lambda ep: ep.set_extra_model_outputs(key="vf", new_data="x", at_indices=0),
        ValueError,
        "set extra-model-output 'vf': ",
    ),
    (
        "bad_len_lookback_buffer",
        None,
        lambda _: SingleAgentEpisode(len_lookback_buffer="many"),
        TypeError,  # as cut() and slice() refuse a lookback that is not an int
        "len_lookback_buffer",
    ),
]


def _renamed(ep):
    ep.id_ = "other"
    return ep


def _shifted(ep):
    ep.t_started += 1
    ep.t += 1
    return ep


def _first_obs_changed(ep):
    ep.observations.set(np.full(2, 0.5, np.float32), at_indices=0)
    return ep


@pytest.mark.parametrize(
    "name,make,call,error,message", EPISODE_CASES, ids=[c[0] for c in EPISODE_CASES]
)
def test_episode_preconditions(name, make, call, error, message):
    ep = make() if make else None
    before = copy.deepcopy(ep)
    with pytest.raises(error, match=message):
        call(ep)
    if ep is not None:
        assert ep == before, f"{name} changed the episode"


BUFFER_CASES = [
    ("get_out_of_range", lambda b: b.get(5), IndexError, "out of range"),
    ("get_list_out_of_range", lambda b: b.get([0, 9]), IndexError, "out of range"),
    ("get_float_index", lambda b: b.get(1.5), TypeError, "int"),
    ("get_one_hot_without_space", lambda b: b.get(one_hot_discrete=True), ValueError, "space"),
    ("set_out_of_range", lambda b: b.set(1, at_indices=3), IndexError, "out of range"),
    (
        "set_list_out_of_range",
        lambda b: b.set([1, 2], at_indices=[0, 7]),
        IndexError,
        "out of range",
    ),
    ("set_size_mismatch", lambda b: b.set([1, 2, 3, 4]), IndexError, "address"),
    (
        "set_slice_size_mismatch",
        lambda b: b.set([1], at_indices=slice(0, 2)),
        IndexError,
        "address",
    ),
    ("slice_zero_step", lambda b: b.get(slice(None, None, 0)), ValueError, "step"),
    ("set_slice_zero_step", lambda b: b.set([], at_indices=slice(0, 2, 0)), ValueError, "step"),
    ("pop_out_of_range", lambda b: b.pop(10), IndexError, "pop index"),
    ("concat_non_buffer", lambda b: b.concat([1, 2]), TypeError, "InfiniteLookbackBuffer"),
    ("truncate_beyond_the_end", lambda b: b.truncate(99), IndexError, "out of range"),
    ("truncate_negative", lambda b: b.truncate(-1), IndexError, "out of range"),
]


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("name,call,error,message", BUFFER_CASES, ids=[c[0] for c in BUFFER_CASES])
def test_buffer_preconditions(name, call, error, message, mode):
    buf = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1)
    if mode == "numpy":
        buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(error, match=message):
        call(buf)
    assert buf == before


NESTED_ROW = {"a": np.zeros(2), "b": np.zeros(3)}
MISFITS = {
    # The first leaf fits, a later one does not: nothing may be written.
    "int_index": (0, {"a": np.ones(2), "b": np.ones(5)}),
    "slice_second_item": (
        slice(0, 2),
        [{"a": np.ones(2), "b": np.ones(3)}, {"a": np.ones(2), "b": np.ones(4)}],
    ),
    "string_into_float": (1, {"a": np.ones(2), "b": np.array(["x", "y", "z"])}),
}


@pytest.mark.parametrize("at, value", MISFITS.values(), ids=MISFITS.keys())
def test_set_of_a_misfit_on_a_nested_numpy_buffer_changes_nothing(at, value):
    buf = InfiniteLookbackBuffer([NESTED_ROW] * 3)
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="does not fit a numpy column"):
        buf.set(value, at_indices=at)
    assert buf == before


UNSTORABLE_NUMBERS = {
    # (column dtype, value): one-by-one assignment refuses these, so append must refuse them
    # at once rather than queue them for a bulk write that would fail at a later read.
    "inf_into_int64": (np.int64, float("inf")),
    "nan_into_int32": (np.int32, float("nan")),
    "huge_float_into_int64": (np.int64, 1e300),
    "huge_int_into_int64": (np.int64, 2**70),
    "int_over_int8": (np.int8, 300),
    "numpy_int_over_int8": (np.int8, np.int64(2**40)),
    "negative_into_uint8": (np.uint8, -1),
    "numpy_nan_into_int64": (np.int64, np.float64("nan")),
    "int_beyond_float64": (np.float64, 10**400),
    "int_beyond_float32": (np.float32, 10**400),
}


@pytest.mark.parametrize("dtype, value", UNSTORABLE_NUMBERS.values(), ids=UNSTORABLE_NUMBERS.keys())
def test_append_of_an_unstorable_number_fails_at_once(dtype, value):
    buf = InfiniteLookbackBuffer([dtype(1), dtype(2)])
    buf.finalize()
    buf.append(dtype(3))  # a pending number ahead of the bad one
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="does not fit a numpy column"):
        buf.append(value)
    assert buf == before
    assert buf.get().tolist() == [1, 2, 3]  # still readable: nothing bad was queued


def test_extend_of_items_without_values_is_refused():
    buf = InfiniteLookbackBuffer([1, 2])
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="does not fit a numpy column"):  # as append says
        buf.extend([{}, {}])
    assert buf == before


def test_a_refused_first_step_leaves_the_numpy_columns_undecided():
    ep = SingleAgentEpisode("ep")
    ep.add_env_reset(ZERO)
    ep.add_env_step(ZERO, 1, 1.0, extra_model_outputs={"vf": 0.0})
    chunk = ep.cut().to_numpy()  # no steps yet: the first one will choose the dtypes
    before = copy.deepcopy(chunk)
    with pytest.raises(AssertionError, match="missing keys"):
        chunk.add_env_step(ZERO, 0.5, 1.0)  # a float action, and no "vf"
    assert chunk == before
    chunk.add_env_step(ZERO, 2, 1.0, extra_model_outputs={"vf": 0.0})
    assert chunk.get_actions().dtype == np.int64  # chosen by this step, not the refused one


@pytest.mark.parametrize("at", [slice(2, 6), [0, 7]], ids=["slice", "index_list"])
def test_scalar_fill_for_numpy_rows_without_a_space_says_what_to_do(at):
    buf = InfiniteLookbackBuffer([np.full(2, i, np.float32) for i in range(4)])
    buf.finalize()
    with pytest.raises(ValueError, match="give the buffer a space"):
        buf.get(at, fill=0.0)
    spaced = InfiniteLookbackBuffer(
        [np.full(2, i, np.float32) for i in range(4)], space=gym.spaces.Box(0, 9, (2,))
    )
    spaced.finalize()
    assert spaced.get(at, fill=0.0).shape == (4 if isinstance(at, slice) else 2, 2)


def test_set_outside_space_on_finalized_buffer_changes_nothing():
    buf = InfiniteLookbackBuffer([0, 1, 0], space=gym.spaces.Discrete(2))
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="space"):
        buf.set([1, 5, 1])
    assert buf == before


@pytest.mark.parametrize(
    "name,mutate,error,message",
    [
        ("missing_key", lambda s: s.pop("t"), KeyError, "missing keys"),
        ("inconsistent_lengths", lambda s: s["actions"]["data"].pop(), ValueError, "inconsistent"),
        ("wrong_t", lambda s: s.__setitem__("t", 99), ValueError, "t=99"),
        ("not_a_dict", None, TypeError, "dict"),
        # Read as int(): 0.5 became t_started 0, None a bare TypeError.
        ("fractional_t_started", lambda s: s.__setitem__("t_started", 0.5), ValueError, "integer"),
        ("t_none", lambda s: s.__setitem__("t", None), ValueError, "integer"),
        # Read as bool(): "no" made a list-mode column look finalized.
        (
            "finalized_a_string",
            lambda s: s["rewards"].__setitem__("finalized", "no"),
            ValueError,
            "must be a bool",
        ),
        # Taken as they were: get_duration_s() then raised TypeError, "no" was a flag.
        (
            "clock_a_string",
            lambda s: s.__setitem__("start_time", "yesterday"),
            ValueError,
            "number",
        ),
        ("clock_a_list", lambda s: s.__setitem__("last_step_time", [1.0]), ValueError, "number"),
        ("flag_an_int", lambda s: s.__setitem__("is_terminated", 1), ValueError, "must be a bool"),
        ("flag_none", lambda s: s.__setitem__("is_truncated", None), ValueError, "must be a bool"),
    ],
    ids=[
        "missing_key",
        "inconsistent_lengths",
        "wrong_t",
        "not_a_dict",
        "fractional_t_started",
        "t_none",
        "finalized_a_string",
        "clock_a_string",
        "clock_a_list",
        "flag_an_int",
        "flag_none",
    ],
)
def test_from_state_refuses_broken_states(name, mutate, error, message):
    state = episode().get_state()
    if mutate is None:
        state = [state]
    else:
        mutate(state)
    with pytest.raises(error, match=message):
        SingleAgentEpisode.from_state(state)


@pytest.mark.parametrize("t_started", [2.7, "3", b"5", True], ids=repr)
def test_the_constructor_refuses_a_t_started_that_is_no_int(t_started):
    # int() made 2.7 into 2, "3" into 3 and True into 1.
    with pytest.raises(TypeError, match="t_started must be an int"):
        SingleAgentEpisode(t_started=t_started)


def test_validate_raises_assertion_error_naming_the_column():
    ep = episode()
    ep.actions.append(1)
    with pytest.raises(AssertionError, match="actions"):
        ep.validate()


def test_errors_survive_python_O():
    import subprocess
    import sys

    code = (
        "from episodes import SingleAgentEpisode\n"
        "ep = SingleAgentEpisode(); ep.add_env_reset(0)\n"
        "try:\n    ep.add_env_reset(0)\nexcept AssertionError:\n    print('raised')\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "raised", out.stderr


def _buffer_state(**changes):
    state = InfiniteLookbackBuffer([1, 2, 3], lookback=1).get_state()
    state.update(changes)
    return state


BUFFER_BUILD_CASES = {
    "negative_lookback": (lambda: InfiniteLookbackBuffer([1], lookback=-1), ValueError, ">= 0"),
    "float_lookback": (lambda: InfiniteLookbackBuffer([1], lookback=1.0), TypeError, "int"),
    "space_not_a_space": (
        lambda: InfiniteLookbackBuffer([1], space="Discrete(2)"),
        TypeError,
        "gymnasium Space",
    ),
    "state_not_a_dict": (
        lambda: InfiniteLookbackBuffer.from_state([1, 2]),
        TypeError,
        "must be a dict",
    ),
    "state_missing_keys": (
        lambda: InfiniteLookbackBuffer.from_state({"data": [1]}),
        KeyError,
        r"\['finalized', 'lookback', 'space'\]",
    ),
    "state_list_mode_with_an_array": (
        lambda: InfiniteLookbackBuffer.from_state(_buffer_state(data=np.arange(3))),
        ValueError,
        "finalized=False",
    ),
    "state_negative_lookback": (
        lambda: InfiniteLookbackBuffer.from_state(_buffer_state(lookback=-1)),
        ValueError,
        ">= 0",
    ),
    "state_lookback_beyond_data": (
        lambda: InfiniteLookbackBuffer.from_state(_buffer_state(lookback=4)),
        ValueError,
        "lookback 4 but only 3 items",
    ),
    "plus_a_string": (
        lambda: InfiniteLookbackBuffer([1]) + "x",
        TypeError,
        "cannot add str",
    ),
    "stacked_twice": (
        lambda: InfiniteLookbackBuffer(np.arange(2)).stacked(),
        ValueError,
        "finalized already",
    ),
}


@pytest.mark.parametrize(
    "build, error, message", BUFFER_BUILD_CASES.values(), ids=BUFFER_BUILD_CASES.keys()
)
def test_buffer_construction_refuses_bad_input(build, error, message):
    with pytest.raises(error, match=message):
        build()


def _numpyd(obs, action=0, reward=1.0, extras=None):
    """A numpy'd episode of two steps built from the given first items."""
    ep = SingleAgentEpisode()
    ep.add_env_reset(obs)
    ep.add_env_step(obs, action, reward, extra_model_outputs=extras)
    ep.add_env_step(obs, action, reward, extra_model_outputs=extras)
    return ep.to_numpy()


NUMPY_STEP_MISFITS = {
    # (episode, add_env_step kwargs): a numpy column refuses an item it would have to
    # broadcast, rename into or truncate; the episode keeps what it had.
    "scalar_observation_for_a_row": (
        lambda: _numpyd(np.zeros(2, np.float32)),
        {"observation": 5.0, "action": 0, "reward": 1.0},
    ),
    "row_of_one_for_a_row_of_two": (
        lambda: _numpyd(np.zeros(2, np.float32)),
        {"observation": np.zeros(1, np.float32), "action": 0, "reward": 1.0},
    ),
    "scalar_action_for_an_action_row": (
        lambda: _numpyd(np.zeros(2, np.float32), action=np.zeros(3)),
        {"observation": np.zeros(2, np.float32), "action": 1.0, "reward": 1.0},
    ),
    "extra_output_of_another_shape": (
        lambda: _numpyd(0.0, extras={"v": np.zeros(2)}),
        {"observation": 0.0, "action": 0, "reward": 1.0, "extra_model_outputs": {"v": 1.0}},
    ),
    "dict_observation_with_a_renamed_key": (
        lambda: _numpyd({"pos": np.zeros(2), "vel": 0.0}),
        {"observation": {"pos": np.ones(2), "WRONG": 1.0}, "action": 0, "reward": 1.0},
    ),
    "tuple_for_a_dict_observation": (
        lambda: _numpyd({"pos": np.zeros(2), "vel": 0.0}),
        {"observation": (np.ones(2), 1.0), "action": 0, "reward": 1.0},
    ),
    "fractional_reward_into_int_rewards": (
        lambda: _numpyd(0.0, reward=0),
        {"observation": 0.0, "action": 0, "reward": 0.5},
    ),
    "wide_int_array_into_int8_actions": (
        lambda: _numpyd(0.0, action=np.int8(1)),
        {"observation": 0.0, "action": np.array(300), "reward": 1.0},
    ),
}


@pytest.mark.parametrize("make, step", NUMPY_STEP_MISFITS.values(), ids=NUMPY_STEP_MISFITS.keys())
def test_numpy_columns_refuse_items_they_would_broadcast_rename_or_truncate(make, step):
    ep = make()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError):
        ep.add_env_step(**step)
    assert ep == before
    ep.validate()


@pytest.mark.parametrize("extras", [[], "logp", [("logp", 0.1)]], ids=["list", "str", "pairs"])
def test_extra_model_outputs_that_are_not_a_dict_change_nothing(extras):
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    before = copy.deepcopy(ep)
    with pytest.raises(TypeError, match="must be a dict"):
        ep.add_env_step(1, 0, 1.0, extra_model_outputs=extras)
    assert ep == before
    ep.validate()


def test_concat_refuses_a_stepless_successor_bringing_a_key_the_episode_lacks():
    ep = SingleAgentEpisode(
        "x", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    # A successor at t=2 without steps whose lookback holds an extra output "v".
    other = SingleAgentEpisode(
        "x",
        observations=[1, 2],
        actions=[1],
        rewards=[1.0],
        extra_model_outputs={"v": [0.3]},
        t_started=2,
    )
    assert len(other) == 0
    before = copy.deepcopy(ep)
    with pytest.raises(AssertionError, match="keys differ"):
        ep.concat_episode(other)
    assert ep == before


@pytest.mark.parametrize("cut", [False, True], ids=["reset_only", "cut_successor"])
def test_a_numpy_episode_records_a_new_extra_output_as_a_numpy_column(cut):
    ep = SingleAgentEpisode()
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.to_numpy()
    if cut:
        ep.add_env_step(np.zeros(2, np.float32), 0, 1.0)
        ep = ep.cut()
    ep.add_env_step(np.ones(2, np.float32), 1, 1.0, extra_model_outputs={"logp": -0.5})
    assert ep.is_numpy
    assert isinstance(ep.get_data_dict()["logp"], np.ndarray)
    ep.validate()


def test_sample_batch_counts_rows_of_nested_numpy_columns():
    obs = {"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32), "c": 0.0}
    ep = SingleAgentEpisode()
    ep.add_env_reset(obs)
    for _ in range(5):
        ep.add_env_step(obs, 0, 1.0)
    ep.to_numpy()
    batch = ep.get_sample_batch()
    assert batch.count == len(batch) == 5


@pytest.mark.parametrize(
    "values",
    [
        {"observations": [0, 1], "actions": InfiniteLookbackBuffer([0])},
        {"extra_model_outputs": {"v": [1.0]}},
        {"custom_data": [1]},
    ],
    ids=["list_column", "list_extra_output", "custom_data_list"],
)
def test_from_fields_refuses_values_of_the_wrong_type(values):
    fields = {
        "observations": InfiniteLookbackBuffer([0, 1]),
        "infos": InfiniteLookbackBuffer([{}, {}]),
        "actions": InfiniteLookbackBuffer([0]),
        "rewards": InfiniteLookbackBuffer([1.0]),
        **values,
    }
    with pytest.raises(TypeError, match="must be"):
        SingleAgentEpisode.from_fields(fields)


@pytest.mark.parametrize(
    ("items", "error", "match"),
    [
        (5, TypeError, "must be a list"),  # as list mode refuses it
        (None, TypeError, "must be a list"),
        ("ab", ValueError, "leading axis"),
        ({"a": 1}, ValueError, "leading axis"),
        ({"a": np.zeros(0, np.int64), "b": np.zeros(3)}, ValueError, "leading axis"),
    ],
)
def test_extend_of_a_numpy_buffer_refuses_what_is_no_batch(items, error, match):
    # A scalar or a ragged batch counted as 0 items and was dropped (a tuple of scalars is
    # the tuple of its items now, as in list mode: test_session32_extend_tuple.py).
    buf = InfiniteLookbackBuffer([{"a": 1, "b": 2.0}] if isinstance(items, dict) else [1, 2])
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(error, match=match):
        buf.extend(items)
    assert buf == before


def test_a_refused_constructor_leaves_the_given_buffers_spaces_alone():
    obs, rewards = InfiniteLookbackBuffer([ZERO, ZERO]), InfiniteLookbackBuffer([1.0, 2.0])
    with pytest.raises(AssertionError):  # two rewards for one step
        SingleAgentEpisode(
            observations=obs, actions=InfiniteLookbackBuffer([0]), rewards=rewards,
            observation_space=OBS_SPACE,
        )  # fmt: skip
    assert obs.space is None and rewards.space is None
    with pytest.raises(ValueError):
        SingleAgentEpisode.from_fields(
            {"observations": obs, "actions": InfiniteLookbackBuffer([0]), "rewards": rewards}
        )
    assert obs.space is None and rewards.space is None


@pytest.mark.parametrize(
    "reward", [np.bool_(True), np.float32(0.5), np.array(2.0), 3, 1.5], ids=repr
)
def test_numpy_mode_takes_every_real_reward_on_the_first_step_and_after(reward):
    ep = episode(0, numpy=True)
    ep.add_env_step(ZERO, 0, reward)
    ep.add_env_step(ZERO, 1, reward)
    assert ep.get_rewards().dtype.kind in "biuf" and len(ep) == 2


def test_numpy_mode_takes_torch_scalar_rewards():
    torch = pytest.importorskip("torch")
    ep = episode(0, numpy=True)
    ep.add_env_step(ZERO, 0, torch.tensor(1.5))
    ep.add_env_step(ZERO, 1, torch.tensor(1))
    assert ep.get_rewards().tolist() == [1.5, 1.0]


@pytest.mark.parametrize("lookback", [1.5, True, "x"], ids=repr)
@pytest.mark.parametrize(
    "make",
    [
        lambda ep, lb: SingleAgentEpisode(
            observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=lb
        ),
        lambda ep, lb: ep.cut(len_lookback_buffer=lb),
        lambda ep, lb: ep.slice(slice(0, 1), len_lookback_buffer=lb),
    ],
    ids=["constructor", "cut", "slice"],
)
def test_a_lookback_length_that_is_no_int_is_one_type_error_everywhere(make, lookback):
    """The constructor said ValueError, cut TypeError, slice a TypeError about an 'index'."""
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(TypeError, match="len_lookback_buffer"):
        make(ep, lookback)


@pytest.mark.parametrize("index", [np.array(1), np.array([[0, 1]])], ids=["0-d", "2-d"])
def test_an_index_array_that_is_not_1d_is_a_clear_type_error(index):
    """It was 'iteration over a 0-d array'."""
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(TypeError, match="index array must be 1-d"):
        ep.get_observations(index)
    with pytest.raises(TypeError, match="index array must be 1-d"):
        ep.set_rewards(new_data=[5.0], at_indices=index)
    assert ep.get_rewards() == [1.0, 2.0]

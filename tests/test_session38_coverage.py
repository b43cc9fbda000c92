"""Session 38: findings of the coverage hunt, and branches it found untested.

1. A numpy'd read by index list of an object column padded with a fill (a list, dict, string,
   None, an object) gave 0-d object arrays where slices, int reads and list mode give the fill.
2. ``FrameStack(n, fill="x")`` without a space turned numeric observations into strings.
3. The converter refused an extra output recorded as ``[[], []]`` per step, which
   ``np.array`` reads as ``(2, 0)``, as it takes ``np.zeros((2, 0))`` per step.
4. Unreachable code removed: the tests pin the behaviour around it.
5. Refusals and branches that held but had no test.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.connectors.float32 import Float32RangeError
from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.converter.refusals import storable_extra
from episodes.episode.returns import reward_sum
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.rollout import CircularBuffer, RolloutStorage
from episodes.runner import EnvRunner
from episodes.spaces import one_hot, space_from_dict, space_to_dict
from episodes.structs import data_equal


class Obj:
    """An object numpy holds as one element of an object column."""

    def __repr__(self) -> str:
        return "Obj()"


def _same(a, b) -> bool:
    """The same value as an element: the same object, or equal and of the same type."""
    if a is b:
        return True
    return type(a) is type(b) and not isinstance(a, np.ndarray) and a == b


# ------------------------------------------------------------ 1. object columns padded by index
OBJ = Obj()
FILLS = {
    "list": [1, 2],
    "dict": {"k": 1},
    "tuple": (1,),
    "string": "z",
    "nul-string": "z\x00",
    "none": None,
    "object": OBJ,
    "int": 5,
}
COLUMNS = {
    "flat": (lambda: [Obj(), Obj()], lambda fill: fill, lambda read: read),
    "dict": (
        lambda: [{"a": 1, "b": Obj()}, {"a": 2, "b": Obj()}],
        lambda fill: {"a": 0, "b": fill},
        lambda read: read["b"],
    ),
    "tuple": (lambda: [(1, Obj()), (2, Obj())], lambda fill: (0, fill), lambda read: read[1]),
}


def _elements(read) -> list:
    return list(read)


@pytest.mark.parametrize("order", [[0, 5], [5, 0, 6, 1], [-1, 1]], ids=["after", "mixed", "before"])
@pytest.mark.parametrize("column", list(COLUMNS))
@pytest.mark.parametrize("fill", list(FILLS))
def test_object_column_index_reads_pad_with_the_fill_itself(fill, column, order) -> None:
    items, fill_of, leaf = COLUMNS[column]
    if column == "flat" and fill == "none":
        pytest.skip("fill=None reads no fillers: out-of-range indices raise")
    value = fill_of(FILLS[fill])
    stored = items()
    numpy_buffer = InfiniteLookbackBuffer(stored)
    numpy_buffer.finalize()
    list_buffer = InfiniteLookbackBuffer(stored)
    neg = order == [-1, 1]
    got = numpy_buffer.get(order, fill=value, neg_index_as_lookback=neg)
    listed = list_buffer.get(order, fill=value, neg_index_as_lookback=neg)
    # The slice read of the whole range: stored items, then fillers after them.
    sliced = leaf(numpy_buffer.get(slice(0, 4), fill=value))
    filler = FILLS[fill]
    assert _same(sliced[3], filler)
    got_leaf = _elements(leaf(got))
    assert isinstance(leaf(got), np.ndarray) and leaf(got).dtype == object
    for position, element, from_list in zip(order, got_leaf, listed):
        stored_at = 0 <= position < 2
        expected = leaf(stored[position]) if column != "flat" and stored_at else None
        if not stored_at:
            assert _same(element, filler), (element, filler)
            assert _same(element, sliced[3])
            assert _same(element, leaf(from_list) if column != "flat" else from_list)
        elif column != "flat":
            assert element is expected
        else:
            assert element is stored[position]
    # The int read pads with the fill too.
    single = numpy_buffer.get(7, fill=value)
    assert _same(leaf(single) if column != "flat" else single, filler)


def test_object_column_index_reads_keep_number_leaves() -> None:
    buffer = InfiniteLookbackBuffer([{"a": 1, "b": Obj()}, {"a": 2, "b": Obj()}])
    buffer.finalize()
    got = buffer.get([5, 1], fill={"a": 0, "b": None})
    assert got["a"].tolist() == [0, 2] and got["a"].dtype == np.int64
    assert got["b"][0] is None


def test_object_column_index_read_of_fillers_only_equals_the_slice_read() -> None:
    rows = [np.array([Obj(), Obj()]), np.array([Obj(), Obj()])]  # an object column of rows
    buffer = InfiniteLookbackBuffer(rows)
    buffer.finalize()
    for fill in ("z\x00", [1, 2], Obj()):
        listed = buffer.get([5, 6], fill=fill)
        sliced = buffer.get(slice(5, 7), fill=fill)
        assert listed.dtype == sliced.dtype == object and listed.shape == sliced.shape == (2,)
        assert all(_same(x, fill) for x in listed) and all(_same(x, fill) for x in sliced)


def test_episode_getter_index_read_of_object_outputs_pads_with_the_fill() -> None:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[0.0, 1.0],
        extra_model_outputs={"h": [{"a": 1, "b": Obj()}, {"a": 2, "b": Obj()}]},
        len_lookback_buffer=0,
    )
    ep.to_numpy()
    got = ep.get_extra_model_outputs("h", [0, 5], fill={"a": 0, "b": [7]})
    assert got["b"][1] == [7] and type(got["b"][1]) is list


# ----------------------------------------------------------- 2. FrameStack's string fill
def _episode(obs, **kw) -> SingleAgentEpisode:
    steps = len(obs) - 1
    return SingleAgentEpisode(
        observations=obs, actions=[0] * steps, rewards=[0.0] * steps, len_lookback_buffer=0, **kw
    )


FRAME_FILLS = {
    "str": ("x", "fill='x' cannot fill a leaf of dtype int64 (not a number: <U1)"),
    "bytes": (b"x", "fill=b'x' cannot fill a leaf of dtype int64 (not a number: |S1)"),
    "np-str": (np.str_("ab"), "cannot fill a leaf of dtype int64 (not a number: <U2)"),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("n", [1, 3], ids=["no-padding", "padding"])
@pytest.mark.parametrize("inference", [False, True])
@pytest.mark.parametrize("fill", list(FRAME_FILLS))
def test_frame_stack_refuses_a_string_fill_for_spaceless_numbers(fill, inference, n, numpy):
    value, message = FRAME_FILLS[fill]
    ep = _episode([0, 1, 2])
    if numpy:
        ep.to_numpy()
    batch = {"kept": 1}
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError) as err:
        FrameStack(n, fill=value, inference=inference)([ep], batch)
    assert message in str(err.value)
    assert batch == {"kept": 1} and ep == before


def test_frame_stack_refuses_a_string_fill_as_prev_actions_prev_rewards_does() -> None:
    ep = _episode([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"fill='x' cannot fill a leaf of dtype int64"):
        PrevActionsPrevRewards(fill="x", one_hot_discrete=False)([ep], {})
    with pytest.raises(ValueError, match=r"fill='x' cannot fill a leaf of dtype float64"):
        FrameStack(2, fill="x")([ep], {})


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("n", [1, 2], ids=["no-padding", "padding"])
def test_prev_actions_refuse_a_string_fill_for_spaceless_numbers(n, numpy) -> None:
    ep = _episode([0, 1, 2])  # no spaces: rewards are not read (n_rewards=0)
    if numpy:
        ep.to_numpy()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match=r"fill='x' cannot fill a leaf of dtype int64"):
        PrevActionsPrevRewards(n, 0, fill="x", one_hot_discrete=False)([ep], {})
    assert ep == before


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_frame_stack_still_takes_a_string_fill_for_text_observations(numpy) -> None:
    ep = _episode(["a", "b", "c"])
    if numpy:
        ep.to_numpy()
    out = FrameStack(3, fill="x")([ep], {})["obs"]
    assert out.tolist() == [["x", "x", "a"], ["x", "a", "b"]]
    # A number fill for numbers is taken as before.
    assert FrameStack(2, fill=-1)([_episode([0, 1, 2])], {})["obs"].tolist() == [[-1, 0], [0, 1]]


# ------------------------------------------------------------ 3. empty lists per step
def _rollout_episode(logits, numpy: bool = False) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[0, 0],
        rewards=[1.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={
            "vf_preds": [0.5] * 2,
            "action_logp": [-0.7] * 2,
            "logits": [logits] * 2,
        },
    )
    if numpy:
        ep.to_numpy()
    return ep


EMPTY_STEPS = {
    "[]": ([], (2, 1, 0)),
    "[[], []]": ([[], []], (2, 1, 2, 0)),
    "zeros((2, 0))": (np.zeros((2, 0)), (2, 1, 2, 0)),
    "[[]]": ([[]], (2, 1, 1, 0)),
    "[[[]], [[]]]": ([[[]], [[]]], (2, 1, 2, 1, 0)),
}


@pytest.mark.parametrize("case", list(EMPTY_STEPS))
def test_empty_lists_per_step_are_read_as_np_array_reads_them(case) -> None:
    logits, shape = EMPTY_STEPS[case]
    keys = ColumnKeys(distribution=("logits",))
    out = episodes_to_rollout([_rollout_episode(logits)], gamma=0.9, keys=keys)
    (params,) = out.storage.distribution_params
    assert tuple(params.shape) == shape == (2, 1, *np.array(logits).shape)


def test_storable_extra_of_empty_lists() -> None:
    assert storable_extra("k", [[], []], steps=3).shape == (3, 2, 0)
    assert storable_extra("k", [[], []], steps=3).dtype == np.float64
    with pytest.raises(ValueError, match="'k' holds empty lists per step"):
        storable_extra("k", [[], []])  # no step count: nothing says T
    with pytest.raises(ValueError, match="holds empty lists per step"):  # np.array: ragged
        storable_extra("k", [[], np.zeros(3)], steps=3)


# --------------------------------------------------------- 4. around the removed code
def test_exact_sum_of_ints_past_int64() -> None:
    # 2**63 beside a negative int: float64 would round both and give 0.
    assert reward_sum([2**63, -(2**63) + 1]) == 1.0
    assert reward_sum([2**63, -1]) == float(2**63 - 1)
    ep = _episode([0, 1, 2])
    ep.set_rewards(new_data=[2**63, -(2**63) + 1])
    assert ep.get_return() == 1.0


@pytest.mark.parametrize(
    "rewards, total",
    [
        (np.array([True, True, False]), 2.0),
        (np.array([[1], [2]], np.int32), 3.0),
        (np.array([1.5, 2.5], np.longdouble), 4.0),
        (np.array([2**62, 2**62], np.uint64), 2.0**63),
    ],
    ids=["bools", "int-rows", "longdouble", "uint64"],
)
def test_reward_sum_of_numpy_numbers(rewards, total) -> None:
    got = reward_sum(rewards)
    assert got == total and type(got) is float


def test_reward_sum_refuses_complex_and_text() -> None:
    with pytest.raises(TypeError, match="complex"):
        reward_sum(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="got 'a' of type str"):
        reward_sum([1.0, "a"])


def test_write_block_and_add_transition_name_fields_the_storage_lacks() -> None:
    st = RolloutStorage("rl", 2, 3, (4,), (1,))
    snap = {k: v.clone() for k, v in st.tensors.items()}
    for field, value in [
        ("privileged_observations", torch.ones(3, 2, 4)),
        ("privileged_actions", torch.ones(3, 2, 1)),
    ]:
        with pytest.raises(ValueError, match=rf"unknown fields \['{field}'\]"):
            st.write_block(0, rewards=torch.ones(3, 2), **{field: value})
        assert all(torch.equal(snap[k], st.tensors[k]) for k in snap) and st.step == 0
    # add_transition skips what the storage does not hold, as rsl_rl's does.
    tr = RolloutStorage.Transition(rewards=torch.ones(2), privileged_actions=torch.ones(2, 1))
    st.add_transition(tr)
    assert st.step == 1 and st.rewards[0, :, 0].tolist() == [1.0, 1.0]


def test_space_from_dict_names_a_ragged_int_field() -> None:
    d = {"type": "MultiDiscrete", "nvec": [np.zeros((2, 2), int), np.zeros((2, 3), int)]}
    with pytest.raises(ValueError, match=r"space<MultiDiscrete>: field 'nvec' is ragged"):
        space_from_dict(d)


# ------------------------------------------------------------ 5. untested branches
def _rl_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[0, 0],
        rewards=[1.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5] * 2, "action_logp": [-0.7] * 2},
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"layout": "x"}, ValueError, "layout must be 'per_env' or 'per_chunk', got 'x'"),
        ({"training_type": "x"}, ValueError, "training_type must be 'rl' or 'distillation'"),
        ({"training_type": "distillation"}, ValueError, "privileged_actions"),
    ],
    ids=["layout", "training-type", "distillation-without-teacher-key"],
)
def test_converter_refuses_bad_arguments(kwargs, error, message) -> None:
    with pytest.raises(error) as err:
        episodes_to_rollout([_rl_episode()], gamma=0.9, **kwargs)
    assert message in str(err.value)


NAN = float("nan")
TENSOR_PAIRS = {
    "equal": (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), True),
    "differ": (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]), False),
    "nan": (torch.tensor([NAN]), torch.tensor([NAN]), True),
    "nan-vs-number": (torch.tensor([NAN]), torch.tensor([1.0]), False),
    "bfloat16": (
        torch.tensor([1.0], dtype=torch.bfloat16),
        torch.tensor([1.0], dtype=torch.bfloat16),
        True,
    ),
    "bfloat16-nan": (
        torch.tensor([NAN], dtype=torch.bfloat16),
        torch.tensor([NAN], dtype=torch.bfloat16),
        True,
    ),
    "complex-nan": (torch.tensor([complex(1, NAN)]), torch.tensor([complex(1, NAN)]), True),
    "complex-differ": (torch.tensor([complex(1, NAN)]), torch.tensor([complex(2, NAN)]), False),
    "requires-grad": (torch.tensor([1.0], requires_grad=True), torch.tensor([1.0]), True),
    "dtype": (
        torch.tensor([1.0], dtype=torch.float32),
        torch.tensor([1.0], dtype=torch.float64),
        False,
    ),
    "shape": (torch.zeros(2), torch.zeros(3), False),
}


@pytest.mark.parametrize("case", list(TENSOR_PAIRS))
def test_data_equal_of_tensors_and_of_episodes_holding_them(case) -> None:
    a, b, equal = TENSOR_PAIRS[case]
    assert data_equal(a, b) is equal
    first = SingleAgentEpisode("x", observations=[a, a], actions=[0], rewards=[1.0])
    second = SingleAgentEpisode("x", observations=[b, b], actions=[0], rewards=[1.0])
    second.t_started = first.t_started
    assert (first == second) is equal


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("observations", {}, "malformed column observations"),
        ("observations", 5, "a buffer state must be a dict, got int"),
        ("extra_model_outputs", [], "extra_model_outputs must be a dict of buffer states"),
        ("extra_model_outputs", {"a": 3}, "malformed column extra_model_outputs['a']"),
        ("custom_data", [], "custom_data must be a dict, got list"),
    ],
)
def test_from_state_refuses_a_malformed_state(key, value, message) -> None:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[0.0, 1.0],
        extra_model_outputs={"a": [1, 2]},
        len_lookback_buffer=0,
    )
    state = dict(ep.get_state())
    state[key] = value
    with pytest.raises(ValueError) as err:
        SingleAgentEpisode.from_state(state)
    assert message in str(err.value)


def test_slice_and_concat_refusals_leave_the_episode() -> None:
    ep = _episode([0, 1, 2])
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="len_lookback_buffer must be >= 0, got -1"):
        ep.slice(slice(0, 1), len_lookback_buffer=-1)
    with pytest.raises(TypeError, match="can only concat a SingleAgentEpisode, got int"):
        ep.concat_episode(3)
    assert ep == before


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"dtype": 5}, ValueError, "field 'dtype' must be a string, got 5"),
        ({"nvec": [2, 0]}, ValueError, "every entry of 'nvec' must be positive"),
        ({"nvec": [2, -1]}, ValueError, "every entry of 'nvec' must be positive"),
        ({"nvec": [200], "dtype": "int8", "start": [-100]}, ValueError, "sizes outside int8"),
        ({"nvec": [300], "dtype": "uint8"}, ValueError, "values outside uint8"),
        ({"nvec": [[2, 3], [4]]}, ValueError, "field 'nvec' must hold only ints"),
    ],
)
def test_space_from_dict_refuses_multi_discrete_fields(change, error, message) -> None:
    d = dict(space_to_dict(gym.spaces.MultiDiscrete([2, 3])))
    d.pop("start", None)
    d.update(change)
    with pytest.raises(error) as err:
        space_from_dict(d)
    assert message in str(err.value)


@pytest.mark.parametrize("key", [True, 1.5])
def test_space_from_dict_refuses_a_dict_key_of_another_type(key) -> None:
    d = space_to_dict(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))
    d = {**d, "spaces": [[key, d["spaces"][0][1]]]}
    with pytest.raises(ValueError, match=rf"key {key!r} must be a str or int"):
        space_from_dict(d)


def test_space_to_dict_refuses_a_tuple_key() -> None:
    with pytest.raises(TypeError, match=r"Dict space key \(1, 2\) is not a str or int"):
        space_to_dict(gym.spaces.Dict({(1, 2): gym.spaces.Discrete(2)}))


@pytest.mark.parametrize(
    "value, space",
    [
        (np.array([5, 1]), gym.spaces.Discrete(3)),
        (5, gym.spaces.Discrete(3)),
        (np.array([-2]), gym.spaces.Discrete(3, start=-1)),
    ],
)
def test_one_hot_refuses_values_out_of_range(value, space) -> None:
    with pytest.raises(ValueError, match=r"one_hot: value out of range for Discrete\(3"):
        one_hot(value, space)


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "connector, column, obs, rewards",
    [
        (FlattenObservations, "FlattenObservations' 'obs' column", [10**400, 1, 2], [0.0, 0.0]),
        (
            lambda: PrevActionsPrevRewards(one_hot_discrete=False),
            "PrevActionsPrevRewards' 'prev_n_rewards' column",
            [0, 1, 2],
            [10**400, 1.0],
        ),
        (
            lambda: AddLearnerColumns(["rewards"]),
            "AddLearnerColumns' 'rewards' column",
            [0, 1, 2],
            [10**400, 1.0],
        ),
    ],
    ids=["obs", "prev-rewards", "learner-rewards"],
)
def test_float32_columns_refuse_a_value_past_float32(connector, column, obs, rewards, numpy):
    ep = SingleAgentEpisode(
        observations=obs, actions=[0, 0], rewards=rewards, len_lookback_buffer=0
    )
    if numpy:
        try:
            ep.to_numpy()
        except ValueError:
            pytest.skip("a numpy column of rewards holds no int beyond int64")
    batch = {"kept": 1}
    with pytest.raises(Float32RangeError) as err:
        connector()([ep], batch)
    assert str(err.value).startswith(column) and "beyond float32's range" in str(err.value)
    assert batch == {"kept": 1}


class _SameStepEnv(gym.vector.VectorEnv):
    """Two sub-envs, same-step autoreset; sub-env 0 ends every second step."""

    def __init__(self, final_size: int):
        self.num_envs = 2
        self.final_size = final_size
        self.single_observation_space = gym.spaces.Box(-1, 1, (3,))
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.t = 0

    def reset(self, seed=None, options=None):
        self.t = 0
        return np.zeros((2, 3), np.float32), {}

    def step(self, actions):
        self.t += 1
        done = np.array([self.t % 2 == 0, False])
        infos = {}
        if done.any():
            final = np.empty(2, object)
            final[0], final[1] = np.zeros(self.final_size, np.float32), None
            infos = {"final_obs": final, "_final_obs": done, "final_info": {}, "_final_info": done}
        return np.zeros((2, 3), np.float32), np.ones(2), done, np.zeros(2, bool), infos


def test_runner_refuses_same_step_final_observations_of_another_shape() -> None:
    def policy(obs):
        return np.zeros(len(obs), np.int64), {}

    with pytest.raises(ValueError, match=r"final observations: got items of shape \(4,\), "):
        EnvRunner(_SameStepEnv(4), policy, seed=0).sample(3)
    assert len(EnvRunner(_SameStepEnv(3), policy, seed=0).sample(3)) == 3


def test_circular_buffer_refuses_a_wrong_shape_leaving_it() -> None:
    buffer = CircularBuffer(3, 2)
    buffer.append(torch.ones(2, 4))
    before, length = buffer[0].clone(), buffer.current_length.clone()
    with pytest.raises(ValueError, match=r"data shape \(2, 5\) != \(2, 4\)"):
        buffer.append(torch.ones(2, 5))
    assert torch.equal(buffer[0], before) and torch.equal(buffer.current_length, length)


def _replay_episode(id_, steps: int = 3) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        id_,
        observations=[np.full(2, i, np.float32) for i in range(steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
    )
    ep.to_numpy()
    return ep


def test_prioritized_update_of_nothing_and_priorities_of_evicted_items() -> None:
    buffer = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buffer.add([_replay_episode("a"), _replay_episode("b")])
    state = buffer.get_state()
    buffer.update_priorities(np.array([]), np.array([], np.int64))
    buffer.update_priorities([], [])
    assert str(buffer.get_state()) == str(state)
    small = PrioritizedEpisodeReplayBuffer(3, seed=0)
    small.add([_replay_episode("a")])
    sampled = small.sample(1)
    small.add([_replay_episode("b")])  # evicts "a"
    with pytest.raises(KeyError, match="some indices are no longer stored"):
        small.get_priorities(sampled["indices"])


def test_replay_state_with_a_wrong_step_count_is_refused() -> None:
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add([_replay_episode("a"), _replay_episode("b")])
    state = buffer.get_state()
    state["num_timesteps"] = 99
    fresh = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match="num_timesteps is 99 for 6 stored steps"):
        fresh.set_state(state)
    assert fresh.get_num_timesteps() == 0 and fresh.get_episode_ids() == []

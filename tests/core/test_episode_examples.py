"""SingleAgentEpisode behaviour (docs/contract.md §4-§7) as named cases in list and numpy mode."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SampleBatch, SingleAgentEpisode
from tests.core._helpers import MODES, assert_same

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT_SPACE = gym.spaces.Discrete(3)


def obs(i):
    return np.full(2, i, np.float32)


def recorded(n, *, mode="list", extra=True, terminated=False, truncated=False):
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(obs(0), {"reset": True})
    if mode == "numpy":
        ep.to_numpy()
    for i in range(1, n + 1):
        last = i == n
        ep.add_env_step(
            obs(i),
            i % 3,
            float(i),
            {"step": i},
            terminated=terminated and last,
            truncated=truncated and last,
            extra_model_outputs={"vf": float(i) / 10, "logp": -float(i)} if extra else None,
        )
    return ep


CONSTRUCTOR_CASES = [
    ("explicit_lookback", dict(len_lookback_buffer=10), 89, 0, 89),
    ("auto_lookback", dict(len_lookback_buffer="auto"), 0, 0, 0),
    ("lookback_larger_than_data", dict(len_lookback_buffer=500), 0, 0, 0),
    ("t_started", dict(len_lookback_buffer=0, t_started=7), 99, 7, 106),
]


@pytest.mark.parametrize(
    "name,kwargs,length,t_started,t", CONSTRUCTOR_CASES, ids=[c[0] for c in CONSTRUCTOR_CASES]
)
def test_constructor_lookback(name, kwargs, length, t_started, t):
    ep = SingleAgentEpisode(
        observations=list(range(100)), actions=list(range(99)), rewards=[1.0] * 99, **kwargs
    )
    assert (len(ep), ep.t_started, ep.t) == (length, t_started, t)
    assert len(ep.get_infos()) == len(ep.get_observations())
    ep.validate()


def test_constructor_defaults():
    ep = SingleAgentEpisode()
    assert len(ep.id_) == 32 and ep.t == ep.t_started == 0
    assert not ep.is_reset and not ep.is_done and not ep.is_numpy
    assert ep.rewards.space == gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
    assert ep.get_duration_s() == 0.0 and ep.custom_data == {}


def test_constructor_accepts_buffers_and_ids():
    from episodes import InfiniteLookbackBuffer

    ep = SingleAgentEpisode(
        "abc",
        observations=InfiniteLookbackBuffer([0, 1, 2], lookback=1),
        actions=InfiniteLookbackBuffer([0, 1], lookback=1),
        rewards=InfiniteLookbackBuffer([0.0, 1.0], lookback=1),
        infos=InfiniteLookbackBuffer([{}, {}, {}], lookback=1),
        agent_id="a0",
        module_id="m",
        multi_agent_episode_id="ma",
    )
    assert ep.id_ == "abc" and len(ep) == 1 and (ep.agent_id, ep.module_id) == ("a0", "m")


@pytest.mark.parametrize("mode", MODES)
def test_record_and_read(mode):
    ep = recorded(5, mode=mode)
    assert len(ep) == 5 and ep.t == 5 and ep.env_steps() == ep.agent_steps() == 5
    assert_same(ep.get_observations(-1), obs(5))
    assert_same(ep.get_actions(), [1, 2, 0, 1, 2])
    assert_same(ep.get_rewards(), [1.0, 2.0, 3.0, 4.0, 5.0])
    assert ep.get_infos(0) == {"reset": True} and ep.get_infos(-1) == {"step": 5}
    assert_same(ep.get_extra_model_outputs("vf"), [0.1, 0.2, 0.3, 0.4, 0.5])
    assert ep.get_return() == 15.0
    assert ep.get_duration_s() >= 0.0
    assert ep.is_numpy == (mode == "numpy")
    ep.validate()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "column,getter,expected",
    [
        ("observations", "get_observations", lambda i: obs(i)),
        ("actions", "get_actions", lambda i: i % 3),
        ("rewards", "get_rewards", lambda i: float(i)),
        ("infos", "get_infos", lambda i: {"step": i}),
    ],
    ids=["observations", "actions", "rewards", "infos"],
)
def test_lookback_on_every_column(column, getter, expected, mode):
    ep = recorded(6, mode=mode)
    successor = ep.cut(len_lookback_buffer=3)
    read = getattr(successor, getter)
    # The successor's ts=0 observation is o_6, so its ts=-1 is o_5; its ts=-1 action is a_6.
    last_before = 6 if column in ("actions", "rewards") else 5
    assert_same(read(-1, neg_index_as_lookback=True), expected(last_before))
    assert_same(read(-3, neg_index_as_lookback=True), expected(last_before - 2))
    with pytest.raises(IndexError):
        read(-4, neg_index_as_lookback=True)


@pytest.mark.parametrize("mode", MODES)
def test_extra_model_outputs_lookback(mode):
    ep = recorded(6, mode=mode)
    successor = ep.cut(len_lookback_buffer=2)
    assert_same(successor.get_extra_model_outputs("vf", -1, neg_index_as_lookback=True), 0.6)
    assert_same(
        successor.get_extra_model_outputs("vf", slice(-3, 0), neg_index_as_lookback=True, fill=0.0),
        [0.0, 0.5, 0.6],
    )


@pytest.mark.parametrize("mode", MODES)
def test_connector_idiom(mode):
    ep = recorded(6, mode=mode)
    windows = [
        ep.get_actions(
            slice(ts - 4, ts), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True
        )
        for ts in range(len(ep))
    ]
    assert_same(windows[0], np.zeros((4, 3)))
    assert_same(windows[2], [[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 1]])


@pytest.mark.parametrize("mode", MODES)
def test_cut(mode):
    ep = recorded(6, mode=mode)
    ep.custom_data["k"] = [1]
    nxt = ep.cut(len_lookback_buffer=2)
    assert (nxt.id_, nxt.t_started, nxt.t, len(nxt), nxt.is_done) == (ep.id_, 6, 6, 0, False)
    assert_same(nxt.get_observations(), [obs(6)])
    assert nxt.observations.lookback == 2 and nxt.actions.lookback == 2
    assert nxt.is_numpy == ep.is_numpy and nxt.custom_data == {"k": [1]}
    nxt.custom_data["k"].append(2)
    nxt.add_env_step(obs(7), 1, 7.0, extra_model_outputs={"vf": 0.7, "logp": -7.0})
    assert len(ep) == 6 and ep.custom_data == {"k": [1]}
    assert_same(ep.get_observations(-1), obs(6))


def test_cut_lookback_is_clamped():
    ep = recorded(2)
    nxt = ep.cut(len_lookback_buffer=10)
    assert nxt.actions.lookback == 2 and nxt.observations.lookback == 2


@pytest.mark.parametrize("mode", MODES)
def test_slice_example(mode):
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3, 4],
        actions=[1, 2, 3, 4],
        rewards=[1.0, 2.0, 3.0, 4.0],
        len_lookback_buffer=0,
        terminated=True,
    )
    if mode == "numpy":
        ep.to_numpy()
    part = ep[1:3]
    assert_same(part.get_observations(), [1, 2, 3])
    assert_same(part.get_actions(), [2, 3])
    assert (part.t_started, part.t, part.is_terminated) == (1, 3, False)
    tail = ep[2:]
    assert tail.is_terminated and tail.t == 4
    assert_same(ep[-2:].get_actions(), [3, 4])


@pytest.mark.parametrize("mode", MODES)
def test_slice_takes_lookback_from_before(mode):
    ep = recorded(8, mode=mode)
    part = ep.slice(slice(3, 5), len_lookback_buffer=2)
    assert_same(part.get_actions(slice(-2, 0), neg_index_as_lookback=True), [2, 0])
    clamped = ep.slice(slice(1, 5), len_lookback_buffer=5)
    assert clamped.actions.lookback == 1
    with pytest.raises(ValueError, match="step"):
        ep[0:4:2]


@pytest.mark.parametrize("mode", MODES)
def test_concat(mode):
    ep = recorded(4, mode=mode)
    ep.custom_data.update(a=1, b=1)
    nxt = ep.cut(len_lookback_buffer=1)
    nxt.custom_data["b"] = 2
    nxt.add_env_step(obs(5), 2, 5.0, extra_model_outputs={"vf": 0.5, "logp": -5.0}, truncated=True)
    ep.concat_episode(nxt)
    assert (ep.t, len(ep), ep.is_truncated) == (5, 5, True)
    assert_same(ep.get_actions(), [1, 2, 0, 1, 2])
    assert ep.custom_data == {"a": 1, "b": 2}
    assert_same(ep.get_extra_model_outputs("logp"), [-1.0, -2.0, -3.0, -4.0, -5.0])
    ep.validate()


@pytest.mark.parametrize("mode", MODES)
def test_to_numpy_keeps_values(mode):
    ep = recorded(5)
    before = {name: getattr(ep, f"get_{name}")() for name in ("observations", "actions", "rewards")}
    ep.to_numpy()
    for name, value in before.items():
        assert_same(getattr(ep, f"get_{name}")(), value)
    assert isinstance(ep.get_infos(), list)
    ep.add_env_step(obs(6), 0, 6.0, extra_model_outputs={"vf": 0.6, "logp": -6.0})
    assert ep.get_observations().shape == (7, 2)


def test_to_numpy_on_reset_only_episode():
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(obs(0))
    ep.to_numpy()
    assert ep.is_numpy and ep.actions.finalized
    ep.add_env_step(obs(1), 1, 1.0)
    assert ep.get_actions().dtype == np.int64 and ep.get_rewards().dtype == np.float64


def test_to_numpy_keeps_tuples():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    ep = SingleAgentEpisode(observation_space=space)
    ep.add_env_reset((0, 1))
    ep.add_env_step((1, 1), 0, 0.0)
    ep.to_numpy()
    assert isinstance(ep.get_observations(), tuple)


@pytest.mark.parametrize("mode", MODES)
def test_data_dict(mode):
    ep = recorded(3, mode=mode, terminated=True)
    data = ep.get_data_dict()
    assert_same(data["obs"], [obs(0), obs(1), obs(2)])
    assert_same(data["terminateds"], [False, False, True])
    assert_same(data["truncateds"], [False, False, False])
    assert_same(data["t"], [0, 1, 2])
    assert list(data["eps_id"]) == [ep.id_] * 3
    assert len(data["infos"]) == 3 and data["infos"][0] == {"reset": True}
    assert_same(data["vf"], [0.1, 0.2, 0.3])
    batch = ep.get_sample_batch()
    assert isinstance(batch, SampleBatch) and len(batch) == 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("container", [list, tuple])
def test_a_sample_batch_counts_steps_of_tuple_observations(mode, container):
    # Recorded as lists, a numpy'd Tuple column is a list of leaf arrays: not 2 rows.
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))
    ep = SingleAgentEpisode(observation_space=space)
    ep.add_env_reset(container([0, np.zeros(2, np.float32)]))
    for _ in range(5):
        ep.add_env_step(container([1, np.zeros(2, np.float32)]), 0, 1.0)
    if mode == "numpy":
        ep.to_numpy()
    assert len(ep.get_sample_batch()) == ep.get_sample_batch().count == 5


def test_data_dict_of_empty_episode_has_no_rows():
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    data = ep.get_data_dict()
    assert all(len(data[k]) == 0 for k in ("obs", "actions", "terminateds", "t"))


@pytest.mark.parametrize("mode", MODES)
def test_state_round_trip_through_pickle(mode):
    ep = recorded(4, mode=mode)
    ep.custom_data["note"] = {"x": np.arange(3)}
    state = pickle.loads(pickle.dumps(ep.get_state()))
    again = SingleAgentEpisode.from_state(state)
    assert again == ep
    assert again.observation_space == OBS_SPACE and again.is_numpy == ep.is_numpy
    assert again.get_duration_s() == ep.get_duration_s()


@pytest.mark.parametrize("mode", MODES)
def test_list_structured_items_survive_state_and_disk(mode, tmp_path):
    # Numpy'd, a column of list items is a *list* of arrays: it must not be read back as a
    # list-mode column.
    from episodes.io import EpisodeWriter, read_episodes

    ep = SingleAgentEpisode("ep", observations=[obs(0)], len_lookback_buffer=0)
    for i in range(3):
        ep.add_env_step(obs(i + 1), 0, 1.0, extra_model_outputs={"pair": [float(i), i]})
    if mode == "numpy":
        ep.to_numpy()
        assert isinstance(ep.extra_model_outputs["pair"].data, list)  # [floats, ints]
    again = SingleAgentEpisode.from_state(pickle.loads(pickle.dumps(ep.get_state())))
    assert again == ep and again.is_numpy == ep.is_numpy
    with EpisodeWriter(tmp_path / "ds") as writer:
        writer.write(ep)
    (loaded,) = read_episodes(tmp_path / "ds", verify=True)
    assert loaded == ep and loaded.is_numpy == ep.is_numpy
    assert_same(loaded.get_extra_model_outputs("pair", 1), [1.0, 1])


@pytest.mark.parametrize("mode", MODES)
def test_deepcopy_len_repr(mode):
    ep = recorded(3, mode=mode)
    clone = copy.deepcopy(ep)
    assert clone == ep
    clone.add_env_step(obs(4), 0, 1.0, extra_model_outputs={"vf": 0.0, "logp": 0.0})
    assert len(ep) == 3 and len(clone) == 4
    text = repr(ep)
    assert "len=3" in text and ep.id_ in text and "done=False" in text


def test_setters():
    ep = recorded(3)
    ep.set_observations(new_data=obs(9), at_indices=-1)
    ep.set_actions(new_data=[0, 0], at_indices=slice(0, 2))
    ep.set_rewards(new_data=[9.0, 9.0, 9.0])
    ep.set_extra_model_outputs(key="vf", new_data=1.0, at_indices=0)
    assert_same(ep.get_observations(-1), obs(9))
    assert_same(ep.get_actions(), [0, 0, 0])
    assert ep.get_return() == 27.0
    assert ep.get_extra_model_outputs("vf", 0) == 1.0


def test_is_reset_and_done_flags():
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    assert ep.is_reset and not ep.is_done
    ep.add_env_step(1, 0, 0.0, terminated=True)
    assert ep.is_done and ep.is_terminated and not ep.is_truncated


def _ready(items, lookback=1):
    return InfiniteLookbackBuffer(list(items), lookback=lookback)


CONSTRUCTOR_INPUTS = {
    "lists": lambda: {"observations": [0.0, 1.0, 2.0], "actions": [0, 1], "rewards": [1.0, 2.0]},
    "tuples": lambda: {"observations": (0.0, 1.0, 2.0), "actions": (0, 1), "rewards": (1.0, 2.0)},
    "arrays": lambda: {
        "observations": np.array([0.0, 1.0, 2.0]),
        "actions": np.array([0, 1]),
        "rewards": np.array([1.0, 2.0]),
    },
    "ready_buffers_without_infos": lambda: {
        "observations": _ready([0.0, 1.0, 2.0]),
        "actions": _ready([0, 1]),
        "rewards": _ready([1.0, 2.0]),
    },
    "ready_buffers_with_infos": lambda: {
        "observations": _ready([0.0, 1.0, 2.0]),
        "infos": _ready([{}, {}, {}]),
        "actions": _ready([0, 1]),
        "rewards": _ready([1.0, 2.0]),
    },
}


@pytest.mark.parametrize("inputs", CONSTRUCTOR_INPUTS.values(), ids=CONSTRUCTOR_INPUTS.keys())
def test_constructor_takes_any_sequence_or_ready_buffers(inputs):
    """Ready buffers keep their own lookback (here 1, as len_lookback_buffer=1 gives lists)."""
    ep = SingleAgentEpisode("a", len_lookback_buffer=1, **inputs())
    want = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=1
    )
    assert ep == want
    assert len(ep) == 1 and ep.get_observations(-1, neg_index_as_lookback=True) == 0.0
    assert ep.get_infos() == [{}, {}]


@pytest.mark.parametrize("mode", MODES)
def test_reads_return_the_stored_data_itself(mode):
    """Contract §3.1: reads hand out the stored data (numpy views, list items), as RLlib's
    do; a copy is what a caller must take before changing a result in place."""
    ep = SingleAgentEpisode(
        observations=[np.full(2, i, np.float32) for i in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        len_lookback_buffer=0,
    )
    if mode == "numpy":
        ep.to_numpy()
    first = ep.get_observations(0)
    first[0] = 99.0
    assert ep.get_observations(0)[0] == 99.0
    kept = ep.get_observations(slice(0, 2))
    copied = np.array(kept, copy=True)
    copied[1][0] = -1.0
    assert ep.get_observations(1)[0] == 1.0


BOX2 = gym.spaces.Box(-1, 1, (2,), np.float32)
LIST_ACTIONS = [
    ("Box", BOX2, [0.5, 0.25]),
    ("MultiDiscrete", gym.spaces.MultiDiscrete([3, 3]), [1, 2]),
    ("Dict with a Box", gym.spaces.Dict({"x": BOX2}), {"x": [0.5, 0.25]}),
]


@pytest.mark.parametrize(
    ("space", "action"), [c[1:] for c in LIST_ACTIONS], ids=[c[0] for c in LIST_ACTIONS]
)
def test_numpy_before_the_first_step_stores_list_actions_as_rows(space, action):
    # The empty column took the list as structure: one array per component.
    after = SingleAgentEpisode(action_space=space)
    after.add_env_reset(0)
    after.add_env_step(1, action, 1.0)
    after.to_numpy()
    before = SingleAgentEpisode(action_space=space)
    before.add_env_reset(0)
    before.to_numpy()
    before.add_env_step(1, action, 1.0)
    from episodes.structs import data_equal, flatten

    assert all(leaf.shape == (1, 2) for leaf in flatten(before.actions.data)[0])
    assert data_equal(before.actions.data, after.actions.data)


@pytest.mark.parametrize("reward", [None, "1.0"], ids=repr)
def test_repr_of_an_episode_whose_rewards_do_not_sum(reward):
    """repr raised TypeError on rewards a list-mode episode accepts."""
    ep = SingleAgentEpisode("a")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, reward)
    assert repr(ep) == "SingleAgentEpisode(len=1, done=False, return=?, id_=a)"


def test_long_list_store_reprs_are_short():
    from episodes.buffer.list_store import ListStore

    assert repr(ListStore([1, 2])) == "ListStore([1, 2])"
    assert repr(ListStore(list(range(100_000)))) == "ListStore(100000 items)"

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tree

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    ShortLookbackWarning,
)

OBS_SPACE = gym.spaces.Box(-100, 100, (2,), np.float32)
ACT_SPACE = gym.spaces.Discrete(3)


def obs(t):
    return np.array([t, 10 * t], dtype=np.float32)


def act(t):
    return t % 3


def rew(t):
    return t + 0.5


def record(steps, *, cut_at=None, lookback=4, terminated=False, numpy=False):
    """An episode of ``steps`` steps; with ``cut_at``, also the chunk after a cut there."""
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(obs(0), {"t": 0})
    chunks = [ep]
    for t in range(steps):
        if cut_at is not None and t == cut_at:
            chunks.append(chunks[-1].cut(len_lookback_buffer=lookback))
        chunks[-1].add_env_step(
            obs(t + 1),
            act(t),
            rew(t),
            {"t": t + 1},
            terminated=terminated and t == steps - 1,
            extra_model_outputs={"vf": np.float32(t / 10)},
        )
    if numpy:
        for chunk in chunks:
            chunk.to_numpy()
    return chunks


def one_hot(a, n=3):
    out = np.zeros(n, np.float32)
    out[a] = 1
    return out


ZERO = np.zeros(3, np.float32)


@pytest.mark.parametrize("numpy", [False, True])
def test_prev_actions_rewards_hand_made(numpy):
    (ep,) = record(3, numpy=numpy)
    out = PrevActionsPrevRewards(2, 3)([ep], {})
    expected_actions = np.array(
        [[ZERO, ZERO], [ZERO, one_hot(0)], [one_hot(0), one_hot(1)]], dtype=np.float32
    )
    np.testing.assert_array_equal(out["prev_n_actions"], expected_actions)
    assert out["prev_n_actions"].dtype == np.float32
    np.testing.assert_array_equal(out["prev_n_rewards"], [[0, 0, 0], [0, 0, 0.5], [0, 0.5, 1.5]])
    plain = PrevActionsPrevRewards(1, 0, one_hot_discrete=False, fill=-1)([ep], {})
    np.testing.assert_array_equal(plain["prev_n_actions"], [[-1], [0], [1]])
    assert "prev_n_rewards" not in plain


@pytest.mark.parametrize("numpy", [False, True])
def test_frame_stack_hand_made(numpy):
    (ep,) = record(3, numpy=numpy)
    out = FrameStack(3)([ep], {})
    z = np.zeros(2, np.float32)
    expected = np.array([[z, z, obs(0)], [z, obs(0), obs(1)], [obs(0), obs(1), obs(2)]])
    np.testing.assert_array_equal(out["obs"], expected)
    assert out["obs"].shape == (3, 3, 2) and out["obs"].dtype == np.float32
    flat = FrameStack(2, flatten=True, out_key="stacked")([ep], {})
    np.testing.assert_array_equal(flat["stacked"], expected[:, 1:].reshape(3, 4))


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("cut_at", [1, 4, 6])
def test_rows_across_a_cut_equal_uncut(numpy, cut_at):
    (full,) = record(7, numpy=numpy)
    first, second = record(7, cut_at=cut_at, lookback=4, numpy=numpy)
    pipe = ConnectorPipeline([FrameStack(4), PrevActionsPrevRewards(4, 4), AddLearnerColumns()])
    whole = pipe([full])
    parts = pipe([second])
    chunked = pipe([first, second])
    for key in ("obs", "prev_n_actions", "prev_n_rewards", "actions", "rewards", "t", "vf"):
        np.testing.assert_array_equal(parts[key], whole[key][cut_at:], err_msg=key)
        np.testing.assert_array_equal(chunked[key], whole[key], err_msg=key)


@pytest.mark.parametrize("numpy", [False, True])
def test_short_lookback_fills_beyond_it(numpy):
    _, second = record(5, cut_at=3, lookback=1, numpy=numpy)
    # The chunk starts at t=3 with one step of lookback: the filled items existed.
    with pytest.warns(ShortLookbackWarning, match=r"keeps 1 step of \w+ lookback"):
        out = ConnectorPipeline([FrameStack(3), PrevActionsPrevRewards(2, 2)])([second], {})
    z = np.zeros(2, np.float32)
    np.testing.assert_array_equal(out["obs"][0], [z, obs(2), obs(3)])
    np.testing.assert_array_equal(out["prev_n_actions"][0], [ZERO, one_hot(act(2))])
    np.testing.assert_array_equal(out["prev_n_rewards"][0], [0, rew(2)])


@pytest.mark.parametrize("numpy", [False, True])
def test_inference_rows(numpy):
    _, second = record(5, cut_at=3, lookback=4, numpy=numpy)
    out = ConnectorPipeline(
        [FrameStack(2, inference=True), PrevActionsPrevRewards(3, 1, inference=True)]
    )([second], {})
    np.testing.assert_array_equal(out["obs"], [[obs(4), obs(5)]])
    np.testing.assert_array_equal(
        out["prev_n_actions"], [[one_hot(act(2)), one_hot(act(3)), one_hot(act(4))]]
    )
    np.testing.assert_array_equal(out["prev_n_rewards"], [[rew(4)]])
    flat = FlattenObservations(inference=True)([second], {})
    np.testing.assert_array_equal(flat["obs"], [obs(5)])


@pytest.mark.parametrize("numpy", [False, True])
def test_add_learner_columns_hand_made(numpy):
    (done,) = record(2, terminated=True, numpy=numpy)
    _, ongoing = record(3, cut_at=1, numpy=numpy)
    out = AddLearnerColumns(
        ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id", "infos")
    )([done, ongoing], {})
    np.testing.assert_array_equal(out["obs"], [obs(0), obs(1), obs(1), obs(2)])
    np.testing.assert_array_equal(out["actions"], [0, 1, 1, 2])
    np.testing.assert_array_equal(out["rewards"], np.float32([0.5, 1.5, 1.5, 2.5]))
    assert out["rewards"].dtype == np.float32
    np.testing.assert_array_equal(out["terminateds"], [False, True, False, False])
    np.testing.assert_array_equal(out["truncateds"], [False] * 4)
    np.testing.assert_array_equal(out["t"], [0, 1, 1, 2])
    assert list(out["eps_id"]) == [done.id_] * 2 + [ongoing.id_] * 2
    np.testing.assert_allclose(out["vf"], np.float32([0.0, 0.1, 0.1, 0.2]))
    assert [i["t"] for i in out["infos"]] == [0, 1, 1, 2]
    kept = AddLearnerColumns(extra_model_outputs=False)([done], {"obs": "mine"})
    assert kept["obs"] == "mine" and "vf" not in kept and "infos" not in kept


@pytest.mark.parametrize("numpy", [False, True])
def test_flatten_observations_dict_space_one_hot(numpy):
    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-5, 5, (2,), np.float32), "key": gym.spaces.Discrete(3)}
    )
    ep = SingleAgentEpisode(observation_space=space, action_space=ACT_SPACE)
    items = [{"key": k, "pos": np.float32([k, -k])} for k in (2, 0, 1)]
    ep.add_env_reset(items[0])
    ep.add_env_step(items[1], 0, 0.0)
    ep.add_env_step(items[2], 0, 0.0)
    if numpy:
        ep.to_numpy()
    out = FlattenObservations()([ep], {})
    # dm-tree order: keys sorted, "key" (one-hot) before "pos".
    np.testing.assert_array_equal(out["obs"], [[0, 0, 1, 2, -2], [1, 0, 0, 0, 0]])
    stacked = FrameStack(2, flatten=True)([ep], {})
    np.testing.assert_array_equal(
        stacked["obs"], [[0, 0, 0, 0, 0, 0, 0, 1, 2, -2], [0, 0, 1, 2, -2, 1, 0, 0, 0, 0]]
    )


def test_empty_episodes_add_nothing_and_pipeline_protocol():
    ep = SingleAgentEpisode(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(obs(0))
    pipe = ConnectorPipeline([FrameStack(2)])
    pipe.append(PrevActionsPrevRewards(1, 1))
    pipe.insert(0, AddLearnerColumns())
    assert len(pipe) == 3 and isinstance(pipe[0], AddLearnerColumns)
    assert "FrameStack" in repr(pipe)
    assert pipe([ep]) == {}
    with pytest.raises(ValueError):
        FrameStack(0)
    with pytest.raises(ValueError):
        PrevActionsPrevRewards(-1, 0)


def test_add_learner_columns_keeps_only_the_extra_outputs_every_episode_has():
    def ep(extras):
        return SingleAgentEpisode(
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            extra_model_outputs=extras,
            len_lookback_buffer=0,
        )

    batch = AddLearnerColumns()(
        [ep({"vf_preds": [0.5, 0.5], "logp": [0.1, 0.2]}), ep({"logp": [0.3, 0.4]})], {}
    )
    assert "vf_preds" not in batch
    assert batch["logp"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert {len(v) for v in batch.values()} == {4}


def test_add_learner_columns_adds_an_extra_output_listed_in_columns_once():
    ep = SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={"vf_preds": [0.5, 0.6]},
        len_lookback_buffer=0,
    )
    batch = AddLearnerColumns(columns=("obs", "actions", "vf_preds"))([ep, ep], {})
    assert batch["vf_preds"].tolist() == pytest.approx([0.5, 0.6, 0.5, 0.6])


@pytest.mark.parametrize(
    "make", [lambda: FrameStack(3, fill=None), lambda: PrevActionsPrevRewards(1, 1, fill=None)]
)
def test_stacking_connectors_need_a_fill_value(make):
    with pytest.raises(ValueError, match="needs a fill value"):
        make()


@pytest.mark.parametrize(
    ("connector", "key"),
    [
        (FlattenObservations(), "obs"),
        (AddLearnerColumns(), "obs"),
        (AddLearnerColumns(), "actions"),
        (AddLearnerColumns(), "rewards"),
        (FrameStack(1), "obs"),
        (PrevActionsPrevRewards(1, 1), "prev_n_rewards"),
    ],
    ids=["flatten-obs", "learner-obs", "learner-actions", "learner-rewards", "stack-1", "prev-1"],
)
def test_a_batch_of_one_episode_owns_its_rows(connector, key):
    # With one episode the batch was a view of its arrays (an in-place edit rewrote the
    # episode), or a read-only sliding window.
    (ep,) = record(4, numpy=True)
    before = {name: np.array(column.get()) for name, column in ep.named_columns().items()}
    out = connector([ep], {})
    assert out[key].flags.writeable
    out[key][...] = 0
    for name, column in ep.named_columns().items():
        np.testing.assert_array_equal(np.asarray(column.get()), before[name])


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_a_batchs_infos_are_not_the_episodes(numpy):
    # The infos column held the episode's own dicts: a learner changing it changed the episode.
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
        infos=[{"k": [0]}, {"k": [1]}, {"k": [2]}], len_lookback_buffer=0,
    )  # fmt: skip
    if numpy:
        ep.to_numpy()
    batch = AddLearnerColumns(columns=("infos",))([ep], {})
    batch["infos"][0]["k"].append("changed")
    batch["infos"][1]["new"] = True
    assert ep.get_infos() == [{"k": [0]}, {"k": [1]}, {"k": [2]}]


def _vector_episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[np.full(2, i, np.float32) for i in range(3)],
        actions=[np.float32([1, 1]), np.float32([2, 2])], rewards=[1.0, 2.0],
        len_lookback_buffer=0,
    )  # fmt: skip
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "connector",
    [
        FrameStack(2),  # a scalar fill for spaceless vector observations
        # ... and actions (raw: one-hot needs a space these episodes lack)
        PrevActionsPrevRewards(2, 0, one_hot_discrete=False),
        PrevActionsPrevRewards(2, 2, fill=np.float32([5, 6]), one_hot_discrete=False),
    ],
    ids=["frame stack", "prev actions", "action-shaped fill for rewards"],
)
def test_a_fill_that_does_not_fit_is_named_in_both_modes(connector, numpy):
    # List mode failed with numpy's bare "inhomogeneous shape"; numpy mode spread an
    # action-shaped fill over the padded reward slots (5 in one row, 6 in the next).
    with pytest.raises(ValueError, match="fill="):
        connector([_vector_episode(numpy)], {})


def test_a_refused_learner_batch_is_left_as_it_was():
    # Columns were written one by one: a refusal left obs added and the rest missing.
    a = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    b = SingleAgentEpisode(
        observations=[0, 1], actions=[np.zeros(3)], rewards=[1.0], len_lookback_buffer=0
    )
    batch = {"kept": 1}
    with pytest.raises(ValueError, match="'actions' rows do not join"):
        AddLearnerColumns()([a, b], batch)
    assert batch == {"kept": 1}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "connector, key",
    [
        (FrameStack(2), "obs"),
        (PrevActionsPrevRewards(2, 0, one_hot_discrete=False), "prev_n_actions"),
    ],
    ids=["frame stack", "prev actions"],
)
def test_spaceless_rows_have_one_dtype_padded_or_not(connector, key, numpy):
    # Without a space a padded read was promoted by the 0.0 fill and an unpadded one was not:
    # a cut chunk's rows were int64 where the same rows of the whole episode were float64.
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3, 4], actions=[0, 1, 2, 0], rewards=[1.0] * 4,
        len_lookback_buffer=0,
    )  # fmt: skip
    if numpy:
        ep.to_numpy()
    later = ep.cut(len_lookback_buffer=3)
    later.add_env_step(5, 1, 1.0)
    whole = connector([ep], {})[key]
    chunk = connector([later], {})[key]
    assert whole.dtype == chunk.dtype == np.float64


def test_eps_ids_of_other_types_stay_apart():
    # 1 and True were joined into int64 [1, 1], 1 and "a" into strings.
    def ep(id_):
        return SingleAgentEpisode(
            id_, observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
        )

    assert AddLearnerColumns()([ep(1), ep(True)], {})["eps_id"].tolist() == [1, True]
    assert [type(i) for i in AddLearnerColumns()([ep(1), ep(True)], {})["eps_id"]] == [int, bool]
    assert AddLearnerColumns()([ep(1), ep("a")], {})["eps_id"].tolist() == [1, "a"]
    assert AddLearnerColumns()([ep("b"), ep("a")], {})["eps_id"].dtype.kind == "U"
    assert AddLearnerColumns()([ep("ep1"), ep("ep10")], {})["eps_id"].dtype.kind == "U"


@pytest.mark.parametrize(
    "connector, key",
    [
        (AddLearnerColumns(), "obs"),
        (AddLearnerColumns(), "actions"),
        (AddLearnerColumns(), "h"),
        (FrameStack(1), "obs"),
        (FlattenObservations(), "obs"),
    ],
    ids=["learner obs", "learner actions", "learner extra", "frame stack", "flatten"],
)
def test_list_structured_items_give_the_same_rows_in_both_modes(connector, key):
    # A numpy'd column of [x, y, z] items reads as a list of leaves, which was batched again
    # into one [leaves, T] array: the rows came out transposed.
    def make(numpy: bool) -> SingleAgentEpisode:
        ep = SingleAgentEpisode(
            observations=[[t, 10 + t, 20 + t] for t in range(4)], actions=[[0, 1], [1, 1], [0, 0]],
            rewards=[1.0] * 3, extra_model_outputs={"h": [[1, 2], [3, 4], [5, 6]]},
            len_lookback_buffer=0,
        )  # fmt: skip
        return ep.to_numpy() if numpy else ep

    want, got = connector([make(False)], {})[key], connector([make(True)], {})[key]
    want, got = tree.flatten(want), tree.flatten(got)
    assert [x.shape for x in got] == [x.shape for x in want]
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "fill, want", [(0.0, np.float64), (np.float32(0), np.float32)], ids=["python", "float32"]
)
def test_spaceless_float32_rows_follow_the_fill_padded_or_not(numpy, fill, want):
    # float32 rows stayed float32 when unpadded and became float64 when padded with 0.0.
    ep = SingleAgentEpisode(
        observations=[np.float32(t) for t in range(5)], actions=[0, 1, 2, 0],
        rewards=[1.0] * 4, len_lookback_buffer=0,
    )  # fmt: skip
    if numpy:
        ep.to_numpy()
    later = ep.cut(len_lookback_buffer=3)
    later.add_env_step(np.float32(5), 1, 1.0)
    whole = FrameStack(2, fill=fill)([ep], {})["obs"]
    chunk = FrameStack(2, fill=fill)([later], {})["obs"]
    assert whole.dtype == chunk.dtype == want

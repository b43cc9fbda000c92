"""The connector contracts pass good connectors and catch bad ones."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.testing import (
    ConnectorContract,
    ConnectorContractError,
    check_connector,
    check_deterministic,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def prev_obs(episodes, batch):
    """A good connector: each step's previous observation (lookback-aware)."""
    rows = [
        np.asarray(ep.get_observations(t - 1, neg_index_as_lookback=True, fill=0.0))
        for ep in episodes
        for t in range(len(ep))
    ]
    return {**batch, "prev_obs": np.stack(rows) if rows else np.zeros((0, 2), np.float32)}


def _episode() -> SingleAgentEpisode:
    obs = [np.full(2, i / 10, np.float32) for i in range(5)]
    return SingleAgentEpisode(
        observations=obs,
        observation_space=OBS,
        actions=[0] * 4,
        rewards=[0.0] * 4,
        len_lookback_buffer=0,
    )


def test_good_connector_passes_every_check():
    check_connector(prev_obs, observation_space=OBS, lookback=1, max_examples=10)


def test_mutating_connector_is_caught():
    def mutating(episodes, batch):
        for ep in episodes:
            ep.custom_data["seen"] = True
        return batch

    with pytest.raises(ConnectorContractError, match="mutated input episode 0"):
        check_does_not_mutate(mutating, [_episode()])


def test_in_place_write_through_a_numpy_view_is_caught():
    def scaling(episodes, batch):
        obs = episodes[0].get_observations()
        obs *= 2  # writes through the getter's view into the episode
        return {"obs": obs}

    with pytest.raises(ConnectorContractError, match="mutated"):
        check_does_not_mutate(scaling, [_episode().to_numpy()])


def test_nondeterministic_connector_is_caught():
    counter = itertools.count()

    def noisy(episodes, batch):
        return {"noise": next(counter)}

    with pytest.raises(ConnectorContractError, match="not deterministic"):
        check_deterministic(noisy, [_episode()])
    with pytest.raises(ConnectorContractError, match="not deterministic"):
        check_connector(noisy, observation_space=OBS, max_examples=5)


def test_connector_without_lookback_is_caught():
    def forgets_lookback(episodes, batch):
        ep = episodes[0]
        return {
            "prev": [
                ep.get_observations(t - 1, fill=0.0) if t else np.zeros(2, np.float32)
                for t in range(len(ep))
            ]
        }

    with pytest.raises(ConnectorContractError, match="differs from the un-cut"):
        check_lookback_across_cuts(forgets_lookback, _episode(), 2, 4, lookback=1)
    check_lookback_across_cuts(prev_obs, _episode(), 2, 4, lookback=1)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_0d_summary_value_is_not_rows(kind):
    # A 0-d array or tensor has __len__, which raises: the check crashed instead of skipping it.
    import torch

    wrap = np.asarray if kind == "numpy" else torch.tensor

    def mean_reward(episodes, batch):
        rewards = [r for ep in episodes for r in ep.get_rewards()]
        return {"mean_reward": wrap(float(np.mean(rewards)) if rewards else 0.0)}

    check_lookback_across_cuts(mean_reward, _episode(), 1, 3, lookback=1)
    with pytest.raises(ConnectorContractError, match="not one row"):
        check_lookback_across_cuts(
            mean_reward, _episode(), 1, 3, lookback=1, row_keys=["mean_reward"]
        )


def test_row_keys_make_alignment_strict():
    def per_episode(episodes, batch):
        return {"n": [len(ep) for ep in episodes]}

    check_lookback_across_cuts(per_episode, _episode(), 1, 3, lookback=1)  # skipped: not rows
    with pytest.raises(ConnectorContractError, match="not one row"):
        check_lookback_across_cuts(per_episode, _episode(), 1, 3, lookback=1, row_keys=["n"])


def test_connector_that_fails_on_reset_episodes_is_caught():
    def needs_a_step(episodes, batch):
        return {"last_action": [ep.get_actions(-1) for ep in episodes]}

    with pytest.raises(ConnectorContractError, match="just-reset"):
        check_handles_empty_and_reset(needs_a_step, OBS)


def test_list_numpy_disagreement_is_caught():
    def mode_dependent(episodes, batch):
        return {"numpy": [ep.is_numpy for ep in episodes]}

    with pytest.raises(ConnectorContractError, match="list and numpy"):
        check_list_numpy_agree(mode_dependent, [_episode()])


def test_outputs_equal_handles_tensors_and_nesting():
    import torch

    assert outputs_equal({"a": (torch.ones(2), [1, 2])}, {"a": (np.ones(2), np.array([1, 2]))})
    assert not outputs_equal({"a": 1}, {"b": 1})
    assert outputs_equal([np.nan], np.array([np.nan]))


def _objects(*items):
    out = np.empty(len(items), object)
    for i, item in enumerate(items):
        out[i] = item
    return out


# (case, a, b, equal) -- object arrays item by item, tensors inside sequences one by one.
EQUALITY = [
    (
        "object arrays of ragged arrays",
        _objects(np.zeros(2), np.ones(3)),
        _objects(np.zeros(2), np.ones(3)),
        True,
    ),
    ("one object against three", _objects(np.zeros(2)), _objects(*[np.zeros(2)] * 3), False),
    ("NaN inside an object array", _objects(np.nan, "x"), _objects(np.nan, "x"), True),
    ("an object array of other values", _objects(1.0, "x"), _objects(2.0, "x"), False),
    ("a list of bfloat16 tensors", "bf16", "bf16", True),
    ("a list of tensors needing grad", "grad", "plain", True),
]


def _maybe_tensors(value):
    import torch

    if not isinstance(value, str):
        return value
    if value == "bf16":
        return [torch.ones(2, dtype=torch.bfloat16), torch.zeros(1, dtype=torch.bfloat16)]
    if value == "grad":
        return (torch.ones(2, requires_grad=True),)
    return (torch.ones(2),)


@pytest.mark.parametrize(
    ("a", "b", "equal"), [c[1:] for c in EQUALITY], ids=[c[0] for c in EQUALITY]
)
def test_outputs_equal_of_objects_and_tensor_sequences(a, b, equal):
    a, b = _maybe_tensors(a), _maybe_tensors(b)
    assert outputs_equal(a, b) is equal
    assert outputs_equal(b, a) is equal


class TestPrevObsContract(ConnectorContract):
    observation_space = OBS
    lookback = 1

    def make_connector(self):
        return prev_obs


SHIPPED = {
    "flatten_observations": (lambda: FlattenObservations(), 0),
    "frame_stack": (lambda: FrameStack(3), 2),
    "prev_actions_prev_rewards": (lambda: PrevActionsPrevRewards(2, 2), 2),
    "add_learner_columns": (lambda: AddLearnerColumns(), 0),
}


@pytest.mark.parametrize(("make", "lookback"), SHIPPED.values(), ids=SHIPPED.keys())
def test_the_shipped_connectors_pass_check_connector(make, lookback):
    # Chunks without steps (start == stop) are drawn too: a connector leaves its empty
    # columns out there, which the cut check accepts.
    check_connector(
        make(),
        observation_space=OBS,
        action_space=gym.spaces.Discrete(3),
        lookback=lookback,
        max_examples=8,
    )


def test_one_drawn_batch_shares_one_space():
    # With no space given, each example draws one; every episode of a batch must have it
    # (a real batch never mixes observation shapes), or FlattenObservations cannot stack.
    check_connector(FlattenObservations(), max_examples=8)


def test_cut_check_accepts_a_chunk_without_steps_leaving_its_columns_out():
    ep = _episode()
    for k in range(len(ep) + 1):
        check_lookback_across_cuts(FlattenObservations(), ep, k, k, lookback=0)
    with pytest.raises(ConnectorContractError, match="keys differ"):
        check_lookback_across_cuts(
            lambda eps, batch: {} if sum(map(len, eps)) else {"x": 1}, ep, 1, 1, 0
        )


@pytest.mark.parametrize(
    ("a", "b"),
    [({"x": np.zeros(3)}, {"x": None}), ({"x": np.array(["a"])}, {"x": "a"}), ("a", b"a")],
    ids=["array_vs_none", "array_vs_str", "str_vs_bytes"],
)
def test_outputs_of_different_types_are_unequal_without_crashing(a, b):
    assert not outputs_equal(a, b) and not outputs_equal(b, a)


def test_row_keys_accept_a_chunk_without_steps_leaving_its_columns_out():
    check_lookback_across_cuts(FrameStack(3), _episode(), 1, 1, 2, row_keys=["obs"])
    with pytest.raises(ConnectorContractError, match="not in the output"):
        check_lookback_across_cuts(lambda eps, b: {}, _episode(), 1, 2, 0, row_keys=["obs"])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Sequence(gym.spaces.Discrete(3)),
        gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None),
    ],
    ids=["sequence", "graph"],
)
def test_spaces_without_a_numpy_mode_are_not_compared_across_modes(space):
    check_connector(lambda eps, batch: dict(batch), observation_space=space, max_examples=5)


class TestFlattenWithDrawnSpaces(ConnectorContract):
    """The mixin draws one space per batch too (FlattenObservations stacks one space only)."""

    lookback = 0

    def make_connector(self):
        return FlattenObservations()

"""Differential tests: three RLlib 2.60 connector pipelines ported to ours, as a migrating
user ports them, on the same seeded random episodes (lookback 0..4, done and ongoing chunks,
list and numpy mode, Box, Discrete and Dict spaces).

1. PPO learner: ``AddObservationsFromEpisodesToBatch(as_learner_connector=True)``,
   ``AddColumnsFromEpisodesToTrainBatch``, ``BatchIndividualItems`` -> ``AddLearnerColumns``.
2. Atari frame stacking, learner and env-to-module: ``FrameStacking`` -> ``FrameStack``.
3. Env-to-module for a nested-observation policy: ``FlattenObservations`` and
   ``PrevActionsPrevRewards`` (continuous actions) -> ours with ``inference=True``.

Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session50_connectors.py
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.connectors.common import (  # noqa: E402
    AddObservationsFromEpisodesToBatch,
    BatchIndividualItems,
)
from ray.rllib.connectors.common.flatten_observations import (  # noqa: E402
    FlattenObservations as RFlattenObservations,
)
from ray.rllib.connectors.common.frame_stacking import (  # noqa: E402
    FrameStacking as RFrameStacking,
)
from ray.rllib.connectors.env_to_module import (  # noqa: E402
    PrevActionsPrevRewards as RPrevActionsPrevRewards,
)
from ray.rllib.connectors.learner import (  # noqa: E402
    AddColumnsFromEpisodesToTrainBatch,
    AddInfosFromEpisodesToTrainBatch,
)
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.numpy import flatten_inputs_to_1d_tensor  # noqa: E402
from ray.rllib.utils.spaces.space_utils import get_base_struct_from_space  # noqa: E402

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.connectors import (  # noqa: E402
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    ShortLookbackWarning,
)

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)
NESTED = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
        "keys": gym.spaces.MultiDiscrete([2, 3]),
    }
)
DISCRETE = gym.spaces.Discrete(4)
CONTINUOUS = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
DONE = {
    "ongoing": {},
    "terminated": {"terminated": True},
    "truncated": {"truncated": True},
}


def _twins(obs_space, act_space, lookback, steps, done, *, count=3, seed=0, vf=False, infos=False):
    """The same random chunks as our episodes and as RLlib's."""
    ours, theirs = [], []
    for i in range(count):
        obs_space.seed(seed + i)
        act_space.seed(seed + i)
        rng = np.random.default_rng(seed + i)
        n = lookback + steps + i  # chunks of different lengths
        kwargs = dict(
            observations=[obs_space.sample() for _ in range(n + 1)],
            actions=[act_space.sample() for _ in range(n)],
            rewards=[float(r) for r in rng.normal(size=n)],
            observation_space=obs_space,
            action_space=act_space,
            len_lookback_buffer=lookback,
            **DONE[done],
        )
        if infos:
            kwargs["infos"] = [{"step": k - lookback} for k in range(n + 1)]
        if vf:
            kwargs["extra_model_outputs"] = {
                "vf_preds": list(rng.normal(size=n).astype(np.float32))
            }
        ours.append(OSAE(f"ep{i}", **_own_lists(kwargs)))  # both take a list over
        theirs.append(RSAE(id_=f"ep{i}", **_own_lists(kwargs)))
    return ours, theirs


def _own_lists(kwargs):
    return {
        key: {k: list(v) for k, v in value.items()}
        if key == "extra_model_outputs"
        else (list(value) if isinstance(value, list) else value)
        for key, value in kwargs.items()
    }


def _run_rllib(pieces, episodes):
    batch, shared = {}, {}
    for piece in pieces:
        batch = piece(
            rl_module=None, batch=batch, episodes=episodes, explore=False, shared_data=shared
        )
    return batch


# --- 1. PPO learner columns -------------------------------------------------------------


@pytest.mark.parametrize("steps", [0, 3])
@pytest.mark.parametrize("done", sorted(DONE))
@pytest.mark.parametrize("lookback", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("obs_space", [BOX, IMAGE], ids=["box", "image"])
def test_ppo_learner_columns_match_rllib(obs_space, lookback, done, steps):
    ours, theirs = _twins(obs_space, DISCRETE, lookback, steps + 1, done, vf=True, infos=True)
    for ep in ours + theirs:
        ep.to_numpy()  # RLlib's learner gets numpy'd episodes
    want = _run_rllib(
        [
            AddObservationsFromEpisodesToBatch(as_learner_connector=True),
            AddColumnsFromEpisodesToTrainBatch(),
            AddInfosFromEpisodesToTrainBatch(),
            BatchIndividualItems(),
        ],
        theirs,
    )
    columns = ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id", "infos")
    got = AddLearnerColumns(columns)(ours, {})
    assert got["infos"] == want["infos"]
    assert set(want) <= set(got)
    for key in ("obs", "actions", "terminateds", "truncateds", "vf_preds"):
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    np.testing.assert_array_equal(got["rewards"], want["rewards"].astype(np.float32))


def test_rllib_deviation_learner_no_rows():  # "learner-no-rows"
    """Pinned: chunks without steps give RLlib's learner pieces an ``obs`` column of no rows
    and no other column; ours add no column at all (none of the shipped connectors does)."""
    ours, theirs = _twins(BOX, DISCRETE, 2, 0, "ongoing", count=1)
    for ep in ours + theirs:
        ep.to_numpy()
    want = _run_rllib(
        [
            AddObservationsFromEpisodesToBatch(as_learner_connector=True),
            AddColumnsFromEpisodesToTrainBatch(),
            BatchIndividualItems(),
        ],
        theirs,
    )
    assert list(want) == ["obs"] and want["obs"].shape == (0, 3)
    pipe = ConnectorPipeline([AddLearnerColumns(), FrameStack(2), PrevActionsPrevRewards(1, 1)])
    assert pipe(ours, {}) == {}


def test_rllib_deviation_learner_rewards_dtype_and_ids():  # "learner-rewards-ids"
    """Pinned: RLlib's learner rewards are float64 and its observations piece renames the
    episodes it reads (``id_ += "_<i>"``); ours are float32 and the episodes keep their ids."""
    ours, theirs = _twins(BOX, DISCRETE, 1, 3, "ongoing")
    for ep in ours + theirs:
        ep.to_numpy()
    want = _run_rllib(
        [
            AddObservationsFromEpisodesToBatch(as_learner_connector=True),
            AddColumnsFromEpisodesToTrainBatch(),
            AddInfosFromEpisodesToTrainBatch(),
            BatchIndividualItems(),
        ],
        theirs,
    )
    columns = ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id", "infos")
    got = AddLearnerColumns(columns)(ours, {})
    assert got["infos"] == want["infos"]
    assert want["rewards"].dtype == np.float64
    assert got["rewards"].dtype == np.float32
    assert [ep.id_ for ep in theirs] == ["ep0_0", "ep1_1", "ep2_2"]
    assert [ep.id_ for ep in ours] == ["ep0", "ep1", "ep2"]


# --- 2. Atari frame stacking ------------------------------------------------------------


def _ours_as_channels(stacked):  # "frame-stack-layout"
    """Ours is ``[rows, n, H, W, 1]`` (oldest first); RLlib's ``[rows, H, W, n]``."""
    return np.moveaxis(stacked[..., 0], 1, -1)


@pytest.mark.parametrize("done", ["ongoing", "terminated"])
@pytest.mark.parametrize("lookback", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_frame_stacking_learner_matches_rllib(n, lookback, done):
    ours, theirs = _twins(IMAGE, DISCRETE, lookback, 3, done)
    for ep in ours + theirs:
        ep.to_numpy()
    want = _run_rllib(
        [RFrameStacking(num_frames=n, as_learner_connector=True), BatchIndividualItems()], theirs
    )
    with warnings.catch_warnings():
        # A lookback shorter than n - 1 pads zeros, as RLlib does, and warns.
        warnings.simplefilter("ignore", ShortLookbackWarning)
        got = FrameStack(n)(ours, {})
    assert got["obs"].dtype == want["obs"].dtype
    np.testing.assert_array_equal(_ours_as_channels(got["obs"]), want["obs"])


@pytest.mark.parametrize("lookback", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_frame_stacking_env_to_module_matches_rllib(n, lookback):
    ours, theirs = _twins(IMAGE, DISCRETE, lookback, 2, "ongoing")
    want = _run_rllib([RFrameStacking(num_frames=n), BatchIndividualItems()], theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortLookbackWarning)
        got = FrameStack(n, inference=True)(ours, {})
    np.testing.assert_array_equal(_ours_as_channels(got["obs"]), want["obs"])


# --- 3. Env-to-module for a nested-observation, continuous-action policy ----------------


def _rllib_flat_last(episodes, obs_space=NESTED):
    piece = RFlattenObservations(input_observation_space=obs_space, input_action_space=CONTINUOUS)
    piece(rl_module=None, batch={}, episodes=episodes, explore=False, shared_data={})
    return np.stack([ep.get_observations(-1) for ep in episodes])


FLAT_CASES = {
    "dict": NESTED,
    "discrete": gym.spaces.Discrete(5, start=0),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (2, 2)))),
    "multi-binary": gym.spaces.MultiBinary(4),
}


@pytest.mark.parametrize("lookback", [0, 1, 4])
@pytest.mark.parametrize("steps", [0, 1, 3])
@pytest.mark.parametrize("obs_space", list(FLAT_CASES.values()), ids=list(FLAT_CASES))
def test_flatten_env_to_module_matches_rllib(obs_space, steps, lookback):
    ours, theirs = _twins(obs_space, CONTINUOUS, lookback, steps, "ongoing")
    got = FlattenObservations(inference=True)(ours, {})["obs"]
    want = _rllib_flat_last(theirs, obs_space)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("done", sorted(DONE))
@pytest.mark.parametrize("lookback", [0, 1, 3])
@pytest.mark.parametrize("obs_space", [BOX, NESTED], ids=["box", "dict"])
def test_flatten_learner_matches_rllib_row_flattening(obs_space, lookback, done, mode):
    """RLlib's learner-side ``FlattenObservations`` cannot run (see the test below), so the
    oracle is the function it calls, ``flatten_inputs_to_1d_tensor``, one step at a time."""
    ours, theirs = _twins(obs_space, DISCRETE, lookback, 3, done)
    if mode == "numpy":
        ours = [ep.to_numpy() for ep in ours]
    struct = get_base_struct_from_space(obs_space)
    want = [
        flatten_inputs_to_1d_tensor(obs, spaces_struct=struct, batch_axis=False)
        for ep in theirs
        for obs in ep.get_observations(slice(0, len(ep)))
    ]
    got = FlattenObservations()(ours, {})["obs"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.stack(want))


def test_rllib_learner_flatten_observations_fails_where_ours_reads():  # "learner-flatten"
    """Pinned: RLlib 2.60's learner-side ``FlattenObservations`` raises on plain Box chunks of
    more than one step (it reshapes one flattened row into ``len(episode)`` rows)."""
    ours, theirs = _twins(BOX, DISCRETE, 1, 3, "ongoing")
    piece = RFlattenObservations(
        input_observation_space=BOX, input_action_space=DISCRETE, as_learner_connector=True
    )
    with pytest.raises(ValueError, match="cannot reshape"):
        _run_rllib([piece, BatchIndividualItems()], theirs)
    assert FlattenObservations()(ours, {})["obs"].shape == (3 + 4 + 5, 3)


def _rllib_prev(episodes, obs_space, act_space, n_actions, n_rewards):
    piece = RPrevActionsPrevRewards(n_prev_actions=n_actions, n_prev_rewards=n_rewards)
    # RLlib 2.60 reads ``self._multi_agent`` while its constructor sets the spaces: set after.
    piece.input_action_space, piece.input_observation_space = act_space, obs_space
    piece(rl_module=None, batch={}, episodes=episodes, explore=False, shared_data={})
    last = [ep.get_observations(-1) for ep in episodes]
    keys = ("prev_n_actions", "prev_n_rewards")
    return {key: np.stack([item[key] for item in last]) for key in keys if key in last[0]}


@pytest.mark.parametrize("done", ["ongoing", "terminated"])
@pytest.mark.parametrize("lookback", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n_actions, n_rewards", [(1, 1), (3, 2), (2, 4), (0, 2)])
def test_env_to_module_nested_obs_pipeline_matches_rllib(n_actions, n_rewards, lookback, done):
    """Previous actions and rewards beside flattened Dict observations, for the last step of
    short, long, ongoing and done chunks."""
    ours, theirs = _twins(NESTED, DISCRETE, lookback, 2, done)
    want_flat = _rllib_flat_last(_twins(NESTED, DISCRETE, lookback, 2, done)[1])  # it writes
    want = _rllib_prev(theirs, NESTED, DISCRETE, n_actions, n_rewards)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortLookbackWarning)
        got = ConnectorPipeline(
            [
                FlattenObservations(inference=True),
                PrevActionsPrevRewards(n_actions, n_rewards, inference=True),
            ]
        )(ours, {})
    np.testing.assert_array_equal(got["obs"], want_flat)
    assert set(got) - {"obs"} == set(want)  # a count of 0 adds no column in either
    if n_actions == 0:
        return
    np.testing.assert_array_equal(
        got["prev_n_actions"].reshape(3, -1), want["prev_n_actions"].reshape(3, -1)
    )
    np.testing.assert_array_equal(got["prev_n_rewards"], want["prev_n_rewards"].astype(np.float32))


def test_rllib_prev_actions_discrete_only_ours_takes_box_actions():  # "prev-box-actions"
    """Pinned: RLlib 2.60's ``PrevActionsPrevRewards`` takes Discrete actions only (a Box
    action space is an ``AttributeError``); ours gives a Box space's previous action vectors."""
    ours, theirs = _twins(BOX, CONTINUOUS, 2, 2, "ongoing")
    with pytest.raises(AttributeError):
        _rllib_prev(theirs, BOX, CONTINUOUS, 2, 1)
    got = PrevActionsPrevRewards(2, 1, inference=True)(ours, {})
    want = np.stack([np.stack(ep.get_actions([-2, -1])) for ep in ours])
    np.testing.assert_array_equal(got["prev_n_actions"], want)


# --- the lookback reads custom connectors are written with --------------------------------


def _reads(ep, k, n):
    """The getter calls RLlib's connector pieces make, as a user's own connector makes them."""
    return {
        "last_obs": ep.get_observations(-1),
        "prev_actions": ep.get_actions(slice(-k, None), fill=0, one_hot_discrete=True),
        "prev_rewards": ep.get_rewards(slice(-k, None), fill=0.0),
        "stack_learner": ep.get_observations(
            slice(-n + 1, len(ep)), neg_index_as_lookback=True, fill=0.0
        ),
        "stack_last": ep.get_observations(slice(-n, None), fill=0.0),
        "actions_before": ep.get_actions(
            slice(-k, len(ep) - 1), neg_index_as_lookback=True, fill=0
        ),
        "lookback_obs": ep.get_observations(-1, neg_index_as_lookback=True, fill=0.0),
    }


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("steps", [1, 2, 5])
@pytest.mark.parametrize("lookback", [0, 1, 2, 3, 4])
def test_connector_getter_reads_match_rllib(lookback, steps, mode):
    ours, theirs = _twins(BOX, DISCRETE, lookback, steps, "ongoing", count=1)
    if mode == "numpy":
        ours[0].to_numpy()
        theirs[0].to_numpy()
    for k in (1, 2, 4):
        for n in (1, 3, 6):
            got, want = _reads(ours[0], k, n), _reads(theirs[0], k, n)
            for key in want:
                g, w = np.asarray(got[key]), np.asarray(want[key])
                assert g.shape == w.shape, (key, k, n)
                np.testing.assert_array_equal(g, w, err_msg=f"{key} k={k} n={n}")


# --- learner-side previous actions/rewards: RLlib's env-to-module rows, step by step -------


@pytest.mark.parametrize("n_actions, n_rewards", [(1, 1), (2, 3), (4, 2)])
@pytest.mark.parametrize("lookback", [0, 1, 2, 4])
def test_prev_learner_rows_are_rllib_env_to_module_rows(lookback, n_actions, n_rewards):
    """In RLlib the learner sees, for step t, what the env-to-module piece wrote when the
    policy acted at t; ours computes those rows from the recorded chunk."""
    steps = 5
    ours, _ = _twins(BOX, DISCRETE, lookback, steps, "terminated", count=1)
    ep = ours[0]
    obs = list(ep.get_observations(slice(-lookback, len(ep) + 1), neg_index_as_lookback=True))
    acts = list(ep.get_actions(slice(-lookback, len(ep)), neg_index_as_lookback=True))
    rews = list(ep.get_rewards(slice(-lookback, len(ep)), neg_index_as_lookback=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortLookbackWarning)
        got = PrevActionsPrevRewards(n_actions, n_rewards)([ep], {})
    for t in range(len(ep)):  # the policy acting at step t saw this episode
        acting = RSAE(
            id_="ep",
            observations=obs[: lookback + t + 1],
            actions=acts[: lookback + t],
            rewards=rews[: lookback + t],
            observation_space=BOX,
            action_space=DISCRETE,
            len_lookback_buffer=lookback,
        )
        want = _rllib_prev([acting], BOX, DISCRETE, n_actions, n_rewards)
        np.testing.assert_array_equal(
            got["prev_n_actions"][t].reshape(-1), want["prev_n_actions"].reshape(-1), err_msg=t
        )
        np.testing.assert_array_equal(
            got["prev_n_rewards"][t], want["prev_n_rewards"][0].astype(np.float32), err_msg=t
        )

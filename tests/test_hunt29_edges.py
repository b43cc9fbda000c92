"""Degenerate inputs found by the session-29 hunts: each a clear error or a working result."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.converter import ColumnKeys, bootstrap_values, episodes_to_batch, episodes_to_rollout
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import split_and_pad_trajectories, trajectory_layout
from episodes.runner import EnvRunner, RandomPolicy
from episodes.testing.strategies import episodes as episode_strategy

_EXTRAS = {"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]}


def _head() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "s",
        observations=[np.float32([t]) for t in range(3)],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs=_EXTRAS,
    )


def _value(obs):
    return np.zeros(len(obs))


END_WITHOUT_OBSERVATION = {
    "rollout": lambda end: episodes_to_rollout([_head(), end], gamma=0.5, value_fn=_value),
    "rollout-per-chunk": lambda end: episodes_to_rollout(
        [_head(), end], gamma=0.5, value_fn=_value, layout="per_chunk"
    ),
    "batch": lambda end: episodes_to_batch([_head(), end]),
    "learner-columns": lambda end: AddLearnerColumns()([_head(), end], {}),
    "replay": lambda end: EpisodeReplayBuffer(10).add([_head(), end]),
}


@pytest.mark.parametrize("flag", ["terminated", "truncated"])
@pytest.mark.parametrize("consumer", END_WITHOUT_OBSERVATION)
def test_an_end_without_an_observation_is_refused_by_name(consumer, flag):
    end = SingleAgentEpisode("s", t_started=2, **{flag: True})
    end.validate()  # valid alone; it only joins nothing
    with pytest.raises(ValueError, match="episode 's': the chunk without steps that ends it"):
        END_WITHOUT_OBSERVATION[consumer](end)


def test_a_replay_add_refusing_such_an_end_leaves_the_buffer_as_it_was():
    buffer = EpisodeReplayBuffer(10)
    buffer.add(_head())
    with pytest.raises(ValueError):
        buffer.add(SingleAgentEpisode("s", t_started=2, terminated=True))
    assert buffer.get_num_timesteps() == 2 and not buffer.get_episodes()[0].is_done


def test_bootstrap_values_of_a_chunk_without_observations_names_it():
    with pytest.raises(ValueError, match="episode 'x' starting at t=4 holds no observation"):
        bootstrap_values([SingleAgentEpisode("x", t_started=4)], value_fn=_value, keys=ColumnKeys())


@pytest.mark.parametrize("num_envs", [0, 2])
def test_trajectories_of_no_steps_are_empty(num_envs):
    dones = torch.zeros(0, num_envs, dtype=torch.bool)
    layout = trajectory_layout(dones)
    assert layout.num_traj == 0 and layout.traj_offsets.tolist() == [0] * (num_envs + 1)
    padded, masks = split_and_pad_trajectories(torch.zeros(0, num_envs, 3), dones)
    assert padded.shape == (0, 0, 3) and masks.shape == (0, 0)


@settings(max_examples=40, deadline=None)
@given(episode_strategy(min_len=0, max_len=2, done=True))
def test_a_required_end_is_always_drawn(episode):
    assert episode.is_done and len(episode) >= 1


def test_a_required_end_with_no_room_for_a_step_is_refused_when_built():
    with pytest.raises(ValueError, match="needs max_len >= 1"):
        episode_strategy(max_len=0, done="terminated")


def test_per_chunk_layout_of_stepless_chunks_gives_no_per_chunk_advice():
    with pytest.raises(ValueError) as info:
        episodes_to_rollout(
            [SingleAgentEpisode("a", observations=[0.0])], gamma=0.9, layout="per_chunk"
        )
    assert "layout='per_chunk'" not in str(info.value)


class _OldInfosEnv(gym.vector.VectorEnv):
    """Same-step autoreset with gymnasium 0.29's infos: per-env dicts in an object array."""

    def __init__(self, top_level: bool) -> None:
        self.num_envs, self.top_level = 2, top_level
        self.single_observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def reset(self, *, seed=None, options=None):
        return np.zeros((2, 1), np.float32), {}

    def step(self, actions):
        done = np.array([True, False])
        obs = np.zeros((2, 1), np.float32)
        per_env = np.array([{}, {}], dtype=object)
        if self.top_level:
            return obs, np.zeros(2), done, np.zeros(2, bool), per_env
        infos = {
            "final_obs": np.array([obs[0], None], dtype=object),
            "_final_obs": done,
            "final_info": per_env,
            "_final_info": done,
        }
        return obs, np.zeros(2), done, np.zeros(2, bool), infos


@pytest.mark.parametrize(
    "top_level, match",
    [(True, "step infos came as a ndarray"), (False, r"infos\['final_info'\] is a ndarray")],
    ids=["infos", "final_info"],
)
def test_infos_as_an_array_of_dicts_are_a_type_error_naming_them(top_level, match):
    env = _OldInfosEnv(top_level)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with pytest.raises(TypeError, match=match):
        runner.sample(2)


def _steps_e() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "E",
        observations=[40.0, 41.0, 42.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs=_EXTRAS,
    )


def _end_e(obs: float = 42.0, **flag: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode("E", observations=[obs], t_started=2, len_lookback_buffer=0, **flag)


JOINING_CONSUMERS = {
    "rollout": lambda chunks: episodes_to_rollout([chunks], gamma=0.5, value_fn=_value),
    "batch": lambda chunks: episodes_to_batch(chunks),
    "learner-columns": lambda chunks: AddLearnerColumns()(chunks, {}),
}


@pytest.mark.parametrize("consumer", JOINING_CONSUMERS)
def test_an_end_with_another_observation_joins_nothing(consumer):
    with pytest.raises(ValueError, match="starts with an observation that differs"):
        JOINING_CONSUMERS[consumer]([_steps_e(), _end_e(99.0, truncated=True)])
    JOINING_CONSUMERS[consumer]([_steps_e(), _end_e(42.0, truncated=True)])  # it joins


@pytest.mark.parametrize("consumer", ["batch", "learner-columns"])
def test_two_ends_of_one_step_are_refused_whatever_their_order(consumer):
    for ends in (
        [_end_e(terminated=True), _end_e(truncated=True)],
        [_end_e(truncated=True), _end_e(terminated=True)],
    ):
        with pytest.raises(ValueError, match="two chunks without steps end it at t=2"):
            JOINING_CONSUMERS[consumer]([_steps_e(), *ends])


def _columns(columns) -> tuple:
    keys = ("eps_id", "rewards", "terminateds", "truncateds")
    return tuple(np.asarray(columns[key]).tolist() for key in keys)


def _replayed(chunks) -> tuple:
    buffer = EpisodeReplayBuffer(10)
    buffer.add(chunks)
    return buffer.get_episode_ids(), buffer.get_num_episodes(), buffer.get_num_timesteps()


# What each consumer makes of the chunks: of episode "o"'s one step only.
ENDS_LEFT_OUT = {
    "batch": (lambda chunks: _columns(episodes_to_batch(chunks)), (["o"], [1.0], [False], [False])),
    "learner-columns": (
        lambda chunks: _columns(AddLearnerColumns()(chunks, {})),
        (["o"], [1.0], [False], [False]),
    ),
    "replay": (_replayed, (["o"], 1, 1)),
}


@pytest.mark.parametrize("consumer", ENDS_LEFT_OUT)
def test_ends_whose_steps_are_not_here_are_left_out_unjudged(consumer):
    # Their episode's steps lie before the chunks given: nothing to join, nothing to refuse.
    other = SingleAgentEpisode(
        "o", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    no_observation = SingleAgentEpisode("q", t_started=2, truncated=True)
    twice = SingleAgentEpisode("r", observations=[5.0], t_started=2, terminated=True)
    consume, expected = ENDS_LEFT_OUT[consumer]
    assert consume([other]) == expected  # the same as without the ends
    for ends in ([no_observation], [twice, copy.deepcopy(twice)]):
        assert consume([other, *ends]) == expected, [end.id_ for end in ends]

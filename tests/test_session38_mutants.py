"""Behaviour pinned by the session-38 mutation hunt (each test kills one surviving mutant)."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.replay.rng import generator_from_state
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner
from episodes.spaces import space_from_dict

Transition = RolloutStorage.Transition


class _ZeroPolicy:
    def __call__(self, obs):
        n = len(obs)
        outs = {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n, np.float32)}
        return np.zeros(n, np.int64), outs


def test_rollout_reads_rewards_edited_before_a_refused_concat():
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, _ZeroPolicy(), seed=0).sample(4)
    chunk = chunks[0]
    chunk.set_rewards(new_data=5.0, at_indices=0)
    last = chunk.get_observations(-1)
    other = SingleAgentEpisode(
        id_=chunk.id_,
        observations=[last, last],
        actions=[0],
        rewards=[1.0],
        t_started=chunk.t,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [np.zeros(3, np.float32)], "action_logp": [np.float32(0)]},
    )
    with pytest.raises(ValueError, match="cannot concat"):
        chunk.concat_episode(other)
    assert chunk.get_rewards().tolist() == [5.0, 1.0, 1.0, 1.0]
    rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=lambda o: np.zeros(len(o)))
    assert rollout.storage.rewards[:, 0, 0].tolist() == [5.0, 1.0, 1.0, 1.0]


def test_one_part_hidden_state_is_refused_by_lstm_storage():
    hidden = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    st = RolloutStorage("rl", 2, 3, (1,), (1,), actor_hidden_state=hidden)
    with pytest.raises(ValueError, match="hidden state has 1 components, expected 2"):
        st.add_transition(
            Transition(observations=torch.zeros(2, 1), hidden_states=(torch.ones(1, 2, 4), None))
        )
    assert st.step == 0


def _dict_storage():
    return RolloutStorage("rl", 2, 3, {"a": (1,), "b": (2,)}, (1,))


def _add_extra_key(st):
    obs = {"a": torch.ones(2, 1), "b": torch.ones(2, 2), "typo": torch.ones(2, 3)}
    st.add_transition(Transition(observations=obs))


def _write_extra_key(st):
    obs = {"a": torch.ones(3, 2, 1), "b": torch.ones(3, 2, 2), "typo": torch.ones(3, 2, 9)}
    st.write_block(0, observations=obs)


@pytest.mark.parametrize("write", [_add_extra_key, _write_extra_key])
def test_dict_observation_with_an_extra_key_is_a_key_error(write):
    st = _dict_storage()
    with pytest.raises(KeyError, match=r"expected keys \['a', 'b'\], got \['a', 'b', 'typo'\]"):
        write(st)
    assert st.step == 0


def _episode(**kw):
    base = dict(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=1)
    base.update(kw)
    return SingleAgentEpisode(**base)


def test_set_observations_negative_index_as_lookback_writes_the_lookback_item():
    ep = _episode()
    ep.set_observations(new_data=99, at_indices=-1, neg_index_as_lookback=True)
    assert ep.get_observations(slice(-1, None), neg_index_as_lookback=True) == [99, 1, 2]
    assert ep.get_observations() == [1, 2]


def test_episodes_with_different_extra_output_keys_are_not_equal():
    fewer = _episode(id_="x", extra_model_outputs={"a": [0.0, 0.0]})
    more = _episode(id_="x", extra_model_outputs={"a": [0.0, 0.0], "b": [1.0, 1.0]})
    assert fewer != more
    assert more != fewer
    assert fewer == _episode(id_="x", extra_model_outputs={"a": [0.0, 0.0]})


def test_philox_state_with_negative_buffer_pos_is_refused():
    state = np.random.Generator(np.random.Philox(0)).bit_generator.state
    state["buffer_pos"] = -1
    with pytest.raises(ValueError, match=r"buffer_pos must be an int in 0 \.\. 4, got -1"):
        generator_from_state(state)


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([2**70, math.inf], math.inf),
        ([2**64, -1, math.inf], math.inf),
        ([2**70, -math.inf], -math.inf),
    ],
)
def test_return_of_huge_int_and_infinite_reward(rewards, expected):
    ep = SingleAgentEpisode(
        observations=list(range(len(rewards) + 1)),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    assert ep.get_return() == expected


def test_return_of_huge_int_and_nan_reward_is_nan():
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 0], rewards=[2**70, math.nan], len_lookback_buffer=0
    )
    assert math.isnan(ep.get_return())


@pytest.mark.parametrize(
    ("low", "high", "message"),
    [
        (["inf"], [5], "low: value 'inf' does not fit dtype int64"),
        ([0], ["-inf"], "high: value '-inf' does not fit dtype int64"),
        (["nan"], [5], "low: value 'nan' does not fit dtype int64"),
    ],
)
def test_int_box_dict_with_a_wrong_infinity_marker_is_refused(low, high, message):
    data = {"type": "Box", "shape": [1], "dtype": "int64", "low": low, "high": high}
    with pytest.raises(ValueError, match=message):
        space_from_dict(data)

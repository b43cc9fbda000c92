"""concat_episode into a numpy'd episode checks ``other``'s steps as add_env_step checks them.

Contract §4.4, §6.3, §7.1 and the deviation numpy-step-misfit: observations and actions
outside the episode's spaces, a string or None reward while the rewards' dtype is still open,
and values a numpy column cannot hold are a ``ValueError`` that changes neither episode, in
either layout of the successor (list mode: item by item; numpy'd: one check of the batch).
§11: a refused concat into a runner's chunk leaves the chunk a view of its block.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.runner import EnvRunner

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
MULTI = gym.spaces.MultiDiscrete([3, 2])
DISCRETE = gym.spaces.Discrete(3)
O0, O1, O2 = (np.full(2, v, np.float32) for v in (0.0, 0.5, 0.25))
ZERO2 = np.zeros(2, np.float32)

# name: (action space, observation of the step, action, reward, a valid action for later)
MISFITS: dict[str, tuple[Any, Any, Any, Any, Any]] = {
    "string reward": (BOX, O1, ZERO2, "oops", ZERO2),
    "None reward": (BOX, O1, ZERO2, None, ZERO2),
    "Box(2,) action of shape (3,)": (BOX, O1, np.zeros(3, np.float32), 1.0, ZERO2),
    "Box action outside the space": (BOX, O1, np.full(2, 5.0, np.float32), 1.0, ZERO2),
    "MultiDiscrete action as a scalar": (MULTI, O1, np.int64(1), 1.0, np.array([1, 0])),
    "Discrete(3) action 7": (DISCRETE, O1, np.int64(7), 1.0, np.int64(2)),
    "observation outside the space": (DISCRETE, np.full(2, 5.0, np.float32), 1, 1.0, 2),
}


def _numpyd(action_space: Any, steps: int) -> SingleAgentEpisode:
    # steps=0: numpy'd after its reset, so the action and reward dtypes are still open.
    episode = SingleAgentEpisode("x", observation_space=BOX, action_space=action_space)
    episode.add_env_reset(O0)
    for _ in range(steps):
        episode.add_env_step(O0, action_space.sample(), 0.0)
    return episode.to_numpy()


def _successor(episode: SingleAgentEpisode, obs: Any, action: Any, reward: Any, numpy: bool):
    successor = SingleAgentEpisode(
        "x",
        observations=[copy.deepcopy(episode.get_observations(-1)), obs],
        actions=[action],
        rewards=[reward],
        t_started=episode.t,
        len_lookback_buffer=0,
    )
    if numpy:
        try:
            successor.to_numpy()
        except ValueError:
            pytest.skip("no numpy'd successor holds this value")
    return successor


@pytest.mark.parametrize("numpy_successor", [False, True], ids=["list succ", "numpy succ"])
@pytest.mark.parametrize("steps", [0, 2], ids=["open columns", "typed columns"])
@pytest.mark.parametrize("case", MISFITS.values(), ids=MISFITS.keys())
def test_concat_refuses_what_add_env_step_refuses(case, steps, numpy_successor):
    space, obs, action, reward, valid_action = case
    stepper = _numpyd(space, steps)
    with pytest.raises(ValueError):
        stepper.add_env_step(obs, action, reward)

    episode = _numpyd(space, steps)
    successor = _successor(episode, obs, action, reward, numpy_successor)
    mine, theirs = copy.deepcopy(episode.get_state()), copy.deepcopy(successor.get_state())
    with pytest.raises(ValueError, match="cannot concat"):
        episode.concat_episode(successor)
    assert episode == SingleAgentEpisode.from_state(mine)
    assert episode.get_state()["actions"]["typed"] == mine["actions"]["typed"]
    assert episode.get_state()["rewards"]["typed"] == mine["rewards"]["typed"]
    assert successor == SingleAgentEpisode.from_state(theirs)
    # The columns keep their open or typed layout: a valid step is still taken.
    episode.add_env_step(O2, valid_action, 1.0)
    assert episode.get_rewards(-1) == 1.0


@pytest.mark.parametrize("numpy_successor", [False, True], ids=["list succ", "numpy succ"])
@pytest.mark.parametrize("steps", [0, 2], ids=["open columns", "typed columns"])
@pytest.mark.parametrize("space", [BOX, MULTI, DISCRETE], ids=["Box", "MultiDiscrete", "Discrete"])
def test_concat_of_valid_steps_equals_the_same_add_env_steps(space, steps, numpy_successor):
    actions = [space.sample() for _ in range(3)]
    stepped = _numpyd(space, steps)
    episode = copy.deepcopy(stepped)
    successor = SingleAgentEpisode(
        "x",
        observations=[episode.get_observations(-1)],
        observation_space=BOX,
        action_space=space,
        t_started=episode.t,
        len_lookback_buffer=0,
    )
    for k, action in enumerate(actions):
        stepped.add_env_step(O1, action, float(k))
        successor.add_env_step(O1, action, float(k))
    if numpy_successor:
        successor.to_numpy()
    episode.concat_episode(successor)
    for name in ("observations", "actions", "rewards"):
        got, want = getattr(episode, name).data, getattr(stepped, name).data
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype, name
    assert episode.t == stepped.t


def test_list_mode_concat_checks_no_spaces_as_add_env_step_does():
    episode = SingleAgentEpisode("x", observations=[O0], action_space=DISCRETE)
    successor = SingleAgentEpisode(
        "x", observations=[O0, O1], actions=[7], rewards=[1.0], len_lookback_buffer=0
    )
    episode.add_env_step(O1, 7, 1.0)  # list mode: not checked against the space
    fresh = SingleAgentEpisode("x", observations=[O0], action_space=DISCRETE)
    fresh.concat_episode(successor)
    assert fresh.get_actions() == [7]


def _runner_chunks(seed: int) -> Any:
    env = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    rng = np.random.default_rng(seed)
    runner = EnvRunner(env, lambda obs: (rng.integers(0, 2, len(obs)), None), seed=seed)
    return runner.sample(4)


RUNNER_MISFITS = {
    "string reward (the float column refuses it)": (np.int64(0), "bad"),
    "complex reward": (np.int64(0), 1 + 2j),
    "action outside Discrete(2)": (np.int64(5), 1.0),
}


@pytest.mark.parametrize("action, reward", RUNNER_MISFITS.values(), ids=RUNNER_MISFITS.keys())
def test_a_refused_concat_leaves_a_runner_chunk_a_view(action, reward):
    chunks = _runner_chunks(0)
    chunk = next(c for c in chunks if not c.is_done)
    before = copy.deepcopy(chunk.get_state())
    assert chunks.unchanged()
    last = chunk.get_observations(-1)
    successor = SingleAgentEpisode(
        chunk.id_,
        observations=[last.copy(), last.copy()],
        actions=[action],
        rewards=[reward],
        t_started=chunk.t,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="cannot concat"):
        chunk.concat_episode(successor)
    assert chunk == SingleAgentEpisode.from_state(before)
    assert chunks.unchanged()


def _stepped_plain(actions: list[Any], numpy: bool, **extras: list[Any]) -> SingleAgentEpisode:
    n = len(actions)
    episode = SingleAgentEpisode(
        "x",
        observations=list(range(n + 1)),
        actions=actions,
        rewards=[1.0] * n,
        extra_model_outputs=extras or None,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


# name: (self's actions, successor's actions, successor's extra-model-outputs): no spaces, so
# only the numpy columns themselves can refuse.
COLUMN_MISFITS = {
    "dict actions with another key": (
        [{"a": 0, "b": 1.0}],
        [{"a": 0, "c": 1.0}],
        {},
    ),
    "int actions given 0.5": ([1], [0.5], {}),
    "row actions of another width": ([np.zeros(2)], [np.zeros(3)], {}),
    "a new extra-model-output key that cannot be stacked": (
        [],
        [0, 1],
        {"h": [np.zeros(2), np.zeros(3)]},
    ),
}


@pytest.mark.parametrize("numpy_successor", [False, True], ids=["list succ", "numpy succ"])
@pytest.mark.parametrize("case", COLUMN_MISFITS.values(), ids=COLUMN_MISFITS.keys())
def test_a_column_misfit_is_refused_before_any_column_changes(case, numpy_successor):
    mine, theirs, extras = case
    episode = _stepped_plain(mine, numpy=True)
    successor = SingleAgentEpisode(
        "x",
        observations=list(range(len(mine), len(mine) + len(theirs) + 1)),
        actions=theirs,
        rewards=[1.0] * len(theirs),
        extra_model_outputs=extras or None,
        t_started=episode.t,
        len_lookback_buffer=0,
    )
    if numpy_successor:
        try:
            successor.to_numpy()
        except ValueError:
            pytest.skip("no numpy'd successor holds these values")
    before = copy.deepcopy(episode.get_state())
    with pytest.raises(ValueError, match="cannot concat.*nothing was changed"):
        episode.concat_episode(successor)
    after = episode.get_state()
    assert episode == SingleAgentEpisode.from_state(before)
    for name in ("observations", "actions", "rewards"):
        assert after[name]["typed"] == before[name]["typed"], name


@pytest.mark.parametrize("numpy_successor", [False, True], ids=["list succ", "numpy succ"])
def test_a_new_extra_key_joins_a_numpyd_reset_only_episode(numpy_successor):
    episode = _stepped_plain([], numpy=True)
    successor = SingleAgentEpisode(
        "x",
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        extra_model_outputs={"vf": [0.5, 0.25]},
        len_lookback_buffer=0,
    )
    if numpy_successor:
        successor.to_numpy()
    episode.concat_episode(successor)
    assert episode.extra_model_outputs["vf"].finalized
    assert episode.get_extra_model_outputs("vf").tolist() == [0.5, 0.25]
    assert episode.get_rewards().tolist() == [1.0, 2.0]
    episode.validate()


def test_concat_updates_custom_data_shallowly_as_rllib_does():
    episode = SingleAgentEpisode("x", observations=[0], len_lookback_buffer=0)
    successor = SingleAgentEpisode(
        "x", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    episode.custom_data.update(kept=1, both="mine")
    successor.custom_data.update(both="theirs", nested={"n": 1})
    episode.concat_episode(successor)
    assert episode.custom_data == {"kept": 1, "both": "theirs", "nested": {"n": 1}}
    assert episode.custom_data["nested"] is successor.custom_data["nested"]

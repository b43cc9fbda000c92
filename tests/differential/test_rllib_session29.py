"""Differential pins of session 29: RLlib differences a random driver found unlisted.

Each test names its docs/deviations.md tag and asserts both sides. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session29.py
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE, OBuf, RBuf  # noqa: E402

pytestmark = pytest.mark.differential

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
DICT = gym.spaces.Dict({"pos": BOX, "k": gym.spaces.Discrete(3)})


def _uneven(episode_cls: Any, buffer_cls: Any) -> Any:
    # Two visible steps; the actions and rewards carry 3 steps of lookback, the observations none.
    actions = list(range(-3, 2))
    return episode_cls(
        "x",
        observations=buffer_cls([0.0, 1.0, 2.0], lookback=0),
        infos=buffer_cls([{}, {}, {}], lookback=0),
        actions=buffer_cls(actions, lookback=3),
        rewards=buffer_cls([float(a) for a in actions], lookback=3),
    )


def test_cut_of_columns_with_other_lookbacks() -> None:  # "cut-uneven-lookbacks"
    ours, theirs = _uneven(OSAE, OBuf).cut(4), _uneven(RSAE, RBuf).cut(4)
    assert ours.is_reset and ours.observations.lookback == 2  # ts=0 is the last observation
    assert ours.get_observations(0) == 2.0
    assert not theirs.is_reset and theirs.observations.lookback == 3  # no ts=0 observation
    infos_first = {
        "observations": [0.0, 1.0, 2.0],
        "infos": [{"i": -1}, {"i": 0}, {"i": 1}, {"i": 2}],
        "actions": [0, 1],
        "rewards": [0.0, 1.0],
    }
    lookbacks = {"observations": 0, "infos": 1, "actions": 0, "rewards": 0}

    def build(episode_cls: Any, buffer_cls: Any) -> Any:
        columns = {k: buffer_cls(v, lookback=lookbacks[k]) for k, v in infos_first.items()}
        return episode_cls("x", **columns)

    assert build(OSAE, OBuf).cut(3).get_infos(0) == {"i": 2}
    with pytest.raises(AssertionError):
        build(RSAE, RBuf).cut(3)


def _dict_episode(cls: Any) -> Any:
    episode = cls("x", observation_space=DICT, action_space=gym.spaces.Discrete(3))
    episode.add_env_reset({"pos": np.zeros(2, np.float32), "k": np.int64(0)})
    for i in range(1, 4):
        episode.add_env_step({"pos": np.full(2, i / 10, np.float32), "k": np.int64(i % 3)}, 1, 1.0)
    return episode


def test_list_mode_set_of_a_batched_dict() -> None:  # "list-set-batched-struct"
    batch = {"pos": np.full((2, 2), 0.9, np.float32), "k": np.array([2, 2])}
    ours, theirs = _dict_episode(OSAE), _dict_episode(RSAE)
    ours.set_observations(new_data=copy.deepcopy(batch), at_indices=slice(0, 2))
    theirs.set_observations(new_data=copy.deepcopy(batch), at_indices=slice(0, 2))
    assert [int(o["k"]) for o in ours.get_observations(slice(0, 2))] == [2, 2]
    assert theirs.observations.data[0:2] == ["pos", "k"]  # the dict's keys, silently
    with pytest.raises(KeyError):
        _dict_episode(RSAE).set_observations(new_data=copy.deepcopy(batch), at_indices=[0, 1])


def _list_parent_with_numpy_successor(cls: Any) -> tuple[Any, Any]:
    parent = cls("x", observation_space=BOX, action_space=gym.spaces.Discrete(3))
    parent.add_env_reset(np.zeros(2, np.float32))
    state = {"h": np.ones(2, np.float32), "c": 1}
    parent.add_env_step(np.full(2, 0.1, np.float32), 1, 1.0, extra_model_outputs={"state": state})
    successor = parent.cut()
    state = {"h": np.full(2, 2.0, np.float32), "c": 2}
    successor.add_env_step(
        np.full(2, 0.2, np.float32), 2, 2.0, extra_model_outputs={"state": state}
    )
    successor.to_numpy()
    return parent, successor


def test_list_mode_concat_of_nested_extra_model_outputs() -> None:
    # "mixed-mode-concat-nested": RLlib list.extend()s the dict, adding its keys.
    ours, ours_next = _list_parent_with_numpy_successor(OSAE)
    theirs, theirs_next = _list_parent_with_numpy_successor(RSAE)
    ours.concat_episode(ours_next)
    assert [int(s["c"]) for s in ours.get_extra_model_outputs("state")] == [1, 2]
    with pytest.raises(AssertionError):
        theirs.concat_episode(theirs_next)
    assert theirs.extra_model_outputs["state"].data[1:] == ["h", "c"]


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_set_at_a_list_with_a_member_out_of_range(numpy: bool) -> None:  # "set-out-of-range-member"
    def episode(cls: Any) -> Any:
        ep = cls(
            "x",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 1, 2],
            rewards=[1.0, 2.0, 3.0],
            len_lookback_buffer=0,
            action_space=gym.spaces.Discrete(3),
        )
        return ep.to_numpy() if numpy else ep

    ours, theirs = episode(OSAE), episode(RSAE)
    for ep in (ours, theirs):
        with pytest.raises(IndexError):
            ep.set_actions(new_data=np.array([2, 2]) if numpy else [2, 2], at_indices=[0, 5])
    assert [int(a) for a in ours.get_actions()] == [0, 1, 2]
    assert [int(a) for a in theirs.get_actions()] == [2, 1, 2]  # the in-range member written


def test_a_numpy_float32_column_keeps_its_dtype() -> None:  # "numpy-column-keeps-dtype"
    def episode(cls: Any) -> Any:
        ep = cls("x", observation_space=BOX, action_space=gym.spaces.Discrete(3))
        ep.add_env_reset(np.zeros(2, np.float32))
        ep.add_env_step(np.zeros(2, np.float32), 1, np.float32(0.5))
        ep.to_numpy()
        ep.add_env_step(np.zeros(2, np.float32), 1, 0.1)
        return ep

    ours, theirs = episode(OSAE).get_rewards(), episode(RSAE).get_rewards()
    assert ours.dtype == np.float32 and ours[1] == np.float32(0.1)
    assert theirs.dtype == np.float64 and theirs[1] == 0.1

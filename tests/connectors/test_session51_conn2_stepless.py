"""Chunks without steps (a just-reset episode: only its reset observation).

``check_list_numpy_agree`` let a connector's numpy error out bare where the connector did not
skip such an episode (``np.stack`` of a list-mode read of no items, ``[]``): it is now a
``ConnectorContractError`` saying in which modes the connector failed and naming the episode
without steps. ``PrevActionsPrevRewards`` without an action space on such a chunk refuses
``one_hot_discrete=True`` in its own words, steps or not (pinned here).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    Float32RangeError,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.testing import ConnectorContractError, check_list_numpy_agree

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def _just_reset(id_: str = "reset") -> SingleAgentEpisode:
    ep = SingleAgentEpisode(id_=id_, observation_space=BOX, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(np.zeros(3, np.float32))
    return ep


def _stepped(id_: str = "stepped") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_=id_,
        observations=[np.full(3, 0.5, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 0.0],
        observation_space=BOX,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


def _stacking(episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    # Does not skip episodes without rows: np.stack of no items fails, in either mode.
    rows = [np.stack(ep.get_observations(slice(0, len(ep)))) for ep in episodes]
    return {**batch, "obs": np.concatenate(rows)}


def _joining(episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    # A list-mode read of no items is [], shape (0,): it joins no (k, 3) rows; numpy'd, (0, 3).
    rows = [np.asarray(ep.get_observations(slice(0, len(ep)))) for ep in episodes]
    return {**batch, "obs": np.concatenate(rows)}


def _numpy_only_fails(episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    if any(ep.is_numpy for ep in episodes):
        raise RuntimeError("numpy is refused here")
    return batch


FAILING = {
    "np.stack, just-reset": (
        _stacking,
        ["reset"],
        r"failed on the list-mode and numpy'd episodes alike: ValueError\('need at least one "
        r"array to stack'\) \(episode 'reset' has no steps: .*skip episodes that give no rows",
    ),
    "np.concatenate, just-reset beside steps": (
        _joining,
        ["stepped", "reset"],
        r"failed on the list-mode episodes, not on the numpy'd ones: ValueError\(.*\) "
        r"\(episode 'reset' has no steps",
    ),
    "numpy'd only": (
        _numpy_only_fails,
        ["reset"],
        r"failed on the numpy'd episodes, not on the list-mode ones: RuntimeError\('numpy is "
        r"refused here'\)$",
    ),
}


@pytest.mark.parametrize("case", list(FAILING))
def test_a_connector_failing_on_stepless_episodes_is_reported_clearly(case: str) -> None:
    connector, kinds, match = FAILING[case]
    episodes = [_just_reset(k) if k == "reset" else _stepped(k) for k in kinds]
    with pytest.raises(ConnectorContractError, match=match) as caught:
        check_list_numpy_agree(connector, episodes)
    assert caught.value.__cause__ is not None  # the connector's own error, chained


def test_a_failure_on_stepped_episodes_names_no_stepless_one() -> None:
    def refuse(episodes: Any, batch: Any) -> Any:
        raise KeyError("obs")

    with pytest.raises(ConnectorContractError, match=r"alike: KeyError\('obs'\)$"):
        check_list_numpy_agree(refuse, [_stepped()])


def test_a_float32_refusal_in_both_modes_is_raised_as_it_is() -> None:
    def refuse(episodes: Any, batch: Any) -> Any:
        raise Float32RangeError("obs: 1e300 is beyond float32")

    with pytest.raises(Float32RangeError, match="beyond float32"):
        check_list_numpy_agree(refuse, [_just_reset()])


SHIPPED = {
    "FlattenObservations": FlattenObservations,
    "FlattenObservations(inference=True)": lambda: FlattenObservations(inference=True),
    "FrameStack(3)": lambda: FrameStack(3),
    "FrameStack(3, inference=True)": lambda: FrameStack(3, inference=True),
    "PrevActionsPrevRewards(2, 2)": lambda: PrevActionsPrevRewards(2, 2),
    "PrevActionsPrevRewards(inference=True)": lambda: PrevActionsPrevRewards(inference=True),
    "AddLearnerColumns": AddLearnerColumns,
}


@pytest.mark.parametrize("connector", list(SHIPPED))
@pytest.mark.parametrize("episodes", ["reset", "reset+stepped"])
def test_shipped_connectors_agree_on_just_reset_episodes(connector: str, episodes: str) -> None:
    eps = [_just_reset()] + ([_stepped()] if episodes == "reset+stepped" else [])
    check_list_numpy_agree(SHIPPED[connector](), eps)


# ------------------------------------------- PrevActionsPrevRewards, no action space, no steps
def _spaceless_reset(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(id_="bare", observations=[np.zeros(3, np.float32)])
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("inference", [False, True], ids=["learner", "inference"])
def test_prev_actions_without_an_action_space_refuse_one_hot_steps_or_not(
    inference: bool, numpy: bool
) -> None:
    batch = {"kept": 1}
    with pytest.raises(
        ValueError,
        match=r"one_hot_discrete=True\) needs the episodes' action space, but episode 'bare' "
        r"has none; pass one_hot_discrete=False for the raw actions",
    ):
        PrevActionsPrevRewards(inference=inference)([_spaceless_reset(numpy)], batch)
    assert batch == {"kept": 1}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_prev_actions_without_an_action_space_fill_the_raw_actions(numpy: bool) -> None:
    connector = PrevActionsPrevRewards(2, 1, one_hot_discrete=False, inference=True)
    out = connector([_spaceless_reset(numpy)], {})
    assert out["prev_n_actions"].tolist() == [[0.0, 0.0]]
    assert out["prev_n_rewards"].tolist() == [[0.0]]
    assert PrevActionsPrevRewards(one_hot_discrete=False)([_spaceless_reset(numpy)], {}) == {}
    # No actions read: no action space needed.
    assert PrevActionsPrevRewards(0, 1)([_spaceless_reset(numpy)], {}) == {}

"""RLlib 2.60's keyword names given to our connectors say what to write here instead.

Python's bare "got an unexpected keyword argument 'num_frames'" named neither our keyword nor
how we differ. The hints come from one table, ``episodes.connectors.rllib_keywords``; every
call the connectors took before is taken as before, with the same signatures.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.connectors.rllib_keywords import RLLIB_KEYWORDS

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(2)

# (what a port writes, the words that must be in the TypeError).
CASES: dict[str, tuple[Any, str]] = {
    "FrameStack(num_frames=4)": (
        lambda: FrameStack(num_frames=4),
        r"FrameStack takes no num_frames= \(an RLlib 2.60 keyword\): .*FrameStack's n: "
        r"FrameStack\(4\)",
    ),
    "FrameStack(num_frames=4, as_learner_connector=False)": (
        lambda: FrameStack(num_frames=4, as_learner_connector=False),
        r"num_frames=.*; FrameStack takes no as_learner_connector=.*"
        r"as_learner_connector=False is inference=True",
    ),
    "FlattenObservations(as_learner_connector=True)": (
        lambda: FlattenObservations(as_learner_connector=True),
        r"FlattenObservations takes no as_learner_connector=.*"
        r"as_learner_connector=True is inference=False \(the default",
    ),
    "FlattenObservations(keys_to_remove=...)": (
        lambda: FlattenObservations(keys_to_remove=["a"]),
        r"takes no keys_to_remove=.*flattens every leaf",
    ),
    "FlattenObservations(multi_agent=False)": (
        lambda: FlattenObservations(multi_agent=False),
        r"takes no multi_agent=.*no multi-agent mode.*single-agent episodes",
    ),
    "FlattenObservations(agent_ids=...)": (
        lambda: FlattenObservations(agent_ids=["a"]),
        r"takes no agent_ids=.*no multi-agent mode",
    ),
    "FlattenObservations(input_observation_space=...)": (
        lambda: FlattenObservations(input_observation_space=BOX),
        r"takes no input_observation_space=.*the spaces come from the episodes",
    ),
    "FlattenObservations(BOX, DISCRETE)": (
        lambda: FlattenObservations(BOX, DISCRETE),
        r"FlattenObservations got a gymnasium space as positional argument 1 \(RLlib's "
        r"input_observation_space",
    ),
    "PrevActionsPrevRewards(BOX, DISCRETE, n_prev_actions=2)": (
        lambda: PrevActionsPrevRewards(BOX, DISCRETE, n_prev_actions=2),
        r"PrevActionsPrevRewards got a gymnasium space as positional argument 1",
    ),
    "PrevActionsPrevRewards(input_action_space=...)": (
        lambda: PrevActionsPrevRewards(input_action_space=DISCRETE),
        r"takes no input_action_space=.*the spaces come from the episodes",
    ),
    "PrevActionsPrevRewards(multi_agent=False)": (
        lambda: PrevActionsPrevRewards(multi_agent=False),
        r"PrevActionsPrevRewards takes no multi_agent=",
    ),
    "FrameStack(BOX, num_frames=4)": (
        lambda: FrameStack(BOX, num_frames=4),
        r"num_frames=.*; FrameStack got a gymnasium space as positional argument 1",
    ),
    "AddLearnerColumns(as_learner_connector=True)": (
        lambda: AddLearnerColumns(as_learner_connector=True),
        r"AddLearnerColumns takes no as_learner_connector=.*learner side only.*"
        r"FlattenObservations\(inference=True\)",
    ),
    "ConnectorPipeline(input_observation_space=..., connectors=[])": (
        lambda: ConnectorPipeline(input_observation_space=BOX, connectors=[]),
        r"ConnectorPipeline takes no input_observation_space=",
    ),
    "ConnectorPipeline(BOX, DISCRETE)": (
        lambda: ConnectorPipeline(BOX, DISCRETE),
        r"ConnectorPipeline got a gymnasium space as positional argument 1",
    ),
    "FrameStack(4, n_prev_actions=1)": (
        lambda: FrameStack(4, n_prev_actions=1),
        r"FrameStack takes no n_prev_actions=.*PrevActionsPrevRewards\(n_prev_actions=",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rllib_keywords_say_what_to_write_instead(case: str) -> None:
    make, match = CASES[case]
    with pytest.raises(TypeError, match=match):
        make()


SHIPPED = {
    "FlattenObservations": FlattenObservations,
    "FrameStack": lambda **kw: FrameStack(2, **kw),
    "PrevActionsPrevRewards": PrevActionsPrevRewards,
    "AddLearnerColumns": AddLearnerColumns,
    "ConnectorPipeline": ConnectorPipeline,
}


CLASSES = {"FrameStack": FrameStack, **{k: v for k, v in SHIPPED.items() if k != "FrameStack"}}
# Every listed keyword each connector does not take (PrevActionsPrevRewards takes RLlib's counts).
NOT_TAKEN = [
    (name, keyword)
    for name, cls in CLASSES.items()
    for keyword in RLLIB_KEYWORDS
    if "." not in keyword and keyword not in inspect.signature(cls).parameters
]


@pytest.mark.parametrize(("connector", "keyword"), NOT_TAKEN)
def test_every_listed_keyword_a_connector_does_not_take_is_explained(
    connector: str, keyword: str
) -> None:
    with pytest.raises(TypeError, match=rf"^{connector} takes no {keyword}= \(an RLlib 2.60"):
        SHIPPED[connector](**{keyword: 1})


@pytest.mark.parametrize("connector", list(SHIPPED))
def test_other_unknown_keywords_keep_pythons_error(connector: str) -> None:
    with pytest.raises(
        TypeError, match=r"__init__\(\) got an unexpected keyword argument 'frames'"
    ):
        SHIPPED[connector](frames=2)


SIGNATURES = {
    FlattenObservations: "(*, one_hot_discrete: 'bool' = True, out_key: 'str' = 'obs', "
    "inference: 'bool' = False)",
    FrameStack: "(n: 'int', *, fill: 'Any' = 0.0, flatten: 'bool' = False, out_key: 'str' = "
    "'obs', inference: 'bool' = False)",
    AddLearnerColumns: "(columns: 'Sequence[str]' = ('obs', 'actions', 'rewards', "
    "'terminateds', 'truncateds', 't', 'eps_id'), *, extra_model_outputs: 'bool' = True)",
    ConnectorPipeline: "(connectors: 'Sequence[Connector]' = ())",
}


@pytest.mark.parametrize("cls", list(SIGNATURES), ids=lambda c: c.__name__)
def test_signatures_are_unchanged(cls: type) -> None:
    assert str(inspect.signature(cls)) == SIGNATURES[cls]


def test_accepted_calls_are_accepted_as_before() -> None:
    ep = SingleAgentEpisode(
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=BOX,
        action_space=DISCRETE,
        len_lookback_buffer=0,
    )
    pipe = ConnectorPipeline(
        connectors=[
            FrameStack(n=2, fill=0.0, flatten=True, out_key="stacked", inference=False),
            FlattenObservations(one_hot_discrete=True, out_key="flat", inference=False),
            PrevActionsPrevRewards(n_prev_actions=2, n_prev_rewards=1, fill=0.0),
            PrevActionsPrevRewards(1, 1, one_hot_discrete=False, inference=True),
            AddLearnerColumns(["actions"], extra_model_outputs=False),
        ]
    )
    out = pipe([ep])
    assert out["stacked"].shape == (2, 6) and out["flat"].shape == (2, 3)
    assert out["actions"].tolist() == [0, 1]


def test_a_subclass_is_named_and_keeps_its_class_hints() -> None:
    class MyColumns(AddLearnerColumns):
        pass

    with pytest.raises(TypeError, match=r"^MyColumns takes no as_learner_connector=.*learner side"):
        MyColumns(as_learner_connector=True)

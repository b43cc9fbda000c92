"""Session 14 fixes of the connectors and of ``check_connector``'s argument checks.

- ``FlattenObservations``/``FrameStack(flatten=True)`` on a batch mixing an episode without an
  observation space (not one-hot) and one with a Discrete space gave numpy's bare concatenate
  error; a space-less float episode keeps working with the default one-hot flag.
- Episodes whose rows do not join (``Discrete(3)`` next to ``Discrete(4)``) gave numpy's bare
  error from FlattenObservations, FrameStack and PrevActionsPrevRewards, naming no column.
- ``PrevActionsPrevRewards`` wrote ``prev_n_actions`` into the batch, then refused.
- An empty ``Dict``/``Tuple`` observation crashed the flattening connectors with IndexError.
- ``check_connector(row_keys=5)`` ran hundreds of connector calls before a bare TypeError;
  ``max_examples=np.int64(2)`` passed the check and then hypothesis refused it.
- ``ConnectorPipeline`` took non-callables (``append(None)``, a string of connectors).
- ``AddLearnerColumns``' repr left ``extra_model_outputs=False`` out.
"""

from __future__ import annotations

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
    flatten_rows,
)
from episodes.testing import ConnectorContract, check_connector

D3, D4 = gym.spaces.Discrete(3), gym.spaces.Discrete(4)


def _episode(id_, observations, *, space=None, action_space=None, actions=None, rewards=None):
    steps = len(observations) - 1
    return SingleAgentEpisode(
        id_,
        observations=observations,
        actions=[0] * steps if actions is None else actions,
        rewards=[1.0] * steps if rewards is None else rewards,
        observation_space=space,
        action_space=action_space,
        len_lookback_buffer=0,
    )


FLATTENING = {
    "FlattenObservations": FlattenObservations,
    "FrameStack(flatten)": lambda: FrameStack(2, flatten=True),
}


# ---------------------------------------------------- space-less episodes and one-hot (bug 1)
@pytest.mark.parametrize("make", FLATTENING.values(), ids=FLATTENING.keys())
def test_a_spaceless_episode_next_to_one_hot_rows_is_refused_naming_it(make):
    with_space = _episode("with", [0, 1, 2], space=D3)
    spaceless = _episode("spaceless", [0, 1, 2])
    batch = {"x": 1}
    with pytest.raises(ValueError, match="'obs' rows do not join") as info:
        make()([with_space, spaceless], batch)
    assert "episode 'spaceless' has no observation space" in str(info.value)
    assert batch == {"x": 1}


@pytest.mark.parametrize("make", FLATTENING.values(), ids=FLATTENING.keys())
def test_a_spaceless_float_episode_flattens_with_the_default_flag(make):
    ep = _episode("a", [0.5, 1.5, 2.5])  # scalars: FrameStack's scalar fill pads them
    out = make()([ep, ep], {})["obs"]
    assert out.dtype == np.float32 and out.shape[0] == 4


# ---------------------------------------------------- rows that do not join (bug 6)
JOIN_CASES = {
    "FlattenObservations": (FlattenObservations, "obs", "(3,)", "(4,)"),
    "FrameStack(flatten)": (lambda: FrameStack(2, flatten=True), "obs", "(6,)", "(8,)"),
    "FrameStack": (lambda: FrameStack(2), "obs", None, None),
    "PrevActionsPrevRewards": (
        lambda: PrevActionsPrevRewards(1, 1),
        "prev_n_actions",
        "(1, 3)",
        "(1, 4)",
    ),
}


@pytest.mark.parametrize("case", JOIN_CASES)
def test_rows_that_do_not_join_name_the_column_and_the_episodes(case):
    make, key, first, other = JOIN_CASES[case]
    if case == "FrameStack":  # unflattened: frames of other shapes
        box2, box3 = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (3,))
        a = _episode("a", [np.zeros(2, np.float32)] * 3, space=box2)
        b = _episode("b", [np.zeros(3, np.float32)] * 3, space=box3)
        first, other = "(2, 2)", "(2, 3)"
    else:
        a = _episode("a", [0, 1, 2], space=D3, action_space=D3, actions=[0, 1])
        b = _episode("b", [0, 1, 3], space=D4, action_space=D4, actions=[0, 3])
    batch = {"x": 1}
    with pytest.raises(ValueError, match=f"'{key}' rows do not join") as info:
        make()([a, b], batch)
    assert f"episode 'a' gives rows shaped {first}, episode 'b' {other}" in str(info.value)
    assert batch == {"x": 1}


# ---------------------------------------------------- PrevActionsPrevRewards' partial write (bug 2)
def test_prev_actions_prev_rewards_leaves_the_batch_unchanged_when_it_refuses():
    a = _episode("a", [0, 1, 0], action_space=gym.spaces.Discrete(2), actions=[0, 1])
    b = SingleAgentEpisode(  # vector rewards: refused, after episode a was read
        "b",
        observations=[0, 1, 0, 1],
        actions=[0, 1, 1],
        rewards=[np.ones(2)] * 3,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=1,
    )
    batch = {"x": 1}
    with pytest.raises(ValueError, match="rewards must be one number per step"):
        PrevActionsPrevRewards(1, 1)([a, b], batch)
    assert batch == {"x": 1}


# ---------------------------------------------------- empty Dict / Tuple observations (bug 3)
EMPTY_SPACES = {
    "Dict({})": gym.spaces.Dict({}),
    "Tuple(())": gym.spaces.Tuple(()),
    "Dict(a=Dict({}))": gym.spaces.Dict({"a": gym.spaces.Dict({})}),
}
EMPTY_CONNECTORS = {
    "FlattenObservations": (FlattenObservations, 2),
    "FlattenObservations(inference)": (lambda: FlattenObservations(inference=True), 1),
    "FrameStack(flatten)": (lambda: FrameStack(2, flatten=True), 2),
    "FrameStack(flatten, inference)": (lambda: FrameStack(3, flatten=True, inference=True), 1),
}


@pytest.mark.parametrize("connector", EMPTY_CONNECTORS)
@pytest.mark.parametrize("space", EMPTY_SPACES)
def test_an_empty_struct_observation_flattens_to_no_columns(space, connector):
    sp = EMPTY_SPACES[space]
    make, rows = EMPTY_CONNECTORS[connector]
    ep = _episode("a", [sp.sample() for _ in range(3)], space=sp)
    out = make()([ep, ep], {})["obs"]
    assert out.shape == (2 * rows, 0) and out.dtype == np.float32


def test_flatten_rows_of_a_value_without_leaves_needs_rows():
    assert flatten_rows({}, rows=3).shape == (3, 0)
    assert flatten_rows((), rows=0).shape == (0, 0)
    with pytest.raises(ValueError, match="rows="):
        flatten_rows({})


# ---------------------------------------------------- check_connector's arguments (bug 4)
BAD_ROW_KEYS = {
    "int": 5,
    "generator": (key for key in ["obs"]),
    "non-str key": ["obs", 3],
    "bytes": b"obs",
}


@pytest.mark.parametrize("row_keys", BAD_ROW_KEYS.values(), ids=BAD_ROW_KEYS.keys())
def test_check_connector_refuses_bad_row_keys_before_any_call(row_keys):
    calls = []

    def connector(episodes, batch):
        calls.append(1)
        return dict(batch)

    with pytest.raises(TypeError, match="row_keys"):
        check_connector(connector, row_keys=row_keys, max_examples=2)
    assert calls == []


def test_a_contract_class_with_bad_row_keys_is_refused_when_made():
    with pytest.raises(TypeError, match="row_keys"):

        class TestBad(ConnectorContract):  # noqa: F841 - made for its refusal
            row_keys = 5


def test_check_connector_takes_numpy_integer_counts():
    check_connector(
        lambda eps, batch: dict(batch),
        max_examples=np.int64(2),
        lookback=np.int64(1),
        max_len=np.int32(3),
    )


# ---------------------------------------------------- ConnectorPipeline's items (bug 5)
BAD_PIPELINES = {
    "append None": lambda pipe: pipe.append(None),
    "insert 42": lambda pipe: pipe.insert(0, 42),
}


@pytest.mark.parametrize("change", BAD_PIPELINES.values(), ids=BAD_PIPELINES.keys())
def test_a_pipeline_refuses_a_non_callable_and_stays_as_it_was(change):
    first = AddLearnerColumns()
    pipe = ConnectorPipeline([first])
    with pytest.raises(TypeError, match="callable"):
        change(pipe)
    assert pipe.connectors == [first]


@pytest.mark.parametrize(
    "connectors",
    ["ab", b"ab", [FrameStack(2), None], 5],
    ids=["str", "bytes", "list with None", "int"],
)
def test_a_pipeline_refuses_what_is_not_a_sequence_of_connectors(connectors):
    with pytest.raises(TypeError, match="connector"):
        ConnectorPipeline(connectors)


def test_a_pipeline_still_takes_callables_and_another_pipeline():
    inner = ConnectorPipeline([FrameStack(2)])
    assert len(ConnectorPipeline(inner)) == 1
    assert len(ConnectorPipeline((lambda eps, b: b, FrameStack(1)))) == 2


# ---------------------------------------------------- AddLearnerColumns' repr
def test_add_learner_columns_repr_shows_extra_model_outputs_when_not_default():
    assert "extra_model_outputs" not in repr(AddLearnerColumns())
    assert repr(AddLearnerColumns(("obs",), extra_model_outputs=False)) == (
        "AddLearnerColumns(columns=('obs',), extra_model_outputs=False)"
    )

"""Connector fixes: inference rows of unreset episodes, flatten_rows row counts, joins that
would turn numbers into text, Dict spaces with unsortable keys, zero-size list items' dtype."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    EpisodeConnector,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    concat_rows,
    flatten_rows,
)
from episodes.spaces import batch, batch_in_space, batch_with_layout

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)


def _ready(id_="ready"):
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)],
        observation_space=BOX,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


def _fresh(kind):
    if kind == "box":
        return SingleAgentEpisode(
            "fresh", observation_space=BOX, action_space=gym.spaces.Discrete(2)
        )
    if kind == "box numpy":
        return SingleAgentEpisode(
            "fresh", observation_space=BOX, action_space=gym.spaces.Discrete(2)
        ).to_numpy()
    return SingleAgentEpisode(
        "fresh", observation_space=gym.spaces.Discrete(3), action_space=gym.spaces.Discrete(2)
    )


# --- 1. an inference row needs an observation (contract §8.1: refused, batch unchanged) ----

INFERENCE = {
    "flatten": lambda: FlattenObservations(inference=True),
    "framestack": lambda: FrameStack(2, inference=True),
    "framestack flat": lambda: FrameStack(2, flatten=True, inference=True),
    "prev": lambda: PrevActionsPrevRewards(1, 1, inference=True),
}


@pytest.mark.parametrize("kind", ["box", "box numpy", "discrete"])
@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_inference_on_unreset_episode_is_refused(name, kind):
    connector = INFERENCE[name]()
    fresh = _fresh(kind)
    episodes = [fresh] if kind == "discrete" else [_ready(), fresh]
    batch_ = {"given": 1}
    with pytest.raises(ValueError, match="episode 'fresh' holds no observation yet"):
        connector(episodes, batch_)
    assert batch_ == {"given": 1}


def test_inference_rows_of_unreset_episode_refused_learner_rows_empty():
    fresh = _fresh("box")
    assert EpisodeConnector().rows(fresh) == (0, 0)
    with pytest.raises(ValueError, match="EpisodeConnector\\(inference=True\\): episode 'fresh'"):
        EpisodeConnector(inference=True).rows(fresh)
    # A reset episode still gives its one row.
    assert EpisodeConnector(inference=True).rows(_ready()) == (0, 1)
    out = FrameStack(2, inference=True)([_ready()], {})["obs"]
    assert out.shape == (1, 2, 2)


# --- 2. flatten_rows refuses leaves of other row counts --------------------------------------

FLATTEN_REFUSALS = {
    "fewer rows re-cut": (
        {"a": np.zeros((2, 1)), "b": np.arange(4.0).reshape(4, 1)},
        None,
        r"leaf \['b'\] has 4 rows, leaf \['a'\] 2",
    ),
    "rows not dividing": (
        {"a": np.zeros((2, 1)), "b": np.zeros((3, 1))},
        None,
        r"leaf \['b'\] has 3 rows",
    ),
    "0-d leaf": (np.float32(1.0), None, "the value is 0-d"),
    "0-d nested leaf": ({"a": np.zeros(2), "b": np.float32(1)}, None, r"leaf \['b'\] is 0-d"),
    "tuple leaf": ((np.zeros((2, 1)), np.zeros((1, 2))), None, r"leaf \[1\] has 1 rows"),
    "rows given differ": (np.zeros((0, 2)), 1, "has 0 rows, where rows=1 were given"),
}


@pytest.mark.parametrize("case", sorted(FLATTEN_REFUSALS))
def test_flatten_rows_refuses_other_row_counts(case):
    value, rows, message = FLATTEN_REFUSALS[case]
    with pytest.raises(ValueError, match=message):
        flatten_rows(value, rows, name="flatten_rows")


def test_flatten_rows_keeps_matching_rows():
    out = flatten_rows({"a": np.zeros((2, 2)), "b": np.ones(2)}, 2)
    assert out.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    assert flatten_rows({}, rows=3).shape == (3, 0)


# --- 3. rows of numbers do not join rows of text ------------------------------------------


def _ep(id_, obs, actions, obs_space=None, emo=None):
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=actions,
        rewards=[0.0] * len(actions),
        observation_space=obs_space,
        extra_model_outputs=emo,
        len_lookback_buffer=0,
    )


def _ints_and_text():
    return [
        _ep("ints", [0, 1, 2], [0, 1], gym.spaces.Discrete(3)),
        _ep("text", ["a", "bb", "c"], [0, 1], gym.spaces.Text(3)),
    ]


JOIN_REFUSALS = {
    "obs Discrete and Text": (lambda: AddLearnerColumns(["obs"]), _ints_and_text, "obs"),
    "framestack ints and str": (
        lambda: FrameStack(1),
        lambda: [_ep("a", [0, 1], [0]), _ep("b", ["x", "y"], [0])],
        "obs",
    ),
    "actions int and str": (
        lambda: AddLearnerColumns(["actions"]),
        lambda: [_ep("a", [0, 0, 0], [1, 2]), _ep("b", [0, 0, 0], ["left", "up"])],
        "actions",
    ),
    "prev actions int and str": (
        lambda: PrevActionsPrevRewards(1, 0, one_hot_discrete=False),
        lambda: [_ep("a", [0, 0, 0], [1, 2]), _ep("b", [0, 0, 0], ["left", "up"])],
        "prev_n_actions",
    ),
    "extra output bool and str": (
        lambda: AddLearnerColumns(["vf"]),
        lambda: [
            _ep("a", [0, 0], [1], emo={"vf": [True]}),
            _ep("b", [0, 0], [1], emo={"vf": ["x"]}),
        ],
        "vf",
    ),
    "actions bytes and str": (
        lambda: AddLearnerColumns(["actions"]),
        lambda: [_ep("a", [0, 0], [b"x"]), _ep("b", [0, 0], ["y"])],
        "actions",
    ),
}


@pytest.mark.parametrize("case", sorted(JOIN_REFUSALS))
def test_number_rows_do_not_join_text_rows(case):
    make, episodes, key = JOIN_REFUSALS[case]
    batch_ = {"given": 1}
    with pytest.raises(ValueError, match=f"the episodes' '{key}' rows do not join: episode"):
        make()(episodes(), batch_)
    assert batch_ == {"given": 1}


def test_numbers_still_join_as_numpy_promotes():
    eps = [_ep("a", [0, 0, 0], [1, 2]), _ep("b", [0, 0, 0], [0.5, 1.5])]
    out = AddLearnerColumns(["actions"])(eps, {})["actions"]
    assert out.dtype == np.float64 and out.tolist() == [1.0, 2.0, 0.5, 1.5]
    texts = [_ep("a", ["x", "y"], [0]), _ep("b", ["long", "z"], [0])]
    assert AddLearnerColumns(["obs"])(texts, {})["obs"].tolist() == ["x", "long"]


def test_concat_rows_and_join_leaves_refuse_text_promotion():
    from episodes.connectors.joining import join_leaves

    with pytest.raises(ValueError, match="numpy would turn the int64 rows into strings"):
        concat_rows([np.array([1, 2]), np.array(["a"])])
    with pytest.raises(ValueError, match=r"numpy would turn the \|S1 rows into strings"):
        join_leaves([np.array(["a"]), np.array([b"b"])])
    # Nested parts, object columns and parts without rows join as before.
    nested = concat_rows([{"x": np.array([1])}, {"x": np.array([0.5])}])
    assert nested["x"].tolist() == [1.0, 0.5]
    assert concat_rows([np.array([1], object), np.array([2])]).tolist() == [1, 2]
    assert concat_rows([np.array([]), np.array(["a"])]).tolist() == ["a"]


# --- 4. Dict spaces with int and str keys: a clear ValueError -------------------------------

MIXED = gym.spaces.Dict({1: gym.spaces.Discrete(2), "a": gym.spaces.Box(-1, 1, (2,), np.float32)})


def _mixed_episode():
    space = gym.spaces.Dict(MIXED.spaces)
    space.seed(0)
    return SingleAgentEpisode(
        "m",
        observations=[space.sample() for _ in range(3)],
        actions=[space.sample() for _ in range(2)],
        rewards=[0.0, 0.0],
        observation_space=MIXED,
        action_space=MIXED,
        len_lookback_buffer=0,
    )


MIXED_CONNECTORS = {
    "flatten": (lambda: FlattenObservations(), "FlattenObservations' 'obs' column"),
    "framestack": (lambda: FrameStack(2), "FrameStack's 'obs' column"),
    "framestack inference": (lambda: FrameStack(2, inference=True), "FrameStack's 'obs'"),
    "framestack flat": (lambda: FrameStack(2, flatten=True), "FrameStack's 'obs' column"),
    "learner": (lambda: AddLearnerColumns(["obs"]), "AddLearnerColumns' 'obs' column"),
    "prev raw": (
        lambda: PrevActionsPrevRewards(1, 0, one_hot_discrete=False),
        "'prev_n_actions' column",
    ),
    "prev one-hot": (lambda: PrevActionsPrevRewards(1, 0), "'prev_n_actions' column"),
}


@pytest.mark.parametrize("case", sorted(MIXED_CONNECTORS))
def test_unsortable_dict_keys_are_a_clear_value_error(case):
    make, name = MIXED_CONNECTORS[case]
    batch_ = {"given": 1}
    with pytest.raises(ValueError, match=f"{name}.*dict keys \\[1, 'a'\\] do not sort"):
        make()([_mixed_episode()], batch_)
    assert batch_ == {"given": 1}


def test_batch_with_layout_refuses_unsortable_keys_like_batch_in_space():
    items = [{1: 0, "a": np.zeros(2, np.float32)}] * 2
    for reader in (batch_in_space, batch_with_layout):
        with pytest.raises(ValueError, match=r"dict keys \[1, 'a'\] do not sort"):
            reader(items, MIXED)


# --- 5. zero-size Box items recorded as lists: one dtype whatever the cut -----------------


def _zero_obs_episode():
    space = gym.spaces.Box(-1, 1, (2, 0), np.float32)
    return SingleAgentEpisode(
        "e",
        observations=[[[], []] for _ in range(5)],
        actions=[0] * 4,
        rewards=[0.0] * 4,
        observation_space=space,
        len_lookback_buffer=0,
    )


def _zero_action_episode():
    return SingleAgentEpisode(
        "a",
        observations=[0] * 5,
        actions=[[] for _ in range(4)],
        rewards=[0.0] * 4,
        action_space=gym.spaces.Box(-1, 1, (0,), np.float32),
        len_lookback_buffer=0,
    )


ZERO_SIZE = {
    "framestack": (_zero_obs_episode, lambda: FrameStack(2), "obs"),
    "framestack inference": (_zero_obs_episode, lambda: FrameStack(2, inference=True), "obs"),
    "prev actions": (
        _zero_action_episode,
        lambda: PrevActionsPrevRewards(1, 0, one_hot_discrete=False),
        "prev_n_actions",
    ),
}


@pytest.mark.parametrize("case", sorted(ZERO_SIZE))
def test_zero_size_list_items_one_dtype_whatever_the_cut(case):
    make_episode, make, key = ZERO_SIZE[case]
    chunk = make_episode().slice(slice(2, 4), len_lookback_buffer=2)  # no padding needed
    forms = {"whole": make_episode(), "numpy": make_episode().to_numpy(), "chunk": chunk}
    dtypes = {form: make()([ep], {})[key].dtype for form, ep in forms.items()}
    assert dtypes == dict.fromkeys(dtypes, np.dtype(np.float64))


def test_batch_types_empty_lists_float64_beside_arrays():
    filler = np.zeros((2, 0), np.float32)
    assert batch([filler, [[], []]]).dtype == np.float64
    box = gym.spaces.Box(-1, 1, (2, 0), np.float32)
    assert batch_in_space([[[], []], [[], []]], box).dtype == np.float64
    assert batch_in_space([[[], []], filler], box).dtype == np.float64
    # Arrays alone keep their dtype; non-empty rows are untouched.
    assert batch([filler, filler]).dtype == np.float32
    assert batch([np.zeros(1, np.float32), [0.5]]).dtype == np.float64


def test_zero_size_inference_frames_padded_or_not_one_dtype():
    space = gym.spaces.Box(-1, 1, (2, 0), np.float32)

    def one_obs():
        return SingleAgentEpisode(
            "e", observations=[[[], []]], observation_space=space, len_lookback_buffer=0
        )

    stack = FrameStack(2, inference=True)  # the one observation is padded with a filler frame
    padded = stack([one_obs()], {})["obs"]
    assert padded.shape == (1, 2, 2, 0)
    assert padded.dtype == stack([one_obs().to_numpy()], {})["obs"].dtype == np.float64

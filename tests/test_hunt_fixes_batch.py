"""Regression tests for bugs found by the batch/connector hunt (fixbatch8).

Each test failed before its fix:

- ``episodes_to_batch`` appended an extra model output named like a standard column (``t``,
  ``dones``, ``obs`` ...) onto that column, doubling its rows.
- A list-mode episode whose Tuple-space items are Python lists (gymnasium's ``Tuple`` contains
  them) failed in FrameStack / PrevActionsPrevRewards as soon as a row needed padding.
- ``equal_in_space`` told a list row from the same float32 row of a float32 Box apart, so
  ``concat_episode``, ``validate_dataset`` and ``load_episode`` refused valid joins.
- Connector window sizes were truncated by ``int()`` (2.7 -> 2, True -> 1) and
  ``AddLearnerColumns(columns="obs")`` read the string letter by letter.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, FrameStack, PrevActionsPrevRewards
from episodes.converter import episodes_to_batch
from episodes.io import EpisodeWriter, load_episode, validate_dataset
from episodes.spaces import batch_in_space, equal_in_space


def _episode(**extra: list[float]) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0],
        actions=[5, 6],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
        extra_model_outputs=extra,
    )


# ------------------------------------------------------------ 1. extra outputs vs standard columns
STANDARD = ["obs", "next_obs", "actions", "rewards", "terminateds", "truncateds", "dones", "t",
            "eps_id", "chunk"]  # fmt: skip


@pytest.mark.parametrize("key", STANDARD)
def test_to_batch_refuses_an_extra_output_named_like_a_column(key):
    with pytest.raises(ValueError, match=f"extra model outputs \\['{key}'\\]"):
        episodes_to_batch([_episode(**{key: [100.0, 200.0]})])


@pytest.mark.parametrize("key", STANDARD)
def test_to_batch_without_extra_outputs_ignores_such_a_name(key):
    batch = episodes_to_batch([_episode(**{key: [100.0, 200.0]})], extra_model_outputs=False)
    assert {len(column) for column in batch.values()} == {2}
    assert batch["terminateds"].tolist() == [False, False]  # not the extra output's values
    assert batch["t"].tolist() == [0, 1]


def test_to_batch_keeps_other_extra_outputs():
    batch = episodes_to_batch([_episode(vf_preds=[0.5, 0.25])])
    assert batch["vf_preds"].tolist() == [0.5, 0.25]
    assert {len(column) for column in batch.values()} == {2}


@pytest.mark.parametrize("key", ["t", "obs", "rewards", "eps_id", "infos"])
def test_add_learner_columns_refuses_an_extra_output_named_like_a_column(key):
    batch = {"kept": 1}
    with pytest.raises(ValueError, match=f"extra model outputs \\['{key}'\\]"):
        AddLearnerColumns((*AddLearnerColumns().columns, "infos"))(
            [_episode(**{key: [100.0, 200.0]})], batch
        )
    assert batch == {"kept": 1}


def test_add_learner_columns_takes_such_a_name_when_it_writes_no_such_column():
    out = AddLearnerColumns(("obs", "actions"), extra_model_outputs=False)(
        [_episode(t=[100.0, 200.0])], {}
    )
    assert sorted(out) == ["actions", "obs"]
    kept = AddLearnerColumns(("obs", "actions"))([_episode(obs=[7.0, 8.0])], {"obs": "mine"})
    assert kept["obs"] == "mine" and kept["actions"].tolist() == [5, 6]


# ------------------------------------------------------------ 2. Tuple items given as lists
_TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,), np.float32)))


def _tuple_episode() -> SingleAgentEpisode:
    obs = [[i % 2, np.full(2, i / 10, np.float32)] for i in range(4)]
    acts = [[1, np.zeros(2, np.float32)], [0, np.ones(2, np.float32)], [1, np.zeros(2, np.float32)]]
    assert all(_TUPLE.contains(o) for o in obs)
    return SingleAgentEpisode(
        observations=obs,
        actions=acts,
        rewards=[1.0, 2.0, 3.0],
        observation_space=_TUPLE,
        action_space=_TUPLE,
        len_lookback_buffer=0,
    )


TUPLE_CASES = {
    "frame_stack": (lambda: FrameStack(2), "obs"),
    "frame_stack_flatten": (lambda: FrameStack(3, flatten=True), "obs"),
    "prev_actions_one_hot": (lambda: PrevActionsPrevRewards(2, 1), "prev_n_actions"),
    "prev_actions_raw": (
        lambda: PrevActionsPrevRewards(2, 1, one_hot_discrete=False),
        "prev_n_actions",
    ),
}


@pytest.mark.parametrize("case", list(TUPLE_CASES))
def test_tuple_items_given_as_lists_pad_as_in_numpy_mode(case):
    make, key = TUPLE_CASES[case]
    listed = make()([_tuple_episode()], {})[key]
    numpyd = _tuple_episode()
    numpyd.to_numpy()
    expected = make()([numpyd], {})[key]
    assert type(listed) is type(expected)
    for got, want in zip(_leaves(listed), _leaves(expected), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def _leaves(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def test_batch_in_space_walks_mixed_tuple_and_list_items_by_position():
    items = [(0, np.zeros(2, np.float32)), [1, np.ones(2, np.float32)]]
    stacked = batch_in_space(items, _TUPLE)
    assert isinstance(stacked, tuple)
    assert stacked[0].tolist() == [0, 1]
    assert stacked[1].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    all_lists = batch_in_space([list(item) for item in items], _TUPLE)
    assert isinstance(all_lists, list)  # items all of one kind keep it


def test_batch_in_space_tuple_of_wrong_length_still_refused():
    with pytest.raises(ValueError):
        batch_in_space([(0, np.zeros(2, np.float32)), [1]], _TUPLE)


# ------------------------------------------------------------ 3. equal_in_space and dtypes
_BOX32 = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

EQUAL_CASES = {
    # name: (a, b, space, equal)
    "f32_list_vs_array": ([0.0, 0.1], np.float32([0.0, 0.1]), _BOX32, True),
    "f32_list_vs_array_differs": ([0.0, 0.2], np.float32([0.0, 0.1]), _BOX32, False),
    "f32_nan": ([np.nan, 0.5], np.float32([np.nan, 0.5]), _BOX32, True),
    "f32_other_shape": ([0.0, 0.1, 0.2], np.float32([0.0, 0.1]), _BOX32, False),
    "int_box_no_float_cast": (
        [0.5, 0.0],
        np.int64([0, 0]),
        gym.spaces.Box(-1, 1, (2,), np.int64),
        False,
    ),
    "multibinary_int8": ([0, 1, 1], np.int8([0, 1, 1]), gym.spaces.MultiBinary(3), True),
    "dict_f32": (
        {"a": [0.0, 0.1], "n": 2},
        {"a": np.float32([0.0, 0.1]), "n": np.int64(2)},
        gym.spaces.Dict({"a": _BOX32, "n": gym.spaces.Discrete(3)}),
        True,
    ),
    "tuple_list_vs_tuple": (
        [1, [0.0, 0.1]],
        (1, np.float32([0.0, 0.1])),
        gym.spaces.Tuple((gym.spaces.Discrete(2), _BOX32)),
        True,
    ),
    "no_space_list_is_structure": ([0.0, 0.5], np.float64([0.0, 0.5]), None, False),
    # A cast that would change a value (wrap an int, overflow a float) is not made: distinct
    # items out of the space's range stay distinct.
    "multibinary_wrap": ([256, 0], np.int8([0, 0]), gym.spaces.MultiBinary(2), False),
    "int8_multidiscrete_wrap": (
        [257, 0],
        np.array([1, 0], np.int8),
        gym.spaces.MultiDiscrete(np.array([3, 3], np.int8)),
        False,
    ),
    "f32_overflow": ([1e300, 0.0], [1e301, 0.0], _BOX32, False),
    "f32_overflow_vs_inf": ([1e300, 0.0], np.float32([np.inf, 0.0]), _BOX32, False),
}


@pytest.mark.parametrize("case", list(EQUAL_CASES))
def test_equal_in_space(case):
    a, b, space, equal = EQUAL_CASES[case]
    assert equal_in_space(a, b, space) is equal
    assert equal_in_space(b, a, space) is equal


def test_batch_in_space_keeps_the_items_dtype():
    # contract 2.3: leaves keep the items' dtype; only the comparison reads the space's
    assert batch_in_space([[0.0, 0.5]], _BOX32).dtype == np.float64


def _float32_pieces():
    head = SingleAgentEpisode("e", observation_space=_BOX32, action_space=gym.spaces.Discrete(2))
    head.add_env_reset(np.zeros(2, np.float32))
    head.add_env_step(np.float32([0.0, 0.1]), 1, 1.0)
    tail = SingleAgentEpisode(
        "e",
        observation_space=_BOX32,
        action_space=gym.spaces.Discrete(2),
        t_started=head.t,
        observations=[[0.0, float(np.float32(0.1))]],
        len_lookback_buffer=0,
    )
    tail.add_env_step([0.0, 0.25], 0, 1.0)
    return head, tail


def test_concat_episode_joins_a_list_row_of_a_float32_box():
    head, tail = _float32_pieces()
    head.concat_episode(tail)
    assert len(head) == 2


def test_dataset_of_float32_list_rows_validates_and_loads(tmp_path):
    head, tail = _float32_pieces()
    head.to_numpy()
    with EpisodeWriter(tmp_path / "d") as writer:
        writer.write(head)
        writer.write(tail)
    report = validate_dataset(tmp_path / "d")
    assert report.ok, report.problems
    assert len(load_episode(tmp_path / "d", "e")) == 2


# ------------------------------------------------------------ 4. connector arguments
BAD_COUNTS = {
    "frame_stack_float": (lambda: FrameStack(2.7), TypeError, "FrameStack's n"),
    "frame_stack_bool": (lambda: FrameStack(True), TypeError, "FrameStack's n"),
    "frame_stack_str": (lambda: FrameStack("2"), TypeError, "FrameStack's n"),
    "frame_stack_zero": (lambda: FrameStack(0), ValueError, "FrameStack's n"),
    "prev_float_actions": (lambda: PrevActionsPrevRewards(1.5, 1), TypeError, "n_actions"),
    "prev_float_rewards": (lambda: PrevActionsPrevRewards(1, 0.5), TypeError, "n_rewards"),
    "prev_numpy_float": (
        lambda: PrevActionsPrevRewards(np.float64(2.9), 1),
        TypeError,
        "n_actions",
    ),
    "prev_bool": (lambda: PrevActionsPrevRewards(1, np.True_), TypeError, "n_rewards"),
    "prev_negative": (lambda: PrevActionsPrevRewards(-1, 1), ValueError, "n_actions"),
    "learner_bare_str": (lambda: AddLearnerColumns(columns="obs"), TypeError, "'obs'"),
    "learner_non_str": (lambda: AddLearnerColumns(columns=("obs", 3)), TypeError, "strings"),
}


@pytest.mark.parametrize("case", list(BAD_COUNTS))
def test_connector_arguments_are_checked_when_made(case):
    make, error, words = BAD_COUNTS[case]
    with pytest.raises(error, match=words):
        make()


def test_numpy_integers_are_counts():
    assert FrameStack(np.int64(3)).n == 3
    conn = PrevActionsPrevRewards(np.int32(2), 0)
    assert (conn.n_actions, conn.n_rewards) == (2, 0)
    assert type(conn.n_actions) is int


def test_add_learner_columns_names_an_unknown_column():
    batch = {"kept": 1}
    with pytest.raises(KeyError, match="no column 'observations'.*'obs'.*'vf'"):
        AddLearnerColumns(("observations",))([_episode(vf=[0.0, 1.0])], batch)
    assert batch == {"kept": 1}


def test_add_learner_columns_takes_an_extra_output_every_episode_has():
    first, second = _episode(vf=[0.0, 1.0]), _episode(vf=[2.0, 3.0], other=[0.0, 0.0])
    out = AddLearnerColumns(("vf",), extra_model_outputs=False)([first, second], {})
    assert out["vf"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(KeyError, match="no column 'other'"):
        AddLearnerColumns(("other",), extra_model_outputs=False)([first, second], {})


def test_copies_of_episodes_are_untouched_by_refusals():
    ep = _episode(t=[100.0, 200.0])
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError):
        episodes_to_batch([ep])
    assert ep.get_extra_model_outputs("t") == before.get_extra_model_outputs("t")

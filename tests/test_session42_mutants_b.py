"""Behaviour that hand-made mutants of ``episodes.runner.policy`` and ``episodes.io.minari_values``
showed no test pinned (session 42, second set).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Policy: a seeded ``RandomPolicy`` repeats its actions and names its space in its repr; an output
holding no batch is refused; a list numpy cannot shape is refused in its own words (an object's
own error quoted and chained, even nested; a ragged list called one); a changed output shape is
named leaf by leaf. Minari values: dict / tuple values or columns unlike their space, Text
values that are no str, items of another shape, string columns, columns of another length,
infos that are no dict or hold an empty array are refused with a ``DatasetError``; a column is
cast only where that is safe; episodes without spaces take the dataset's pair (in order), ones
that do not stack are refused; integer rewards float64 holds (the dtype's minimum too) are
exported and others refused; NUL-ended Text leaves are found inside tuples (only str values of
Text leaves are read); a layout mismatch is described key by key.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io.errors import DatasetError
from episodes.io.minari_values import (
    EpisodeBuffers,
    cast_to_space,
    split_infos,
    split_steps,
    stack_infos,
    text_ends_in_nul,
)
from episodes.runner import RandomPolicy
from episodes.runner.policy import check_outputs, check_shapes, output_shapes

# ---------------------------------------------------------------------- runner.policy


@pytest.mark.parametrize(
    "space",
    [
        pytest.param(gym.spaces.MultiDiscrete([5, 5, 5, 5]), id="multi-discrete"),
        pytest.param(gym.spaces.Box(-1.0, 1.0, (4, 3)), id="box"),
    ],
)
def test_a_seeded_random_policy_repeats_its_actions(space: gym.Space[Any]) -> None:
    # mutant: `if seed is not None` -> `if seed is None` (the seed never reaches the space)
    first = RandomPolicy(space, seed=3)(None)[0]
    again = RandomPolicy(space, seed=3)(None)[0]
    other = RandomPolicy(space, seed=4)(None)[0]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_a_random_policy_names_its_space_in_its_repr() -> None:
    # mutant: `__repr__` returns None (repr() raises a TypeError)
    space = gym.spaces.MultiDiscrete([2, 3])
    assert repr(RandomPolicy(space)) == f"RandomPolicy({space})"


@pytest.mark.parametrize(
    ("actions", "extras", "name"),
    [
        pytest.param({}, {}, "actions", id="empty-dict-actions"),
        pytest.param(np.zeros(2), {"state": ()}, "extra output 'state'", id="empty-tuple-extra"),
        pytest.param(np.zeros(2), {"s": {"h": ()}}, "extra output 's'", id="nested-empty"),
    ],
)
def test_an_output_without_any_batch_is_refused(actions: Any, extras: Any, name: str) -> None:
    # mutant: the "holds no batch" raise deleted (nothing would record the output)
    with pytest.raises(ValueError, match=f"the policy's {name} holds no batch"):
        check_outputs(actions, extras, 2, None)


class _Unreadable:
    """An object whose ``__array__`` raises its own ``ValueError``."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise ValueError("no array for you")


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        pytest.param(
            [_Unreadable(), _Unreadable()],
            r"the policy's actions cannot be read as an array \(numpy reading a _Unreadable "
            r"in it raised: no array for you\)",
            id="own-error",
        ),
        pytest.param(
            [[1.0, [_Unreadable()]], [2.0, [3.0]]],
            r"the policy's actions cannot be read as an array \(numpy reading a _Unreadable ",
            id="own-error-nested",
        ),
        pytest.param(
            [[0.0, 1.0], [2.0]],
            r"the policy's actions is a list whose items differ in shape \(a ragged list\)",
            id="ragged",
        ),
    ],
)
def test_a_list_numpy_cannot_shape_is_refused_in_its_own_words(actions: Any, match: str) -> None:
    # mutants in _list_shape: `if own is not None` -> `if own is None`, its raise deleted,
    # and `own[1]` -> `own[0]` / `own[2]` in the message
    with pytest.raises(ValueError, match=match) as info:
        check_outputs(actions, {}, 2, None)
    if "cannot be read" in match:
        assert str(info.value.__cause__) == "no array for you"


@pytest.mark.parametrize(
    ("before", "after", "match"),
    [
        pytest.param(
            np.zeros(2),
            {"h": np.zeros(3)},
            r"changed shape from \(\(2,\),\) to \(\(3,\),\)",
            id="array-to-dict",
        ),
        pytest.param(
            np.zeros(2), {"h": np.zeros(2)}, r"changed nesting from \(2,\) to \{'h'", id="nesting"
        ),
        pytest.param(np.zeros(2), np.zeros(3), r"changed shape from \(2,\) to \(3,\)", id="array"),
        pytest.param(
            ((np.zeros(2),),),
            ((np.zeros(3),),),
            r"changed shape from \(\(2,\),\) to \(\(3,\),\):",
            id="tuple-in-tuple",
        ),
    ],
)
def test_a_changed_output_shape_is_named_leaf_by_leaf(before: Any, after: Any, match: str) -> None:
    # mutants in _shape_changed: `isinstance(before, dict) or isinstance(after, dict) or ...`
    # with either `or` -> `and` (a dict after an array, or a tuple in a tuple, named as a
    # whole rather than leaf by leaf)
    shapes = output_shapes(np.zeros(2), {"out": before})
    with pytest.raises(ValueError, match=r"the policy's extra output 'out' " + match):
        check_shapes(np.zeros(2), {"out": after}, shapes)


# ---------------------------------------------------------------------- io.minari_values


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"a": [1], "b": [2]}, id="extra-key"),
        pytest.param({"b": [2]}, id="missing-key"),
        pytest.param([{"a": 1}], id="not-a-dict"),
    ],
)
def test_cast_to_space_refuses_dict_values_with_other_keys(values: Any) -> None:
    # mutants: `not isinstance(values, dict) or set(values) != ...` -> `and`; its raise deleted
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3)})
    with pytest.raises(DatasetError, match=r"observations are not dicts with the keys \['a'\]"):
        cast_to_space(values, space, "observations")


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(([1], [0], [2]), id="three-items"),
        pytest.param([[1]], id="one-item"),
        pytest.param({0: [1], 1: [0]}, id="a-dict"),
    ],
)
def test_cast_to_space_refuses_tuple_values_of_another_length(values: Any) -> None:
    # mutants: `not isinstance(values, (tuple, list)) or len(values) != ...` -> `and`; its
    # raise deleted
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))
    with pytest.raises(DatasetError, match="actions are not tuples of 2 items"):
        cast_to_space(values, space, "actions")


@pytest.mark.parametrize(
    ("values", "space", "match"),
    [
        pytest.param(
            ["ab", 3], gym.spaces.Text(4), "hold a value that is not a str", id="text-not-str"
        ),
        pytest.param(
            [[0.5, 0.5, 0.5]],
            gym.spaces.Box(0, 1, (2,)),
            r"have items of shape \(3,\), their space",
            id="box-other-shape",
        ),
        pytest.param(
            [1, 2], gym.spaces.MultiDiscrete([3, 3]), r"have items of shape \(\),", id="scalars"
        ),
        pytest.param(
            np.array([["0.5", "0.5"]]),
            gym.spaces.Box(0, 1, (2,)),
            "have dtype <U3 and the space's dtype is float32",
            id="strings-to-float",
        ),
        pytest.param(
            np.array(["1"]),
            gym.spaces.Discrete(3),
            "have dtype <U1 and the space's dtype is int64",
            id="strings-to-int",
        ),
    ],
)
def test_cast_to_space_refuses_values_that_do_not_fit(
    values: Any, space: gym.Space[Any], match: str
) -> None:
    # mutants: the Text raise and the shape raise deleted; `_cast`'s `array.dtype.kind not in
    # "biuf" or dtype.kind not in "biuf"` -> `and` (a string column cast to numbers)
    with pytest.raises(DatasetError, match=match):
        cast_to_space(values, space, "observations")


@pytest.mark.parametrize(
    ("batched", "space", "match"),
    [
        pytest.param(
            [1, 2], gym.spaces.Dict({"a": gym.spaces.Discrete(3)}), "not a dict", id="dict"
        ),
        pytest.param(
            (np.array([1, 2]),),
            gym.spaces.Tuple((gym.spaces.Discrete(3),) * 2),
            "not a tuple",
            id="tuple-short",
        ),
        pytest.param(
            (np.array([1, 2]),) * 3,
            gym.spaces.Tuple((gym.spaces.Discrete(3),) * 2),
            "not a tuple",
            id="tuple-long",
        ),
        pytest.param(
            {0: [1, 2], 1: [0, 1]},
            gym.spaces.Tuple((gym.spaces.Discrete(3),) * 2),
            "not a tuple",
            id="tuple-as-dict",
        ),
    ],
)
def test_split_steps_refuses_columns_unlike_their_space(
    batched: Any, space: gym.Space[Any], match: str
) -> None:
    # mutants: the Dict and Tuple raises deleted; `not isinstance(batched, (tuple, list)) or
    # len(batched) != ...` -> `and`
    with pytest.raises(DatasetError, match=f"observations are {match} as their"):
        split_steps(batched, space, 2, "observations")


@pytest.mark.parametrize(
    "observations",
    [
        pytest.param([[0.5, 0.0], [0.5]], id="ragged-short"),
        pytest.param([[0.5, 0.0], [0.5, 0.0, 1.0]], id="ragged-long"),
    ],
)
def test_an_episode_that_does_not_stack_in_its_spaces_is_refused(observations: Any) -> None:
    # mutant: the "does not fit its spaces" raise deleted (to_numpy's error swallowed)
    pytest.importorskip("minari")
    buffers = EpisodeBuffers((gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)), infos=False)
    episode = SingleAgentEpisode(
        "r", observations=observations, actions=[1], rewards=[1.0], len_lookback_buffer=0
    )
    with pytest.raises(DatasetError, match="episode 'r' does not fit its spaces: to_numpy"):
        buffers.add(episode)
    assert buffers.buffers == []


def test_an_episode_without_spaces_takes_the_datasets_pair() -> None:
    # mutant: `episode.action_space = self.spaces[1]` -> `self.spaces[0]` (actions stacked
    # under the observation space)
    pytest.importorskip("minari")
    actions = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(-1, 1, (3,))})
    buffers = EpisodeBuffers((gym.spaces.Box(-1, 1, (2,)), actions), infos=False)
    episode = SingleAgentEpisode(
        "r",
        observations=[[0.5, 0.0]] * 3,
        actions=[{"a": 1, "b": [0.0, 0.5, 1.0]}, {"a": 0, "b": [1.0, 0.5, 0.0]}],
        rewards=[1.0] * 2,
        len_lookback_buffer=0,
    )
    buffers.add(episode)
    assert episode.action_space == actions
    stored = buffers.buffers[0].actions
    np.testing.assert_array_equal(stored["a"], [1, 0])
    np.testing.assert_array_equal(stored["b"], [[0.0, 0.5, 1.0], [1.0, 0.5, 0.0]])


def _reward_buffers(rewards: Any) -> EpisodeBuffers:
    buffers = EpisodeBuffers((gym.spaces.Discrete(3),) * 2, infos=False)
    episode = SingleAgentEpisode(
        "r", observations=[0, 1, 2], actions=[1, 1], rewards=rewards, len_lookback_buffer=0
    )
    buffers.add(episode)
    return buffers


@pytest.mark.parametrize(
    "rewards",
    [
        pytest.param(np.array([-128, 127], np.int8), id="int8-extremes"),
        pytest.param(np.array([0, 255], np.uint8), id="uint8-extremes"),
        pytest.param(np.array([-(2**63), 2**53]), id="int64-min"),
    ],
)
def test_integer_rewards_float64_holds_are_exported(rewards: np.ndarray) -> None:
    # mutant in _float64_rewards: `cast >= float(info.min)` -> `>` (the dtype's minimum refused)
    pytest.importorskip("minari")
    assert _reward_buffers(rewards).buffers[0].rewards == [float(r) for r in rewards]


@pytest.mark.parametrize(
    "rewards",
    [
        pytest.param(np.array([2**53 + 1, 0]), id="above-2**53"),
        pytest.param(np.array([2**63 - 1, 0]), id="int64-max"),
    ],
)
def test_integer_rewards_float64_would_change_are_refused(rewards: np.ndarray) -> None:
    # mutant in _float64_rewards: `fits.all() and array_equal(back, rewards)` -> `or` (2**53 + 1
    # exported as 2**53)
    pytest.importorskip("minari")
    with pytest.raises(DatasetError, match="has rewards of dtype int64 and Minari stores float64"):
        _reward_buffers(rewards)


@pytest.mark.parametrize(
    ("items", "space", "expected"),
    [
        pytest.param(
            [("a\x00", 1)],
            gym.spaces.Tuple((gym.spaces.Text(2, charset="a\x00"), gym.spaces.Discrete(2))),
            True,
            id="tuple",
        ),
        pytest.param(
            [{"t": "a", "n": 1}, {"t": "a\x00", "n": 0}],
            gym.spaces.Dict(
                {"t": gym.spaces.Text(2, charset="a\x00"), "n": gym.spaces.Discrete(2)}
            ),
            True,
            id="dict",
        ),
        pytest.param(
            [("a", 1)],
            gym.spaces.Tuple((gym.spaces.Text(2, charset="a\x00"), gym.spaces.Discrete(2))),
            False,
            id="no-nul",
        ),
    ],
)
def test_a_nul_ended_text_leaf_is_found_inside_tuples_and_dicts(
    items: list[Any], space: gym.Space[Any], expected: bool
) -> None:
    # mutant: `_has_text`'s Tuple branch returns None (a Tuple's Text leaves never looked at)
    assert text_ends_in_nul(items, space) is expected


def test_an_info_of_another_layout_is_described_key_by_key() -> None:
    # mutants: `_describe` (or its inner `kind`) returns None
    infos = [
        {"x": 1.0, "v": np.zeros(3, np.float32)},
        {"x": "a", "v": np.zeros(3, np.float32)},
    ]
    with pytest.raises(DatasetError) as info:
        stack_infos(infos, None, "episode 'e'")
    assert str(info.value).startswith(
        "episode 'e', step 1: the info {'x': str, 'v': float32[3]} differs from the first "
        "exported step's {'x': float64, 'v': float32[3]}; "
    )


@pytest.mark.parametrize(
    ("infos", "kind"),
    [
        pytest.param([{"x": 1}, {"x": 2}], "list", id="list"),
        pytest.param(("x",), "tuple", id="tuple"),
    ],
)
def test_split_infos_refuses_infos_that_are_no_dict(infos: Any, kind: str) -> None:
    # mutant: the "not a dict of columns" raise deleted
    with pytest.raises(DatasetError, match=f"infos are a {kind}, not a dict of columns"):
        split_infos(infos, 2, "infos")


@pytest.mark.parametrize(
    ("infos", "why"),
    [
        pytest.param([[1], [2]], "it is a list, not a dict", id="lists"),
        pytest.param([{"x": 1}, "x"], "it is a str, not a dict", id="str-after-dict"),
        pytest.param([{"x": np.zeros(0)}], "its value 'x' is a ndarray", id="empty-array"),
        pytest.param(
            [{"x": np.zeros((2, 0), np.int32)}], "its value 'x' is a ndarray", id="empty-2d"
        ),
    ],
)
def test_stack_infos_refuses_infos_that_are_no_dict(infos: list[Any], why: str) -> None:
    # mutants: `_info_layout`'s "not a dict" answer returns None (the infos silently dropped);
    # `_info_kind`'s `array.size == 0` -> `== -1` (an empty array taken)
    with pytest.raises(DatasetError, match=f"Minari cannot store this info: {why}"):
        stack_infos(infos, None, "episode 'e'")


@pytest.mark.parametrize(
    ("column", "space", "expected"),
    [
        pytest.param(np.array([0.5, 1.5]), gym.spaces.Discrete(3), [0.5, 1.5], id="float-discrete"),
        pytest.param(
            np.array([0.1, 1.5]), gym.spaces.Box(0, 2, ()), [0.1, 1.5], id="float64-float32-box"
        ),
        pytest.param(
            np.array([1, 2], np.int32), gym.spaces.Discrete(3), [1, 2], id="int32-discrete"
        ),
    ],
)
def test_split_steps_casts_a_column_only_where_that_is_safe(
    column: np.ndarray, space: gym.Space[Any], expected: list[Any]
) -> None:
    # mutant: `array.dtype != dtype and np.can_cast(..., "safe")` -> `or` (an unsafe cast
    # truncates 0.5 to 0, or rounds 0.1 to float32)
    steps = split_steps(column, space, 2, "observations")
    assert [step.item() for step in steps] == expected
    assert all(step.dtype == np.result_type(column.dtype, space.dtype) for step in steps)


@pytest.mark.parametrize(
    ("column", "size"),
    [
        pytest.param(np.array([1, 2, 3]), 3, id="too-long"),
        pytest.param(np.array([1]), 1, id="too-short"),
        pytest.param(np.int64(1), None, id="unsized"),
    ],
)
def test_split_steps_refuses_a_column_of_another_length(column: Any, size: int | None) -> None:
    # mutant: `_sized`'s raise deleted
    with pytest.raises(DatasetError, match=f"observations hold {size} values where the episode"):
        split_steps(column, gym.spaces.Discrete(4), 2, "observations")


@pytest.mark.parametrize(
    ("items", "space"),
    [
        pytest.param([None, "a"], gym.spaces.Text(3), id="text-not-str"),
        pytest.param(
            [{"t": "a", "n": "b\x00"}],
            gym.spaces.Dict({"t": gym.spaces.Text(3), "n": gym.spaces.Discrete(2)}),
            id="str-in-discrete-leaf",
        ),
    ],
)
def test_text_ends_in_nul_reads_only_str_values_of_text_leaves(
    items: list[Any], space: gym.Space[Any]
) -> None:
    # mutant in _text_leaves: `isinstance(space, Text) and isinstance(item, str)` -> `or`
    assert text_ends_in_nul(items, space) is False

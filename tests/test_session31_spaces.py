"""Session 31 fixes: exotic spaces (text with NUL, Tuple items as arrays, empty parts).

One test per finding; each names its cases.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces as gs
from hypothesis import HealthCheck, given, settings

from episodes import SingleAgentEpisode
from episodes.spaces import equal_in_space
from episodes.testing import ConnectorContractError, check_connector, check_list_numpy_agree
from episodes.testing.compare import outputs_equal
from episodes.testing.strategies import chunked_episodes, episodes
from episodes.testing.strategies.episodes import stacks

QUIET = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))


def _episode(observations, space, **kw):
    return SingleAgentEpisode(
        "e",
        observations=observations,
        actions=[0] * (len(observations) - 1),
        rewards=[1.0] * (len(observations) - 1),
        observation_space=space,
        action_space=gs.Discrete(2),
        len_lookback_buffer=0,
        **kw,
    )


# ------------------------------------------- 1: get_sample_batch of text mixed with numbers
MIXED_ROWS = {
    "oneof_part_of_a_dict": (
        gs.Dict({"x": gs.OneOf([gs.Text(2), gs.Discrete(3)])}),
        [{"x": (np.int64(0), "ab")}, {"x": (np.int64(1), np.int64(2))}, {"x": (np.int64(0), "c")}],
    ),
    "dict_rows_without_a_space": (None, [{"x": "ab"}, {"x": 2}, {"x": "c"}]),
    "flat_rows_without_a_space": (None, ["ab", 2.5, "c"]),
}


@pytest.mark.parametrize("case", list(MIXED_ROWS))
def test_sample_batch_refuses_text_mixed_with_numbers_as_to_numpy_does(case):
    space, observations = MIXED_ROWS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = _episode(observations, space)
    with pytest.raises(ValueError, match="mix text and other values"):
        ep.get_sample_batch()
    with pytest.raises(ValueError, match="mix text and other values|no fixed layout"):
        SingleAgentEpisode.from_state(ep.get_state()).to_numpy()  # as numpy'ing refuses them
    # Text alone still makes a column, nested too.
    text = _episode([{"x": "ab"}, {"x": "c"}, {"x": "d"}], None)
    assert text.get_sample_batch()["obs"]["x"].tolist() == ["ab", "c"]


# ------------------------------------------------------ 2: text compared exactly (trailing NUL)
NUL_TEXT = gs.Text(3, charset="a\x00")


@pytest.mark.parametrize(
    ("space", "head", "tail"),
    [
        (NUL_TEXT, ["a", "a"], ["a\x00", "aa"]),
        (None, ["", ""], ["\x00\x00", "z"]),
        (gs.Dict({"t": NUL_TEXT}), [{"t": "a"}, {"t": "a"}], [{"t": "a\x00"}, {"t": "aa"}]),
        (gs.Tuple([NUL_TEXT, gs.Discrete(2)]), [("a", 0), ("a", 0)], [("a\x00", 0), ("aa", 1)]),
    ],
    ids=["text_space", "no_space", "text_in_dict", "text_in_tuple"],
)
def test_concat_and_equal_in_space_tell_text_apart_by_a_trailing_nul(space, head, tail):
    first = _episode(head, space)
    successor = _episode(tail, space, t_started=1)
    assert not equal_in_space(head[-1], tail[0], space)
    assert equal_in_space(tail[0], tail[0], space) and equal_in_space(head[-1], head[-1], space)
    before = first.get_state()
    with pytest.raises(AssertionError, match="first observation differs"):
        first.concat_episode(successor)
    assert first.get_observations() == before["observations"]["data"]
    # Strings of other widths (a numpy'd chunk's) still equal the same strings.
    assert equal_in_space(np.array(["ab"]), np.array(["ab"], dtype="<U5"), None)
    assert equal_in_space(np.str_("ab"), "ab", gs.Text(4))


# ------------------------------------------------------------ 3: Tuple items given as arrays
PAIR = gs.Tuple([gs.Discrete(3), gs.Discrete(2)])


def test_tuple_items_given_as_arrays_are_walked_by_position_in_both_modes():
    assert PAIR.contains(np.array([1, 0]))
    ep = SingleAgentEpisode("e", observation_space=PAIR, action_space=gs.Discrete(2))
    ep.add_env_reset(np.array([1, 0]))
    ep.add_env_step(np.array([2, 1]), 0, 1.0)
    listed_hot = ep.get_observations(one_hot_discrete=True)  # raised before
    listed_batch = ep.get_sample_batch()["obs"]
    ep.to_numpy()
    observations = ep.get_observations()
    assert isinstance(observations, tuple)  # the space's layout, not an (n, 2) array
    assert [o.tolist() for o in observations] == [[1, 2], [0, 1]]
    assert outputs_equal(listed_hot, ep.get_observations(one_hot_discrete=True))
    assert outputs_equal(listed_batch, ep.get_sample_batch()["obs"], check_dtype=True)
    padded = ep.get_observations(slice(-1, 1), neg_index_as_lookback=True, fill=0)
    assert [p.tolist() for p in padded] == [[0, 1], [0, 0]]
    ep.add_env_step(np.array([0, 1]), 0, 1.0)  # the array form of a valid item is stored
    ep.add_env_step((1, 1), 0, 1.0)
    assert [o.tolist() for o in ep.get_observations()] == [[1, 2, 0, 1], [0, 1, 1, 1]]
    # An episode numpy'd before its steps, and a Tuple part of a Dict, take array items too.
    early = SingleAgentEpisode("f", observation_space=PAIR, action_space=gs.Discrete(2))
    early.to_numpy()
    early.add_env_reset(np.array([1, 0]))
    early.add_env_step((2, 1), 0, 1.0)
    assert [o.tolist() for o in early.get_observations()] == [[1, 2], [0, 1]]
    nested = SingleAgentEpisode("g", observation_space=gs.Dict({"p": PAIR}))
    nested.add_env_reset({"p": np.array([1, 0])})
    nested.add_env_step({"p": np.array([2, 1])}, 0, 1.0)
    nested.to_numpy().add_env_step({"p": np.array([0, 0])}, 0, 1.0)
    assert [o.tolist() for o in nested.get_observations()["p"]] == [[1, 2, 0], [0, 1, 0]]
    with pytest.raises(ValueError):  # not an item: nothing recorded
        nested.add_env_step({"p": np.array([0, 0, 0])}, 0, 1.0)
    assert len(nested) == 2


# -------------------------------------------------- 4: a Text fill ending in NUL, numpy'd reads
@pytest.mark.parametrize("fill", ["x\x00", "\x00"], ids=["x_nul", "nul"])
@pytest.mark.parametrize(
    "space", [gs.Text(4), gs.Dict({"t": gs.Text(4)}), None], ids=["text", "dict", "no_space"]
)
def test_text_fill_ending_in_nul_is_whole_or_refused_never_cut(fill, space):
    items = ["ab", "cd", "ef"]
    observations = [{"t": i} for i in items] if isinstance(space, gs.Dict) else items
    ep = _episode(observations, space)

    def leaf(value):
        return value["t"] if isinstance(space, gs.Dict) else value

    listed = ep.get_observations(slice(-2, 1), neg_index_as_lookback=True, fill=fill)
    assert [leaf(v) for v in listed] == [fill, fill, "ab"]  # list mode pads with it whole
    ep.to_numpy()
    for indices in (slice(-2, 1), [-1, 0], [-2, -1], slice(1, -3, -1)):
        with pytest.raises(ValueError, match="ends in NUL"):
            ep.get_observations(indices, neg_index_as_lookback=True, fill=fill)
    assert leaf(ep.get_observations(-1, neg_index_as_lookback=True, fill=fill)) == fill
    padded = ep.get_observations(slice(-2, 1), neg_index_as_lookback=True, fill="x")
    assert leaf(padded).tolist() == ["x", "x", "ab"]


# ------------------------------------------ 5: strategies and a Text whose charset holds NUL
@pytest.mark.parametrize(
    "space",
    [NUL_TEXT, gs.Dict({"t": NUL_TEXT, "n": gs.Discrete(2)})],
    ids=["text", "text_in_dict"],
)
def test_strategies_draw_no_numpyd_episode_that_cut_a_nul(space):
    assert not stacks(space)
    with pytest.raises(ValueError, match="charset holds NUL"):
        episodes(space, gs.Discrete(2), numpy=True)

    @QUIET
    @given(episodes(space, gs.Discrete(2), min_len=1))
    def drawn_are_valid(ep):
        assert not ep.is_numpy
        assert all(space.contains(o) for o in ep.get_observations(slice(None)))

    @QUIET
    @given(chunked_episodes(observation_space=space, action_space=gs.Discrete(2)))
    def chunks_join(chunked):
        assert len(chunked.chunks) >= 1

    drawn_are_valid()
    chunks_join()
    check_connector(
        lambda eps, batch: {"obs": [e.get_observations() for e in eps]},
        observation_space=space,
        action_space=gs.Discrete(2),
        lookback=1,
        max_examples=20,
    )


# -------------------------------------- 6: an empty Dict or Tuple part beside other parts
@pytest.mark.parametrize(
    ("space", "item"),
    [
        (gs.Dict({"a": gs.Tuple([]), "b": gs.Discrete(2)}), lambda v: {"a": (), "b": v}),
        (gs.Dict({"a": gs.Dict({}), "b": gs.Discrete(2)}), lambda v: {"a": {}, "b": v}),
        (gs.Tuple([gs.Tuple([]), gs.Discrete(2)]), lambda v: ((), v)),
    ],
    ids=["empty_tuple_in_dict", "empty_dict_in_dict", "empty_tuple_in_tuple"],
)
def test_testing_toolkit_gives_an_empty_part_beside_others_a_numpy_mode(space, item):
    assert stacks(space)
    ep = SingleAgentEpisode(observation_space=space, action_space=gs.Discrete(2))
    ep.add_env_reset(item(0))
    ep.add_env_step(item(1), 0, 1.0)
    as_list = ep.get_observations()
    numpied = SingleAgentEpisode.from_state(ep.get_state()).to_numpy()
    assert outputs_equal(as_list, numpied.get_observations())
    assert not outputs_equal([item(0), item(0)], numpied.get_observations())

    @QUIET
    @given(episodes(space, gs.Discrete(2), numpy=True, min_len=1))
    def drawn(drawn_ep):
        assert drawn_ep.is_numpy

    drawn()

    def differs(eps, batch):  # the list form for list episodes, a batch for numpy'd ones
        return {"obs": [e.get_observations() if e.is_numpy else "list" for e in eps]}

    with pytest.raises(ConnectorContractError, match="list and numpy"):
        check_list_numpy_agree(differs, [ep])
    check_list_numpy_agree(lambda eps, b: {"o": [e.get_observations() for e in eps]}, [ep])
    # Items holding no value at all still have no numpy mode.
    assert not stacks(gs.Dict({"a": gs.Tuple([])}))
    assert not stacks(gym.spaces.Tuple([]))

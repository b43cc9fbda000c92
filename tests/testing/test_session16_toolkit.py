"""episodes.testing: flaky contracts, identity objects, list-vs-array compares, chunk items."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings

from episodes import SingleAgentEpisode
from episodes.testing import (
    ConnectorContractError,
    check_connector,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    check_list_numpy_agree,
    outputs_equal,
)
from episodes.testing.strategies import chunked_episodes, replay_in_chunks, spaces

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


# -- check_connector: a connector keeping state is one ConnectorContractError -----------------


def _tags_first_stepped_episode():
    seen = []

    def connector(episodes, batch):
        # Keeps state: writes into the first episode with steps it ever sees, never again, so
        # hypothesis's replay of the failing example passes (its FlakyFailure before the fix).
        for ep in episodes:
            if len(ep) and not seen:
                seen.append(ep.id_)
                ep.custom_data["seen"] = True
        return dict(batch)

    return connector


def _tags_new_ids():
    seen = set()

    def connector(episodes, batch):
        for ep in episodes:
            if ep.id_ not in seen:
                seen.add(ep.id_)
                ep.custom_data["seen"] = True
        return dict(batch)

    return connector


@pytest.mark.parametrize("make", [_tags_first_stepped_episode, _tags_new_ids])
def test_check_connector_raises_contract_error_for_a_stateful_connector(make):
    with pytest.raises(ConnectorContractError) as info:
        check_connector(make(), observation_space=OBS, max_examples=20)
    assert type(info.value) is ConnectorContractError  # not hypothesis's FlakyFailure
    assert "mutated input episode" in str(info.value)


def test_flaky_contract_error_says_the_connector_keeps_state():
    with pytest.raises(ConnectorContractError, match="behaved differently"):
        check_connector(_tags_first_stepped_episode(), observation_space=OBS, max_examples=20)


# -- check_does_not_mutate: objects compared by identity -------------------------------------


class _Plain:  # no __eq__: compared by identity
    def __init__(self) -> None:
        self.n = 0


def _episode_with_objects(numpy: bool = False) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2],
        observation_space=gym.spaces.Discrete(3),
        actions=[0, 1],
        rewards=[0.5, 1.0],
        infos=[{"obj": _Plain()}, {}, {}],
        len_lookback_buffer=0,
    )
    ep.custom_data["rng"] = np.random.default_rng(0)
    ep.custom_data["obj"] = _Plain()
    return ep.to_numpy() if numpy else ep


def _noop(eps, batch):
    return dict(batch)


def _reads_everything(eps, batch):
    return {"obs": [ep.get_observations() for ep in eps], "infos": [ep.get_infos() for ep in eps]}


def _samples_space(eps, batch):  # moves the space's generator, which space == ignores
    return {"sample": [ep.observation_space.sample() for ep in eps]}


def _draws_from_rng(eps, batch):
    return {"x": [ep.custom_data["rng"].random() for ep in eps]}


def _replaces_rng(eps, batch):
    for ep in eps:
        ep.custom_data["rng"] = np.random.default_rng(0)
    return dict(batch)


def _changes_attribute(eps, batch):
    for ep in eps:
        ep.custom_data["obj"].n = 1
    return dict(batch)


def _changes_info_object(eps, batch):
    for ep in eps:
        ep.get_infos(0)["obj"].n = 1
    return dict(batch)


KEEPS = {"no-op": _noop, "reads": _reads_everything, "samples space": _samples_space}
BREAKS = {
    "draws from stored rng": (_draws_from_rng, "changed in place .*Generator"),
    "replaces stored rng": (_replaces_rng, r"custom_data\['rng'\]"),
    "changes an attribute": (_changes_attribute, "changed in place .*_Plain"),
    "changes an info's object": (_changes_info_object, "changed in place .*_Plain"),
}


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("name", list(KEEPS))
def test_does_not_mutate_passes_with_identity_objects(name, numpy):
    ep = _episode_with_objects(numpy)
    check_does_not_mutate(KEEPS[name], [ep])
    check_does_not_mutate(KEEPS[name], [ep, ep])  # one episode twice


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("name", list(BREAKS))
def test_does_not_mutate_catches_identity_objects_replaced_or_changed(name, numpy):
    connector, message = BREAKS[name]
    ep = _episode_with_objects(numpy)
    with pytest.raises(ConnectorContractError, match=message):
        check_does_not_mutate(connector, [ep])
    # The caller's objects stay as they were: the connector got copies.
    assert ep.custom_data["obj"].n == 0 and ep.get_infos(0)["obj"].n == 0
    assert ep.custom_data["rng"].random() == np.random.default_rng(0).random()


# -- outputs_equal: a list against an array or tensor -------------------------------------------


UNEQUAL = {
    "int vs its string": (["a", 1], np.array(["a", "1"])),
    "float vs its string": ([1.5, "x"], np.array(["1.5", "x"])),
    "bytes with trailing NUL": ([b"a\x00"], np.array([b"a"])),
    "str with trailing NUL": (["a\x00"], np.array(["a"])),
    "tuple int vs string": (("a", 1), np.array(["a", "1"])),
    "nested rows": ([["a", 1]], np.array([["a", "1"]])),
}
EQUAL = {
    "plain ints": ([1, 2], np.array([1, 2])),
    "plain floats": ([1.0, np.nan], np.array([1.0, np.nan])),
    "strings": (["a", "bc"], np.array(["a", "bc"])),
    "bytes": ([b"a", b"b"], np.array([b"a", b"b"])),
    "empty list, array without rows": ([], np.zeros((0, 2))),
    "rows of arrays": ([np.zeros(2), np.ones(2)], np.array([[0.0, 0.0], [1.0, 1.0]])),
}


@pytest.mark.parametrize("name", list(UNEQUAL))
def test_list_against_array_is_not_equal_through_numpy_conversions(name):
    a, b = UNEQUAL[name]
    assert not outputs_equal(a, b)
    assert not outputs_equal(b, a)


@pytest.mark.parametrize("name", list(EQUAL))
def test_list_against_array_of_the_same_values_is_equal(name):
    a, b = EQUAL[name]
    assert outputs_equal(a, b) and outputs_equal(b, a)


def test_list_numpy_agree_skips_text_beside_numbers_which_to_numpy_refuses():
    # A spaceless episode: numpy would stack ["a", 1] into array(["a", "1"]); to_numpy
    # refuses that, so there is no numpy'd episode to compare with.
    ep = SingleAgentEpisode(
        observations=["a", 1], actions=[0], rewards=[0.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match="mix text and other values"):
        copy.deepcopy(ep).to_numpy()
    check_list_numpy_agree(lambda eps, batch: {"obs": eps[0].get_observations()}, [ep])


def test_list_numpy_agree_catches_a_connector_that_reads_the_modes_differently():
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[0.0])
    with pytest.raises(ConnectorContractError, match="list and numpy episodes give different"):
        check_list_numpy_agree(lambda eps, batch: {"n": [int(eps[0].is_numpy)]}, [ep])


@pytest.mark.parametrize("kind", ["requires_grad", "bfloat16"])
@pytest.mark.parametrize("check_dtype", [False, True])
def test_list_of_tensors_against_a_stacked_tensor(kind, check_dtype):
    torch = pytest.importorskip("torch")
    dtype = torch.bfloat16 if kind == "bfloat16" else torch.float32
    item = torch.tensor([1.0, 2.0], dtype=dtype, requires_grad=kind == "requires_grad")
    same = torch.tensor([[1.0, 2.0]], dtype=dtype)
    other = torch.tensor([[1.0, 3.0]], dtype=dtype)
    assert outputs_equal([item], same, check_dtype=check_dtype)
    assert outputs_equal(same, [item], check_dtype=check_dtype)
    assert not outputs_equal([item], other, check_dtype=check_dtype)
    if kind == "bfloat16":  # a bfloat16 list against a float32 tensor: dtypes differ
        assert not outputs_equal([item], same.float(), check_dtype=True)


# -- outputs_equal(check_dtype=True): one rule for lists and arrays ---------------------------


DTYPE_CASES = {
    # name: (list of Python values, list of numpy values, array, lists equal?)
    "str vs np.str_": (["ab"], [np.str_("ab")], np.array(["ab"]), False),
    "bytes vs np.bytes_": ([b"ab"], [np.bytes_(b"ab")], np.array([b"ab"]), False),
    "int among floats": ([1, 2.5], [1.0, 2.5], np.array([1.0, 2.5]), False),
    "floats": ([1.0, 2.5], [np.float64(1.0), np.float64(2.5)], np.array([1.0, 2.5]), True),
    "ints": ([1, 2], [np.int64(1), np.int64(2)], np.array([1, 2]), True),
}


@pytest.mark.parametrize("name", list(DTYPE_CASES))
def test_check_dtype_is_the_same_against_a_list_and_an_array(name):
    plain, numpy_items, array, lists_equal = DTYPE_CASES[name]
    assert outputs_equal(numpy_items, array, check_dtype=True)  # the array's own items
    assert outputs_equal(plain, numpy_items, check_dtype=True) is lists_equal
    assert outputs_equal(plain, array, check_dtype=True) is lists_equal
    assert outputs_equal(plain, array) and outputs_equal(plain, numpy_items)  # values agree


def test_check_dtype_keeps_exact_shapes_for_an_empty_list():
    assert not outputs_equal([], np.zeros((0, 2)), check_dtype=True)
    assert not outputs_equal([[]], np.zeros((1, 0, 2)), check_dtype=True)


# -- chunks keep a list-mode episode's items --------------------------------------------------


def test_replay_in_chunks_keeps_numpy_scalars_of_a_list_episode():
    ep = SingleAgentEpisode(
        observations=[np.int64(0), np.int64(1), np.int64(2)],
        observation_space=gym.spaces.Discrete(3),
        actions=[np.int64(1), np.int64(0)],
        action_space=gym.spaces.Discrete(2),
        rewards=[0.0, 1.0],
        len_lookback_buffer=0,
    )
    for chunk in replay_in_chunks(ep, (1,), (0,)):
        assert {type(o) for o in chunk.get_observations()} == {np.int64}
        assert {type(a) for a in chunk.get_actions()} == {np.int64}
        assert {o: 1 for o in chunk.get_observations()}  # hashable, as the episode's are


@settings(max_examples=30, deadline=None)
@given(
    chunked_episodes(
        observation_space=gym.spaces.Discrete(3),
        action_space=gym.spaces.Box(-1.0, 1.0, (), np.float32),
        min_len=2,
        numpy=False,
    )
)
def test_list_mode_chunks_hold_the_episode_item_types(ce):
    start = 0
    for chunk in ce.chunks:
        stop = start + len(chunk)
        for got, want in (
            (chunk.get_observations(), ce.episode.get_observations(slice(start, stop + 1))),
            (chunk.get_actions(), ce.episode.get_actions(slice(start, stop))),
        ):
            assert [type(x) for x in got] == [type(x) for x in want]
        start = stop


# -- check_handles_empty_and_reset refuses a strategy of spaces -------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"observation_space": spaces()}, "observation_space"),
        ({"observation_space": 3}, "observation_space"),
        ({"observation_space": OBS, "action_space": spaces()}, "action_space"),
    ],
)
def test_handles_empty_and_reset_refuses_what_is_not_a_space(kwargs, name):
    with pytest.raises(TypeError, match=name):
        check_handles_empty_and_reset(_noop, **kwargs)

"""episodes.testing: tensors in custom_data, numpy mode by the library's rule, spaces() bounds,
Python int vs float comparisons, the types items() draws."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.structs import data_equal
from episodes.testing import (
    ConnectorContractError,
    check_connector,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    outputs_equal,
)
from episodes.testing.strategies import episodes, items, spaces
from episodes.testing.strategies.episodes import stacks

D = gym.spaces.Discrete(2)
MIXED_KEYS = gym.spaces.Dict({1: D, "a": D})  # gymnasium takes it; to_numpy refuses it
HUGE_TEXT = gym.spaces.Text(10**9)  # no numpy string dtype is that wide
FIND = settings(database=None, max_examples=200, suppress_health_check=list(HealthCheck))


def _untouched(eps, batch):
    return dict(batch)


def _episode(value):
    ep = SingleAgentEpisode(
        "a", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    ep.custom_data["value"] = value
    return ep


# -- torch tensors in custom_data ------------------------------------------------------------


def _tensors(torch):
    return {
        "needs grad, vector": torch.ones(3, requires_grad=True),
        "needs grad, scalar": torch.ones((), requires_grad=True),
        "bfloat16": torch.ones(3, dtype=torch.bfloat16),
        "dict of grad tensors": {"h": torch.zeros(2, 4, requires_grad=True)},
        "NaN inside": torch.tensor([float("nan"), 1.0], requires_grad=True),
        "int": torch.arange(4),
    }


@pytest.mark.parametrize(
    "name",
    [
        "needs grad, vector",
        "needs grad, scalar",
        "bfloat16",
        "dict of grad tensors",
        "NaN inside",
        "int",
    ],
)
def test_untouched_tensors_in_custom_data_are_not_a_mutation(name):
    torch = pytest.importorskip("torch")
    ep = _episode(_tensors(torch)[name])
    assert ep == copy.deepcopy(ep)  # raised "Boolean value of Tensor ... ambiguous"
    check_does_not_mutate(_untouched, [ep])


def test_changed_tensors_in_custom_data_are_a_mutation():
    torch = pytest.importorskip("torch")
    changes = {
        "values": lambda t: t.detach() + 1,
        "dtype": lambda t: t.detach().double(),
        "shape": lambda t: t.detach().reshape(3, 1),
        "to bfloat16": lambda t: t.detach().bfloat16(),
    }
    for what, change in changes.items():

        def connector(eps, batch, change=change):
            for ep in eps:
                ep.custom_data["value"] = change(ep.custom_data["value"])
            return dict(batch)

        ep = _episode(torch.ones(3, requires_grad=True))
        with pytest.raises(ConnectorContractError, match="mutated input episode"):
            check_does_not_mutate(connector, [ep])
        assert not data_equal(torch.ones(3, requires_grad=True), change(torch.ones(3))), what


def test_data_equal_on_tensors_needs_dtype_shape_and_values():
    torch = pytest.importorskip("torch")
    nan = float("nan")
    cases = {
        "equal, grad on one": (torch.ones(2, requires_grad=True), torch.ones(2), True),
        "NaNs equal": (torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0]), True),
        "dtype differs": (torch.ones(2), torch.ones(2, dtype=torch.float64), False),
        "shape differs": (torch.ones(2), torch.ones(1, 2), False),
        "values differ": (torch.ones(2), torch.zeros(2), False),
        "bfloat16 values differ": (
            torch.ones(2, dtype=torch.bfloat16),
            torch.zeros(2, dtype=torch.bfloat16),
            False,
        ),
        "bfloat16 against an array": (torch.ones(2, dtype=torch.bfloat16), np.ones(2), False),
    }
    for name, (a, b, expected) in cases.items():
        assert data_equal(a, b) is expected, name
        assert data_equal(b, a) is expected, name


# -- numpy mode follows the library's own rule -----------------------------------------------

UNSTACKABLE = {"int and str Dict keys": MIXED_KEYS, "Text(10**9)": HUGE_TEXT}


@pytest.mark.parametrize("name", list(UNSTACKABLE))
def test_spaces_to_numpy_refuses_do_not_stack(name):
    space = UNSTACKABLE[name]
    assert not stacks(space)
    assert not stacks(gym.spaces.Tuple([D, space]))
    assert stacks(gym.spaces.Dict({"a": D, "b": gym.spaces.Text(5)}))


@pytest.mark.parametrize("name", list(UNSTACKABLE))
@pytest.mark.parametrize("where", ["observation_space", "action_space"])
def test_numpy_true_is_refused_when_built(name, where):
    spaces_ = {"observation_space": D, "action_space": D, where: UNSTACKABLE[name]}
    with pytest.raises(ValueError, match=f"numpy=True.*{where}"):
        episodes(**spaces_, numpy=True)


def test_numpy_none_draws_list_mode_only_for_mixed_keys():
    strategy = episodes(MIXED_KEYS, D, max_len=2)
    assert not find(strategy, lambda ep: len(ep) > 0, settings=FIND).is_numpy

    @settings(max_examples=30, database=None)
    @given(strategy)
    def test(ep):
        assert not ep.is_numpy

    test()


@pytest.mark.parametrize("where", ["observation_space", "action_space"])
def test_contracts_skip_numpy_mode_for_mixed_keys(where):
    spaces_ = {"observation_space": D, "action_space": D, where: MIXED_KEYS}
    check_handles_empty_and_reset(_untouched, **spaces_)  # raised to_numpy's ValueError
    check_connector(_untouched, **spaces_, max_examples=5)


# -- spaces(): bounds refused when built ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kinds": ["box"], "max_dims": 33}, "max_dims"),
        ({"max_depth": 32}, "max_depth"),
        ({"max_depth": 150}, "max_depth"),
    ],
)
def test_spaces_refuses_bounds_it_cannot_draw(kwargs, name):
    with pytest.raises(ValueError, match=name):
        spaces(**kwargs)


def test_spaces_draws_at_its_bounds():
    assert find(spaces(max_depth=31), lambda s: True, settings=FIND) is not None
    deep = find(spaces(["box"], max_dims=32, max_side=1), lambda s: len(s.shape) == 32)
    assert deep.shape == (1,) * 32


class _Custom(gym.Space):
    def __init__(self):
        super().__init__((), None)

    def contains(self, x):
        return True

    def sample(self, mask=None, probability=None):
        return 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"observation_space": _Custom()}, "observation_space"),
        ({"action_space": gym.spaces.Dict({"a": _Custom()})}, "action_space"),
        ({"extra_model_outputs": {"vf": _Custom()}}, "extra_model_outputs"),
    ],
)
def test_episodes_refuses_a_space_items_cannot_draw_when_built(kwargs, name):
    with pytest.raises(TypeError, match=f"{name}.*_Custom"):
        episodes(**kwargs)


# -- Python ints against floats ----------------------------------------------------------------

BIG = 2**53 + 1  # float(BIG) == 2.0**53: numpy's promotion made them equal
NUMBERS = {
    "int vs float": (BIG, float(2**53), False),
    "in lists": ([BIG], [float(2**53)], False),
    "in a tuple beside a float": ((BIG, 0.5), (2**53, 0.5), False),
    "nested lists": ([[BIG, 0.5]], [[2**53, 0.5]], False),
    "in a dict": ({"t": BIG}, {"t": float(2**53)}, False),
    "equal big ints beside floats": ([BIG, 0.5], [BIG, 0.5], True),
    "small int equals float": ([1, 2], [1.0, 2.0], True),
    "NaN beside a big int": ([float("nan"), BIG], [float("nan"), BIG], True),
}


@pytest.mark.parametrize("name", list(NUMBERS))
def test_python_ints_and_floats_compare_as_python_does(name):
    a, b, expected = NUMBERS[name]
    assert outputs_equal(a, b) is expected
    assert outputs_equal(b, a) is expected


def test_data_equal_python_int_vs_float_is_exact():
    assert not data_equal(BIG, float(2**53))
    assert not data_equal([BIG], [float(2**53)])
    assert data_equal(1, 1.0) and data_equal(True, 1)
    assert data_equal(float("nan"), float("nan"))


def test_does_not_mutate_catches_an_int_turned_float():
    def rounds_counter(eps, batch):
        for ep in eps:
            ep.custom_data["value"] = float(ep.custom_data["value"])
        return dict(batch)

    with pytest.raises(ConnectorContractError, match=r"custom_data\['value'\]"):
        check_does_not_mutate(rounds_counter, [_episode(BIG)])


# -- items(): gymnasium's sample() types --------------------------------------------------------


def test_one_of_index_is_an_int64_as_gymnasium_samples():
    space = gym.spaces.OneOf([D, D])
    space.seed(0)
    drawn = find(items(space), lambda v: True, settings=FIND)
    assert type(drawn[0]) is type(space.sample()[0]) is np.int64
    assert space.contains(drawn)


def test_graph_edge_links_are_int32_as_gymnasium_samples():
    space = gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), D)
    space.seed(0)
    drawn = find(items(space), lambda g: len(g.edge_links) > 0, settings=FIND)
    sampled = space.sample(num_nodes=3, num_edges=2)
    assert drawn.edge_links.dtype == sampled.edge_links.dtype == np.int32
    assert space.contains(drawn)


@settings(max_examples=30, database=None)
@given(st.data())
def test_items_of_drawn_one_of_and_graph_spaces_are_valid(data):
    space = data.draw(spaces(["discrete", "graph", "one_of"], max_depth=1))
    assert space.contains(data.draw(items(space)))

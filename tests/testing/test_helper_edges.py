"""Edges of the testing helpers and of what they compare (each case failed before its fix)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch
from episodes.runner import RunnerMetrics
from episodes.testing import (
    ConnectorContract,
    ConnectorContractError,
    check_deterministic,
    check_does_not_mutate,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.strategies import chunked_episodes, episodes, items, rollouts, spaces


def _episode(id_="a"):
    return SingleAgentEpisode(
        id_, observations=[0, 1, 2, 3], actions=[0, 0, 0], rewards=[0.0] * 3, len_lookback_buffer=0
    )


def test_a_subclass_override_of_a_contract_test_wins():
    ran = []

    class TestMine(ConnectorContract):
        observation_space = gym.spaces.Discrete(3)

        def make_connector(self):
            return lambda eps, batch: dict(batch)

        def test_lookback_across_cuts(self, data=None):
            ran.append("mine")

    TestMine().test_lookback_across_cuts()
    assert ran == ["mine"]


def test_an_override_in_an_intermediate_base_wins_too():
    # Only the class's own __dict__ was looked at: the base's override gave way to the
    # mixin's contract test again one class down.
    ran = []

    class Adapted(ConnectorContract):
        observation_space = gym.spaces.Discrete(3)

        def test_lookback_across_cuts(self, data=None):
            ran.append("base")

    class TestMine(Adapted):
        def make_connector(self):
            return lambda eps, batch: dict(batch)

    class TestDeeper(TestMine):
        pass

    TestMine().test_lookback_across_cuts()
    TestDeeper().test_lookback_across_cuts()
    assert ran == ["base", "base"]
    assert TestMine.test_deterministic is not ConnectorContract.test_deterministic  # wrapped


def test_a_connector_that_changes_the_input_list_is_caught():
    def drops(eps, batch):
        eps.pop()
        return {}

    with pytest.raises(ConnectorContractError, match="list of input episodes"):
        check_does_not_mutate(drops, [_episode("a"), _episode("b")])


def test_a_row_key_missing_on_a_chunk_is_a_contract_error():
    def forgets(eps, batch):
        ep = eps[0]
        return {"obs": list(ep.get_observations(slice(0, len(ep))))} if ep.t_started == 0 else {}

    with pytest.raises(ConnectorContractError, match="row keys"):
        check_lookback_across_cuts(forgets, _episode(), 1, 3, 1, row_keys=["obs"])


def test_bfloat16_outputs_compare():
    out = {"x": torch.zeros(2, dtype=torch.bfloat16)}
    assert outputs_equal(out, {"x": torch.zeros(2, dtype=torch.bfloat16)})
    assert not outputs_equal(out, {"x": torch.ones(2, dtype=torch.bfloat16)})
    assert not outputs_equal(out, {"x": torch.zeros(2)}, check_dtype=True)
    check_deterministic(
        lambda eps, batch: {"x": torch.zeros(2, dtype=torch.bfloat16)}, [_episode()]
    )


@pytest.mark.parametrize(
    ("a", "b"), [(("a", 3), ("a", "3")), (["x", 1.5], ["x", "1.5"])], ids=["int-str", "float-str"]
)
def test_numbers_and_their_strings_differ(a, b):
    assert not outputs_equal(a, b) and outputs_equal(a, a)


def test_structured_extra_outputs_batch_as_dicts():
    ep = SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={"dist": [{"mean": 0.5, "std": 1.0}, {"mean": 1.5, "std": 2.0}]},
        len_lookback_buffer=0,
    )
    for chunk in (ep, SingleAgentEpisode.from_state(ep.get_state()).to_numpy()):
        batch = episodes_to_batch([chunk, chunk])
        assert batch["dist"]["mean"].tolist() == [0.5, 1.5, 0.5, 1.5]


def test_no_episodes_listed_with_max_listed_zero():
    metrics = RunnerMetrics(max_listed=0)
    metrics.add_episodes(np.ones(1000), np.full(1000, 3))
    out = metrics.reduce()
    assert out["episode_returns"] == [] and out["num_episodes"] == 1000
    assert metrics.episode_returns == [] and out["mean_episode_return"] == 1.0


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Sequence(gym.spaces.Discrete(3), stack=True),
        gym.spaces.Box(0, 1, (2,), bool),
        gym.spaces.Box(0, 1, (0,)),  # low.flat[0] of no entries
        gym.spaces.Box(2**53 + 1, 2**53 + 1, (), np.int64),  # the bound went through a float
        gym.spaces.Box(np.array([2**62, 0]), np.array([2**62 + 3, 1]), dtype=np.int64),
    ],
    ids=[
        "stacked-sequence",
        "bool-box",
        "box-of-no-entries",
        "int64-above-2**53",
        "per-entry-int64",
    ],
)
def test_items_of_these_spaces_are_drawn(space):
    @settings(max_examples=30, database=None)
    @given(items(space))
    def drawn(value):
        assert space.contains(value)

    drawn()


@pytest.mark.parametrize(
    "space", [gym.spaces.Dict({}), gym.spaces.Tuple(())], ids=["dict", "tuple"]
)
def test_episodes_of_spaces_without_values_are_list_mode(space):
    # They were drawn in numpy mode, whose columns cannot hold items without values.
    @settings(max_examples=10, database=None)
    @given(episodes(space, gym.spaces.Discrete(2), max_len=3))
    def drawn(ep):
        assert not ep.is_numpy
        ep.validate()

    drawn()


@pytest.mark.parametrize(
    "kwargs", [{"done": "yes", "max_len": 0}, {"lookback": (3, 1)}, {"lookback": (-2, 0)}]
)
def test_bad_episode_strategy_arguments_are_refused_up_front(kwargs):
    # done="yes" passed whenever a length-0 episode was drawn; bad ranges failed inside
    # hypothesis.
    @settings(max_examples=5, database=None)
    @given(st.data())
    def draw(data):
        data.draw(episodes(gym.spaces.Discrete(2), gym.spaces.Discrete(2), **kwargs))

    with pytest.raises(ValueError, match="done|range"):
        draw()


@pytest.mark.parametrize(
    ("name", "a", "b"),
    [
        # Stacking the list promoted both sides to one dtype before dtypes were compared.
        ("arrays of another dtype in a list", [np.zeros(2, np.float32)], [np.zeros(2)]),
        ("a numpy scalar in a list", {"x": [np.int32(1), 2]}, {"x": [1, 2]}),
    ],
)
def test_check_dtype_sees_into_lists(name, a, b):
    assert outputs_equal(a, b)
    assert not outputs_equal(a, b, check_dtype=True)


def test_dicts_with_keys_of_mixed_types_compare():
    """Sorting the keys for the message raised TypeError ('<' between str and int)."""
    assert not outputs_equal({1: 0, "a": 0}, {1: 0})
    calls = iter([{"per_env": {0: 1.0, "total": 1.0}}, {"per_env": {0: 1.0}}])
    with pytest.raises(ConnectorContractError, match="keys differ"):
        check_deterministic(lambda eps, batch: next(calls), [_episode()])


@pytest.mark.parametrize(
    ("start", "stop", "lookback"), [(3, 1, 0), (1, 10, 0), (-1, 2, 0), (0, 2, -1)]
)
def test_check_lookback_across_cuts_refuses_rows_it_would_not_compare(start, stop, lookback):
    """slice() clamped them, so a connector wrong on every chunk passed."""
    with pytest.raises(ValueError, match="start <= stop"):
        check_lookback_across_cuts(lambda eps, batch: {}, _episode(), start, stop, lookback)


def test_check_handles_empty_and_reset_leaves_the_users_space_generator_alone():
    from episodes.testing import check_handles_empty_and_reset

    space, twin = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (2,))
    space.seed(5)
    twin.seed(5)
    check_handles_empty_and_reset(lambda eps, batch: {}, space)
    np.testing.assert_array_equal(space.sample(), twin.sample())


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("done=1", {"done": 1, "min_len": 1}),
        ("done=0", {"done": 0, "max_len": 0}),
        ("done=np.True_", {"done": np.True_}),
        ("numpy='no'", {"numpy": "no"}),
        (
            "numpy=True for Sequence items",
            {"observation_space": gym.spaces.Sequence(gym.spaces.Discrete(2)), "numpy": True},
        ),
        ("float min_len", {"min_len": 1.0}),
    ],
)
def test_episodes_refuses_bad_parameters_on_every_draw(name, kwargs):
    """They passed on some draws (empty episodes, items that happened to stack) and failed on
    others, which hypothesis reports as flaky failures of the user's own test. They are now
    refused when the strategy is built, before any draw."""
    with pytest.raises(ValueError):
        episodes(**kwargs)


def _draw(strategy):
    """One example, drawn as a test would (``.example()`` is for interactive use)."""
    drawn = []

    @settings(max_examples=1, database=None)
    @given(strategy)
    def keep(value):
        drawn.append(value)

    keep()
    return drawn[0]


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("a string of kinds", lambda: spaces("box")),  # was split into letters
        ("max_children=0", lambda: spaces(max_children=0)),
        ("max_side=0", lambda: spaces(max_side=0)),
        ("max_chunks=0", lambda: _draw(chunked_episodes(max_chunks=0))),
        ("max_cut_lookback=-1", lambda: _draw(chunked_episodes(max_cut_lookback=-1))),
        ("T=True", lambda: _draw(rollouts(T=True))),
        ("T=(3, 1)", lambda: _draw(rollouts(T=(3, 1)))),
        ("num_layers=-1", lambda: _draw(rollouts(num_layers=-1))),
    ],
)
def test_strategies_refuse_bad_parameters_by_name(name, make):
    with pytest.raises(ValueError, match=name.split("=")[0].split()[-1]):
        make()


def test_numpy_ints_are_sizes_too():
    assert _draw(rollouts(T=np.int64(2), N=2))["rewards"].shape[:2] == (2, 2)
    assert len(_draw(episodes(min_len=np.int64(2), max_len=2, lookback=np.int64(1)))) == 2


@settings(max_examples=200, database=None)
@given(items(gym.spaces.Box(-np.inf, np.inf, (4,), np.float16)))
def test_unbounded_float16_items_are_finite(value):
    """Drawn as float64 and cast, over half of them were inf."""
    assert value.dtype == np.float16 and np.isfinite(value).all()


def test_numpy_scalars_are_parameters_too():
    assert _draw(spaces(max_side=np.int64(3), max_depth=np.int64(1))) is not None
    assert _draw(episodes(numpy=np.True_, min_len=1)).is_numpy

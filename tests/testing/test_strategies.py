"""The strategies draw valid values and shrink to minimal examples."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing.strategies import (
    ALL_KINDS,
    BATCHABLE_KINDS,
    CONTAINER_KINDS,
    LEAF_KINDS,
    chunked_episodes,
    episodes,
    items,
    rollouts,
    spaces,
)


def _depth(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Dict):
        return 1 + max(_depth(s) for s in space.spaces.values())
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.OneOf)):
        return 1 + max(_depth(s) for s in space.spaces)
    return 0


# ------------------------------------------------------------------------------------ validity
@given(st.data())
def test_items_are_contained_in_their_space(data):
    space = data.draw(spaces(), label="space")
    value = data.draw(items(space), label="value")
    assert space.contains(value)


@pytest.mark.parametrize("kind", LEAF_KINDS)
def test_every_leaf_kind_can_be_drawn(kind):
    space = find(spaces((kind,)), lambda s: True)
    assert space.contains(find(items(space), lambda v: True))


@given(spaces(max_depth=1))
def test_max_depth_is_respected(space):
    assert _depth(space) <= 1


@given(spaces(("discrete", "tuple"), max_depth=2))
def test_kinds_restrict_the_spaces(space):
    leaves = [space]
    while leaves:
        s = leaves.pop()
        if isinstance(s, gym.spaces.Tuple):
            leaves.extend(s.spaces)
        else:
            assert isinstance(s, gym.spaces.Discrete)


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown space kinds"):
        spaces(("boxes",))


@given(episodes(min_len=1, max_len=4, lookback=(0, 2)))
def test_episodes_validate_and_respect_bounds(ep):
    ep.validate()
    assert 1 <= len(ep) <= 4
    assert ep.observations.lookback <= 2
    for obs in ep.observations.data if not ep.is_numpy else []:
        assert ep.observation_space.contains(obs)
    for act in ep.actions.data if not ep.is_numpy else []:
        assert ep.action_space.contains(act)


@given(episodes(done="truncated", min_len=1, numpy=True, extra_model_outputs={}))
def test_episode_options_are_honoured(ep):
    assert ep.is_truncated and not ep.is_terminated and ep.is_numpy
    assert ep.extra_model_outputs == {}


@given(episodes(gym.spaces.Discrete(3), spaces(("box",), max_depth=0), max_len=0))
def test_episode_spaces_may_be_spaces_or_strategies(ep):
    assert ep.observation_space == gym.spaces.Discrete(3)
    assert isinstance(ep.action_space, gym.spaces.Box)
    assert len(ep) == 0 and ep.is_reset and not ep.is_done


@given(chunked_episodes(max_len=6))
def test_chunks_cover_the_episode(ce):
    assert sum(len(c) for c in ce.chunks) == len(ce.episode)
    assert ce.chunks[0].t_started == ce.episode.t_started
    for a, b in zip(ce.chunks, ce.chunks[1:]):
        assert a.t == b.t_started and not a.is_done
    for chunk, lookback in zip(ce.chunks[1:], ce.lookbacks):
        chunk.validate()
        assert chunk.actions.lookback <= lookback


@given(rollouts(hidden="any"))
def test_rollouts_have_consistent_shapes(r):
    t, n = r["rewards"].shape[:2]
    for key in ("observations", "actions", "values", "actions_log_prob", "dones", "time_outs"):
        assert r[key].shape[:2] == (t, n)
    assert r["last_values"].shape == (n, 1)
    assert r["dones"].dtype == torch.bool
    assert not (r["time_outs"] & ~r["dones"]).any()
    assert (r["distribution_params"][1] > 0).all()
    for states in r["hidden_states"]:
        if states is not None:
            assert len(states) in (1, 2)
            for s in states:
                assert s.shape[0] == t and s.shape[2] == n


# ------------------------------------------------------------------------------------ shrinking
def test_spaces_shrink_to_a_tiny_discrete():
    assert find(spaces(), lambda s: True) == gym.spaces.Discrete(1)


def test_spaces_shrink_containers_to_one_small_child():
    space = find(spaces(), lambda s: isinstance(s, gym.spaces.Dict))
    assert len(space.spaces) == 1 and _depth(space) == 1


def test_items_shrink_to_simple_values():
    box = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
    assert np.array_equal(find(items(box), lambda v: True), np.zeros(3, np.float32))
    assert find(items(gym.spaces.Discrete(4, start=2)), lambda v: True) == 2
    assert find(items(gym.spaces.Text(5, min_length=0)), lambda v: True) == ""


def test_episodes_shrink_to_the_shortest_failing_example():
    ep = find(episodes(), lambda ep: len(ep) >= 2)
    assert len(ep) == 2
    assert ep.observations.lookback == 0 and not ep.is_done and not ep.is_numpy
    assert ep.extra_model_outputs == {}


def test_done_episodes_shrink_to_length_one():
    ep = find(episodes(), lambda ep: ep.is_done)
    assert len(ep) == 1 and ep.observations.lookback == 0


def test_chunked_episodes_shrink_to_two_chunks():
    ce = find(chunked_episodes(), lambda ce: len(ce.chunks) >= 2)
    # The cut shrinks to the first step with no lookback. The episode's length usually shrinks
    # to 2 as well, but the shrinker promises a local minimum only: one CI run (under load)
    # stopped at a 5-step episode cut at 1, so the length is not asserted.
    assert len(ce.chunks) == 2 and ce.cuts == (1,) and ce.lookbacks == (0,)
    assert len(ce.chunks[0]) == 1


def test_rollouts_shrink_to_one_step_one_env():
    r = find(rollouts(), lambda r: True)
    assert r["rewards"].shape == (1, 1, 1) and not r["dones"].any()


# ------------------------------------------------------------------------------ import hygiene
def test_importing_episodes_does_not_import_hypothesis_and_strategies_not_torch():
    code = (
        "import sys, episodes; assert 'hypothesis' not in sys.modules;"
        "import episodes.testing.strategies; assert 'torch' not in sys.modules, 'torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_kinds_constants_are_consistent():
    assert ALL_KINDS == LEAF_KINDS + CONTAINER_KINDS
    assert len(set(ALL_KINDS)) == len(ALL_KINDS)
    assert set(BATCHABLE_KINDS) <= set(ALL_KINDS)
    assert set(BATCHABLE_KINDS) & set(LEAF_KINDS)  # spaces() needs a leaf kind


@settings(max_examples=30, deadline=None)
@given(episodes(spaces(BATCHABLE_KINDS), spaces(BATCHABLE_KINDS), max_len=3, numpy=False))
def test_episodes_of_batchable_kinds_stack_into_numpy(ep: SingleAgentEpisode):
    # What BATCHABLE_KINDS promises: to_numpy() can stack every column of such an episode.
    assert not ep.is_numpy
    ep.to_numpy()
    assert ep.is_numpy
    ep.validate()


@settings(max_examples=20, deadline=None)
@given(episodes(gym.spaces.Sequence(gym.spaces.Discrete(3)), gym.spaces.Discrete(2), max_len=3))
def test_spaces_whose_items_do_not_stack_give_list_mode_episodes(ep):
    assert not ep.is_numpy
    ep.validate()


def _boxes(space):
    if isinstance(space, gym.spaces.Box):
        yield space
    for child in getattr(space, "spaces", None) or ():
        yield from _boxes(space.spaces[child] if isinstance(space.spaces, dict) else child)
    for attr in ("feature_space", "node_space", "edge_space"):
        if getattr(space, attr, None) is not None:
            yield from _boxes(getattr(space, attr))


@settings(max_examples=60, deadline=None)
@given(spaces(["sequence", "graph"], max_side=1))
def test_max_side_holds_inside_sequence_and_graph_spaces(space):
    assert all(max(box.shape, default=1) <= 1 for box in _boxes(space))

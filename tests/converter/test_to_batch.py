"""episodes_to_batch: every row is the step it came from, for nested spaces and both modes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tree
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch
from episodes.testing.strategies import BATCHABLE_KINDS, episodes, spaces


def assert_equal_trees(a, b):
    tree.assert_same_structure(a, b)
    for x, y in zip(tree.flatten(a), tree.flatten(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@st.composite
def chunk_lists(draw):
    obs_space = draw(spaces(BATCHABLE_KINDS, max_depth=1))
    act_space = draw(spaces(BATCHABLE_KINDS, max_depth=1))
    extras = {"vf_preds": gym.spaces.Box(-1.0, 1.0, (), np.float32)}
    return draw(
        st.lists(
            episodes(obs_space, act_space, max_len=4, extra_model_outputs=extras, numpy=False),
            min_size=1,
            max_size=4,
        )
    )


@given(chunk_lists(), st.booleans())
def test_rows_are_the_steps_they_came_from(chunks, numpy):
    if numpy:
        chunks = [c.to_numpy() for c in chunks]
    if not any(len(c) for c in chunks):
        with pytest.raises(ValueError, match="no steps"):
            episodes_to_batch(chunks)
        return
    batch = episodes_to_batch(chunks)
    row = 0
    for index, chunk in enumerate(chunks):  # "chunk" is the index among all given chunks
        for j in range(len(chunk)):
            at = tree.map_structure(lambda leaf, r=row: leaf[r], batch)
            assert_equal_trees(at["obs"], chunk.get_observations(j))
            assert_equal_trees(at["next_obs"], chunk.get_observations(j + 1))
            assert_equal_trees(at["actions"], chunk.get_actions(j))
            assert at["rewards"] == chunk.get_rewards(j)
            assert at["vf_preds"] == chunk.get_extra_model_outputs("vf_preds", j)
            last = j == len(chunk) - 1
            assert at["terminateds"] == (last and chunk.is_terminated)
            assert at["truncateds"] == (last and chunk.is_truncated)
            assert at["dones"] == (at["terminateds"] or at["truncateds"])
            assert (at["t"], at["eps_id"], at["chunk"]) == (chunk.t_started + j, chunk.id_, index)
            row += 1
    assert len(batch["rewards"]) == row


@given(chunk_lists())
def test_list_and_numpy_chunks_give_the_same_batch(chunks):
    if not any(len(c) for c in chunks):
        return
    assert_equal_trees(episodes_to_batch(chunks), episodes_to_batch([c.to_numpy() for c in chunks]))


def test_obs_fn_sees_both_observation_columns():
    ep = SingleAgentEpisode(
        observations=[{"x": 0.0}, {"x": 1.0}, {"x": 2.0}],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()
    batch = episodes_to_batch([ep], obs_fn=lambda obs: obs["x"] * 10)
    assert batch["obs"].tolist() == [0.0, 10.0]
    assert batch["next_obs"].tolist() == [10.0, 20.0]


def test_extra_outputs_only_where_every_chunk_has_them():
    def chunk(extras):
        return SingleAgentEpisode(
            observations=[0, 1],
            actions=[0],
            rewards=[0.0],
            extra_model_outputs=extras,
            len_lookback_buffer=0,
        )

    both = [chunk({"a": [1.0], "b": [2.0]}), chunk({"a": [3.0]})]
    batch = episodes_to_batch(both)
    assert batch["a"].tolist() == [1.0, 3.0] and "b" not in batch
    assert "a" not in episodes_to_batch(both, extra_model_outputs=False)


def _list_obs_chunks(numpy: bool, space=None, make_obs=None):
    make_obs = make_obs or (lambda i: [i, 10 + i, 20 + i])
    out = []
    for k in ("a", "b"):
        ep = SingleAgentEpisode(
            k, observations=[make_obs(i) for i in range(3)], actions=[0, 1], rewards=[1.0, 1.0],
            observation_space=space, len_lookback_buffer=0,
        )  # fmt: skip
        out.append(ep.to_numpy() if numpy else ep)
    return out


@pytest.mark.parametrize(
    "space, make_obs",
    [
        (None, None),  # same-shaped leaves: were stacked [leaves, T] and joined on that axis
        (  # leaves of other shapes: a ValueError in numpy mode only
            gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32))),
            lambda i: [i % 3, np.full(2, i / 10, np.float32)],
        ),
    ],
    ids=["same-shaped leaves", "tuple of other shapes"],
)
def test_list_structured_observations_batch_alike_in_both_modes(space, make_obs):
    want = episodes_to_batch(_list_obs_chunks(False, space, make_obs))
    got = episodes_to_batch(_list_obs_chunks(True, space, make_obs))
    for key in ("obs", "next_obs"):
        w, g = tree.flatten(want[key]), tree.flatten(got[key])
        assert [x.shape for x in g] == [x.shape for x in w] and w[0].shape[0] == 4
        for x, y in zip(w, g):
            np.testing.assert_array_equal(x, y)

"""Int columns of several episodes join as ints: uint64 beside signed ints is int64 or refused.

numpy joins uint64 rows with signed ones as float64: an int action column became floats, and
values beyond 2**53 were rounded (two distinct actions merged). The converter, the batch
builder and the connectors' join now give int64 where every uint64 value fits, else a
``ValueError``; every other mix joins as numpy joins it (ints beside floats give floats).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors.joining import join_leaves
from episodes.converter import episodes_to_batch, episodes_to_rollout

BIG = 2**63 + 1

# name: (first actions, second actions, joined dtype or None for a refusal)
MIXES = {
    "small-uint64-beside-int64": (np.array([5, 7], np.uint64), np.array([0, -1]), np.int64),
    "int64-beside-small-uint64": (np.array([0, 1]), np.array([5, 7], np.uint64), np.int64),
    "uint64-beside-int8": (np.array([3, 4], np.uint64), np.array([-2, 1], np.int8), np.int64),
    "int64-max-fits": (np.array([2**63 - 1, 0], np.uint64), np.array([-1, 1]), np.int64),
    "big-uint64-beside-int64": (np.array([BIG, BIG + 2], np.uint64), np.array([0, 1]), None),
    "uint64-beside-uint8": (np.array([BIG, 1], np.uint64), np.array([2, 3], np.uint8), np.uint64),
    "uint32-beside-int32": (np.array([5, 6], np.uint32), np.array([-1, 2], np.int32), np.int64),
}


def _chunk(id_, actions):
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)] * 3,
        actions=actions,
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [np.float32(0)] * 2, "action_logp": [np.float32(0)] * 2},
    ).to_numpy()


def _zeros(obs):
    return np.zeros(len(obs))


@pytest.mark.parametrize("first,second,dtype", MIXES.values(), ids=MIXES.keys())
def test_join_leaves(first, second, dtype):
    if dtype is None:
        with pytest.raises(ValueError, match="uint64 values up to"):
            join_leaves([first, second])
        return
    joined = join_leaves([first, second])
    assert joined.dtype == dtype
    assert joined.tolist() == first.tolist() + second.tolist()


@pytest.mark.parametrize("first,second,dtype", MIXES.values(), ids=MIXES.keys())
def test_episodes_to_batch(first, second, dtype):
    chunks = [_chunk("a", first), _chunk("b", second)]
    if dtype is None:
        with pytest.raises(ValueError, match="'actions' rows do not join"):
            episodes_to_batch(chunks)
        return
    actions = episodes_to_batch(chunks)["actions"]
    assert actions.dtype == dtype
    assert actions.tolist() == first.tolist() + second.tolist()


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
@pytest.mark.parametrize("first,second,dtype", MIXES.values(), ids=MIXES.keys())
def test_rollout_across_envs(first, second, dtype, layout):
    groups = [[_chunk("a", first)], [_chunk("b", second)]]
    if dtype is None:
        with pytest.raises(ValueError, match="actions: the envs' rows do not join"):
            episodes_to_rollout(groups, gamma=0.9, value_fn=_zeros, layout=layout)
        return
    actions = episodes_to_rollout(groups, gamma=0.9, value_fn=_zeros, layout=layout)
    stored = actions.storage.actions[:, :, 0]
    assert not stored.dtype.is_floating_point
    assert stored[:, 0].tolist() == [int(v) for v in first]
    assert stored[:, 1].tolist() == [int(v) for v in second]


@pytest.mark.parametrize("first,second,dtype", MIXES.values(), ids=MIXES.keys())
def test_rollout_within_one_env(first, second, dtype):
    groups = [[_chunk("a", first), _chunk("b", second)]]
    if dtype is None:
        with pytest.raises(ValueError, match="actions of env 0"):
            episodes_to_rollout(groups, gamma=0.9, value_fn=_zeros)
        return
    stored = episodes_to_rollout(groups, gamma=0.9, value_fn=_zeros).storage.actions[:, 0, 0]
    assert not stored.dtype.is_floating_point
    assert stored.tolist() == [int(v) for v in [*first, *second]]


def test_ints_beside_floats_still_join_as_floats():
    assert join_leaves([np.array([1]), np.array([0.5]), np.array([2], np.uint64)]).dtype == float

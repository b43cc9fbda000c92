"""``from_state`` copies the state's columns: the restored object never writes into the snapshot.

``SingleAgentEpisode.from_state`` and ``InfiniteLookbackBuffer.from_state`` used to take the
state's lists and arrays over, so writing the restored episode changed the caller's snapshot
and a second ``from_state`` of it failed or shared its columns. ``copy=False`` keeps the old
zero-copy path for a state nobody else holds; unpickling never went through ``from_state``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer


def _episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "x",
        observations=[np.float32([t, -t]) for t in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 1.0, 1.0],
        extra_model_outputs={"logp": [0.1, 0.2, 0.3]},
        len_lookback_buffer=1,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list mode", "numpy mode"])
def test_writing_a_restored_episode_leaves_the_snapshot_and_a_second_restore_alone(numpy):
    ep = _episode(numpy)
    state = ep.get_state()
    first = SingleAgentEpisode.from_state(state)
    first.set_rewards(new_data=-7.0, at_indices=0)
    first.set_observations(new_data=np.float32([9, 9]), at_indices=0)
    first.set_extra_model_outputs(key="logp", new_data=5.0, at_indices=0)
    first.add_env_step(np.float32([4, -4]), 1, 2.0, extra_model_outputs={"logp": 0.4})
    second = SingleAgentEpisode.from_state(state)  # the snapshot is as it was taken
    assert second == ep
    assert np.asarray(second.get_rewards()).tolist() == [1.0, 1.0]
    assert len(second) == len(ep) == 2 and len(first) == 3
    assert np.asarray(second.get_observations(0)).tolist() == [1.0, -1.0]


def test_two_episodes_restored_from_one_state_share_no_column():
    state = _episode(True).get_state()
    a, b = SingleAgentEpisode.from_state(state), SingleAgentEpisode.from_state(state)
    a.set_rewards(new_data=-1.0, at_indices=1)
    assert b.get_rewards().tolist() == [1.0, 1.0]
    assert not np.shares_memory(a.observations.data, b.observations.data)
    assert not np.shares_memory(a.observations.data, state["observations"]["data"])


@pytest.mark.parametrize(
    "data, finalized",
    [
        ([1, 2, 3], False),
        (np.arange(3.0), True),
        ({"a": np.arange(3), "b": (np.zeros((3, 2)), np.ones(3, np.int8))}, True),
    ],
    ids=["list", "array", "nested arrays"],
)
def test_a_buffer_restored_from_a_state_owns_its_data(data, finalized):
    buf = InfiniteLookbackBuffer(data, lookback=1)
    if finalized:
        buf.finalize()
    state = buf.get_state()
    restored = InfiniteLookbackBuffer.from_state(state)
    before = InfiniteLookbackBuffer.from_state(state)
    restored.set(restored.get(0), at_indices=1)
    restored.append(restored.get(0))
    assert InfiniteLookbackBuffer.from_state(state) == before == buf
    assert restored != buf


def test_copy_false_takes_the_arrays_over():
    buf = InfiniteLookbackBuffer(np.arange(3.0), lookback=0)
    buf.finalize()
    state = buf.get_state()
    adopted = InfiniteLookbackBuffer.from_state(state, copy=False)
    assert np.shares_memory(adopted.data, state["data"])
    assert not np.shares_memory(InfiniteLookbackBuffer.from_state(state).data, state["data"])


def test_unpickling_still_restores_a_whole_episode():
    ep = _episode(True)
    back = pickle.loads(pickle.dumps(ep))
    assert back == ep
    back.add_env_step(np.float32([4, -4]), 1, 2.0, extra_model_outputs={"logp": 0.4})
    assert len(back) == 3 and len(ep) == 2

"""A replay state's item ids must stay unique: broken ones are refused, the buffer unchanged."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(id_: str, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
    )


def _state(layout: bool) -> dict[str, Any]:
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 3))
    state = buf.get_state()
    if not layout:
        state["layout"] = None  # the compact form: steps in slot order
    return state


def _set(path: tuple[str, ...], value: Any):
    def edit(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


BROKEN = {
    "next_uid 0 (below the stored ids)": _set(("next_uid",), 0),
    "next_uid equal to a stored id": _set(("next_uid",), 2),
    "next_uid negative": _set(("next_uid",), -5),
    "next_uid a bool": _set(("next_uid",), True),
    "next_uid a float": _set(("next_uid",), 3.0),
    "next_uid a string": _set(("next_uid",), "3"),
    "next_uid past int64": _set(("next_uid",), 2**63),
    "repeated step ids": _set(("steps", "uid"), np.array([1, 1, 1])),
    "falling step ids": _set(("steps", "uid"), np.array([2, 1, 0])),
    "negative step ids": _set(("steps", "uid"), np.array([-3, -2, -1])),
}


@pytest.mark.parametrize("layout", [True, False], ids=["with layout", "compact"])
@pytest.mark.parametrize("edit", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_item_ids_are_refused_and_the_buffer_kept(edit, layout: bool) -> None:
    state = _state(layout)
    if layout and state.get("layout") is None:
        pytest.skip("this buffer's state has no layout")
    edit(state)
    buf = PrioritizedEpisodeReplayBuffer(100, seed=1)
    buf.add(_episode("z", 2))
    before = copy.deepcopy(buf.get_state())
    with pytest.raises(ValueError, match="broken replay buffer state"):
        buf.set_state(state)
    after = buf.get_state()
    assert after["next_uid"] == before["next_uid"]
    np.testing.assert_array_equal(after["steps"]["uid"], before["steps"]["uid"])
    assert buf.get_num_timesteps() == 2


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_a_sound_state_still_restores_and_numbers_new_steps_after_its_own(kind) -> None:
    buf = kind(100, seed=0)
    buf.add([_episode("a", 3), _episode("b", 2)])
    restored = kind(100, seed=0)
    restored.set_state(buf.get_state())
    restored.add(_episode("c", 2))
    uids = restored.get_state()["steps"]["uid"].tolist()
    assert uids == sorted(set(uids)) == list(range(7))

"""Replay states whose parts disagree are refused; priorities, alpha and spaces are checked.

A state must be one a buffer could have had: each episode's steps run its ``t_begin .. t_end -
1`` once, in slot order, with the links and first/last slots that implies; the stored steps fit
the capacity by ``add``'s rule; infos are dicts; spaces are ``space_to_dict`` dicts (or, in
states of earlier versions, gymnasium spaces). A prioritized state's leaves are its priorities
to the power ``alpha``, and ``alpha``/``max_priority`` pass the constructor's checks. Every
refusal is a ``ValueError("a broken replay buffer state: ...")`` and leaves the buffer as it was.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces as gs

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.spaces import space_to_dict

KINDS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
OBS_SPACE = gs.Box(0.0, 50.0, (1,), np.float32)
ACT_SPACE = gs.Discrete(3)


def _chunk(id_: str, n: int, t0: int = 0, **kwargs: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t0 + t]) for t in range(n + 1)],
        actions=[t % 3 for t in range(n)],
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
        **kwargs,
    )


def _filled(kind: type, capacity: int = 30) -> Any:
    buf = kind(capacity, seed=0)
    # Interleaved chunks: the episodes' slots are not adjacent, and "c" starts at t=4.
    buf.add([_chunk("a", 3), _chunk("b", 4, terminated=True), _chunk("c", 2, t0=4)])
    buf.add([_chunk("a", 2, t0=3), _chunk("c", 3, t0=6)])
    return buf


def _edit(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value

    return edit


def _at(index: int, value: Any) -> Callable[[Any], Any]:
    def change(array: Any) -> Any:
        array = np.array(array) if isinstance(array, np.ndarray) else list(array)
        array[index] = value
        return array

    return change


def _swap_owners(state: dict[str, Any]) -> None:
    # Two steps of the same t trade episodes: counts and t ranges still agree.
    ep, t = state["steps"]["ep"].copy(), state["steps"]["t"]
    i = int(np.flatnonzero((ep == 0) & (t == 1))[0])
    j = int(np.flatnonzero((ep == 1) & (t == 1))[0])
    ep[i], ep[j] = ep[j], ep[i]
    state["steps"]["ep"] = ep


def _swap_times(state: dict[str, Any]) -> None:
    # An episode's steps out of time order: t 0 and 1 of episode "a" trade slots.
    t = state["steps"]["t"].copy()
    i, j = np.flatnonzero(state["steps"]["ep"] == 0)[:2]
    t[i], t[j] = t[j], t[i]
    state["steps"]["t"] = t


BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "a step handed to another episode": _edit(("steps", "ep"), _at(0, 1)),
    "two steps trading episodes": _swap_owners,
    "an episode's steps out of time order": _swap_times,
    "t_end below the steps": _edit(("episodes", "t_end"), _at(0, 3)),
    "t_end above the steps": _edit(("episodes", "t_end"), _at(0, 9)),
    "t_begin after the steps": _edit(("episodes", "t_begin"), _at(0, 50)),
    "t_begin and t_end shifted together": _edit(("episodes", "t_begin"), _at(2, 5)),
    "a repeated t": _edit(("steps", "t"), _at(1, 0)),
    "t as floats": _edit(("steps", "t"), lambda t: t.astype(np.float64)),
    "t past int64's safe range": _edit(("steps", "t"), _at(0, 2**63 - 1)),
    "a link to another episode's step": _edit(("steps", "nxt"), _at(0, 4)),
    "a missing link": _edit(("steps", "prv"), _at(1, -1)),
    "a wrong first slot": _edit(("episodes", "first_slot"), _at(1, 4)),
    "a wrong last slot": _edit(("episodes", "last_slot"), _at(0, 2)),
    "spaces that are no spaces": _edit(("spaces",), ("junk", 5)),
    "a malformed space dict": _edit(("spaces",), [{"type": "Box"}, None]),
    "one space only": _edit(("spaces",), [None]),
    "spaces as a dict": _edit(("spaces",), {"obs": None, "act": None}),
    "more steps than the capacity": _edit(("capacity",), 3),
    "infos that are no list": _edit(("steps", "infos"), lambda i: "abc"),
    "infos as a numeric array": _edit(("steps", "infos"), lambda i: np.zeros(len(i))),
    "final infos that are no list": _edit(("episodes", "final_info"), lambda i: 5),
    "layout slots that fall": _edit(("layout", "slots"), lambda s: s[::-1].copy()),
    "layout slots past the end": _edit(("layout", "slots"), _at(-1, 10**6)),
    "a negative layout slot": _edit(("layout", "slots"), _at(0, -1)),
    "layout end as a string": _edit(("layout", "end"), "14"),
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("edit", list(BROKEN.values()), ids=list(BROKEN))
def test_a_state_whose_parts_disagree_is_refused_and_the_buffer_kept(kind, edit) -> None:
    state = copy.deepcopy(_filled(kind).get_state())
    edit(state)
    buf = kind(50, seed=1)
    buf.add(_chunk("z", 2))
    before = buf.get_state()
    with pytest.raises(ValueError, match="a broken replay buffer state"):
        buf.set_state(state)
    after = buf.get_state()
    assert after["episodes"]["ids"] == before["episodes"]["ids"] == ["z"]
    assert after["capacity"] == 50 and buf.get_num_timesteps() == 2
    np.testing.assert_array_equal(after["steps"]["t"], before["steps"]["t"])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("layout", [True, False], ids=["with layout", "compact"])
def test_a_sound_state_restores_and_draws_as_the_original(kind, layout: bool) -> None:
    buf = _filled(kind)
    state = buf.get_state()
    if not layout:
        state["layout"] = None
    back = kind(5, seed=7)
    back.set_state(copy.deepcopy(state))
    assert back.get_episode_ids() == ["a", "b", "c"] and back.get_num_timesteps() == 14
    assert [len(e) for e in back.get_episodes()] == [5, 4, 5]
    if layout:
        np.testing.assert_array_equal(
            back.sample(50)["indices"], copy.deepcopy(buf).sample(50)["indices"]
        )
    back.add(_chunk("new", 25))  # evicts by the restored counts, as the original would
    original = copy.deepcopy(buf)
    original.add(_chunk("new", 25))
    assert back.get_episode_ids() == original.get_episode_ids()
    assert back.get_num_timesteps() == original.get_num_timesteps()
    assert back.get_num_timesteps() == sum(len(e) for e in back.get_episodes())


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_one_episode_over_the_capacity_is_a_state_add_can_make(kind) -> None:
    buf = kind(3, seed=0)
    buf.add(_chunk("long", 8))  # add keeps one episode even over the capacity
    back = kind(3, seed=0)
    back.set_state(buf.get_state())
    assert back.get_num_timesteps() == 8 and back.capacity == 3


def test_infos_of_dict_subclasses_and_empty_infos_restore() -> None:
    buf = EpisodeReplayBuffer(10, seed=0)
    infos = [OrderedDict(k=1), {}, {"x": [1]}]
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            infos=infos,
            len_lookback_buffer=0,
        )
    )
    back = EpisodeReplayBuffer(10)
    back.set_state(buf.get_state())
    assert back.get_episodes()[0].get_infos() == infos


# --------------------------------------------------------------------------------- spaces
def test_the_state_holds_spaces_as_json_safe_dicts_and_restores_them() -> None:
    buf = _filled(EpisodeReplayBuffer)
    state = buf.get_state()
    assert list(state["spaces"]) == [space_to_dict(OBS_SPACE), space_to_dict(ACT_SPACE)]
    json.dumps(state["spaces"], allow_nan=False)
    back = EpisodeReplayBuffer(10)
    state["spaces"] = json.loads(json.dumps(state["spaces"]))  # as read back from JSON
    back.set_state(state)
    episode = back.sample(1, sample_episodes=True)[0]
    assert (episode.observation_space, episode.action_space) == (OBS_SPACE, ACT_SPACE)


def test_a_state_without_spaces_keeps_none() -> None:
    buf = EpisodeReplayBuffer(10)
    buf.add(
        SingleAgentEpisode(
            "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
        )
    )
    state = buf.get_state()
    assert list(state["spaces"]) == [None, None]
    back = EpisodeReplayBuffer(10)
    back.set_state(state)
    assert back.get_episodes()[0].observation_space is None


def test_a_state_of_an_earlier_version_with_space_objects_still_restores() -> None:
    state = _filled(EpisodeReplayBuffer).get_state()
    state["spaces"] = (OBS_SPACE, ACT_SPACE)  # as get_state wrote them before
    back = EpisodeReplayBuffer(10)
    back.set_state(state)
    assert back.get_state()["spaces"] == [space_to_dict(OBS_SPACE), space_to_dict(ACT_SPACE)]


def test_a_saved_buffer_keeps_its_spaces(tmp_path) -> None:
    buf = _filled(PrioritizedEpisodeReplayBuffer)
    buf.save(tmp_path / "buf")
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert back.get_state()["spaces"] == buf.get_state()["spaces"]
    assert back.get_episode_ids() == buf.get_episode_ids()


# ----------------------------------------------------------------------------- priorities
def _prioritized(alpha: float = 0.6) -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(_chunk("a", 10, terminated=True))
    buf.update_priorities(np.linspace(0.1, 7.0, 10), np.arange(10))
    return buf


def test_leaves_that_are_not_the_priorities_to_the_power_alpha_are_refused() -> None:
    state = _prioritized(alpha=1.0).get_state()
    state["prioritized"]["leaves"] = state["prioritized"]["leaves"].copy()
    state["prioritized"]["leaves"][0] = 1e6  # its priority stays 0.1
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    with pytest.raises(ValueError, match="a broken replay buffer state: leaves\\[0\\]"):
        buf.set_state(state)
    assert buf.get_num_timesteps() == 0


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.5])
def test_restored_priorities_draw_exactly_as_the_original(alpha: float) -> None:
    buf = _prioritized(alpha)
    back = PrioritizedEpisodeReplayBuffer(5, seed=3)
    back.set_state(buf.get_state())
    original = copy.deepcopy(buf)
    mine, theirs = back.sample(200, beta=0.5), original.sample(200, beta=0.5)
    np.testing.assert_array_equal(mine["indices"], theirs["indices"])
    np.testing.assert_array_equal(mine["weights"], theirs["weights"])
    assert back.get_priorities(np.arange(10)).tolist() == buf.get_priorities(np.arange(10)).tolist()


def test_a_max_priority_set_below_the_stored_priorities_round_trips() -> None:
    buf = _prioritized()
    buf.max_priority = 0.5  # settable: new steps get it, stored ones keep theirs (up to 7.0)
    back = PrioritizedEpisodeReplayBuffer(5)
    back.set_state(buf.get_state())
    assert back.max_priority == 0.5


def test_huge_priorities_whose_powers_sum_finitely_restore() -> None:
    buf = PrioritizedEpisodeReplayBuffer(10, alpha=0.5, seed=0)
    buf.add(_chunk("a", 2))
    buf.update_priorities([1e308, 1e308], [0, 1])  # their sum overflows, their roots do not
    back = PrioritizedEpisodeReplayBuffer(10)
    back.set_state(buf.get_state())
    assert back.get_priorities([0, 1]).tolist() == [1e308, 1e308]


BAD_PRIORITIZED = {
    "alpha a string": ("alpha", "1"),
    "alpha a bool": ("alpha", True),
    "alpha None": ("alpha", None),
    "alpha NaN": ("alpha", float("nan")),
    "alpha negative": ("alpha", -1.0),
    "alpha infinite": ("alpha", float("inf")),
    "alpha a list": ("alpha", [1.0]),
    "max_priority a string": ("max_priority", "2.5"),
    "max_priority None": ("max_priority", None),
    "max_priority a bool": ("max_priority", True),
    "max_priority zero": ("max_priority", 0.0),
    "max_priority infinite": ("max_priority", float("inf")),
    "max_priority overflowing its power": ("max_priority", 1e200),
    "leaves of strings": ("leaves", np.array(["1.0"] * 10)),
    "leaves of bools": ("leaves", np.ones(10, bool)),
    "leaves of one row short": ("leaves", np.ones(9)),
    "priorities None": ("priorities", None),
    "priorities of zeros": ("priorities", np.zeros(10)),
}


@pytest.mark.parametrize("key, value", list(BAD_PRIORITIZED.values()), ids=list(BAD_PRIORITIZED))
def test_bad_prioritized_fields_are_a_broken_state(key: str, value: Any) -> None:
    state = _prioritized(alpha=2.0).get_state()  # 1e200 ** 2 overflows
    state["prioritized"][key] = value
    other = PrioritizedEpisodeReplayBuffer(10, alpha=0.3, seed=0)
    with pytest.raises(ValueError, match="a broken replay buffer state"):
        other.set_state(state)
    assert other.alpha == 0.3 and other.max_priority == 1.0 and other.get_num_timesteps() == 0


@pytest.mark.parametrize("missing", ["alpha", "max_priority", "leaves"])
def test_a_prioritized_part_missing_a_key_is_a_broken_state(missing: str) -> None:
    state = _prioritized().get_state()
    del state["prioritized"][missing]
    with pytest.raises(ValueError, match=f"a broken replay buffer state: .*{missing}"):
        PrioritizedEpisodeReplayBuffer(10).set_state(state)


def test_a_prioritized_part_that_is_no_dict_is_a_broken_state() -> None:
    state = _prioritized().get_state()
    state["prioritized"] = [1.0, 1.0]
    with pytest.raises(ValueError, match="a broken replay buffer state: 'prioritized' must be"):
        PrioritizedEpisodeReplayBuffer(10).set_state(state)


# ------------------------------------------- what add() takes, a state restores (regression hunt)
class _OwnSpace(gs.Space):
    """A user's space class, which space_to_dict cannot write."""

    def __init__(self):
        super().__init__((), np.float32)

    def contains(self, x):
        return True

    def sample(self, mask=None, probability=None):
        return np.float32(0)


def _own_episode(t_started: int, infos=None, space=None) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        observation_space=space,
        infos=infos,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        t_started=t_started,
        len_lookback_buffer=0,
    )


ADDED = {
    "infos that are ints": {"infos": [1, 2, 3]},
    "infos that are lists": {"infos": [[1], [2], [3]]},
    "t_started beyond 2**62": {"t_started": 2**62 + 5},
    "t_started near the int64 end": {"t_started": 2**63 - 10},
    "negative t_started": {"t_started": -5},
    "a space of the user's own class": {"space": _OwnSpace()},
}


@pytest.mark.parametrize("kwargs", ADDED.values(), ids=ADDED.keys())
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_whatever_add_took_the_state_restores(kwargs, kind):
    kwargs = {"t_started": 0, **kwargs}
    buffer = kind(capacity=100)
    buffer.add([_own_episode(**kwargs)])
    restored = kind(capacity=100)
    restored.set_state(buffer.get_state())
    (got,) = restored.get_episodes()
    (want,) = buffer.get_episodes()
    assert got.t_started == want.t_started and got.get_infos() == want.get_infos()
    assert type(got.observation_space) is type(want.observation_space)

"""Copies and pickles of user subclasses keep what the subclass stores."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.testing import check_deterministic


class TaggedEpisode(SingleAgentEpisode):
    def __init__(self, *args: Any, tag: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tag = tag


class SlottedEpisode(SingleAgentEpisode):
    __slots__ = ("note",)


class EmptySlotsEpisode(SingleAgentEpisode):
    __slots__ = ()


class TaggedBuffer(InfiniteLookbackBuffer):
    def __init__(self, *args: Any, tag: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tag = tag


class SlottedBuffer(InfiniteLookbackBuffer):
    __slots__ = "note"  # a single slot may be named by a bare string


COPIES: dict[str, Callable[[Any], Any]] = {
    "deepcopy": copy.deepcopy,
    "copy": copy.copy,
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
}


def _episode(cls: type[SingleAgentEpisode], **kwargs: Any) -> SingleAgentEpisode:
    return cls(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], **kwargs)


@pytest.mark.parametrize("how", list(COPIES))
def test_an_episode_subclass_keeps_its_attributes(how: str) -> None:
    tagged = _episode(TaggedEpisode, tag="mine")
    slotted = _episode(SlottedEpisode)
    slotted.note = "kept"
    bare = _episode(EmptySlotsEpisode)
    for original, name, want in ((tagged, "tag", "mine"), (slotted, "note", "kept")):
        clone = COPIES[how](original)
        assert type(clone) is type(original)
        assert getattr(clone, name) == want
        assert clone == original
    assert COPIES[how](bare) == bare


def test_an_unset_slot_stays_unset() -> None:
    clone = copy.deepcopy(_episode(SlottedEpisode))
    assert not hasattr(clone, "note")


@pytest.mark.parametrize("how", list(COPIES))
@pytest.mark.parametrize("numpy", [False, True])
def test_a_buffer_subclass_keeps_its_attributes(how: str, numpy: bool) -> None:
    tagged = TaggedBuffer([1, 2, 3], tag="mine")
    slotted = SlottedBuffer([1, 2, 3])
    slotted.note = "kept"
    for buffer in (tagged, slotted):
        if numpy:
            buffer.finalize()
    assert COPIES[how](tagged).tag == "mine"
    assert COPIES[how](slotted).note == "kept"


def test_contract_checks_take_an_episode_subclass() -> None:
    episode = _episode(TaggedEpisode, tag="mine")
    check_deterministic(lambda episodes, batch: {"n": [len(e.tag) for e in episodes]}, [episode])


def test_cut_and_slice_share_custom_data_values_that_cannot_be_copied() -> None:
    import threading

    from episodes.testing import check_lookback_across_cuts

    lock = threading.Lock()
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    episode.custom_data.update(lock=lock, rows=[1, 2])
    for chunk in (episode.cut(), episode[0:1], episode.slice(slice(1, 2))):
        assert chunk.custom_data["lock"] is lock
        assert chunk.custom_data["rows"] == [1, 2]
        assert chunk.custom_data["rows"] is not episode.custom_data["rows"]
    check_lookback_across_cuts(
        lambda episodes, batch: {"n": [len(e) for e in episodes]}, episode, 0, 2, 1
    )


def test_chunks_of_a_subclass_carry_its_attributes() -> None:
    tagged = _episode(TaggedEpisode, tag="mine")
    slotted = _episode(SlottedEpisode)
    slotted.note = "kept"
    for chunk in (tagged.cut(), tagged[0:1], tagged.slice(slice(1, 2))):
        assert type(chunk) is TaggedEpisode and chunk.tag == "mine"
    assert slotted.cut().note == "kept"
    assert not hasattr(_episode(SlottedEpisode).cut(), "note")
    assert type(SingleAgentEpisode(observations=[0]).cut()) is SingleAgentEpisode

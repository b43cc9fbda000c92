"""Checks the hunt found missing (docs11): each bad input is refused with a clear error.

- ``PrevActionsPrevRewards(one_hot_discrete=True)`` (the default) skipped the one-hot for an
  episode without an action space: ``[rows, n]`` raw actions instead of ``[rows, n, A]``, and a
  list mixing such an episode with one that has a space died in numpy's concatenate.
- ``SingleAgentEpisode.from_fields`` ignored keys that are not fields (``"terminated"`` for
  ``"is_terminated"`` built a not-done episode) and gave ``id_=None`` when ``id_`` was left out.
- ``InfiniteLookbackBuffer.adopt_store`` took a store of another length, leaving a lookback
  past the data (``len`` raised).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.connectors import PrevActionsPrevRewards


def _episode(space: gym.Space[Any] | None, numpy: bool = False) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "no-space" if space is None else "space",
        observations=[0, 0, 0], actions=[1, 0], rewards=[1.0, 2.0],
        action_space=space, len_lookback_buffer=0,
    )  # fmt: skip
    return ep.to_numpy() if numpy else ep


# ------------------------------------------------------------------------ PrevActionsPrevRewards
SPACELESS_CASES = {
    "alone": lambda numpy: [_episode(None, numpy)],
    "after_one_with_a_space": lambda numpy: [_episode(gym.spaces.Discrete(2), numpy),
                                             _episode(None, numpy)],
    "stepless": lambda numpy: [SingleAgentEpisode("no-space", observations=[0])],
}  # fmt: skip


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("case", list(SPACELESS_CASES))
def test_prev_actions_one_hot_without_an_action_space_is_refused(case: str, numpy: bool) -> None:
    batch = {"kept": 1}
    with pytest.raises(ValueError, match="PrevActionsPrevRewards.*'no-space' has none"):
        PrevActionsPrevRewards(2, 1)(SPACELESS_CASES[case](numpy), batch)
    assert batch == {"kept": 1}


def test_prev_actions_without_a_space_work_raw_or_without_actions() -> None:
    raw = PrevActionsPrevRewards(2, 1, one_hot_discrete=False)([_episode(None)], {})
    np.testing.assert_array_equal(raw["prev_n_actions"], [[0, 0], [0, 1]])
    rewards_only = PrevActionsPrevRewards(0, 1)([_episode(None)], {})
    assert list(rewards_only) == ["prev_n_rewards"]
    one_hot = PrevActionsPrevRewards(2, 1)([_episode(gym.spaces.Discrete(2))], {})
    assert one_hot["prev_n_actions"].shape == (2, 2, 2)


# -------------------------------------------------------------------------------- from_fields
def _fields(**extra: Any) -> dict[str, Any]:
    buf = InfiniteLookbackBuffer
    values = {
        "observations": buf([0, 1]), "infos": buf([{}, {}]), "actions": buf([1]),
        "rewards": buf([0.5]), "extra_model_outputs": {},
    }  # fmt: skip
    return {**values, **extra}


UNKNOWN_KEYS = {
    "misspelt_flag": ({"terminated": True}, r"\['terminated'\]"),
    "not_a_field": ({"bogus": 1}, r"\['bogus'\]"),
    "private_slot": ({"_custom_data": {}}, r"\['_custom_data'\]"),
    "two_named": ({"terminated": True, "bogus": 1}, r"\['terminated', 'bogus'\]"),
}


@pytest.mark.parametrize("case", list(UNKNOWN_KEYS))
def test_from_fields_names_keys_that_are_not_fields(case: str) -> None:
    extra, names = UNKNOWN_KEYS[case]
    values = _fields(id_="a", **extra)
    with pytest.raises(ValueError, match=f"from_fields: {names} are not fields"):
        SingleAgentEpisode.from_fields(values)
    assert values["observations"].space is None  # the given buffers are left alone


def test_from_fields_draws_an_id_when_left_out_as_the_constructor() -> None:
    first, second = (
        SingleAgentEpisode.from_fields(_fields()),
        SingleAgentEpisode.from_fields(_fields()),
    )
    assert isinstance(first.id_, str) and len(first.id_) == 32
    assert first.id_ != second.id_


def test_from_fields_keeps_what_field_values_and_get_state_give() -> None:
    ep = SingleAgentEpisode("x", observations=[0, 1], actions=[0], rewards=[1.0])
    assert SingleAgentEpisode.from_fields(ep.field_values()) == ep
    ep.id_ = None  # type: ignore[assignment]  # a given None is a value, not "left out"
    assert SingleAgentEpisode.from_state(ep.get_state()).id_ is None


# -------------------------------------------------------------------------------- adopt_store
BAD_STORES = {
    "shorter_array": (lambda: ArrayStore.from_batch(np.array([9])), ValueError, "holds 1 items"),
    "longer_list": (lambda: ListStore([1, 2, 3, 4]), ValueError, "holds 4 items"),
    "empty": (lambda: ListStore([]), ValueError, "holds 0 items"),
    "not_a_store": (lambda: [1, 2, 3], TypeError, "ListStore or ArrayStore, got list"),
}


@pytest.mark.parametrize("case", list(BAD_STORES))
def test_adopt_store_refuses_a_store_that_cannot_stand_in(case: str) -> None:
    make, error, words = BAD_STORES[case]
    buf = InfiniteLookbackBuffer([1, 2, 3], lookback=2)
    before = buf.get_state()
    with pytest.raises(error, match=words):
        buf.adopt_store(make())
    assert buf.get_state() == before and len(buf) == 1


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_adopt_store_switches_to_a_store_of_the_same_items_either_way(numpy: bool) -> None:
    buf = InfiniteLookbackBuffer([1, 2, 3], lookback=2)
    if numpy:
        buf.finalize()
        buf.adopt_store(ListStore(buf.store.items(0)))  # what the runner does for list mode
    else:
        buf.adopt_store(buf.stacked())
    assert buf.finalized is not numpy and len(buf) == 1
    assert [int(x) for x in buf.get(slice(-2, 1), neg_index_as_lookback=True)] == [1, 2, 3]

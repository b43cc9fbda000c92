"""Regressions the session's own review found in its fixes, pinned.

- the masked-array scan walked a container holding itself for ever (to_numpy, replay add);
- a Tuple item given as an object array of ragged parts was split when numpy'd before its
  steps but kept whole when numpy'd after (the two episodes were unequal);
- a NUL-ending fill was refused on a column of Python objects, which no string width cuts;
- ``write_block(..., values=None)`` skipped the field before and was refused after.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer.plain_arrays import holds_masked
from episodes.replay import EpisodeReplayBuffer


def _self_holding_list() -> list:
    item: list = [1.0]
    item.append(item)
    return item


def _dict_held_twice() -> dict:
    item: dict = {}
    item["x"] = item
    item["y"] = item  # a level-by-level walk doubles at every level
    return item


@pytest.mark.parametrize(
    "make", [_self_holding_list, _dict_held_twice], ids=["list-in-itself", "dict-twice"]
)
def test_the_masked_scan_ends_on_containers_holding_themselves(make):
    assert holds_masked([make()]) is False
    deep: object = np.ma.masked_array([1], mask=1)
    for _ in range(40):
        deep = [deep]
    assert holds_masked([deep]) is True  # deeper than the level-by-level walk goes


def test_a_self_holding_observation_is_refused_not_walked_for_ever():
    item = _self_holding_list()
    ep = SingleAgentEpisode(
        observations=[item, item], actions=[0], rewards=[0.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match="to_numpy: observations cannot be stacked"):
        ep.to_numpy()  # a RecursionError once: the structure walk followed the item round
    assert not ep.is_numpy
    assert all(got is item for got in ep.get_observations(slice(None), neg_index_as_lookback=False))
    buffer = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError):
        buffer.add(
            SingleAgentEpisode(
                "e", observations=[item, item], actions=[0], rewards=[0.0], len_lookback_buffer=0
            )
        )
    assert buffer.get_num_timesteps() == 0


SPACE = gym.spaces.Tuple(
    [gym.spaces.Box(0, 1, (2,), np.float32), gym.spaces.Box(0, 1, (3,), np.float32)]
)


def _parts(value: float) -> np.ndarray:
    item = np.empty(2, dtype=object)
    item[0], item[1] = np.full(2, value, np.float32), np.full(3, value, np.float32)
    return item


def test_ragged_tuple_items_as_object_arrays_numpy_alike_before_and_after_the_steps():
    assert SPACE.contains(_parts(0.5))
    after = SingleAgentEpisode(
        "e", observations=[_parts(0.0), _parts(0.5)], actions=[0], rewards=[1.0],
        observation_space=SPACE, len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    before = SingleAgentEpisode("e", observation_space=SPACE, len_lookback_buffer=0).to_numpy()
    before.add_env_reset(_parts(0.0))
    before.add_env_step(_parts(0.5), 0, 1.0)
    assert after == before
    assert [part.shape for part in before.get_observations()] == [(2, 2), (2, 3)]
    successor = SingleAgentEpisode(
        "e", observations=[_parts(0.5), _parts(1.0)], actions=[0], rewards=[1.0], t_started=1,
        observation_space=SPACE, len_lookback_buffer=0,
    )  # fmt: skip
    before.concat_episode(successor)
    assert [part.shape for part in before.get_observations()] == [(3, 2), (3, 3)]


class Token:
    def __init__(self, text: str) -> None:
        self.text = text


@pytest.mark.parametrize("fill", ["x\x00", "\x00", b"y\x00"])
def test_an_object_column_pads_with_a_nul_ending_fill_whole(fill):
    ep = SingleAgentEpisode(
        observations=[Token("a"), Token("b"), Token("c")], actions=[0, 1], rewards=[0.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    assert ep.get_observations().dtype == object
    padded = ep.get_observations(slice(0, 5), fill=fill)
    assert padded.dtype == object and padded.tolist()[3:] == [fill, fill]
    listed = ep.get_observations([0, 7], fill=fill)
    assert listed.dtype == object and listed.tolist()[1] == fill


def test_a_text_column_still_refuses_a_fill_numpy_would_cut():
    ep = SingleAgentEpisode(observations=["a", "b"], actions=[0], rewards=[0.0]).to_numpy()
    with pytest.raises(ValueError, match="ends in NUL"):
        ep.get_observations([0, 7], fill="x\x00")


def test_write_block_skips_a_field_given_as_none():
    torch = pytest.importorskip("torch")
    from episodes.rollout import RolloutStorage

    storage = RolloutStorage("rl", 4, 3, (2,), (1,))
    storage.write_block(0, rewards=torch.ones(2, 4, 1), values=None)
    assert storage.step == 2 and float(storage.rewards[:2].sum()) == 8.0

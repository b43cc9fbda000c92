"""What a review of this session's changes found, each pinned.

* ``to_numpy`` takes a Dict holding a Box row given as a list next to a Text leaf (the text
  check read the row's numbers as leaves).
* ``SampleBatch.copy()`` copies lists of leaf arrays and infos' containers too.
* A one-hot read of an infinite value is a ``ValueError``, not an ``OverflowError``.
* ``episodes_to_batch`` keeps steps exact when chunks start on either side of 2**63.
* ``get_return`` names the reward as given and adds Decimals exactly.
* ``SampleBatch`` counts with a non-str key.
* Int arrays of int64 and uint64 items keep their values when stacked.
"""

from __future__ import annotations

from decimal import Decimal

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SampleBatch, SingleAgentEpisode
from episodes.converter import episodes_to_batch


def test_a_box_row_given_as_a_list_beside_text_stacks():
    space = gym.spaces.Dict({"a": gym.spaces.Box(-5, 5, (2,), np.float32), "t": gym.spaces.Text(5)})
    buffer = InfiniteLookbackBuffer(
        [{"a": [1.0, 2.0], "t": "x"}, {"a": [3.0, 4.0], "t": "yz"}], space=space
    )
    buffer.finalize()
    assert buffer.data["a"].shape == (2, 2) and buffer.data["t"].tolist() == ["x", "yz"]


def test_a_deep_sample_batch_copy_shares_nothing_it_can_write():
    batch = SampleBatch(
        {"obs": [np.zeros(2), np.zeros(2)], "t": np.arange(2), "infos": [{"k": [1]}, {}]}
    )
    copied = batch.copy()
    copied["obs"][0][0] = 1.0
    copied["infos"][0]["k"].append(2)
    assert batch["obs"][0][0] == 0.0 and batch["infos"][0]["k"] == [1]


@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
def test_a_one_hot_read_of_an_infinite_value_is_a_value_error(numpyd):
    buffer = InfiniteLookbackBuffer([1.0, float("inf")] * 5, space=gym.spaces.Discrete(3))
    if numpyd:
        buffer.finalize()
    with pytest.raises(ValueError, match="integer values"):
        buffer.get(one_hot_discrete=True)


def _chunks_starting_at(starts):
    return [
        SingleAgentEpisode(
            i,
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            t_started=t,
            len_lookback_buffer=0,
        )
        for i, t in enumerate(starts)
    ]


def test_episodes_to_batch_keeps_steps_on_either_side_of_int64_exact():
    chunks = _chunks_starting_at([0, 2**63 + 1])
    steps = episodes_to_batch(chunks)["t"]
    assert [int(t) for t in steps] == [0, 1, 2**63 + 1, 2**63 + 2]


def test_get_return_names_the_reward_given_and_adds_decimals_exactly():
    episode = SingleAgentEpisode()
    episode.add_env_reset(0)
    for reward in (Decimal("0.1"), Decimal("0.2")):
        episode.add_env_step(1, 0, reward)
    assert episode.get_return() == 0.3
    episode.add_env_step(1, 0, "x")
    with pytest.raises(TypeError, match="got 'x' of type str"):
        episode.get_return()


def test_a_sample_batch_with_a_non_str_key_counts():
    batch = SampleBatch({1: np.array([1, 2, 3])})
    assert batch.count == len(batch) == 3 and bool(batch)


def test_int_arrays_of_int64_and_uint64_keep_their_values():
    buffer = InfiniteLookbackBuffer([np.array([2**63 + 1], np.uint64), np.array([1])])
    buffer.finalize()
    assert [int(v) for v in buffer.data.ravel()] == [2**63 + 1, 1]


def test_zero_d_int_arrays_no_float_holds_keep_their_values():
    items = [np.array(2**63 + 1, np.uint64), np.array(-1)]
    buffer = InfiniteLookbackBuffer(items)
    buffer.finalize()
    assert [int(v) for v in buffer.data] == [2**63 + 1, -1]


def test_repr_never_fails_on_what_the_rewards_hold():
    torch = pytest.importorskip("torch")
    episode = SingleAgentEpisode("e")
    episode.add_env_reset(0)
    episode.add_env_step(1, 0, torch.tensor(1.0, requires_grad=True))
    assert "return=?" in repr(episode)


@pytest.mark.parametrize("order", [(list, tuple, tuple), (tuple, list, list)])
def test_a_list_mode_batch_nests_as_the_space_says_whichever_form_comes_first(order):
    space = gym.spaces.Tuple((gym.spaces.Discrete(5), gym.spaces.Discrete(5)))
    box = gym.spaces.Box(0.0, 9.0, (2,), np.float32)
    for observation_space, want in ((space, tuple), (box, np.ndarray)):
        episode = SingleAgentEpisode(
            "e",
            observations=[kind((k, k + 1)) for k, kind in enumerate(order)],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            observation_space=observation_space,
            len_lookback_buffer=0,
        )
        listed = episode.get_sample_batch()["obs"]
        numpyd = episode.to_numpy().get_sample_batch()["obs"]
        assert type(listed) is type(numpyd) is want
        assert np.array_equal(np.asarray(listed), np.asarray(numpyd))


def test_without_a_space_the_first_row_decides_as_numpy_reads_a_list():
    assert SampleBatch({"obs": [[1, 2], (3, 4)]})["obs"].shape == (2, 2)
    assert isinstance(SampleBatch({"obs": [(1, 2), [3, 4]]})["obs"], tuple)


@pytest.mark.parametrize("ids", [["a", 1], ["a", 1.5], [np.array("ab"), "c"], [1, "1"], [1, True]])
def test_eps_ids_of_mixed_types_make_a_column_of_distinct_ids(ids):
    column = SampleBatch({"eps_id": ids})["eps_id"]
    assert len(column) == 2 and list(column) == ids


def test_a_deep_copy_keeps_the_containers_types():
    import collections

    Pair = collections.namedtuple("Pair", "a b")
    infos = [collections.OrderedDict(k=[1]), collections.defaultdict(list, k=[2])]
    batch = SampleBatch({"t": np.arange(2), "infos": infos, "pair": Pair(np.zeros(2), np.ones(2))})
    copied = batch.copy()
    assert [type(i) for i in copied["infos"]] == [type(i) for i in infos]
    assert type(copied["pair"]) is Pair and copied["pair"].a is not batch["pair"].a


def test_add_learner_columns_keeps_steps_on_either_side_of_int64_exact():
    from episodes.connectors import AddLearnerColumns

    chunks = _chunks_starting_at([2**63 - 1, 0])
    steps = AddLearnerColumns(["t"])(chunks, {})["t"]
    assert [int(t) for t in steps] == [2**63 - 1, 2**63, 0, 1]


def test_a_huge_float_one_hot_value_is_refused_without_a_warning():
    import warnings

    buffer = InfiniteLookbackBuffer([0.0] * 8 + [1e30], space=gym.spaces.Discrete(3))
    buffer.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="out of range"):
            buffer.get(one_hot_discrete=True)


def test_copies_rebuild_containers_as_rllib_does():
    import time

    stamp = time.gmtime(0)
    batch = SampleBatch({"t": np.arange(1), "infos": [{"st": stamp}], "obs": {"a": np.zeros(1)}})
    deep, shallow = batch.copy(), batch.copy(shallow=True)
    assert deep["infos"][0]["st"].tm_year == 1970
    shallow["obs"]["a"] = np.ones(1)  # a new container: the original keeps its own
    assert batch["obs"]["a"].tolist() == [0.0]
    assert shallow["infos"][0] is not batch["infos"][0]

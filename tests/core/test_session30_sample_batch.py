"""SampleBatch counts and columns, and exact ints when stacking, found by two hunts.

* ``count`` is ``seq_lens``' sum where given, skips ``infos`` and ``state_in_*``/
  ``state_out_*`` as RLlib does, counts a nested column by its first leaf with rows (an empty
  part holds none) and a list of leaf arrays by its first leaf, whatever the key order.
* An ``eps_id`` ending in NUL stays whole in a list-mode batch, as in a numpy'd one.
* A column of dict rows is refused wherever the first dict lies.
* Ints that no float64 holds, stacked beside ints of another numpy type, keep their values
  (uint64, or an object column), as they do appended one by one.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SampleBatch, SingleAgentEpisode

COUNTS = {
    # name: (columns, rows)
    "seq_lens first": ({"seq_lens": [2, 1], "obs": np.zeros((3, 2))}, 3),
    "seq_lens last": ({"obs": np.zeros((3, 2)), "seq_lens": np.array([2, 1])}, 3),
    "state_in first": ({"state_in_0": np.zeros((2, 4)), "obs": np.zeros((3, 2))}, 3),
    "state_out first": ({"state_out_0": np.zeros((1, 4)), "obs": np.zeros((3, 2))}, 3),
    "infos first": ({"infos": [{}], "obs": np.zeros((3, 2))}, 3),
    "empty dict part": ({"obs": {"a": {}, "b": np.zeros(3)}}, 3),
    "empty tuple part": ({"obs": ((), np.zeros(3))}, 3),
    "nested empty part": ({"obs": {"a": (), "b": {"c": np.zeros(3)}}}, 3),
}


@pytest.mark.parametrize("name", list(COUNTS))
def test_count_takes_the_columns_rlib_counts_by(name):
    columns, rows = COUNTS[name]
    assert SampleBatch(columns).count == len(SampleBatch(columns)) == rows


def test_a_list_of_leaf_arrays_counts_its_rows_not_its_parts():
    rows = [[np.zeros(2), k] for k in range(5)]  # Tuple items recorded as lists
    batch = SampleBatch({"obs": rows, "actions": list(range(5))})
    assert batch.count == 5
    assert SampleBatch({"obs": rows}).count == 5


@pytest.mark.parametrize("id_", ["a\0", b"x\0"])
def test_an_id_ending_in_nul_stays_whole_in_a_list_mode_batch(id_):
    episode = SingleAgentEpisode(
        id_, observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    for batch in (episode.get_sample_batch(), episode.to_numpy().get_sample_batch()):
        assert list(batch["eps_id"]) == [id_, id_]


@pytest.mark.parametrize("rows", [[{"a": 1}, None], [None, {"a": 1}], [5, {"a": 1}]])
def test_dict_rows_are_refused_wherever_the_dict_lies(rows):
    with pytest.raises(ValueError, match="rows do not stack"):
        SampleBatch({"x": rows})


EXACT = {
    # name: (items, dtype)
    "beyond int64 beside small": ([2**63 + 1, 1], np.uint64),
    "int64 max beside uint64": ([np.int64(2**63 - 1), np.uint64(2**63)], np.uint64),
    "both signs": ([2**63 + 1, -1], object),
}


@pytest.mark.parametrize("name", list(EXACT))
def test_ints_no_float_holds_keep_their_values_when_stacked(name):
    items, dtype = EXACT[name]
    for buffer in (InfiniteLookbackBuffer(list(items)), InfiniteLookbackBuffer()):
        if len(buffer):
            buffer.finalize()
        else:
            buffer.finalize()
            buffer.extend(list(items))
        assert buffer.data.dtype == dtype
        assert [int(v) for v in buffer.data] == [int(v) for v in items]


def test_small_mixed_ints_stay_as_numpy_stacks_them():
    buffer = InfiniteLookbackBuffer([np.int64(-1), np.uint64(2)])
    buffer.finalize()
    assert buffer.data.dtype == np.float64 and buffer.data.tolist() == [-1.0, 2.0]


def test_to_numpy_keeps_int_rewards_beyond_int64():
    episode = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 0], rewards=[2**63 + 1, 1], len_lookback_buffer=0
    )
    assert [int(r) for r in episode.to_numpy().get_rewards()] == [2**63 + 1, 1]
    assert episode.get_return() == float(2**63 + 2)


def test_an_empty_list_column_beside_others_is_an_empty_array():
    batch = SampleBatch({"obs": [], "t": []})
    assert batch["obs"].shape == (0,) and batch.count == 0


def test_truth_and_copies_go_by_rows_as_in_rllib():
    assert not SampleBatch({"gamma": 0.99}) and not SampleBatch({"obs": np.zeros((0, 2))})
    assert SampleBatch({"obs": np.zeros((2, 2))})
    batch = SampleBatch({"obs": {"a": np.zeros(2)}, "actions": [0, 1]})
    deep, shallow = batch.copy(), batch.copy(shallow=True)
    assert type(deep) is SampleBatch and deep.count == 2
    deep["obs"]["a"][0] = 1.0
    assert batch["obs"]["a"][0] == 0.0
    assert shallow["obs"]["a"] is batch["obs"]["a"]

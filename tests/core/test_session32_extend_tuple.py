"""A tuple given to a numpy'd buffer's extend is the tuple of its items, as in list mode."""

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

PAIR = gym.spaces.Tuple((gym.spaces.Discrete(6), gym.spaces.Box(0, 1, (2,))))

CASES = [
    ("scalars", [1, 2, 3], None, (4, 5)),
    ("rows", [np.zeros(2)], None, (np.ones(2), np.full(2, 2.0))),
    ("dicts", [{"a": 1}], None, ({"a": 2}, {"a": 3})),
    ("empty with a space", [], gym.spaces.Discrete(6), (1, 2)),
]


@pytest.mark.parametrize("name,start,space,items", CASES, ids=[c[0] for c in CASES])
def test_numpy_extend_of_a_tuple_matches_list_mode(name, start, space, items):
    listed = InfiniteLookbackBuffer(list(start), space=space)
    listed.extend(items)
    numpied = InfiniteLookbackBuffer(list(start), space=space)
    numpied.finalize()
    numpied.extend(items)
    expected = InfiniteLookbackBuffer(listed.get(), space=space)
    expected.finalize()
    got, want = numpied.get(), expected.get()
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
    else:
        np.testing.assert_array_equal(got, want)


def test_a_tuple_column_still_takes_a_tuple_batch():
    buf = InfiniteLookbackBuffer([], space=PAIR)
    buf.finalize()
    buf.extend((np.array([1, 2]), np.zeros((2, 2), np.float32)))
    assert len(buf) == 2
    np.testing.assert_array_equal(buf.get()[0], [1, 2])


def test_a_tuple_of_scalars_without_a_space_or_items_stays_refused():
    buf = InfiniteLookbackBuffer([])
    buf.finalize()
    with pytest.raises(ValueError, match="share a leading axis"):
        buf.extend((4, 5))
    assert len(buf) == 0

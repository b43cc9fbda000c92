"""Items that are Mappings but no dicts: a named refusal, not a bare leading-length error."""

import collections
import types
from collections.abc import Mapping

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode


class _ReadOnly(Mapping):
    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


REFUSED = [
    ("mappingproxy", types.MappingProxyType, "mappingproxy"),
    ("custom Mapping", _ReadOnly, "_ReadOnly"),
]

KEPT = [
    ("dict", dict),
    ("OrderedDict", collections.OrderedDict),
    ("defaultdict", lambda d: collections.defaultdict(int, d)),
]


def _items(make):
    return [make({"a": np.full(2, float(i)), "b": i}) for i in range(3)]


@pytest.mark.parametrize(("name", "make", "shown"), REFUSED, ids=[c[0] for c in REFUSED])
def test_to_numpy_names_a_mapping_that_is_no_dict(name, make, shown):
    episode = SingleAgentEpisode(
        observations=_items(make), actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match=f"holds a {shown}, a Mapping that is no dict"):
        episode.to_numpy()
    assert not episode.is_numpy  # refused: still the list-mode episode it was
    assert episode.get_observations(0)["b"] == 0


@pytest.mark.parametrize(("name", "make", "shown"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_buffer_of_such_items_refuses_numpy_mode(name, make, shown):
    buffer = InfiniteLookbackBuffer(_items(make))
    with pytest.raises(ValueError, match="give dict\\(item\\)"):
        buffer.finalize()
    assert buffer.get(-1)["b"] == 2


@pytest.mark.parametrize(("name", "make"), KEPT, ids=[c[0] for c in KEPT])
def test_dict_subclasses_still_stack(name, make):
    episode = SingleAgentEpisode(
        observations=_items(make), actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    episode.to_numpy()
    np.testing.assert_array_equal(episode.get_observations(slice(None))["b"], [0, 1, 2])

"""Array-likes iterating numpy rows keep their rows; an __array__ that raises is named."""

import numpy as np
import pytest

from episodes import SingleAgentEpisode


class _HostRows:
    """Iterates numpy rows; refuses implicit conversion, as device arrays do."""

    shape = (3, 2)

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a host NumPy array is not allowed")

    def __iter__(self):
        return iter([np.full(2, float(i)) for i in range(3)])


class _Labels:
    """Iterates labels; its __array__ raises a KeyError."""

    shape = (3, 2)

    def __array__(self, dtype=None, copy=None):
        raise KeyError("no cached values")

    def __iter__(self):
        return iter(["x", "y", "z"])


def test_an_array_like_iterating_numpy_rows_keeps_them():
    episode = SingleAgentEpisode(
        observations=_HostRows(), actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    np.testing.assert_array_equal(episode.get_observations(-1), [2.0, 2.0])


@pytest.mark.parametrize("column", ["observations", "actions"])
def test_an_array_like_whose_array_raises_is_named(column):
    given = {"observations": [0.0, 1.0, 2.0], "actions": [0, 1], "rewards": [1.0, 1.0]}
    given[column] = _Labels()
    with pytest.raises(TypeError, match=f"{column} given as a _Labels iterates no rows"):
        SingleAgentEpisode(**given, len_lookback_buffer=0)

"""Ids compared as the equality hunt found they must be.

* An id that is or holds an array (or a tensor) compares element by element: ``==`` and
  ``concat_episode`` raised numpy's "truth value is ambiguous".
* Complex ids compare each part NaN-aware: ``1+nanj`` is not ``2+nanj``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.episode.state import same_id

SAME = {
    "array": (np.array([1, 2]), np.array([1, 2])),
    "tuple holding an array": (("run", np.array([1, 2])), ("run", np.array([1, 2]))),
    "complex NaN": (complex(1, float("nan")), complex(1, float("nan"))),
    "NaN": (float("nan"), float("nan")),
}
DIFFERENT = {
    "array": (np.array([1, 2]), np.array([1, 3])),
    "complex NaN parts": (complex(1, float("nan")), complex(2, float("nan"))),
    "NaN and complex NaN": (float("nan"), complex(1, float("nan"))),
    "complex and text": (1j, "1j"),
}


@pytest.mark.parametrize("name", list(SAME))
def test_same_ids(name):
    a, b = SAME[name]
    assert same_id(a, b) and same_id(b, a)


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_different_ids(name):
    a, b = DIFFERENT[name]
    assert not same_id(a, b) and not same_id(b, a)


@pytest.mark.parametrize("field", ["id_", "agent_id", "module_id", "multi_agent_episode_id"])
def test_episodes_with_array_ids_compare_and_join(field):
    episode = SingleAgentEpisode(
        "e", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    setattr(episode, field, ("run", np.array([1, 2])))
    assert episode == copy.deepcopy(episode)
    successor = copy.deepcopy(episode).cut()
    successor.add_env_step(2.0, 0, 1.0)
    episode.concat_episode(successor)
    assert len(episode) == 2


def test_complex_nan_ids_of_other_parts_do_not_join():
    a = SingleAgentEpisode(
        complex(1, float("nan")),
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    b = SingleAgentEpisode(
        complex(2, float("nan")),
        observations=[1.0, 2.0],
        actions=[0],
        rewards=[1.0],
        t_started=1,
        len_lookback_buffer=0,
    )
    assert a != SingleAgentEpisode.from_state({**a.get_state(), "id_": b.id_})
    with pytest.raises(AssertionError, match="different ids"):
        a.concat_episode(b)


EXACT_PAIRS = {
    "numpy int and a Python float": (np.int64(2**53 + 1), 2.0**53),
    "Python int and a numpy float": (2**53 + 1, np.float64(2.0**53)),
    "uint64 and a Python float": (np.uint64(2**64 - 1), 2.0**64),
    "0-d int array and a Python float": (np.array(2**53 + 1), 2.0**53),
}


@pytest.mark.parametrize("name", list(EXACT_PAIRS))
def test_a_numpy_number_and_a_python_number_compare_exactly(name):
    from episodes.spaces import equal_in_space
    from episodes.structs import data_equal

    a, b = EXACT_PAIRS[name]
    assert not data_equal(a, b) and not data_equal(b, a)
    assert not equal_in_space(a, b, None)
    assert data_equal(np.int64(3), 3.0) and data_equal(3, np.float32(3.0))

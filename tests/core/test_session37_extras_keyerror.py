"""A KeyError raised while an extra output converts is that value's refusal, nothing more.

It used to be read as "a new key": the step was taken back with the step before it.
"""

import numpy as np
import pytest

from episodes import SingleAgentEpisode


class _Lazy:
    def __array__(self, dtype=None, copy=None):
        raise KeyError("missing cache entry")


def _episode(numpy):
    episode = SingleAgentEpisode()
    episode.add_env_reset(0.0)
    for i in range(1, 4):
        episode.add_env_step(float(i), i, float(i), extra_model_outputs={"a": 0.5, "b": 0.5})
    return episode.to_numpy() if numpy else episode


@pytest.mark.parametrize("bad", ["a", "b"], ids=["first key", "last key"])
def test_a_key_error_from_a_value_takes_back_only_its_step(bad):
    episode = _episode(numpy=True)
    outputs = {"a": 0.5, "b": 0.5, bad: _Lazy()}
    with pytest.raises(KeyError, match="missing cache entry"):
        episode.add_env_step(9.0, 9, 9.0, extra_model_outputs=outputs)
    episode.validate()
    assert episode.t == 3
    np.testing.assert_array_equal(episode.get_observations(), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(episode.get_rewards(), [1.0, 2.0, 3.0])
    for key in "ab":
        np.testing.assert_array_equal(episode.get_extra_model_outputs(key), [0.5] * 3)


def test_a_new_key_still_takes_the_checked_path():
    episode = _episode(numpy=False)
    with pytest.raises(AssertionError, match="missing keys"):
        episode.add_env_step(9.0, 9, 9.0, extra_model_outputs={"a": 0.5, "c": 0.5})
    episode.validate()
    assert episode.t == 3 and episode.get_extra_model_outputs("a") == [0.5] * 3


@pytest.mark.parametrize(
    "given",
    [{"a": "x", "c": 1}, {"c": 1, "a": "x"}, {"a": "x"}],
    ids=["bad value, then a new key", "a new key, then a bad value", "bad value, a key missing"],
)
def test_keys_that_do_not_match_are_refused_first_whatever_their_order(given):
    episode = _episode(numpy=True)
    with pytest.raises(AssertionError, match="missing keys \\['b'\\]"):
        episode.add_env_step(9.0, 9, 9.0, extra_model_outputs=given)
    episode.validate()
    assert episode.t == 3


def test_a_new_key_before_a_known_one_leaves_earlier_steps_whole():
    episode = SingleAgentEpisode("a")
    episode.add_env_reset(0)
    episode.add_env_step(1, 0, 1.0, extra_model_outputs={"a": 10, "b": 20})
    with pytest.raises(AssertionError):
        episode.add_env_step(2, 0, 1.0, extra_model_outputs={"c": 0, "a": 11})
    assert episode.get_extra_model_outputs("a") == [10]
    assert episode.get_extra_model_outputs("b") == [20]
    episode.validate()

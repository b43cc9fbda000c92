"""Pins for two space questions checked again: float one-hots, and Text column widths.

- A float action at a Discrete leaf that is NaN, infinite or beyond int64 (``2**63``) is a
  ``ValueError`` naming the values, never numpy's invalid-cast ``RuntimeWarning`` or a wrapped
  index, through ``one_hot`` and through a buffer's one-hot window read alike.
- Chunks of one ``Text`` space numpy'd with strings of different lengths get the same dtype
  (``<U{max_length}``), so they join, in memory and through a dataset.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.io import DatasetWriter, load_episode
from episodes.spaces import one_hot

D3 = gym.spaces.Discrete(3)
M33 = gym.spaces.MultiDiscrete([3, 3])

BAD_FLOATS: dict[str, tuple[Any, gym.Space[Any], str]] = {
    "nan": (float("nan"), D3, "integer values"),
    "inf": (np.float64("inf"), D3, "integer values"),
    "minus_inf": (-np.inf, D3, "integer values"),
    "two_63": (2.0**63, D3, "out of range"),
    "minus_two_63": (-(2.0**63), D3, "out of range"),
    "two_64_float32": (np.float32(2.0**64), D3, "out of range"),
    "batch_with_nan": (np.array([1.0, np.nan]), D3, "integer values"),
    "batch_with_two_63": (np.array([1.0, 2.0**63]), D3, "out of range"),
    "float16_inf": (np.array([np.inf], np.float16), D3, "integer values"),
    "list_of_floats": ([0.0, 2.0**63], D3, "out of range"),
    "multi_nan": (np.array([0.0, np.nan]), M33, "integer values"),
    "multi_two_63": (np.array([2.0**63, 0.0]), M33, "out of range"),
}


@pytest.mark.parametrize(("value", "space", "match"), BAD_FLOATS.values(), ids=BAD_FLOATS.keys())
def test_one_hot_of_unusable_floats_is_a_value_error(value: Any, space: Any, match: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's invalid-cast warning would fail here
        with pytest.raises(ValueError, match=match):
            one_hot(value, space)


def test_integral_floats_still_encode():
    assert one_hot(np.array([2.0, 0.0]), D3).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert one_hot(np.float32(1.0), D3).tolist() == [0, 1, 0]


WINDOW_DATA = {
    "nan": [0.0, float("nan")],
    "inf": [0.0, float("inf")],
    "two_63": [0.0, 1.0, 2.0**63],
}


@pytest.mark.parametrize("as_array", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("data", WINDOW_DATA.values(), ids=WINDOW_DATA.keys())
def test_one_hot_window_reads_refuse_them_too(data: list[float], as_array: bool):
    buffer = InfiniteLookbackBuffer(data=np.array(data) if as_array else data, space=D3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fill in (None, 0.0):
            with pytest.raises(ValueError, match="one-hot|one_hot"):
                buffer.get(slice(-4, None), fill=fill, one_hot_discrete=True)
    assert buffer.get(0, one_hot_discrete=True).tolist() == [1, 0, 0]  # buffer unchanged


def _text_chunks() -> tuple[SingleAgentEpisode, SingleAgentEpisode]:
    first = SingleAgentEpisode(
        "t",
        observations=["abc", "ab"],
        actions=[0],
        rewards=[0.0],
        observation_space=gym.spaces.Text(10),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    second = first.cut()
    second.add_env_step("abcdefg", 1, 1.0)
    return first.to_numpy(), second.to_numpy()


def test_text_chunks_share_the_spaces_width():
    first, second = _text_chunks()
    assert first.get_observations().dtype == second.get_observations().dtype == np.dtype("<U10")
    first.concat_episode(second)
    assert first.get_observations().tolist() == ["abc", "ab", "abcdefg"]


@pytest.mark.parametrize("numpy", [None, True, False])
def test_text_chunks_join_through_a_dataset(tmp_path: Path, numpy: bool | None):
    with DatasetWriter(tmp_path / "data") as writer:
        writer.write_many(_text_chunks())
    joined = load_episode(tmp_path / "data", "t", numpy=numpy)
    assert list(joined.get_observations()) == ["abc", "ab", "abcdefg"]
    if numpy is not False:
        assert joined.get_observations().dtype == np.dtype("<U10")

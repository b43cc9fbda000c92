"""Differential pins of session 19: how ``to_numpy`` joins items of different dtypes.

Arrays of different dtypes in one list-mode column: RLlib 2.60 casts every item into the first
item's dtype (wrapping or overflowing), ours promote as numpy does, so the values are kept.
Numbers alone (no arrays) are promoted by both alike, rounding ints beyond 2**53 next to
floats. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session19.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


def _numpyd(cls: Any, observations: list[Any]) -> list[Any]:
    episode = cls("x")
    episode.add_env_reset(observations[0])
    for obs in observations[1:]:
        episode.add_env_step(obs, 0, 0.0)
    episode.to_numpy()
    column = np.asarray(episode.get_observations())
    return [column.dtype, column.tolist()]


ARRAYS = {
    "uint8 then int64": (
        [np.array([5], np.uint8), np.array([300]), np.array([-1])],
        [np.dtype(np.int64), [[5], [300], [-1]]],
        [np.dtype(np.uint8), [[5], [44], [255]]],
    ),
    "float32 then float64": (
        [np.array([1.0], np.float32), np.array([0.5]), np.array([1e39])],
        [np.dtype(np.float64), [[1.0], [0.5], [1e39]]],
        [np.dtype(np.float32), [[1.0], [0.5], [np.inf]]],
    ),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_arrays_of_different_dtypes_are_promoted(name: str) -> None:  # "to_numpy-array-dtypes"
    observations, ours, theirs = ARRAYS[name]
    assert _numpyd(OSAE, observations) == ours
    assert _numpyd(RSAE, observations) == theirs


NUMBERS = {
    "int64 beyond 2**53 next to a float": [np.int64(2**53 + 1), np.float64(0.5), np.int64(0)],
    "uint64 next to a signed int": [np.uint64(2**64 - 1), np.int64(-1), np.uint64(0)],
    "Python ints beyond int64": [-1, 2**63 + 1, 0],
}


@pytest.mark.parametrize("name", list(NUMBERS))
def test_numbers_of_different_dtypes_are_promoted_alike(name: str) -> None:
    ours, theirs = _numpyd(OSAE, NUMBERS[name]), _numpyd(RSAE, NUMBERS[name])
    assert ours == theirs
    assert ours[0] == np.dtype(np.float64)

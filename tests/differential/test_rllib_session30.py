"""Differential pins of session 30: RLlib differences the hunts found unlisted.

Each test names its docs/deviations.md tag and asserts both sides. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session30.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


def _list_items(episode_cls: Any, space: Any = None) -> Any:
    return episode_cls(
        "x",
        observations=[[0.5, 1.5], [1.0, 2.0], [2.0, 3.0]],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        observation_space=space,
        len_lookback_buffer=0,
    )


def test_to_numpy_of_list_items_without_a_space() -> None:  # "to_numpy-list-items"
    theirs = _list_items(RSAE).to_numpy()
    assert theirs.get_observations().shape == (3, 2)  # rows
    ours = _list_items(OSAE).to_numpy()
    columns = ours.get_observations()
    assert isinstance(columns, list) and [c.tolist() for c in columns] == [
        [0.5, 1.0, 2.0],
        [1.5, 2.0, 3.0],
    ]  # one array per position: the lists nest, as dm-tree reads them
    assert ours.get_observations(0) == [0.5, 1.5]
    # A Box space says the lists are rows: then both give rows.
    box = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    assert _list_items(OSAE, box).to_numpy().get_observations().shape == (3, 2)


EXACT_INTS = {
    "uint64 next to a signed int": ([np.uint64(2**64 - 1), np.int64(-1), np.uint64(0)], object),
    "Python ints beyond int64": ([-1, 2**63 + 1, 0], object),
    "int64 next to a big uint64": ([np.int64(1), np.uint64(2**63 + 1), np.int64(0)], np.uint64),
}


def _numpyd_observations(episode_cls: Any, observations: list[Any]) -> np.ndarray:
    episode = episode_cls()
    episode.add_env_reset(observations[0])
    for obs in observations[1:]:
        episode.add_env_step(obs, 0, 0.0)
    return np.asarray(episode.to_numpy().get_observations())


@pytest.mark.parametrize("name", list(EXACT_INTS))
def test_to_numpy_of_ints_no_one_int_dtype_holds(name: str) -> None:  # "to_numpy-exact-ints"
    items, dtype = EXACT_INTS[name]
    theirs = _numpyd_observations(RSAE, items)
    assert theirs.dtype == np.float64  # rounded: 2**64 - 1 reads 2.0**64
    ours = _numpyd_observations(OSAE, items)
    assert ours.dtype == dtype and [int(v) for v in ours] == [int(v) for v in items]

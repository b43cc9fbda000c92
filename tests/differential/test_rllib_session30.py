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

"""Differential pins of session 39: ``SampleBatch.count`` against RLlib 2.60's.

Batches whose columns agree in length count alike (with and without ``seq_lens``, nested
columns, infos and numbers beside them). A batch whose ``t`` or ``rewards`` disagrees with the
column given first counts by ``t``/``rewards`` here, by the first column in RLlib
(deviations.md, "sample-batch-count-order"). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session39_rllib_sample_batch_count.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402
from ray.rllib.policy.sample_batch import SampleBatch as RSampleBatch  # noqa: E402

from episodes import SampleBatch  # noqa: E402

pytestmark = pytest.mark.differential

AGREEING: dict[str, dict[str, Any]] = {
    "plain": {"obs": np.zeros((4, 2)), "actions": np.arange(4), "rewards": np.ones(4)},
    "t_last": {"obs": np.zeros(3), "rewards": np.ones(3), "t": np.arange(3)},
    "nested_first": {"obs": {"a": np.zeros(5), "b": np.ones((5, 2))}, "rewards": np.ones(5)},
    "number_beside": {"gamma": 0.99, "obs": np.zeros(2)},
    "seq_lens": {"seq_lens": np.array([2, 1]), "obs": np.zeros((3, 2))},
    "empty_seq_lens": {"seq_lens": np.zeros(0, np.int32), "obs": np.zeros(3)},
}


@pytest.mark.parametrize("name", list(AGREEING))
def test_batches_whose_columns_agree_count_as_rllib_counts(name: str) -> None:
    columns = AGREEING[name]
    assert SampleBatch(dict(columns)).count == RSampleBatch(dict(columns)).count


def test_t_or_rewards_disagreeing_with_the_first_column_count_first() -> None:
    # The "sample-batch-count-order" row of deviations.md.
    columns = {"obs": np.zeros(2), "rewards": np.zeros(2), "t": np.arange(5)}
    assert RSampleBatch(dict(columns)).count == 2  # RLlib: the first column given
    assert SampleBatch(dict(columns)).count == 5  # ours: t, then rewards, then the rest

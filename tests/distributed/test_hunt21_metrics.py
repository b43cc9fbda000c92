"""GroupMetrics.add_sample reads the sample before it counts anything."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from episodes.distributed import GroupMetrics, RunnerSample

REFUSED: dict[str, tuple[Any, str]] = {
    "none": (None, "^add_sample takes a RunnerSample, got NoneType"),
    "a dict": ({"env_steps": 3}, "^add_sample takes a RunnerSample, got dict"),
    "metrics none": (RunnerSample(0, 0, 0, 0, 1, [], None), "metrics must be a dict"),  # type: ignore[arg-type]
    "metrics list": (RunnerSample(0, 0, 0, 0, 1, [], [1]), "got list"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_sample_counts_nothing(case: str) -> None:
    sample, message = REFUSED[case]
    metrics = GroupMetrics()
    metrics.add_sample(RunnerSample(0, 0, 0, 0, 1, [], {"num_env_steps": 2}))
    before = dataclasses.asdict(metrics)
    with pytest.raises(TypeError, match=message):
        metrics.add_sample(sample, shared_memory=True)
    assert dataclasses.asdict(metrics) == before
    assert metrics.reduce()["num_samples"] == 1

"""Differential pins of session 38: ``SampleBatch[start:stop]`` slices rows as RLlib 2.60's.

Both sides get the same columns and the same slice; every column must hold the same rows, and
arrays must be views of the batch on both sides. The deviations are pinned too: RLlib reads
``[0:0]`` as every row and ignores a step, and rounds a bound inside a sequence down to that
sequence's start, where ours reads bounds and steps as a list does and refuses such a cut.
Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session38_rllib_sample_batch_slice.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402
from ray.rllib.policy.sample_batch import SampleBatch as RSampleBatch  # noqa: E402

from episodes import SampleBatch  # noqa: E402

pytestmark = pytest.mark.differential


def _columns() -> dict[str, Any]:
    return {
        "obs": np.arange(12.0).reshape(6, 2),
        "actions": np.array([0, 1, 1, 0, 1, 0]),
        "rewards": np.linspace(0, 1, 6),
        "nested": {"a": np.arange(6), "b": (np.arange(6) * 2, np.arange(6) * 3)},
        "infos": [{"i": i} for i in range(6)],
    }


def _seq_columns() -> dict[str, Any]:
    return {
        "obs": np.arange(6),
        "seq_lens": np.array([0, 2, 3, 0, 1], np.int32),
        "state_in_0": np.arange(5).reshape(5, 1),
        "infos": list(range(6)),
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return sorted(a) == sorted(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype


AGREED = [
    slice(0, 2),
    slice(1, None),
    slice(None, -1),
    slice(-2, None),
    slice(3, 1),
    slice(5, 10),
    slice(-10, 2),
    slice(None),
    slice(2, 4, 1),
]
SEQ_AGREED = [slice(0, 2), slice(2, 5), slice(0, 5), slice(5, 6), slice(2, None), slice(None)]


@pytest.mark.parametrize(
    ("make", "where"),
    [(_columns, s) for s in AGREED] + [(_seq_columns, s) for s in SEQ_AGREED],
    ids=repr,
)
def test_slices_as_rllib(make: Any, where: slice) -> None:
    ours, theirs = SampleBatch(make()), RSampleBatch(make())
    a, b = ours[where], theirs[where]
    assert type(a) is SampleBatch and len(a) == len(b) == a.count == b.count
    assert sorted(a) == sorted(b)
    for key in a:
        assert _same(a[key], b[key]), key
    if len(a):  # arrays are views of the batch on both sides
        assert np.shares_memory(a["obs"], ours["obs"]) and np.shares_memory(b["obs"], theirs["obs"])


DEVIATIONS = [
    (_columns, slice(0, 0), lambda ours, theirs: len(ours) == 0 and len(theirs) == 6),
    (_columns, slice(None, None, 2), lambda ours, theirs: len(ours) == 3 and len(theirs) == 6),
    (
        _columns,
        slice(None, None, -1),
        lambda ours, theirs: ours["actions"].tolist() == [0, 1, 0, 1, 1, 0] and len(theirs) == 6,
    ),
]


# deviations.md: "sample-batch-slice-bounds"
@pytest.mark.parametrize(("make", "where", "check"), DEVIATIONS, ids=repr)
def test_bounds_and_steps_read_as_a_list(make: Any, where: slice, check: Any) -> None:
    assert check(SampleBatch(make())[where], RSampleBatch(make())[where])


# deviations.md: "sample-batch-slice-seq"
@pytest.mark.parametrize("where", [slice(1, 4), slice(0, 3), slice(3, 6)], ids=repr)
def test_a_cut_inside_a_sequence_is_refused(where: slice) -> None:
    theirs = RSampleBatch(_seq_columns())[where]  # rounded down to sequence starts
    assert len(theirs) != where.stop - where.start and theirs["obs"][0] in (0, 2, 5)
    with pytest.raises(ValueError, match="cut a sequence"):
        SampleBatch(_seq_columns())[where]

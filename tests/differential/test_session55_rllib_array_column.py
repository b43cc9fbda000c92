"""Differential pin: an extra-model-output column assigned as a plain array.

``extra_model_outputs`` is a plain dict on both sides, so a user adding an intrinsic-reward
column writes ``ep.extra_model_outputs["rnd"] = values``. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session55_rllib_array_column.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


def _with_array_column(cls: Any) -> Any:
    ep = cls("x")
    ep.add_env_reset(0)
    for i in range(3):
        ep.add_env_step(i + 1, 0, 1.0, extra_model_outputs={"v": 0.0})
    ep.extra_model_outputs["rnd"] = np.zeros(3)
    return ep


def test_validate_names_a_column_assigned_as_an_array() -> None:  # "validate-array-column"
    theirs, ours = _with_array_column(RSAE), _with_array_column(OSAE)
    theirs.validate()  # passes: only the lengths are compared, and an array has one
    with pytest.raises(AttributeError, match="finalize"):
        theirs.to_numpy()  # the first use fails without naming the column
    for use in (ours.validate, ours.to_numpy):
        with pytest.raises(AssertionError, match=r"extra_model_outputs\['rnd'\] is a ndarray"):
            use()
    assert not ours.is_numpy and list(ours.get_extra_model_outputs("v")) == [0.0, 0.0, 0.0]

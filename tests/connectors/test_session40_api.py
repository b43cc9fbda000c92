"""Connectors' column-name arguments are checked when the connector is made.

``FrameStack(out_key=None)`` and ``FlattenObservations(out_key=3)`` wrote batches keyed None or 3,
which no learner reads, while ``AddLearnerColumns(columns=("obs", None))`` refused such names
with a ``TypeError``: now every connector's column name is a str, else a ``TypeError`` naming
the argument.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, FlattenObservations, FrameStack

MAKERS = {
    "FrameStack out_key": (lambda key: FrameStack(2, out_key=key), "FrameStack's out_key"),
    "FrameStack flat out_key": (
        lambda key: FrameStack(2, flatten=True, out_key=key),
        "FrameStack's out_key",
    ),
    "FlattenObservations out_key": (
        lambda key: FlattenObservations(out_key=key),
        "FlattenObservations' out_key",
    ),
    "AddLearnerColumns columns": (lambda key: AddLearnerColumns(columns=("obs", key)), "columns"),
}

NOT_NAMES = {
    "None": None,
    "int": 3,
    "tuple": ("obs",),
    "bytes": b"obs",
    "numpy str": np.array("obs"),
}


@pytest.mark.parametrize(("make", "argument"), MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize("key", NOT_NAMES.values(), ids=NOT_NAMES.keys())
def test_a_column_name_that_is_no_str_is_a_type_error_naming_the_argument(make, argument, key):
    with pytest.raises(TypeError, match=f"^{argument} must be"):
        make(key)


def _episode():
    return SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    )


OUT_KEYS = {name: make for name, (make, _) in MAKERS.items() if "out_key" in name}


@pytest.mark.parametrize("make", OUT_KEYS.values(), ids=OUT_KEYS.keys())
@pytest.mark.parametrize("key", ["features", "obs", ""])
def test_str_out_keys_are_written(make, key):
    batch = make(key)([_episode()], {})
    assert key in batch and all(isinstance(k, str) for k in batch)

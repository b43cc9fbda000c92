"""One-hot of a non-finite float: the ValueError alone, on every read path, no RuntimeWarning."""

import warnings

import numpy as np
import pytest
from gymnasium.spaces import Discrete

from episodes import InfiniteLookbackBuffer
from episodes.spaces import one_hot


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize(
    "read",
    [
        lambda b: b.get(slice(None), one_hot_discrete=True),
        lambda b: b.get([0, 1], one_hot_discrete=True),
        lambda b: one_hot(b.get(0), Discrete(3)),
    ],
    ids=["slice", "index list", "one_hot"],
)
def test_non_finite_values_are_refused_without_warnings(value, read):
    buffer = InfiniteLookbackBuffer([value, 0.0], space=Discrete(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="integer values"):
            read(buffer)

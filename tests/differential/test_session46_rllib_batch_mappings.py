"""Differential pin of session 46: ``batch`` of items holding a mapping that is no dict.

Each deviation test carries its docs/deviations.md tag and asserts both sides: OUR behaviour and
RLlib's, so it flags the day RLlib changes (then revisit the row). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session46_rllib_batch_mappings.py
"""

from __future__ import annotations

import collections
import types
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402
from ray.rllib.utils.spaces.space_utils import batch as rllib_batch  # noqa: E402

from episodes.spaces import batch  # noqa: E402
from tests._mapping_kinds import ReadOnlyMapping  # noqa: E402

pytestmark = pytest.mark.differential


_Groups = ReadOnlyMapping


MAKERS = {
    "UserDict": collections.UserDict,
    "MappingProxyType": types.MappingProxyType,
    "Mapping subclass": lambda d: _Groups(**d),
}
PLACES = {"item": lambda inner: inner, "nested in a dict": lambda inner: {"o": inner}}


def _rllib_answer(items: list[Any]) -> Any:
    try:
        return rllib_batch(items)
    except TypeError as error:
        return error


# --------------------------------------------------------------------- batch-mapping-no-dict
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", MAKERS)
def test_batch_refuses_a_mapping_that_is_no_dict(kind: str, place: str) -> None:
    # "batch-mapping-no-dict"
    items = [PLACES[place](MAKERS[kind]({"a": np.full(2, float(t))})) for t in range(2)]
    with pytest.raises(ValueError, match=r"item 0 holds a .*, a Mapping that is no dict.*dict\("):
        batch(items)
    theirs = _rllib_answer(items)
    if place == "item" and kind == "MappingProxyType":  # an object array of the mappings
        assert isinstance(theirs, np.ndarray) and theirs.dtype == object
        assert [dict(m) for m in theirs][1]["a"].tolist() == [1.0, 1.0]
    elif place == "item":  # read as its keys: strings, not the values
        assert isinstance(theirs, np.ndarray) and theirs.tolist() == [["a"], ["a"]]
    elif kind == "Mapping subclass":  # rebuilt through a constructor that takes no pairs
        assert isinstance(theirs, TypeError)
    else:  # batched by its keys
        assert np.asarray(theirs["o"]["a"]).tolist() == [[0.0, 0.0], [1.0, 1.0]]

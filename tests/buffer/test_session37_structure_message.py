"""A batch that nests otherwise than a finalized column's items is refused naming both nestings.

``extend`` of a numpy'd Dict column given a batch under other keys said "batch has 2 leaves but
the column stores 2 (or they nest otherwise)", which names neither nesting. The message now
shows both, as the items' row shapes under their keys (or tuple parts); the column is left as
it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore

FIRST = {"a": np.zeros(2), "b": np.zeros(2)}
CASES = {
    "other keys": (
        {"a": np.zeros((2, 2)), "c": np.zeros((2, 2))},
        "the batch's items nest as {'a': 'shape (2,)', 'c': 'shape (2,)'}, the column's as "
        "{'a': 'shape (2,)', 'b': 'shape (2,)'}: structure mismatch",
    ),
    "a key fewer": (
        {"a": np.zeros((3, 2))},
        "the batch's items nest as {'a': 'shape (2,)'}, the column's as "
        "{'a': 'shape (2,)', 'b': 'shape (2,)'}: structure mismatch",
    ),
    "a dict deeper": (
        {"a": np.zeros((2, 2)), "b": {"c": np.zeros(2)}},
        "the batch's items nest as {'a': 'shape (2,)', 'b': {'c': 'shape ()'}}, the column's "
        "as {'a': 'shape (2,)', 'b': 'shape (2,)'}: structure mismatch",
    ),
    "a flat batch": (
        np.zeros((2, 2)),
        "the batch's items nest as shape (2,), the column's as "
        "{'a': 'shape (2,)', 'b': 'shape (2,)'}: structure mismatch",
    ),
}


@pytest.mark.parametrize(("batch", "message"), CASES.values(), ids=CASES.keys())
def test_a_batch_nesting_otherwise_names_both_nestings(batch: Any, message: str) -> None:
    episode = SingleAgentEpisode()
    episode.add_env_reset(FIRST)
    episode.to_numpy()
    with pytest.raises(ValueError) as caught:
        episode.observations.extend(batch)
    assert str(caught.value) == message
    observations = episode.get_observations()
    assert sorted(observations) == ["a", "b"] and len(episode.observations) == 1
    assert [observations[k].tolist() for k in ("a", "b")] == [[[0.0, 0.0]], [[0.0, 0.0]]]


def test_the_store_names_a_nested_column_in_a_flat_batch() -> None:
    store = ArrayStore.from_batch(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError) as caught:
        store.extend_batch({"x": np.zeros((2, 3))})
    assert str(caught.value) == (
        "the batch's items nest as {'x': 'shape (3,)'}, the column's as shape (3,): "
        "structure mismatch"
    )
    assert store.size == 1 and store.data.tolist() == [[0.0, 0.0, 0.0]]

"""Index forms: a list-like position of a 0-d int array or tensor, and objects that are no
iterables."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.indexing import sequence_position
from episodes.rollout import CircularBuffer

TAKEN = [
    ("python int", 2, 2),
    ("numpy int", np.int32(2), 2),
    ("0-d numpy array", np.array(2), 2),
    ("0-d torch tensor", torch.tensor(2), 2),
    ("0-d uint8 tensor", torch.tensor(2, dtype=torch.uint8), 2),
]
REFUSED = [
    ("bool", True),
    ("numpy bool", np.True_),
    ("0-d bool array", np.array(True)),
    ("0-d bool tensor", torch.tensor(True)),
    ("1-element tensor", torch.tensor([2])),
    ("1-element array", np.array([2])),
    ("float", 2.0),
    ("0-d float tensor", torch.tensor(2.0)),
    ("string", "2"),
]


@pytest.mark.parametrize(("name", "value", "want"), TAKEN, ids=[c[0] for c in TAKEN])
def test_ints_taken(name: str, value: object, want: int) -> None:
    assert sequence_position(value, 5) == want and type(sequence_position(value, 5)) is int


@pytest.mark.parametrize(("name", "value"), REFUSED, ids=[c[0] for c in REFUSED])
def test_others_refused(name: str, value: object) -> None:
    with pytest.raises(TypeError):
        sequence_position(value, 5)


def test_episode_is_not_reversible() -> None:
    with pytest.raises(TypeError, match="not reversible"):
        reversed(SingleAgentEpisode(observations=[0]))


def test_circular_buffer_is_not_iterable() -> None:
    buf = CircularBuffer(4, 1)
    buf.append(torch.tensor([[1.0]]))
    with pytest.raises(TypeError, match="not iterable"):
        list(buf)
    assert buf[0].tolist() == [[1.0]]

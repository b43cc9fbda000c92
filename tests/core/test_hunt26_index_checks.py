"""``sequence_position`` reads an index as a list does; ``whole_number`` takes 0-d ints only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes.indexing import sequence_position


@given(length=st.integers(0, 50), index=st.integers(-60, 60))
def test_it_reads_an_index_as_a_list_does(length, index):
    items = list(range(length))
    try:
        want = items[index]
    except IndexError:
        with pytest.raises(IndexError, match=f"chunk index {index} out of range"):
            sequence_position(index, length)
    else:
        assert sequence_position(index, length) == want
        assert sequence_position(np.int64(index), length) == want


@pytest.mark.parametrize("index", [True, np.bool_(False), 1.0, "1", None], ids=repr)
def test_what_a_list_refuses_is_a_type_error(index):
    with pytest.raises(TypeError):
        sequence_position(index, 4)


def test_the_message_names_what_is_indexed():
    with pytest.raises(IndexError, match="piece index 9 out of range for 2 pieces"):
        sequence_position(9, 2, what="piece")


WHOLE = [
    ("0-d torch int", "tensor(2)", 2),
    ("numpy int", "np.int64(3)", 3),
    ("0-d numpy int", "np.array(3)", 3),
    ("torch bool", "tensor(True)", None),
    ("one-element torch vector", "tensor([2])", None),
    ("one-element torch matrix", "tensor([[2]])", None),
    ("one-element numpy vector", "np.array([2])", None),
]


@pytest.mark.parametrize("name, expr, want", WHOLE, ids=[w[0] for w in WHOLE])
def test_whole_number_takes_0d_ints_only(name, expr, want):
    import torch

    from episodes.indexing import whole_number

    value = eval(expr, {"np": np, "tensor": torch.tensor})  # noqa: S307 - the table's literals
    if want is None:
        with pytest.raises(ValueError, match="n_step must be an int >= 1"):
            whole_number(value, "n_step", 1)
    else:
        assert whole_number(value, "n_step", 1) == want

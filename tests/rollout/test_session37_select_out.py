"""select_rows with out=: as torch.index_select whatever the number of rows (dtype, shape)."""

import warnings

import pytest
import torch

from episodes.rollout.select import select_rows


@pytest.mark.parametrize("rows", [10, 9000], ids=["plain path", "wide-row path"])
def test_an_out_of_another_dtype_is_refused(rows):
    source = torch.arange(20000.0).view(10000, 2)
    out = torch.zeros(rows, 2, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="same scalar type"):
        select_rows(source, torch.arange(rows), out=out)
    assert not out.any()


@pytest.mark.parametrize("rows", [10, 9000], ids=["plain path", "wide-row path"])
def test_an_out_of_another_row_shape_is_resized_as_index_select_resizes_it(rows):
    source = torch.arange(20000.0).view(10000, 2)
    index = torch.arange(rows).flip(0)
    mine, theirs = torch.empty(rows, 1, 2), torch.empty(rows, 1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of resizing a non-empty out
        got = select_rows(source, index, out=mine)
        expected = torch.index_select(source, 0, index, out=theirs)
    assert got.shape == expected.shape == (rows, 2)
    assert torch.equal(got, expected)

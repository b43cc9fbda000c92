"""select_rows: the bits index_select gives, with small rows moved as one wide element."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import select as select_module
from episodes.rollout import select_rows


@pytest.fixture(autouse=True)
def _every_selection_takes_the_wide_path(monkeypatch):
    # Small selections skip the reinterpretation; these tests check it on small tensors.
    monkeypatch.setattr(select_module, "_MIN_ROWS", 0)


DTYPES = [torch.bool, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.float32, torch.float64]  # fmt: skip

# (case, dtype, row shape): rows of 2, 4, 8 and 16 bytes are reinterpreted, the rest are not.
CASES = [
    ("CartPole observation: 4 float32, 16 bytes", torch.float32, (4,)),
    ("two logits: 8 bytes", torch.float32, (2,)),
    ("one element per row", torch.float32, (1,)),
    ("a 1-D column", torch.int64, ()),
    ("2 x 2 float32 rows", torch.float32, (2, 2)),
    ("3 float32: 12 bytes, as it is", torch.float32, (3,)),
    ("4 bools: 4 bytes", torch.bool, (4,)),
    ("two float64: 16 bytes", torch.float64, (2,)),
    ("48 float32, as it is", torch.float32, (48,)),
    ("empty rows", torch.float32, (0,)),
]


def _rows(dtype: torch.dtype, shape: tuple[int, ...], count: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 256, (count, *shape, torch.empty(0, dtype=dtype).element_size()),
                         dtype=torch.uint8, generator=gen)  # fmt: skip
    if dtype is torch.bool:
        return bits[..., 0] % 2 == 1
    return bits.view(dtype).reshape(count, *shape)  # arbitrary bits, NaN payloads included


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype is torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize(("dtype", "shape"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_select_rows_gives_index_selects_bits(dtype, shape):
    source = _rows(dtype, shape, 50, seed=len(shape))
    index = torch.tensor([49, 0, 7, 7, 3])
    want = source.index_select(0, index)
    assert _same_bits(select_rows(source, index), want)
    out = torch.empty_like(want)
    assert select_rows(source, index, out=out) is out
    assert _same_bits(out, want)


def test_a_view_starting_mid_element_and_a_strided_out_fall_back():
    source = torch.arange(42.0).view(21, 2)[1:]  # offset of 2 floats: 8 bytes, one wide element
    shifted = torch.arange(43.0)[1:].view(21, 2)  # offset of 1 float: not a whole int64
    index = torch.tensor([3, 1])
    for src in (source, shifted):
        assert torch.equal(select_rows(src, index), src.index_select(0, index))
    out = torch.empty(2, 4)[:, :2]  # not contiguous
    select_rows(source, index, out=out)
    assert torch.equal(out, source.index_select(0, index))


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 5), max_size=2).map(tuple),
    count=st.integers(1, 30),
    offset=st.integers(0, 3),
    picks=st.lists(st.integers(0, 10_000), max_size=40),
    seed=st.integers(0, 2**16),
)
def test_select_rows_equals_index_select(dtype, shape, count, offset, picks, seed):
    source = _rows(dtype, shape, count + offset, seed)[offset:]
    index = torch.tensor([p % count for p in picks], dtype=torch.int64)
    want = source.index_select(0, index)
    assert _same_bits(select_rows(source, index), want)
    out = torch.empty_like(want)
    select_rows(source, index, out=out)
    assert _same_bits(out, want)


@pytest.mark.parametrize(
    ("dtype", "shape", "wide"),
    [(torch.float32, (4,), torch.complex128), (torch.float32, (2,), torch.int64),
     (torch.float16, (2,), torch.int32), (torch.bool, (2,), torch.int16),
     (torch.float32, (1,), torch.float32), (torch.float32, (3,), None)],
)  # fmt: skip
def test_which_rows_move_as_one_element(dtype, shape, wide):
    from episodes.rollout.select import _one_per_row

    flat = _one_per_row(torch.zeros(6, *shape, dtype=dtype))
    assert (flat is None) if wide is None else (flat.dtype == wide and flat.shape == (6,))


@pytest.mark.parametrize(
    "row_shape", [(2,), (1,), (), (3,)], ids=["8 bytes", "one", "1-D", "12 bytes"]
)
def test_a_tensor_that_requires_grad_keeps_its_graph(row_shape):
    source = torch.randn(5, *row_shape, requires_grad=True)
    picked = select_rows(source, torch.tensor([1, 1, 4]))
    picked.sum().backward()
    assert source.grad is not None
    assert source.grad.reshape(5, -1)[:, 0].tolist() == [0.0, 2.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("row_shape", [(4,), (2,), (1,), (3,)])
def test_large_selections_take_the_wide_path_as_they_are(row_shape, monkeypatch):
    monkeypatch.undo()  # the real threshold
    source = _rows(torch.float32, row_shape, 20_000, seed=1)
    index = torch.randperm(20_000, generator=torch.Generator().manual_seed(0))[:9_000]
    assert len(index) >= select_module._MIN_ROWS
    assert _same_bits(select_rows(source, index), source.index_select(0, index))

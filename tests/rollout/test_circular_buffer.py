from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import CircularBuffer


def push(buf, values, device):
    for v in values:
        buf.append(torch.full((buf.batch_size, 2), float(v), device=device))


def test_lifo_and_overwrite(device):
    buf = CircularBuffer(3, 2, device)
    assert buf.max_length == 3
    push(buf, [1, 2], device)
    assert buf[0][:, 0].tolist() == [2.0, 2.0] and buf[1][:, 0].tolist() == [1.0, 1.0]
    assert buf.current_length.tolist() == [2, 2]
    push(buf, [3, 4, 5], device)  # overwrites 1 and 2
    assert [buf[k][0, 0].item() for k in range(3)] == [5.0, 4.0, 3.0]
    assert buf.current_length.tolist() == [3, 3]
    assert buf[0].device.type == device.type
    assert buf.buffer[0, :, 0].tolist() == [3.0, 4.0, 5.0]  # oldest first


@pytest.mark.parametrize("k", [-1, 3, 10])
def test_out_of_range(device, k):
    buf = CircularBuffer(3, 2, device)
    with pytest.raises(RuntimeError, match="empty"):
        buf[0]
    push(buf, [1], device)
    with pytest.raises(IndexError, match="out of range"):
        buf[k]


def test_bad_construction_and_append():
    with pytest.raises(ValueError):
        CircularBuffer(0, 2)
    buf = CircularBuffer(2, 2)
    with pytest.raises(ValueError):
        buf.append(torch.zeros(3, 1))


def test_per_env_reset(device):
    buf = CircularBuffer(4, 3, device)
    push(buf, [1, 2, 3], device)
    buf.reset([1])
    assert buf.current_length.tolist() == [3, 0, 3]
    assert buf[0][1].tolist() == [0.0, 0.0]  # nothing since the reset reads as zeros
    push(buf, [4], device)
    assert buf.current_length.tolist() == [4, 1, 4]
    # lags beyond an env's history clamp to its oldest item since the reset
    assert buf[2][:, 0].tolist() == [2.0, 4.0, 2.0]
    lag = torch.tensor([0, 0, 3], device=device)
    assert buf[lag][:, 0].tolist() == [4.0, 4.0, 1.0]
    buf.reset()
    assert buf.current_length.tolist() == [0, 0, 0]


def test_dtype_preserved(device):
    buf = CircularBuffer(2, 2, device)
    buf.append(torch.tensor([[1], [2]], dtype=torch.int16, device=device))
    assert buf[0].dtype == torch.int16


def test_windows_never_cross_reset(device):
    n = 4
    buf = CircularBuffer(6, n, device)
    # item value = global step; env e is reset after step e (so shorter histories)
    for step in range(10):
        buf.append(torch.full((n, 1), float(step), device=device))
        if step < n:
            buf.reset([step])
    # env e was reset after step e, so its history is steps e+1..9 (capped at 6 items)
    seq = 3
    g = torch.Generator(device=device).manual_seed(0)
    seen = set()
    for w in buf.mini_batch_generator(seq, batch_size=64, num_batches=5, generator=g):
        assert w.data.shape == (seq, 64, 1) and w.data.device.type == device.type
        vals = w.data[..., 0].T.cpu()
        for env, lag, row in zip(w.env_ids.tolist(), w.lags.tolist(), vals, strict=True):
            assert row.tolist() == [float(9 - lag - seq + 1 + i) for i in range(seq)]
            assert row[0] >= env + 1  # starts after the env's reset
            seen.add((env, lag))
    lengths = buf.current_length.tolist()
    valid = {(e, j) for e in range(n) for j in range(lengths[e] - seq + 1)}
    assert seen == valid  # uniform sampling hits every valid window


def test_windows_errors():
    buf = CircularBuffer(4, 2)
    with pytest.raises(ValueError):
        next(buf.mini_batch_generator(2, 1, 1))
    push(buf, [1], "cpu")
    with pytest.raises(ValueError, match="no env"):
        next(buf.mini_batch_generator(2, 1, 1))
    with pytest.raises(ValueError):
        next(buf.mini_batch_generator(5, 1, 1))


@settings(max_examples=40, deadline=None)
@given(
    max_len=st.integers(1, 5),
    n=st.integers(1, 3),
    ops=st.lists(st.one_of(st.just("append"), st.integers(0, 2)), max_size=15),
)
def test_property_matches_python_deques(max_len, n, ops):
    buf = CircularBuffer(max_len, n)
    hist: list[list[float]] = [[] for _ in range(n)]
    counter = 0
    for op in ops:
        if op == "append":
            counter += 1
            buf.append(torch.arange(n, dtype=torch.float32) + 100 * counter)
            for e in range(n):
                hist[e] = (hist[e] + [100.0 * counter + e])[-max_len:]
        elif op < n:
            buf.reset([op])
            hist[op] = []
    assert buf.current_length.tolist() == [len(h) for h in hist]
    if counter:
        for k in range(max_len):
            want = [h[-1 - min(k, len(h) - 1)] if h else 0.0 for h in hist]
            assert buf[k].tolist() == want


def test_reset_takes_a_bool_mask_of_the_done_envs():
    buf = CircularBuffer(3, 3)
    buf.append(torch.tensor([1.0, 2.0, 3.0]))
    buf.reset(torch.tensor([False, False, True]))
    assert buf.current_length.tolist() == [1, 1, 0]
    buf.reset([True, False, False])  # a list of bools is a mask too
    assert buf.current_length.tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="bool mask"):
        buf.reset(torch.tensor([True, False]))


@pytest.mark.parametrize("change", ["append", "reset"])
def test_a_generator_refuses_to_go_on_after_the_buffer_changed(change):
    buf = CircularBuffer(4, 2)
    for v in range(4):
        buf.append(torch.full((2,), float(v)))
    batches = buf.mini_batch_generator(seq_len=2, batch_size=3, num_batches=3)
    next(batches)
    buf.append(torch.full((2,), 100.0)) if change == "append" else buf.reset([0])
    with pytest.raises(RuntimeError, match="changed"):
        next(batches)


def test_tensor_lags_stay_inside_each_envs_history():
    # A negative lag wrapped to the oldest ring slot: an item from before env 0's reset.
    buf = CircularBuffer(3, 2)
    for value in (1, 2, 3):
        buf.append(torch.tensor([value, 10 + value]))
    buf.reset([0])
    buf.append(torch.tensor([4, 14]))
    assert buf[torch.tensor([-1, 0])].tolist() == [4, 14]  # clamped to the newest
    assert buf[torch.tensor([5, 5])].tolist() == [4, 12]  # clamped to the oldest
    with pytest.raises(TypeError, match="integers"):
        buf[torch.tensor([0.0, 1.0])]
    with pytest.raises(ValueError, match="shape"):
        buf[torch.tensor([0, 0, 0])]
    with pytest.raises(TypeError, match="integers or a bool mask"):
        buf.reset(torch.tensor([0.9]))  # was truncated to env 0
    assert buf.current_length.tolist() == [1, 3]


@pytest.mark.parametrize(
    ("ids", "error"),
    [(torch.tensor([0.5]), TypeError), (torch.tensor([True]), ValueError), ([7], IndexError)],
    ids=["float ids", "short mask", "out of range"],
)
def test_a_refused_reset_changes_nothing_and_a_generator_goes_on(ids, error):
    buf = CircularBuffer(4, 2)
    for v in range(4):
        buf.append(torch.full((2,), float(v)))
    batches = buf.mini_batch_generator(seq_len=2, batch_size=3, num_batches=3)
    next(batches)
    with pytest.raises(error):
        buf.reset(ids)
    assert buf.current_length.tolist() == [4, 4]
    next(batches)


@pytest.mark.parametrize("ids", [[], (), torch.tensor([], dtype=torch.long)], ids=repr)
def test_resetting_no_env_is_allowed(ids):
    buf = CircularBuffer(3, 2)
    buf.append(torch.tensor([1.0, 2.0]))
    buf.reset(ids)
    assert buf.current_length.tolist() == [1, 1]


def test_the_buffer_property_is_what_the_lags_read():
    # It showed the raw ring: items from before a reset, while buf[k] read the new history.
    buf = CircularBuffer(3, 3)
    for v in (1.0, 2.0, 3.0, 4.0):
        buf.append(torch.tensor([v, 10 * v, 100 * v]))
    buf.reset([0])
    buf.append(torch.tensor([7.0, 50.0, 500.0]))
    buf.reset([2])
    whole = buf.buffer
    for k in range(3):
        assert torch.equal(whole[:, 2 - k], buf[k])
    assert whole.tolist() == [[7.0, 7.0, 7.0], [30.0, 40.0, 50.0], [0.0, 0.0, 0.0]]

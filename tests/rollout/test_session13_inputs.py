"""Inputs the rollout entry points refused only part-way, or with an AttributeError.

A tensor whose shape and dtype fit but which holds no data (meta) or is not dense (sparse,
nested, quantized) passed the row checks and failed in the copy, after other fields were
written; non-tensors met ``.detach()`` or ``.dim()``. Each refusal must name the argument and
leave the object as it was (contract section 8).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from episodes.rollout import (
    CircularBuffer,
    RolloutStorage,
    Transition,
    bootstrap_time_outs,
    compute_gae,
    distillation_generator,
    mini_batch_generator,
    normalize_into,
    normalize_over,
    pad_with_layout,
    recurrent_mini_batch_generator,
    select_rows,
    split_and_pad_trajectories,
    trajectory_layout,
    unpad_trajectories,
)

N, T = 2, 3


def _quiet(make):
    """Calls ``make`` without torch's prototype / beta / deprecation warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def _nested(n: int) -> torch.Tensor:
    return _quiet(lambda: torch.nested.nested_tensor([torch.zeros(1)] * n))


def _quantized(shape: tuple[int, ...]) -> torch.Tensor:
    return _quiet(lambda: torch.quantize_per_tensor(torch.zeros(shape), 0.1, 0, torch.qint8))


# name -> a [N] tensor whose shape and dtype fit a scalar field but which cannot be copied
NO_DATA = {
    "meta": lambda: torch.zeros(N, device="meta"),
    "sparse": lambda: torch.zeros(N).to_sparse(),
    "sparse csr": lambda: _quiet(torch.zeros(N, 1).to_sparse_csr),
    "nested": lambda: _nested(N),
    "quantized": lambda: _quantized((N,)),
}
NOT_TENSORS = {
    "list": [0.0] * N,
    "None": None,
    "float": 0.5,
    "numpy": np.zeros(N, dtype=np.float32),
    "dict": {"a": 1.0},
    "tuple": (0.0,) * N,
}


def _storage(**kwargs) -> RolloutStorage:
    storage = RolloutStorage("rl", N, T, (4,), (1,), **kwargs)
    g = torch.Generator().manual_seed(0)
    for tensor in storage.tensors.values():  # cells a refused write would visibly change
        noise = torch.randn(tensor.shape, generator=g)
        tensor.copy_(noise > 0 if tensor.dtype == torch.bool else noise)
    storage.add_transition(Transition(rewards=torch.ones(N)))  # step 1
    return storage


def _snapshot(storage: RolloutStorage) -> dict:
    state = {name: t.clone() for name, t in storage.tensors.items()}
    state["step"] = storage.step
    for which in ("actor", "critic"):
        saved = getattr(storage, f"saved_hidden_states_{which}")
        state[which] = None if saved is None else [s.clone() for s in saved]
    return state


def _assert_unchanged(storage: RolloutStorage, before: dict) -> None:
    after = _snapshot(storage)
    assert after.keys() == before.keys()
    for key, value in before.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(after[key], value), f"{key} was written"
        elif isinstance(value, list):
            assert all(torch.equal(a, b) for a, b in zip(after[key], value, strict=True)), key
        else:
            assert after[key] == value, key


# ------------------------------------------------------------------ RolloutStorage writes
@pytest.mark.parametrize("kind", sorted(NO_DATA))
@pytest.mark.parametrize("field", ["dones", "values", "actions_log_prob", "rewards"])
def test_add_transition_refuses_tensors_without_data_before_writing(kind, field):
    """Rewards were written into row ``step`` before torch refused the meta dones."""
    storage = _storage()
    before = _snapshot(storage)
    fields = {"rewards": torch.tensor([5.0, 6.0]), "values": torch.ones(N, 1)}
    fields[field] = NO_DATA[kind]()
    with pytest.raises(ValueError, match=field):
        storage.add_transition(Transition(**fields))
    _assert_unchanged(storage, before)


@pytest.mark.parametrize("kind", ["meta", "sparse", "quantized"])
def test_add_transition_refuses_a_hidden_state_without_data(kind):
    storage = _storage(actor_hidden_state=(1, 3))
    before = _snapshot(storage)
    state = {
        "meta": torch.zeros(1, N, 3, device="meta"),
        "sparse": torch.zeros(1, N, 3).to_sparse(),
        "quantized": _quantized((1, N, 3)),
    }[kind]
    with pytest.raises(ValueError, match="actor hidden state"):
        storage.add_transition(Transition(rewards=torch.ones(N), hidden_states=(state, None)))
    _assert_unchanged(storage, before)


@pytest.mark.parametrize("kind", ["meta", "sparse", "nested", "quantized"])
def test_write_block_refuses_blocks_without_data_before_writing(kind):
    storage = _storage()
    before = _snapshot(storage)
    block = {
        "meta": lambda: torch.zeros(1, N, device="meta"),
        "sparse": lambda: torch.zeros(1, N).to_sparse(),
        "nested": lambda: _nested(1),
        "quantized": lambda: _quantized((1, N)),
    }[kind]()
    with pytest.raises(ValueError, match="dones"):
        storage.write_block(0, rewards=torch.full((1, N), 5.0), dones=block)
    _assert_unchanged(storage, before)


def test_write_block_names_the_field_of_a_non_tensor_block():
    storage = _storage()
    before = _snapshot(storage)
    with pytest.raises(TypeError, match="values: blocks must be torch tensors"):
        storage.write_block(0, rewards=torch.ones(1, N), values=np.zeros((1, N, 1)))
    _assert_unchanged(storage, before)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ("a number", TypeError, "distribution_params: expected 2 tensors, got int"),
        ("one of two", ValueError, "distribution_params: expected 2 tensors, got 1"),
    ],
)
def test_distribution_params_of_the_wrong_kind_are_named(params, error, message):
    """A bare number met len(): "object of type 'int' has no len()"."""
    storage = _storage()
    before = _snapshot(storage)
    value = 5 if params == "a number" else (torch.zeros(N, 1),)
    with pytest.raises(error, match=message):
        storage.add_transition(Transition(rewards=torch.ones(N), distribution_params=value))
    _assert_unchanged(storage, before)


# ------------------------------------------------------------------ compute_returns / GAE
@pytest.mark.parametrize("kind", sorted(NOT_TENSORS))
def test_compute_returns_refuses_non_tensor_last_values(kind):
    """'list' object has no attribute 'detach'."""
    storage = _storage()
    before = _snapshot(storage)
    with pytest.raises(TypeError, match="last_values: expected a torch.Tensor"):
        storage.compute_returns(NOT_TENSORS[kind], gamma=0.9, lam=0.95)
    _assert_unchanged(storage, before)


@pytest.mark.parametrize(
    ("kind", "last_values"),
    [
        ("complex", lambda: torch.tensor([1 + 2j, 0j])),
        ("meta", lambda: torch.zeros(N, device="meta")),
        ("sparse", lambda: torch.zeros(N).to_sparse()),
    ],
)
def test_compute_returns_refuses_complex_or_data_less_last_values(kind, last_values):
    """Complex last values lost their imaginary part with only torch's warning."""
    storage = _storage()
    before = _snapshot(storage)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "discards the imaginary part" on the way
        with pytest.raises(ValueError, match="last_values"):
            storage.compute_returns(last_values(), gamma=0.9, lam=0.95)
    _assert_unchanged(storage, before)


def test_compute_returns_refuses_a_storage_mask_that_is_no_tensor():
    storage = _storage()
    storage.valid = [[True] * N] * T
    before = _snapshot(storage)
    with pytest.raises(TypeError, match="valid: expected a torch.Tensor"):
        storage.compute_returns(torch.zeros(N), gamma=0.9, lam=0.95)
    _assert_unchanged(storage, before)


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("rewards", [[0.0] * N] * T, TypeError),
        ("values", [[0.0] * N] * T, TypeError),
        ("dones", None, TypeError),
        ("last_values", np.zeros(N), TypeError),
        ("values", torch.zeros(T, N, dtype=torch.complex64), ValueError),
        ("dones", torch.zeros(T, N, dtype=torch.complex64), ValueError),
        ("valid", [[True] * N] * T, TypeError),
        ("rewards", torch.zeros(T, N, device="meta"), ValueError),
    ],
)
def test_compute_gae_names_a_bad_argument(argument, value, error):
    args = {
        "rewards": torch.ones(T, N),
        "values": torch.zeros(T, N),
        "dones": torch.zeros(T, N),
        "last_values": torch.zeros(N),
        "gamma": 0.9,
        "lam": 0.95,
    }
    args[argument] = value
    with pytest.raises(error, match=argument):
        compute_gae(**args)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_compute_gae_refuses_an_out_that_cannot_hold_the_advantages(dtype):
    """Advantages of 1.9 were stored as 1 in an int out (or torch refused part-way)."""
    out = torch.full((T, N), 7).to(dtype)
    before = out.clone()
    with pytest.raises(ValueError, match="out must hold"):
        compute_gae(
            torch.ones(T, N), torch.zeros(T, N), torch.zeros(T, N), torch.zeros(N), 1, 1, out=out
        )
    assert torch.equal(out, before)


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("rewards", [0.0, 0.0], TypeError),
        ("values", [0.0, 0.0], TypeError),
        ("time_outs", None, TypeError),
        ("values", torch.zeros(N, dtype=torch.complex64), ValueError),
    ],
)
def test_bootstrap_time_outs_names_a_bad_argument(argument, value, error):
    args = {"rewards": torch.zeros(N), "values": torch.ones(N), "time_outs": torch.ones(N)}
    args[argument] = value
    with pytest.raises(error, match=argument):
        bootstrap_time_outs(args["rewards"], args["values"], args["time_outs"], 0.5)


# ------------------------------------------------------------------ normalisation
@pytest.mark.parametrize(
    ("case", "out", "advantages", "valid", "error", "message"),
    [
        ("list advantages", torch.zeros(2), [1.0, 2.0], None, TypeError, "advantages"),
        ("list out", [0.0, 0.0], torch.tensor([1.0, 2.0]), None, TypeError, "out: expected"),
        ("out resized", torch.zeros(3), torch.tensor([1.0, 2.0]), None, ValueError, "out has"),
        ("int out", torch.zeros(2, dtype=torch.int64), torch.ones(2), None, ValueError, "out"),
        ("int advantages", torch.zeros(2), torch.tensor([1, 2]), None, ValueError, "advantages"),
        ("list valid", torch.zeros(2), torch.ones(2), [True, True], TypeError, "valid"),
        ("valid too long", torch.zeros(2), torch.ones(2), torch.ones(3) > 0, ValueError, "valid"),
    ],
)
def test_normalize_into_refuses_before_writing_out(case, out, advantages, valid, error, message):
    """An out of 3 cells was resized to 2 (a warning only); a mask of 3 cells failed after
    out was written."""
    before = out.clone() if isinstance(out, torch.Tensor) else list(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "An output ... was resized"
        with pytest.raises(error, match=message):
            normalize_into(out, advantages, valid)
    if isinstance(out, torch.Tensor):
        assert out.shape == before.shape and torch.equal(out, before)


@pytest.mark.parametrize(
    ("values", "valid", "error"),
    [
        ([1.0, 2.0], torch.ones(2) > 0, TypeError),
        (torch.ones(2), [True, True], TypeError),
        (torch.ones(2, 3), torch.ones(3, 2) > 0, ValueError),  # [N, T] read as [T, N]
    ],
)
def test_normalize_over_refuses_bad_arguments(values, valid, error):
    before = values.clone() if isinstance(values, torch.Tensor) else None
    with pytest.raises(error):
        normalize_over(values, valid)
    if before is not None:
        assert torch.equal(values, before)


# ------------------------------------------------------------------ generators
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: mini_batch_generator(None, 1), id="flat"),
        pytest.param(lambda: recurrent_mini_batch_generator(None, 1), id="recurrent"),
        pytest.param(lambda: distillation_generator(None), id="distillation"),
    ],
)
def test_generators_refuse_what_is_no_storage(make):
    """'NoneType' object has no attribute 'training_type'."""
    with pytest.raises(TypeError, match="needs a RolloutStorage"):
        make()


def test_flat_generator_checks_its_torch_generator_at_the_call():
    """An int seed was refused by torch.randperm at the first batch."""
    storage = _storage()
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        storage.mini_batch_generator(1, 1, generator=0)


# ------------------------------------------------------------------ trajectories, select_rows
@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: split_and_pad_trajectories([[1.0]], torch.zeros(1, 1)), TypeError, "tensor"),
        (lambda: split_and_pad_trajectories(torch.zeros(1, 1), [[0]]), TypeError, "dones"),
        (lambda: trajectory_layout(None), TypeError, "dones"),
        (lambda: trajectory_layout(torch.zeros(2, 2, device="meta")), ValueError, "dones"),
        (
            lambda: pad_with_layout([[1.0, 2.0]] * 2, trajectory_layout(torch.zeros(2, 2))),
            TypeError,
            "tensor",
        ),
        (lambda: pad_with_layout(torch.zeros(2, 2), (2, 2)), TypeError, "TrajectoryLayout"),
        (
            lambda: pad_with_layout(
                torch.zeros(2, 2).to_sparse(), trajectory_layout(torch.zeros(2, 2))
            ),
            ValueError,
            "tensor",
        ),
        (lambda: unpad_trajectories([[1.0]], torch.ones(1, 1) > 0), TypeError, "trajectories"),
        (lambda: unpad_trajectories(torch.zeros(1, 1), [[True]]), TypeError, "masks"),
        (lambda: select_rows([[1.0]], torch.tensor([0])), TypeError, "source and index"),
        (lambda: select_rows(torch.zeros(2, 1), [0]), TypeError, "source and index"),
    ],
)
def test_trajectory_functions_name_a_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------------------ CircularBuffer
def _buffer() -> CircularBuffer:
    buf = CircularBuffer(3, N)
    for v in (1.0, 2.0):
        buf.append(torch.tensor([v, 10 * v]))
    return buf


def _buffer_state(buf: CircularBuffer) -> tuple[torch.Tensor, ...]:
    return buf.buffer, buf.current_length, buf[0], buf[1]


def _assert_buffer_unchanged(buf: CircularBuffer, before, windows) -> None:
    after = _buffer_state(buf)
    assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))
    next(windows)  # a generator made before the refused call goes on: nothing changed


@pytest.mark.parametrize(
    ("kind", "data", "error"),
    [
        ("None", lambda: None, TypeError),
        ("list", lambda: [[1.0, 2.0], [3.0, 4.0]], TypeError),
        ("numpy", lambda: np.ones(N, dtype=np.float32), TypeError),
        ("meta", lambda: torch.zeros(N, device="meta"), ValueError),
        ("sparse", lambda: torch.zeros(N).to_sparse(), ValueError),
        ("nested", lambda: _nested(N), ValueError),
        ("quantized", lambda: _quantized((N,)), ValueError),
    ],
)
def test_circular_buffer_append_refuses_before_moving(kind, data, error):
    """A list met .dim(); a sparse or quantized item moved the newest slot, then failed."""
    buf = _buffer()
    before, windows = _buffer_state(buf), buf.mini_batch_generator(1, 2, 3)
    with pytest.raises(error, match="data"):
        buf.append(data())
    _assert_buffer_unchanged(buf, before, windows)
    fresh = CircularBuffer(3, N)
    with pytest.raises(error, match="data"):
        fresh.append(data())
    with pytest.raises(RuntimeError, match="empty"):
        _ = fresh.buffer


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        ([0, 5], IndexError, "out of bounds"),  # env 0 was reset before torch refused 5
        ([1, -7], IndexError, "out of bounds"),
        ({"a": 1}, TypeError, "batch_ids"),  # "Could not infer dtype of dict"
        ("ab", TypeError, "batch_ids"),
        (torch.ones(N, dtype=torch.bool, device="meta"), ValueError, "batch_ids"),
    ],
)
def test_circular_buffer_reset_refuses_before_forgetting(ids, error, message):
    buf = _buffer()
    before, windows = _buffer_state(buf), buf.mini_batch_generator(1, 2, 3)
    with pytest.raises(error, match=message):
        buf.reset(ids)
    _assert_buffer_unchanged(buf, before, windows)


def test_circular_buffer_checks_its_torch_generator_at_the_call():
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        _buffer().mini_batch_generator(1, 2, 1, generator=5)


def test_circular_buffer_refuses_lags_without_data():
    with pytest.raises(ValueError, match="lags"):
        _buffer()[torch.zeros(N, dtype=torch.long, device="meta")]

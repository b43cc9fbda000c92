"""Rollout API consistency: checked flags and devices, identity equality, informative reprs.

- ``write_block(share=...)`` takes a bool only, as every other rollout flag does: the string
  ``"False"`` used to turn sharing on.
- ``device=`` of ``RolloutStorage`` and ``CircularBuffer`` is checked where the object is made:
  None is the CPU (as rsl_rl's storage takes it), a device torch does not know or that is not
  available here, and the meta device (whose writes were silently lost), are a ``DeviceError``
  naming ``device`` (a ``ValueError`` and a ``RuntimeError``, as the replay buffers' is).
- ``Transition``, ``RLBatch`` and ``DistillationBatch`` compare by identity, as rsl_rl's plain
  classes do: ``==`` raised torch's "Boolean value of Tensor ... is ambiguous".
- ``repr`` of the storage and the circular buffer names sizes, cursor, device and dtype.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

from episodes.rollout import (
    CircularBuffer,
    DistillationBatch,
    RLBatch,
    RolloutStorage,
    Transition,
)
from episodes.rollout.devices import DeviceError, checked_device

T, N = 3, 2


def _storage(**kwargs):
    return RolloutStorage("rl", N, T, (4,), (1,), **kwargs)


# ------------------------------------------------------------------ write_block(share=...)
NOT_FLAGS = {
    "string False": "False",
    "string no": "no",
    "int 1": 1,
    "int 0": 0,
    "None": None,
    "tensor": torch.tensor(True),
    "array": np.array([True]),
}


@pytest.mark.parametrize("share", NOT_FLAGS.values(), ids=NOT_FLAGS.keys())
def test_write_block_refuses_a_share_that_is_no_bool_before_writing(share):
    storage = _storage()
    outside = torch.ones(T, N, 1)
    with pytest.raises(TypeError, match="share must be a bool"):
        storage.write_block(0, share=share, rewards=outside)
    assert storage.step == 0 and not storage.shared
    assert storage.rewards.data_ptr() != outside.data_ptr()
    assert float(storage.rewards.abs().sum()) == 0.0


FLAGS = {"True": (True, True), "False": (False, False), "numpy True": (np.True_, True)}


@pytest.mark.parametrize(("share", "shared"), FLAGS.values(), ids=FLAGS.keys())
def test_write_block_takes_bools(share, shared):
    storage = _storage()
    outside = torch.ones(T, N, 1)
    assert storage.write_block(0, share=share, rewards=outside) == T
    assert (storage.rewards.data_ptr() == outside.data_ptr()) is shared
    assert sorted(storage.shared) == (["rewards"] if shared else [])


# ------------------------------------------------------------------ device=
def _buffer(device):
    return CircularBuffer(3, N, device)


MAKERS = {"RolloutStorage": lambda device: _storage(device=device), "CircularBuffer": _buffer}

REFUSED_DEVICES = {
    "meta": ("meta", DeviceError, "meta device holds no data"),
    "meta device": (torch.device("meta"), DeviceError, "meta device holds no data"),
    "unknown name": ("abc", DeviceError, "device must be a torch device"),
    "float": (3.5, TypeError, "device must be a torch device"),
    "bool": (True, TypeError, "device must be a torch device"),
    "list": (["cpu"], TypeError, "device must be a torch device"),
}
if not torch.cuda.is_available():
    REFUSED_DEVICES["cuda unavailable"] = ("cuda", DeviceError, "device='cuda' is not available")
    REFUSED_DEVICES["cuda:0 unavailable"] = (
        torch.device("cuda", 0),
        DeviceError,
        "is not available here",
    )


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize(
    ("device", "error", "words"), REFUSED_DEVICES.values(), ids=REFUSED_DEVICES.keys()
)
def test_an_unusable_device_is_refused_naming_it(make, device, error, words):
    with pytest.raises(error, match=words):
        make(device)


@pytest.mark.parametrize(
    "device", ["meta", "abc"] + ([] if torch.cuda.is_available() else ["cuda"])
)
def test_device_error_is_caught_as_value_and_runtime_error(device):
    for base in (ValueError, RuntimeError):
        with pytest.raises(base):
            _storage(device=device)
        with pytest.raises(base):
            _buffer(device)


ACCEPTED_DEVICES = {
    "None": (None, torch.device("cpu")),
    "cpu": ("cpu", torch.device("cpu")),
    "cpu:0": ("cpu:0", torch.device("cpu", 0)),
    "torch.device": (torch.device("cpu"), torch.device("cpu")),
}


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize(("device", "want"), ACCEPTED_DEVICES.values(), ids=ACCEPTED_DEVICES.keys())
def test_usable_devices_are_taken_and_none_is_the_cpu(make, device, want):
    made = make(device)
    assert made.device == want


def test_a_none_device_storage_and_buffer_work_on_the_cpu():
    storage = _storage(device=None)
    storage.add_transition(Transition(rewards=torch.ones(N)))
    assert storage.rewards.device.type == "cpu" and storage.rewards[0].sum() == N
    buf = _buffer(None)
    buf.append(torch.ones(N, 2))
    assert buf.buffer.device.type == "cpu"


def test_the_meta_device_is_refused_by_the_check_unless_asked_for():
    with pytest.raises(DeviceError):
        checked_device("meta")
    assert checked_device("meta", meta=True) == torch.device("meta")
    with pytest.raises(DeviceError):  # taking it once does not let it through later
        checked_device("meta")


def test_the_error_names_the_argument_given():
    with pytest.raises(DeviceError, match="^where="):
        checked_device("meta", "where")


# ------------------------------------------------------------------ == by identity
def _rl_batch():
    storage = _storage()
    return next(storage.mini_batch_generator(1, num_epochs=1))


def _distillation_batch():
    return next(RolloutStorage("distillation", N, T, (4,), (1,)).generator())


def _transition():
    return Transition(observations=torch.zeros(N, 4), rewards=torch.ones(N))


RECORDS = {
    "Transition": _transition,
    "RLBatch": _rl_batch,
    "DistillationBatch": _distillation_batch,
}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_records_holding_tensors_compare_by_identity(make):
    record = make()
    twin = copy.deepcopy(record)
    assert record == record and not (record != record)
    assert record != twin and not (record == twin)
    assert record in [twin, record] and {record: 1}[record] == 1  # hashable, as plain objects


def test_record_classes_are_identity_compared_dataclasses():
    for cls in (Transition, RLBatch, DistillationBatch):
        assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__


# ------------------------------------------------------------------ repr
def _written_storage():
    storage = _storage()
    storage.add_transition(Transition(rewards=torch.ones(N)))
    return storage


def _shared_storage():
    storage = _storage(dtype=torch.float64)
    storage.write_block(0, share=True, values=torch.zeros(T, N, 1, dtype=torch.float64))
    storage.valid = torch.ones(T, N, dtype=torch.bool)
    return storage


def _cleared_storage():
    storage = _written_storage()
    storage.clear()
    return storage


STORAGE_REPRS = {
    "new": (
        _storage,
        "RolloutStorage(training_type='rl', T=3, N=2, step=0, device=cpu, dtype=torch.float32)",
    ),
    "one step": (
        _written_storage,
        "RolloutStorage(training_type='rl', T=3, N=2, step=1, device=cpu, dtype=torch.float32)",
    ),
    "cleared": (
        _cleared_storage,
        "RolloutStorage(training_type='rl', T=3, N=2, step=0, device=cpu, dtype=torch.float32)",
    ),
    "shared and masked": (
        _shared_storage,
        "RolloutStorage(training_type='rl', T=3, N=2, step=3, device=cpu, dtype=torch.float64, "
        "shared=['values'], masked=True)",
    ),
    "distillation": (
        lambda: RolloutStorage("distillation", 4, 5, (2,), (1,)),
        "RolloutStorage(training_type='distillation', T=5, N=4, step=0, device=cpu, "
        "dtype=torch.float32)",
    ),
    "unpickled": (
        lambda: pickle.loads(pickle.dumps(_written_storage())),
        "RolloutStorage(training_type='rl', T=3, N=2, step=1, device=cpu, dtype=torch.float32)",
    ),
    "never initialised": (
        lambda: RolloutStorage.__new__(RolloutStorage),
        "RolloutStorage(training_type='?', T=?, N=?, step=?, device=?, dtype=?)",
    ),
}


@pytest.mark.parametrize(("make", "want"), STORAGE_REPRS.values(), ids=STORAGE_REPRS.keys())
def test_storage_repr_names_sizes_cursor_device_and_dtype(make, want):
    assert repr(make()) == want


def _filled_buffer():
    buf = CircularBuffer(3, N)
    buf.append(torch.ones(N, 4, dtype=torch.int64))
    return buf


def _reset_buffer():
    buf = _filled_buffer()
    buf.append(torch.ones(N, 4, dtype=torch.int64))
    buf.reset([0])
    return buf


BUFFER_REPRS = {
    "empty": (
        lambda: CircularBuffer(3, N),
        "CircularBuffer(max_len=3, batch_size=2, length=0, device=cpu)",
    ),
    "one item": (
        _filled_buffer,
        "CircularBuffer(max_len=3, batch_size=2, length=1, item_shape=(4,), dtype=torch.int64, "
        "device=cpu)",
    ),
    "one env reset": (
        _reset_buffer,
        "CircularBuffer(max_len=3, batch_size=2, length=0..2, item_shape=(4,), "
        "dtype=torch.int64, device=cpu)",
    ),
    "copied": (
        lambda: copy.copy(_filled_buffer()),
        "CircularBuffer(max_len=3, batch_size=2, length=1, item_shape=(4,), dtype=torch.int64, "
        "device=cpu)",
    ),
    "never initialised": (
        lambda: CircularBuffer.__new__(CircularBuffer),
        "CircularBuffer(max_len=?, batch_size=?, length=?, device=?)",
    ),
}


@pytest.mark.parametrize(("make", "want"), BUFFER_REPRS.values(), ids=BUFFER_REPRS.keys())
def test_buffer_repr_names_sizes_lengths_item_and_device(make, want):
    assert repr(make()) == want


def test_reprs_hold_no_tensor_contents():
    storage = _storage()
    storage.rewards.fill_(12345.0)
    buf = CircularBuffer(2, N)
    buf.append(torch.full((N,), 98765))
    assert "12345" not in repr(storage) and "98765" not in repr(buf)

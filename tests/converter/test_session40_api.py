"""Converter API consistency: checked devices and flags, identity equality.

- ``episodes_to_rollout(device=...)`` without a storage is checked before anything is read, as
  the storage checks it: a device not available here (torch's bare ``AssertionError``) or the
  meta device is a ``DeviceError`` naming ``device`` (a ``ValueError`` and ``RuntimeError``);
  ``device=None`` still means the default.
- ``time_major(pad=...)`` takes a bool only (``"no"`` padded).
- ``Rollout`` and ``TimeMajorColumns`` compare by identity: ``==`` raised torch's or numpy's
  "ambiguous" error.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_rollout, time_major
from episodes.converter.columns import TimeMajorColumns
from episodes.converter.to_rollout import Rollout
from episodes.rollout.devices import DeviceError


def _episode(n=2, id_=None):
    return SingleAgentEpisode(
        id_,
        observations=[float(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5] * n, "action_logp": [-0.7] * n},
    )


def _value_fn(obs):
    return torch.zeros(len(obs))


class _Recorder:
    """A value_fn that records whether it was called."""

    def __init__(self):
        self.calls = 0

    def __call__(self, obs):
        self.calls += 1
        return torch.zeros(len(obs))


# ------------------------------------------------------------------ device=
REFUSED = {
    "meta": ("meta", DeviceError, "device='meta': a meta device holds no data"),
    "meta device": (torch.device("meta"), DeviceError, "meta device holds no data"),
    "unknown name": ("abc", DeviceError, "device must be a torch device"),
    "float": (2.5, TypeError, "device must be a torch device"),
}
if not torch.cuda.is_available():
    REFUSED["cuda unavailable"] = ("cuda", DeviceError, "device='cuda' is not available here")


@pytest.mark.parametrize(("device", "error", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_an_unusable_device_is_refused_before_anything_is_read(device, error, words):
    value_fn = _Recorder()
    with pytest.raises(error, match=words):
        episodes_to_rollout([_episode()], gamma=0.9, value_fn=value_fn, device=device)
    assert value_fn.calls == 0


@pytest.mark.parametrize("base", [ValueError, RuntimeError])
def test_the_device_error_is_a_value_and_a_runtime_error(base):
    with pytest.raises(base):
        episodes_to_rollout([_episode()], gamma=0.9, value_fn=_value_fn, device="meta")


ACCEPTED = {"None": None, "cpu": "cpu", "cpu:0": "cpu:0", "torch.device": torch.device("cpu")}


@pytest.mark.parametrize("device", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_usable_devices_and_none_fill_a_cpu_storage(device):
    rollout = episodes_to_rollout([_episode()], gamma=0.9, value_fn=_value_fn, device=device)
    assert rollout.storage.device.type == "cpu" and rollout.storage.step == 2
    assert rollout.storage.rewards.flatten().tolist() == [1.0, 1.0]


def test_a_given_storage_still_reports_another_device_as_a_mismatch():
    storage = episodes_to_rollout([_episode()], gamma=0.9, value_fn=_value_fn).storage
    with pytest.raises(ValueError, match="differs from the given storage's device"):
        episodes_to_rollout(
            [_episode()], gamma=0.9, value_fn=_value_fn, storage=storage, device="meta"
        )
    with pytest.raises(DeviceError, match="device must be a torch device"):  # not torch's words
        episodes_to_rollout(
            [_episode()], gamma=0.9, value_fn=_value_fn, storage=storage, device="abc"
        )


# ------------------------------------------------------------------ time_major(pad=...)
NOT_FLAGS = {"string no": "no", "int 1": 1, "int 0": 0, "None": None, "array": np.array([False])}


@pytest.mark.parametrize("pad", NOT_FLAGS.values(), ids=NOT_FLAGS.keys())
def test_time_major_refuses_a_pad_that_is_no_bool(pad):
    groups = [[_episode(2, "a")], [_episode(3, "b")]]
    with pytest.raises(TypeError, match="pad must be a bool"):
        time_major(groups, ColumnKeys(), pad=pad)


@pytest.mark.parametrize(("pad", "masked"), [(True, True), (np.True_, True), (False, False)])
def test_time_major_takes_bools(pad, masked):
    groups = [[_episode(2, "a")], [_episode(2 + masked, "b")]]
    cols = time_major(groups, ColumnKeys(), pad=pad)
    assert (cols.mask is not None) is masked


# ------------------------------------------------------------------ == by identity
def _rollout():
    return episodes_to_rollout([_episode(), _episode()], gamma=0.9, value_fn=_value_fn)


def _columns():
    return time_major([[_episode(2, "a")], [_episode(2, "b")]], ColumnKeys())


RECORDS = {"Rollout": _rollout, "TimeMajorColumns": _columns}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_records_holding_arrays_compare_by_identity(make):
    record = make()
    twin = copy.copy(record)
    assert record == record and not (record != record)
    assert record != twin and not (record == twin)
    assert record in [twin, record] and {record: 1}[record] == 1


def test_record_classes_are_identity_compared():
    for cls in (Rollout, TimeMajorColumns):
        assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__

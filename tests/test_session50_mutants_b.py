"""Behaviour that hand-made mutants of ``episodes.converter.storage_for`` showed no test
pinned (session 50; the other modules' are in ``test_session50_mutants.py``).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest


def test_the_default_device_is_the_given_storage_s():
    # Only the storage's ``device`` is read: a stand-in names a device this host need not have.
    # mutant: the storage ignored, and the numpy recording's CPU taken.
    torch = pytest.importorskip("torch")
    from episodes.converter.storage_for import default_device

    assert default_device([], types.SimpleNamespace(device="cuda:1")) == torch.device("cuda:1")
    assert default_device([], None) == torch.device("cpu")


def test_a_generator_stops_after_a_reset_of_every_env():
    # mutant: reset() with no ids not counted as a change, and windows planned before it read
    # histories it had forgotten.
    torch = pytest.importorskip("torch")
    from episodes.rollout import CircularBuffer

    buf = CircularBuffer(3, 2)
    for v in range(3):
        buf.append(torch.full((2,), float(v)))
    windows = buf.mini_batch_generator(2, 2, 3)
    next(windows)
    buf.reset()
    with pytest.raises(RuntimeError, match="the buffer changed"):
        next(windows)


def test_a_critic_given_tensors_gets_a_frozen_column_as_a_copy():
    # torch cannot mark a tensor read-only. mutant: the frozen array shared (torch warns, and
    # a write through the tensor would change it).
    torch = pytest.importorskip("torch")
    from episodes.converter.storage_for import taking_tensors

    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    seen = []
    critic = taking_tensors(lambda obs: seen.append(obs) or obs["x"].sum(), torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert critic({"x": frozen}).item() == 3.0
    seen[0]["x"].add_(1.0)
    assert frozen.tolist() == [0.0, 1.0, 2.0]


def test_a_complex_longdouble_column_is_refused_even_for_a_float_field():
    # Rounded into a float field, it would lose its imaginary part. mutant: taken as a float.
    torch = pytest.importorskip("torch")
    from episodes.converter.storage_for import as_tensors

    column = np.array([1 + 2j], np.clongdouble)
    with pytest.raises(TypeError, match="which no tensor holds"):
        as_tensors(column, torch.device("cpu"), torch.float32, name="actions")
    kept = as_tensors(np.array([1.5], np.longdouble), torch.device("cpu"), torch.float32)
    assert kept.dtype == torch.float32 and kept.tolist() == [1.5]


def test_a_longdouble_column_rounds_once_into_a_float32_field():
    # 1 + 2**-24 + 2**-60 lies just above the midpoint of two float32s: rounded once it is the
    # upper one. mutant: rounded to float64 first (the midpoint), then to even (1.0).
    torch = pytest.importorskip("torch")
    from episodes.converter.storage_for import as_tensors

    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("this platform's longdouble is no wider than float64")
    one = np.longdouble(1)
    column = np.array([one + one / 2**24 + one / 2**60])
    out = as_tensors(column, torch.device("cpu"), torch.float32)
    assert out.item() == 1 + 2**-23


def _time_major(steps):
    from episodes.converter.columns import TimeMajorColumns

    zeros = np.zeros((steps, 2))
    return TimeMajorColumns(
        observations=np.zeros((steps, 2, 4), np.float32),
        actions=np.zeros((steps, 2), np.int64),
        rewards=zeros,
        dones=zeros.astype(bool),
        truncated=zeros.astype(bool),
        extras={"vf_preds": zeros, "action_logp": zeros},
    )


def _ready(storage, steps):
    import torch

    from episodes.converter.columns import ColumnKeys
    from episodes.converter.storage_for import ready_storage

    obs, actions = torch.zeros(steps, 2, 4), torch.zeros(steps, 2, 1, dtype=torch.long)
    args = (obs, actions, "rl", ColumnKeys(), torch.device("cpu"), torch.float32)
    return ready_storage(storage, _time_major(steps), *args)


def test_a_reused_storage_of_another_length_is_refused():
    # The remembered layout holds item shapes only. mutant: no size check, and a storage of
    # T=3 took a rollout of T=2 (its third row kept from before).
    pytest.importorskip("torch")
    storage = _ready(None, 3)
    assert _ready(storage, 3) is storage
    with pytest.raises(ValueError, match="holds T=3 x N=2 transitions, but these chunks make T=2"):
        _ready(storage, 2)


def test_a_reused_storage_that_gained_hidden_states_is_checked_again():
    # Its layout was found fine before a write gave it hidden states. mutant: the remembered
    # layout ignored them, and the storage's stale states went to the generators.
    torch = pytest.importorskip("torch")
    storage = _ready(None, 3)
    assert _ready(storage, 3) is storage
    storage.saved_hidden_states_actor = [torch.zeros(3, 1, 2, 5)]
    with pytest.raises(ValueError, match="holds actor hidden states"):
        _ready(storage, 3)


@pytest.mark.parametrize(
    ("obs_dtype", "actions", "message"),
    [
        # mutant: no int range check before the clear (write_block refused it after).
        ("float32", ("int64", 300), r"actions: values in \[300, 300\] do not fit a torch.int8"),
        # mutants: the remembered layout without the actions' (or observations') dtype.
        ("float32", ("float32", 0), "actions are torch.int8, which cannot hold"),
        ("complex64", ("int8", 0), "observations are torch.float32, which cannot hold"),
    ],
    ids=["int_out_of_range", "float_actions", "complex_observations"],
)
def test_a_reused_storage_is_checked_for_what_these_columns_hold(obs_dtype, actions, message):
    torch = pytest.importorskip("torch")
    from episodes.converter.columns import ColumnKeys
    from episodes.converter.storage_for import ready_storage

    def ready(storage, obs, acts):
        args = ("rl", ColumnKeys(), torch.device("cpu"), torch.float32)
        return ready_storage(storage, _time_major(3), obs, acts, *args)

    int8_actions = torch.zeros(3, 2, 1, dtype=torch.int8)
    storage = ready(None, torch.zeros(3, 2, 4), int8_actions)
    assert ready(storage, torch.zeros(3, 2, 4), int8_actions) is storage  # layout remembered
    dtype, value = actions
    obs = torch.zeros(3, 2, 4, dtype=getattr(torch, obs_dtype))
    acts = torch.full((3, 2, 1), value, dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match=message):
        ready(storage, obs, acts)

"""Storages and history buffers filled under ``torch.inference_mode``, used outside it.

What a storage or a ``CircularBuffer`` keeps is made as normal tensors even inside inference
mode (a storage built there, hidden states allocated by a first write there, the copies that
replace shared tensors, a buffer's ring and lengths), and ``write_block(share=True)`` copies an
inference tensor instead of taking it. So every generator's batches train with ``backward()``
outside inference mode, and later writes outside it go through. ``compute_gae`` reads its
inputs detached: its advantages carry no graph (documented, unchanged).
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
from torch import nn

from episodes.rollout import (
    CircularBuffer,
    RolloutStorage,
    Transition,
    compute_gae,
    unpad_trajectories,
)

T, N = 6, 4
INSIDE = torch.inference_mode


def _step_data(t: int) -> dict:
    g = torch.Generator().manual_seed(t)
    return {
        "observations": torch.randn(N, 3, generator=g),
        "actions": torch.randint(0, 2, (N, 1), generator=g),
        "rewards": torch.randn(N, generator=g),
        "dones": torch.rand(N, generator=g) < 0.3,
        "values": torch.randn(N, 1, generator=g),
        "actions_log_prob": torch.randn(N, generator=g),
        "privileged_actions": torch.randint(0, 2, (N, 1), generator=g),
        "hidden_states": (torch.randn(1, N, 5, generator=g), None),
    }


def _fields(training_type: str, data: dict) -> dict:
    drop = ("values", "actions_log_prob") if training_type == "distillation" else ()
    drop += ("privileged_actions",) if training_type == "rl" else ()
    return {k: v for k, v in data.items() if k not in drop}


def _new(training_type: str) -> RolloutStorage:
    extra = {"distribution_params": ()} if training_type == "rl" else {}
    return RolloutStorage(training_type, N, T, (3,), (1,), actions_dtype=torch.int64, **extra)


def _fill(storage: RolloutStorage, how: str) -> None:
    steps = [_fields(storage.training_type, _step_data(t)) for t in range(T)]
    if how == "add_transition":
        for step in steps:
            storage.add_transition(Transition(**step))
        return
    block = {k: torch.stack([s[k] for s in steps]) for k in steps[0] if k != "hidden_states"}
    block["hidden_states"] = (torch.stack([s["hidden_states"][0] for s in steps]), None)
    storage.write_block(0, share=how == "write_block_share", **block)


def _kept(storage: RolloutStorage) -> list[torch.Tensor]:
    return [*storage.tensors.values(), *(storage.saved_hidden_states_actor or ())]


def _leaves(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return []


def _train(storage: RolloutStorage, generator: str) -> int:
    """One pass of a loss over the generator's batches, with backward(); the batch count."""
    net, cell = nn.Linear(3, 2), nn.Linear(5, 2)
    if generator == "flat":
        batches = storage.mini_batch_generator(2, num_epochs=1)
    elif generator == "recurrent":
        batches = storage.recurrent_mini_batch_generator(2, num_epochs=1)
    else:
        batches = storage.generator()
    count = 0
    for batch in batches:
        assert not any(leaf.is_inference() for leaf in _leaves(batch))
        logits = net(batch.observations)
        if getattr(batch, "hidden_states", (None,))[0] is not None:
            logits = logits + cell(batch.hidden_states[0]).sum()
        if generator == "recurrent":  # [T, num_traj, 2] as the batch's [T, n_envs] fields
            logits = unpad_trajectories(logits, batch.masks)
        dist = torch.distributions.Categorical(logits=logits)
        if generator == "distillation":
            loss = nn.functional.cross_entropy(logits, batch.privileged_actions.squeeze(-1))
            loss = loss + dist.log_prob(batch.actions.squeeze(-1)).mean()
        else:
            logp = dist.log_prob(batch.actions.squeeze(-1))
            ratio = torch.exp(logp - batch.old_actions_log_prob.squeeze(-1))
            value = logits[..., :1]
            loss = -(ratio * batch.advantages.squeeze(-1)).mean()
            loss = loss + ((value - batch.returns) * (value - batch.values)).mean()
        loss.backward()
        count += 1
    assert net.weight.grad is not None
    return count


CASES = [
    (training_type, generator, how, built)
    for training_type, generators in (
        ("rl", ("flat", "recurrent")),
        ("distillation", ("distillation",)),
    )
    for generator in generators
    for how in ("add_transition", "write_block", "write_block_share")
    for built in ("outside", "inside")
]


@pytest.mark.parametrize(("training_type", "generator", "how", "built"), CASES)
def test_a_storage_filled_in_inference_mode_trains_outside(training_type, generator, how, built):
    with INSIDE() if built == "inside" else contextlib.nullcontext():
        storage = _new(training_type)
    with INSIDE():
        _fill(storage, how)
        if training_type == "rl":
            storage.compute_returns(torch.zeros(N, 1), 0.99, 0.95)
    assert not any(t.is_inference() for t in _kept(storage))
    expected = _new(training_type)  # the same writes outside inference mode
    _fill(expected, how)
    if training_type == "rl":
        expected.compute_returns(torch.zeros(N, 1), 0.99, 0.95)
    for got, want in zip(_kept(storage), _kept(expected), strict=True):
        assert torch.equal(got, want)
    assert _train(storage, generator) > 0
    storage.clear()  # the next rollout's writes, outside inference mode
    _fill(storage, how)
    for got, want in zip(_kept(storage), _kept(expected), strict=True):
        assert torch.equal(got, want)


def test_write_block_share_copies_an_inference_tensor():
    storage = _new("rl")
    mine = torch.ones(T, N, 1)  # a normal tensor is still taken inside inference mode
    with INSIDE():
        rewards = torch.full((T, N), 2.0)
        storage.write_block(0, share=True, rewards=rewards, values=mine)
    assert sorted(storage.shared) == ["values"]
    assert storage.values.data_ptr() == mine.data_ptr()
    assert not storage.rewards.is_inference()
    assert storage.rewards.data_ptr() != rewards.data_ptr()
    assert storage.rewards.flatten().tolist() == [2.0] * (T * N)
    storage.rewards.mul_(0.5)  # in place, outside inference mode: the storage's own tensor
    assert rewards.flatten().tolist() == [2.0] * (T * N)


@pytest.mark.parametrize("how", ["partial_write", "own", "compute_returns"])
def test_a_shared_tensor_is_replaced_by_a_normal_one_in_inference_mode(how):
    storage = _new("rl")
    mine = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    storage.write_block(0, share=True, values=mine)
    with INSIDE():
        if how == "partial_write":
            storage.write_block(1, values=torch.zeros(2, N, 1))
        elif how == "own":
            storage.own()
        else:
            storage.valid = torch.ones(T, N, dtype=torch.bool)
            storage.valid[0, 0] = False  # its value is set to 0: in a copy of the shared one
            storage.compute_returns(torch.zeros(N, 1), 0.99, 0.95)
    assert storage.shared == frozenset()
    assert not storage.values.is_inference()
    assert mine.flatten().tolist() == list(range(T * N))  # the caller's tensor untouched
    storage.values.add_(1.0)  # in place, outside inference mode


def test_hidden_states_allocated_inside_take_later_writes_outside():
    storage = _new("rl")
    first = Transition(**_fields("rl", _step_data(0)))
    with INSIDE():
        storage.add_transition(first)
    second = Transition(**_fields("rl", _step_data(1)))
    storage.add_transition(second)  # raised, after writing row 1's observations and rewards
    assert storage.step == 2
    assert torch.equal(storage.observations[1], second.observations)
    assert torch.equal(storage.saved_hidden_states_actor[0][1], second.hidden_states[0])
    storage.clear()
    storage.add_transition(first)
    assert torch.equal(storage.saved_hidden_states_actor[0][0], first.hidden_states[0])


BUFFER_CASES = ["built_inside", "first_append_inside", "reset_inside", "all_inside_but_reads"]


@pytest.mark.parametrize("case", BUFFER_CASES)
def test_a_circular_buffer_used_inside_then_outside(case):
    def inside(step: str) -> contextlib.AbstractContextManager:
        chosen = {
            "built_inside": {"build"},
            "first_append_inside": {"append0"},
            "reset_inside": {"reset"},
            "all_inside_but_reads": {"build", "append0", "append1", "reset"},
        }[case]
        return INSIDE() if step in chosen else contextlib.nullcontext()

    def drive(buf_inside) -> CircularBuffer:
        with buf_inside("build"):
            buf = CircularBuffer(3, 2)
        with buf_inside("append0"):
            buf.append(torch.tensor([[1.0], [2.0]]))
        with buf_inside("append1"):
            buf.append(torch.tensor([[3.0], [4.0]]))
        with buf_inside("reset"):
            buf.reset([0])
        buf.append(torch.tensor([[5.0], [6.0]]))  # raised after any of them inside
        buf.reset(torch.tensor([False, True]))
        buf.append(torch.tensor([[7.0], [8.0]]))
        return buf

    got = drive(inside)
    want = drive(lambda step: contextlib.nullcontext())
    assert torch.equal(got.buffer, want.buffer)
    assert got.current_length.tolist() == want.current_length.tolist() == [2, 1]
    assert got[0].flatten().tolist() == [7.0, 8.0]


def test_compute_gae_gives_advantages_without_grad():
    weight = torch.ones(1, requires_grad=True)
    rewards = torch.ones(3, 2, 1)
    values = torch.zeros(3, 2, 1) * weight
    last = torch.ones(2, 1) * weight
    dones = torch.zeros(3, 2, 1, dtype=torch.bool)
    advantages = compute_gae(rewards, values, dones, last, 1.0, 1.0)
    assert not advantages.requires_grad and advantages.grad_fn is None
    assert advantages[:, 0, 0].tolist() == [4.0, 3.0, 2.0]

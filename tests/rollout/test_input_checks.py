"""Refusals of the rollout containers: a clear error, nothing changed (contract section 8)."""

from __future__ import annotations

import pytest
import torch

from episodes.rollout import CircularBuffer, RolloutStorage, Transition


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("float steps", {"num_transitions_per_env": 3.0}, "num_transitions_per_env must be an int"),
        ("float envs", {"num_envs": 2.5}, "num_envs must be an int"),
        ("bool envs", {"num_envs": True}, "num_envs must be an int"),
    ],
)
def test_sizes_must_be_ints(name, kwargs, message):
    args = {"num_envs": 2, "num_transitions_per_env": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        RolloutStorage("rl", args["num_envs"], args["num_transitions_per_env"], (2,), (1,))


def test_an_int_action_shape_is_a_flat_action():
    assert RolloutStorage("rl", 2, 3, (2,), 4).actions.shape == (3, 2, 4)


@pytest.mark.parametrize(
    ("name", "fields", "message"),
    [
        ("no fields", {}, "no blocks given"),
        ("0-d block", {"rewards": torch.tensor(1.0)}, "0-d tensor"),
    ],
)
def test_write_block_refusals_are_clear(name, fields, message):
    storage = RolloutStorage("rl", 2, 3, (2,), (1,))
    before = storage.rewards.clone()
    with pytest.raises(ValueError, match=message):
        storage.write_block(0, **fields)
    assert storage.step == 0 and torch.equal(storage.rewards, before)


def test_hidden_states_must_be_an_actor_critic_pair():
    """A third part was ignored (zip stops at the shorter)."""
    storage = RolloutStorage("rl", 2, 3, (2,), (1,))
    state = torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match="pair"):
        storage.add_transition(Transition(hidden_states=(state, None, state)))
    assert storage.step == 0 and storage.saved_hidden_states_actor is None


def test_circular_buffer_stores_data_not_graphs():
    """Each append kept the caller's autograd graph alive: 4001 nodes after 2000 appends."""
    weight = torch.ones(2, requires_grad=True)
    buf = CircularBuffer(3, 2)
    for _ in range(5):
        buf.append(weight * 2.0)
    assert buf[0].grad_fn is None and not buf.buffer.requires_grad


def test_circular_buffer_refuses_values_its_dtype_would_truncate():
    buf = CircularBuffer(3, 2)
    buf.append(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="truncated"):
        buf.append(torch.tensor([0.7, 2.9]))
    assert buf[0].tolist() == [1, 2] and buf[1].tolist() == [1, 2]


@pytest.mark.parametrize("lag", [1.5, True])
def test_circular_buffer_lags_are_ints(lag):
    buf = CircularBuffer(3, 2)
    buf.append(torch.zeros(2))
    with pytest.raises(TypeError, match="lag"):
        buf[lag]


@pytest.mark.parametrize(("batch_size", "num_batches"), [(-1, 1), (0, 1), (2, -1)])
def test_circular_buffer_window_counts_are_checked(batch_size, num_batches):
    buf = CircularBuffer(3, 2)
    buf.append(torch.zeros(2))
    with pytest.raises(ValueError, match="batch_size"):
        next(buf.mini_batch_generator(1, batch_size, num_batches))


def test_circular_buffer_casts_a_narrower_dtype_of_the_same_kind():
    """As rsl_rl's buffer: float64 data (torch.from_numpy of env arrays) into float32."""
    buf = CircularBuffer(3, 2)
    buf.append(torch.zeros(2))
    buf.append(torch.tensor([0.5, 1.5], dtype=torch.float64))
    assert buf[0].dtype == torch.float32 and buf[0].tolist() == [0.5, 1.5]

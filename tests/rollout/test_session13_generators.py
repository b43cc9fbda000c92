"""Mini-batch generators: float16 per-batch normalisation, and valid cells ending trajectories."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from episodes.rollout import RolloutStorage, normalize_into  # noqa: E402


def _constant_fp16_storage(t: int = 4, n: int = 2) -> RolloutStorage:
    st = RolloutStorage("rl", n, t, (1,), (1,), dtype=torch.float16)
    st.write_block(0, rewards=torch.ones(t, n), values=torch.zeros(t, n), dones=torch.ones(t, n))
    st.compute_returns(torch.zeros(n), gamma=0.99, lam=0.95, normalize_advantage=False)
    return st


@pytest.mark.parametrize(
    "batches",
    [
        lambda st: st.mini_batch_generator(2, 1, normalize_advantage_per_mini_batch=True),
        lambda st: st.recurrent_mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True),
    ],
    ids=["flat", "recurrent"],
)
def test_float16_equal_advantages_normalise_to_zero_per_mini_batch(batches) -> None:
    st = _constant_fp16_storage()
    assert torch.unique(st.advantages).numel() == 1
    whole = normalize_into(torch.empty_like(st.advantages), st.advantages.clone())
    assert torch.equal(whole, torch.zeros_like(whole))
    for batch in batches(st):
        assert batch.advantages.dtype == torch.float16
        assert torch.equal(batch.advantages, torch.zeros_like(batch.advantages))


def test_float32_per_mini_batch_normalisation_is_unchanged() -> None:
    st = RolloutStorage("rl", 2, 4, (1,), (1,))
    rewards = torch.arange(8.0).view(4, 2)
    st.write_block(0, rewards=rewards, values=torch.zeros(4, 2), dones=torch.zeros(4, 2))
    st.compute_returns(torch.zeros(2), 0.99, 0.95, normalize_advantage=False)
    (batch,) = st.mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True)
    flat = st.advantages.flatten()
    want = (flat - flat.mean()) / (flat.std() + 1e-8)  # rsl_rl's formula, in float32
    got = batch.advantages.flatten()
    assert torch.allclose(torch.sort(got).values, torch.sort(want).values, rtol=1e-6, atol=1e-6)


def test_a_cell_without_a_transition_ends_its_trajectory_without_dones() -> None:
    """GAE ends the episode at a valid-False cell; the recurrent split agrees."""
    st = RolloutStorage("rl", 1, 4, (1,), (1,), actor_hidden_state=(1, 1))
    st.write_block(0, observations=torch.arange(4.0).view(4, 1, 1), dones=torch.zeros(4, 1))
    st.valid = torch.tensor([[True], [False], [True], [True]])
    st.compute_returns(torch.zeros(1), 0.99, 0.95)
    (batch,) = st.recurrent_mini_batch_generator(1, 1)
    # Three trajectories: step 0, the empty cell, then steps 2..3; no state crosses the gap.
    assert batch.masks.int().T.tolist() == [[1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]]
    assert batch.observations[..., 0].T.tolist() == [
        [0.0, 0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0],
        [2.0, 3.0, 0.0, 0.0],
    ]
    # The same borders marked done split alike (as the converter marks them).
    done = RolloutStorage("rl", 1, 4, (1,), (1,), actor_hidden_state=(1, 1))
    dones = torch.tensor([[1.0], [1.0], [0.0], [0.0]])
    done.write_block(0, observations=torch.arange(4.0).view(4, 1, 1), dones=dones)
    done.valid = st.valid.clone()
    done.compute_returns(torch.zeros(1), 0.99, 0.95)
    (other,) = done.recurrent_mini_batch_generator(1, 1)
    assert torch.equal(other.masks, batch.masks)
    assert torch.equal(other.observations, batch.observations)


def test_a_run_of_cells_without_transitions_is_one_trajectory() -> None:
    st = RolloutStorage("rl", 1, 6, (1,), (1,), actor_hidden_state=(1, 1))
    st.write_block(0, observations=torch.arange(6.0).view(6, 1, 1), dones=torch.zeros(6, 1))
    st.valid = torch.tensor([[True], [True], [False], [False], [False], [True]])
    st.compute_returns(torch.zeros(1), 0.99, 0.95)
    (batch,) = st.recurrent_mini_batch_generator(1, 1)
    assert batch.masks.int().sum(0).tolist() == [2, 3, 1]

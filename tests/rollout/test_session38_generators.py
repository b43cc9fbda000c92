"""A ``RolloutStorage`` generator refuses its next batch once the storage was refilled.

Each generator takes something of the storage when it is made (the flat one its valid cells,
the recurrent one its ``valid`` and, at its first batch, the padded observations, trajectory
layout and first hidden states; the distillation one its ``valid``) and reads the rest at
each batch. A generator held across a refill therefore mixed two rollouts: masked cells of
the second handed out, valid ones skipped, one rollout's observations paired with the
other's actions. Like ``CircularBuffer.mini_batch_generator`` after an ``append``, it now
raises ``RuntimeError`` at the next batch. ``compute_returns`` (and assigning the returns or
advantages, as rsl_rl's ``PPO.compute_returns`` does) is no refill: a held generator reads
the new advantages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.rollout import RolloutStorage

T, N = 4, 2
Transition = RolloutStorage.Transition
REFUSED = "the storage changed .* while its {} was in use; make a new generator"


def _storage(training_type: str = "rl") -> RolloutStorage:
    """A ``T x N`` storage with a GRU actor state, its first ``T - 1`` steps written.

    ``valid`` marks them: a storage written part-way without a mask is refused.
    """
    st = RolloutStorage(training_type, N, T, (1,), (1,), actor_hidden_state=(1, 3))
    _fill(st, 0.0, steps=T - 1, valid=torch.arange(T).view(T, 1).expand(T, N) < T - 1)
    return st


def _fill(st: RolloutStorage, base: float, steps: int = T, valid: Any = None) -> None:
    """``clear`` + ``write_block`` + ``valid`` (+ ``compute_returns``): one rollout."""
    st.clear()
    cells = base + torch.arange(float(steps * N)).view(steps, N, 1)
    st.write_block(
        0,
        observations=cells,
        actions=cells.clone(),
        rewards=torch.ones(steps, N),
        dones=torch.zeros(steps, N),
    )
    st.valid = valid
    if st.training_type == "rl":
        st.compute_returns(torch.zeros(N), 0.9, 0.95, normalize_advantage=False)


def _generators(st: RolloutStorage) -> dict[str, Callable[[], Iterator[Any]]]:
    if st.training_type == "distillation":
        return {"generator": st.generator}
    return {
        "mini_batch_generator": lambda: st.mini_batch_generator(2, num_epochs=2),
        "recurrent_mini_batch_generator": lambda: st.recurrent_mini_batch_generator(
            2, num_epochs=2
        ),
    }


def _hidden(st: RolloutStorage) -> None:
    st.saved_hidden_states_actor = [torch.ones(T, 1, N, 3)]


def _some_valid(st: RolloutStorage) -> None:
    st.valid = torch.ones(T, N, dtype=torch.bool)


#: What refills a storage: each makes a generator made before it refuse its next batch.
REFILLS: dict[str, Callable[[RolloutStorage], Any]] = {
    "clear": lambda st: st.clear(),
    "add_transition": lambda st: st.add_transition(Transition(rewards=torch.ones(N))),
    # A source in the storage's own memory: the general path (_write), not fast_rows.
    "add_transition_general_path": lambda st: st.add_transition(
        Transition(observations=st.observations[0])
    ),
    "write_block": lambda st: st.write_block(0, rewards=torch.ones(T, N)),
    "write_block_share": lambda st: st.write_block(0, share=True, rewards=torch.ones(T, N)),
    "write_block_hidden": lambda st: st.write_block(
        0, hidden_states=(torch.ones(1, 1, N, 3), None)
    ),
    "assign_valid": _some_valid,
    "assign_valid_none": lambda st: setattr(st, "valid", None),
    "assign_step": lambda st: setattr(st, "step", 0),
    "assign_observations": lambda st: setattr(st, "observations", torch.ones(T, N, 1)),
    "assign_actions": lambda st: setattr(st, "actions", torch.ones(T, N, 1)),
    "assign_dones": lambda st: setattr(st, "dones", torch.ones(T, N, 1, dtype=torch.bool)),
    "assign_hidden_states": _hidden,
}
#: Only an "rl" storage has these.
RL_REFILLS: dict[str, Callable[[RolloutStorage], Any]] = {
    "assign_values": lambda st: setattr(st, "values", torch.ones(T, N, 1)),
    "assign_log_probs": lambda st: setattr(st, "actions_log_prob", torch.ones(T, N, 1)),
}
GENERATORS = {
    "mini_batch_generator": "rl",
    "recurrent_mini_batch_generator": "rl",
    "generator": "distillation",
}
CASES = [
    (what, name, refill)
    for what, training in GENERATORS.items()
    for name, refill in ({**REFILLS, **RL_REFILLS} if training == "rl" else REFILLS).items()
]


@pytest.mark.parametrize("before_first", [False, True], ids=["after_a_batch", "before_any"])
@pytest.mark.parametrize(
    ("what", "name", "refill"), CASES, ids=[f"{what}-{name}" for what, name, _ in CASES]
)
def test_a_refill_refuses_the_next_batch(
    what: str, name: str, refill: Callable[[RolloutStorage], Any], before_first: bool
) -> None:
    st = _storage(GENERATORS[what])
    make = _generators(st)[what]
    gen = make()
    if not before_first:
        next(gen)
    refill(st)
    with pytest.raises(RuntimeError, match=REFUSED.format(what)):
        next(gen)
    # One made after the refill works, to its last batch (once the storage is read whole:
    # part-way written without a mask, as ``valid = None`` leaves it, it is refused).
    if 0 < st.step < T and st.valid is None:
        st.write_block(st.step, rewards=torch.ones(T - st.step, N))
    assert list(make())


def test_the_reported_mix_of_two_rollouts_is_refused() -> None:
    st = RolloutStorage("rl", N, T, (1,), (1,))
    first = torch.ones(T, N, dtype=torch.bool)
    first[0, 0] = False
    _fill(st, 0.0, valid=first)
    gen = st.mini_batch_generator(1, num_epochs=2)
    next(gen)
    second = torch.ones(T, N, dtype=torch.bool)
    second[3, 1] = False
    _fill(st, 100.0, valid=second)
    with pytest.raises(RuntimeError, match=REFUSED.format("mini_batch_generator")):
        next(gen)  # handed out the masked cell 107 and skipped the valid 100
    (batch,) = st.mini_batch_generator(1, num_epochs=1)
    assert sorted(batch.observations.flatten().tolist()) == [float(100 + i) for i in range(7)]


def test_a_recurrent_generator_does_not_pair_two_rollouts() -> None:
    st = RolloutStorage("rl", N, T, (1,), (1,))
    _fill(st, 0.0)
    gen = st.recurrent_mini_batch_generator(N, num_epochs=1)
    first = next(gen)
    assert torch.equal(first.observations[:, 0], first.actions[:, 0])
    _fill(st, 100.0)
    with pytest.raises(RuntimeError, match=REFUSED.format("recurrent_mini_batch_generator")):
        next(gen)  # observations padded from the first rollout, actions from the second
    for batch in st.recurrent_mini_batch_generator(N, num_epochs=1):
        assert torch.equal(batch.observations[:, 0], batch.actions[:, 0])
        assert batch.observations.min() >= 100


def _flat_advantages(batch: Any) -> list[float]:
    return sorted(batch.advantages.flatten().tolist())


def test_compute_returns_between_batches_is_read_by_a_held_flat_generator() -> None:
    st = _storage()
    st.valid = torch.ones(T, N, dtype=torch.bool)
    st.valid[0, 1] = False
    st.compute_returns(torch.zeros(N), 0.9, 0.95, normalize_advantage=False)
    gen = st.mini_batch_generator(1, num_epochs=3)
    old = _flat_advantages(next(gen))
    st.compute_returns(torch.ones(N), 0.5, 0.5, normalize_advantage=False)
    new = sorted(st.advantages[st.valid].flatten().tolist())
    assert new != old
    assert _flat_advantages(next(gen)) == new
    # rsl_rl's PPO.compute_returns assigns them: no refill either.
    st.advantages = st.returns - st.values + 1.0
    st.returns = st.returns + 2.0
    batch = next(gen)
    assert _flat_advantages(batch) == sorted(st.advantages[st.valid].flatten().tolist())
    assert _flat_advantages(batch) != new
    returns = sorted(st.returns[st.valid].flatten().tolist())
    assert sorted(batch.returns.flatten().tolist()) == returns


def test_compute_returns_between_batches_is_read_by_a_held_recurrent_generator() -> None:
    st = _storage()
    st.compute_returns(torch.zeros(N), 0.9, 0.95, normalize_advantage=False)
    gen = st.recurrent_mini_batch_generator(N, num_epochs=2)
    first = next(gen)
    old = first.advantages.clone()
    st.compute_returns(torch.ones(N), 0.5, 0.5, normalize_advantage=True)
    second = next(gen)  # env 1 of the first epoch
    assert torch.equal(second.advantages, st.advantages[:, 1:2])
    third = next(gen)  # env 0 again
    assert torch.equal(third.advantages, st.advantages[:, 0:1])
    assert not torch.equal(third.advantages, old)
    st.advantages = torch.zeros(T, N, 1)
    assert next(gen).advantages.abs().sum() == 0


@pytest.mark.parametrize("training", ["rl", "distillation"])
def test_what_changes_nothing_lets_a_held_generator_go_on(training: str) -> None:
    st = _storage(training)
    keep = {
        "refused write_block": lambda: st.write_block(0, rewards=torch.ones(T, N + 1)),
        "refused field": lambda: setattr(st, "actions", torch.ones(T, N)),
        "refused add_transition": lambda: st.add_transition(Transition(rewards=torch.ones(N + 1))),
    }
    for make in _generators(st).values():
        gen = make()
        next(gen)
        for refused in keep.values():
            with pytest.raises(ValueError):
                refused()
        st.own()  # the same values in the storage's own tensors
        next(gen)
    st.add_transition(Transition(rewards=torch.ones(N)))  # now full
    for make in _generators(st).values():
        gen = make()
        next(gen)
        with pytest.raises(OverflowError):
            st.add_transition(Transition(rewards=torch.ones(N)))
        next(gen)


def _chunk(id_: str, base: float) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(1, base + t, np.float32) for t in range(T + 1)],
        actions=[t % 2 for t in range(T)],
        rewards=[1.0] * T,
        extra_model_outputs={"vf_preds": [0.0] * T, "action_logp": [0.0] * T},
        len_lookback_buffer=0,
    )


def _zero_values(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


def test_converting_into_a_storage_refills_it() -> None:
    def convert(base: float, **kw: Any) -> RolloutStorage:
        chunks = [_chunk("a", base), _chunk("b", base + 10)]
        return episodes_to_rollout(chunks, gamma=0.9, value_fn=_zero_values, **kw).storage

    st = convert(0.0)
    gen = st.mini_batch_generator(1, num_epochs=3)
    recurrent = st.recurrent_mini_batch_generator(1, num_epochs=2)
    next(gen)
    with pytest.raises(ValueError):
        convert(50.0, storage=st, dtype=torch.float64)  # refused: the storage is unchanged
    next(gen)
    assert convert(100.0, storage=st) is st
    with pytest.raises(RuntimeError, match=REFUSED.format("mini_batch_generator")):
        next(gen)
    with pytest.raises(RuntimeError, match=REFUSED.format("recurrent_mini_batch_generator")):
        next(recurrent)
    (batch,) = st.mini_batch_generator(1, num_epochs=1)
    assert batch.observations.min() >= 100

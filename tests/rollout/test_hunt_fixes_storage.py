"""Rollout storage and buffer bugs a hunt found, pinned: one table or focused test per bug.

- A mapping whose iteration is not its keys (a TensorDict, rsl_rl's observations: iterating it
  yields batch rows) was refused by ``add_transition`` and ``write_block`` (``unhashable type``)
  though the constructor takes one as a spec.
- Writes cast values into a field that cannot hold them without a word: 0.7 into int64 actions
  stored as 0, 300.5 into uint8 observations as 44.
- ``CircularBuffer.reset`` read a uint8 done mask (rsl_rl's dones dtype) as env indices.
- A ``write_block`` source viewing the storage's own rows failed part-way (torch's overlap
  check, after earlier fields were written), or was read after an earlier field changed it.
- ``CircularBuffer(max_len=2.5)`` was taken and failed later; float window sizes gave an
  ``IndexError``; the storage generators checked their counts only at the first batch, and the
  flat generator read an ``[N, T]`` ``valid`` mask as ``[T, N]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch

from episodes.rollout import CircularBuffer, RolloutStorage

N, T = 3, 4


class RowsMapping(Mapping):
    """A mapping that iterates its rows, as a TensorDict does: only ``keys()`` gives keys."""

    def __init__(self, items: dict[str, torch.Tensor]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._items[key]

    def __len__(self) -> int:
        return len(next(iter(self._items.values())))

    def __iter__(self) -> Iterator[Any]:  # rows, like a TensorDict's batch dimension
        leaves = list(self._items.values())
        return iter([tuple(leaf[i] for leaf in leaves) for i in range(len(self))])

    def keys(self) -> Any:
        return self._items.keys()


def dict_obs_storage() -> RolloutStorage:
    spec = {"policy": torch.zeros(N, 4), "critic": torch.zeros(N, 5)}
    return RolloutStorage("rl", N, T, spec, (1,))


def obs_of(*batch: int) -> dict[str, torch.Tensor]:
    return {"policy": torch.randn(*batch, 4), "critic": torch.randn(*batch, 5)}


def snapshot(st: RolloutStorage) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in st.tensors.items()}


def assert_unchanged(st: RolloutStorage, before: dict[str, torch.Tensor], step: int) -> None:
    assert st.step == step
    for name, tensor in st.tensors.items():
        assert torch.equal(tensor, before[name]), name


# ------------------------------------------------------------------ mappings iterating rows
@pytest.mark.parametrize("write", ["add_transition", "write_block"])
def test_observations_may_be_a_mapping_whose_iteration_is_not_its_keys(write):
    st = dict_obs_storage()
    if write == "add_transition":
        given = obs_of(N)
        st.add_transition(RolloutStorage.Transition(observations=RowsMapping(given)))
        got = {k: v[0] for k, v in st.observations.items()}
    else:
        given = obs_of(T, N)
        assert st.write_block(0, observations=RowsMapping(given)) == T
        got = st.observations
    assert all(torch.equal(got[k], given[k]) for k in given)


def test_a_row_iterating_mapping_with_other_keys_is_a_key_error_naming_them():
    st = dict_obs_storage()
    wrong = RowsMapping({"policy": torch.zeros(N, 4), "other": torch.zeros(N, 5)})
    with pytest.raises(KeyError, match="other"):
        st.add_transition(RolloutStorage.Transition(observations=wrong))
    assert st.step == 0


@pytest.mark.parametrize("write", ["add_transition", "write_block"])
def test_tensordict_observations_as_rsl_rl_passes_them(write):
    tensordict = pytest.importorskip("tensordict")
    spec = tensordict.TensorDict(obs_of(N), batch_size=[N])
    st = RolloutStorage("rl", N, T, spec, (1,))
    if write == "add_transition":
        given = tensordict.TensorDict(obs_of(N), batch_size=[N])
        st.add_transition(RolloutStorage.Transition(observations=given))
        assert torch.equal(st.observations["policy"][0], given["policy"])
    else:
        given = tensordict.TensorDict(obs_of(T, N), batch_size=[T, N])
        st.write_block(0, observations=given)
        assert torch.equal(st.observations["critic"], given["critic"])


# ------------------------------------------------------------------ values a field cannot hold
def int_fields_storage() -> RolloutStorage:
    obs = {"img": torch.zeros(N, 2, dtype=torch.uint8), "x": torch.zeros(N, 2)}
    return RolloutStorage("rl", N, T, obs, (1,), actions_dtype=torch.int64)


REFUSED = {
    "float_actions_into_int64": ("actions", torch.full((N, 1), 0.7)),
    "float64_actions_into_int64": ("actions", torch.ones(N, 1).double()),
    "float_obs_into_uint8": (
        "observations",
        {"img": torch.full((N, 2), 300.5), "x": torch.zeros(N, 2)},
    ),
    "complex_rewards_into_float": ("rewards", torch.ones(N, dtype=torch.complex64)),
}


def _fields(field: str, value: Any, k: int | None) -> dict[str, Any]:
    """The transition fields of a case, stepped (``k`` None) or as a ``[k, N, ...]`` block."""

    def block(x: torch.Tensor) -> torch.Tensor:
        return x if k is None else x.unsqueeze(0).expand(k, *x.shape).contiguous()

    value = {key: block(v) for key, v in value.items()} if isinstance(value, dict) else block(value)
    # A field that fits, given first: the refusal must come before any field is written.
    return {"rewards": block(torch.ones(N)), field: value} if field != "rewards" else {field: value}


@pytest.mark.parametrize(("field", "value"), REFUSED.values(), ids=REFUSED.keys())
@pytest.mark.parametrize("write", ["add_transition", "write_block"])
def test_values_a_field_cannot_hold_are_refused_and_nothing_is_written(write, field, value):
    st = int_fields_storage()
    before = snapshot(st)
    with pytest.raises(ValueError, match="cannot hold"):
        if write == "add_transition":
            st.add_transition(RolloutStorage.Transition(**_fields(field, value, None)))
        else:
            st.write_block(0, **_fields(field, value, 2))
    assert_unchanged(st, before, 0)


ACCEPTED = {
    # float64 env arrays into a float32 storage: rounded, as documented (same kind).
    "float64_obs_into_float32": (
        "observations",
        {"img": torch.zeros(N, 2, dtype=torch.uint8), "x": torch.full((N, 2), 0.1).double()},
    ),
    "int64_obs_into_uint8": (
        "observations",
        {"img": torch.full((N, 2), 7), "x": torch.zeros(N, 2)},
    ),
    "int64_dones_into_bool": ("dones", torch.tensor([0, 1, 0])),  # Isaac Lab's dones
    "uint8_dones_into_bool": ("dones", torch.tensor([0, 1, 0], dtype=torch.uint8)),  # rsl_rl
    "float_dones_into_bool": ("dones", torch.tensor([0.0, 1.0, 0.0])),
    "int_rewards_into_float": ("rewards", torch.tensor([1, 2, 3])),
}


@pytest.mark.parametrize(("field", "value"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_values_of_the_fields_kind_are_still_taken(field, value):
    st = int_fields_storage()
    st.add_transition(RolloutStorage.Transition(**{field: value}))
    assert st.step == 1
    if field == "dones":
        assert st.dones[0].flatten().tolist() == [False, True, False]


def test_int_dones_of_the_wrong_shape_are_still_refused():
    st = int_fields_storage()
    with pytest.raises(ValueError, match="does not fit"):
        st.add_transition(RolloutStorage.Transition(dones=torch.zeros(N + 1, dtype=torch.long)))
    assert st.step == 0


def test_float_hidden_states_into_a_float_storage_are_taken():
    st = RolloutStorage("rl", N, T, (2,), (1,), actor_hidden_state=(1, 3))
    state = torch.ones(1, N, 3, dtype=torch.float64)
    st.add_transition(RolloutStorage.Transition(hidden_states=(state, None)))
    assert st.saved_hidden_states_actor[0][0].sum().item() == 3 * N


# ------------------------------------------------------------------ uint8 done masks
def test_circular_buffer_reset_reads_a_uint8_mask_as_the_dones():
    buf = CircularBuffer(max_len=3, batch_size=4)
    buf.append(torch.arange(4.0))
    buf.reset(torch.tensor([0, 0, 1, 0], dtype=torch.uint8))
    assert buf.current_length.tolist() == [1, 1, 0, 1]
    buf.reset(torch.tensor([0, 1]))  # int64: env indices, as before
    assert buf.current_length.tolist() == [0, 0, 0, 1]


def test_circular_buffer_refuses_a_uint8_mask_of_another_shape():
    buf = CircularBuffer(max_len=3, batch_size=4)
    buf.append(torch.arange(4.0))
    with pytest.raises(ValueError, match="mask must have shape"):
        buf.reset(torch.tensor([2], dtype=torch.uint8))  # was env 2's index
    assert buf.current_length.tolist() == [1, 1, 1, 1]


# ------------------------------------------------------------------ sources viewing the storage
def test_a_block_overlapping_its_own_rows_is_written_as_given():
    st = RolloutStorage("rl", 2, 4, (1,), (1,))
    st.rewards.view(-1).copy_(torch.arange(8.0))
    old = st.rewards[0:3].clone()
    assert st.write_block(1, values=torch.full((3, 2), 7.0), rewards=st.rewards[0:3]) == 3
    assert torch.equal(st.rewards[1:4], old) and st.step == 4
    assert (st.values[1:] == 7.0).all()


def test_a_block_viewing_a_field_written_in_the_same_call_reads_it_as_it_was():
    st = RolloutStorage("rl", 2, 4, (1,), (1,))
    st.values.view(-1).copy_(torch.arange(8.0))
    old_values = st.values.clone()
    st.write_block(0, values=torch.zeros(4, 2), rewards=st.values)
    assert torch.equal(st.rewards, old_values) and not st.values.any()


def test_a_step_viewing_a_field_written_in_the_same_step_reads_it_as_it_was():
    # Rewards are copied before values: a value viewing the rewards read the new ones.
    st = RolloutStorage("rl", 2, 4, (1,), (1,))
    st.rewards.view(-1).copy_(torch.arange(1.0, 9.0))
    old_row = st.rewards[0].clone()
    st.add_transition(RolloutStorage.Transition(rewards=torch.zeros(2), values=st.rewards[0]))
    assert torch.equal(st.values[0], old_row) and not st.rewards[0].any()


def test_a_hidden_state_viewing_its_own_saved_rows_is_written_as_given():
    st = RolloutStorage("rl", 2, 4, (1,), (1,), actor_hidden_state=(1, 1))
    saved = st.saved_hidden_states_actor[0]
    saved.view(-1).copy_(torch.arange(8.0))
    old = saved[0:3].clone()
    st.write_block(1, hidden_states=(saved[0:3], None))
    assert torch.equal(st.saved_hidden_states_actor[0][1:4], old)


def test_a_shared_block_given_again_stays_shared():
    # A runner hands the same block memory every round: it is taken, not cloned.
    st = RolloutStorage("rl", 2, 4, (1,), (1,))
    values = torch.ones(4, 2)
    st.write_block(0, share=True, values=values)
    st.write_block(0, share=True, values=values)
    assert st.shared == {"values"} and st.values.data_ptr() == values.data_ptr()


# ------------------------------------------------------------------ sizes and counts
@pytest.mark.parametrize(
    ("max_len", "batch_size"), [(2.5, 2), (2.0, 2), (2, 1.5), (True, 2), (2, 0)], ids=repr
)
def test_circular_buffer_sizes_are_whole_numbers(max_len, batch_size):
    with pytest.raises(ValueError, match="must be an int"):
        CircularBuffer(max_len, batch_size)


@pytest.mark.parametrize(
    ("seq_len", "batch_size", "num_batches"),
    [(2.0, 2, 1), (2, 2.0, 1), (2, 2, 1.0), (0, 2, 1), (4, 2, 1), (True, 2, 1)],
    ids=repr,
)
def test_circular_buffer_window_sizes_are_checked_at_the_call(seq_len, batch_size, num_batches):
    buf = CircularBuffer(3, 2)
    for i in range(3):
        buf.append(torch.tensor([float(i), 10.0 + i]))
    with pytest.raises(ValueError):
        buf.mini_batch_generator(seq_len, batch_size, num_batches)  # no next(): at the call


def rl_storage(num_envs: int = 2, steps: int = 3) -> RolloutStorage:
    return RolloutStorage("rl", num_envs, steps, (2,), (1,))


@pytest.mark.parametrize(
    ("num_mini_batches", "num_epochs"),
    [(0, 1), (2.0, 1), (True, 1), (1, 1.5), (1, -1), (99, 1)],
    ids=repr,
)
@pytest.mark.parametrize("which", ["flat", "recurrent"])
def test_storage_generators_check_their_counts_at_the_call(which, num_mini_batches, num_epochs):
    st = rl_storage()
    make = st.mini_batch_generator if which == "flat" else st.recurrent_mini_batch_generator
    with pytest.raises(ValueError):
        make(num_mini_batches, num_epochs)  # no next(): at the call


def test_a_distillation_storage_is_refused_at_the_call():
    st = RolloutStorage("distillation", 2, 3, (2,), (1,))
    with pytest.raises(ValueError, match="training_type"):
        st.mini_batch_generator(1, 1)


@pytest.mark.parametrize("which", ["flat", "recurrent", "distillation"])
def test_a_valid_mask_of_another_shape_is_refused(which):
    # [N, T] instead of [T, N]: the flat generator read it as [T, N] without a word.
    kind = "distillation" if which == "distillation" else "rl"
    st = RolloutStorage(kind, 2, 3, (2,), (1,))
    st.valid = torch.ones(2, 3, dtype=torch.bool)
    make = {
        "flat": lambda: st.mini_batch_generator(1, 1),
        "recurrent": lambda: st.recurrent_mini_batch_generator(1, 1),
        "distillation": st.generator,
    }[which]
    with pytest.raises(ValueError, match=r"valid must be a \[T, N\]"):
        make()
    st.valid = torch.ones(3, 2, dtype=torch.bool)
    assert len(list(make())) >= 1

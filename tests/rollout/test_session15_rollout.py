"""Session 15 fixes of the rollout storage: one field shared with another, block starts that are
no Python int, dict observation specs with non-str keys, empty hidden-state blocks, bad specs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.rollout import RolloutStorage, Transition

T, N = 3, 2


def make(device="cpu", **kwargs):
    return RolloutStorage("rl", N, T, (1,), (1,), device=device, **kwargs)


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# ---------------------------------------------------------------- 1. share=True of own memory
# (case, field written, source taken from the storage, then a write into the source's field)
OWN_SOURCES = [
    ("rewards for values", "values", lambda st: st.rewards),
    ("advantages for values", "values", lambda st: st.advantages),
    ("a view of rewards", "values", lambda st: st.rewards.view(T, N)),
    ("rewards for the log-probs", "actions_log_prob", lambda st: st.rewards),
    ("a hidden state's rows", "values", lambda st: st.saved_hidden_states_actor[0][:, 0]),
]


@pytest.mark.parametrize(
    ("field", "source"), [c[1:] for c in OWN_SOURCES], ids=[c[0] for c in OWN_SOURCES]
)
def test_share_of_own_memory_copies_it(device, field, source):
    st = make(device, actor_hidden_state=(1, 1))
    st.write_block(0, rewards=torch.arange(6.0, device=device).view(T, N))
    st.saved_hidden_states_actor[0].copy_(torch.arange(6.0, device=device).view(T, 1, N, 1))
    st.compute_returns(torch.zeros(N, device=device), 0.9, 0.9, normalize_advantage=False)
    src = source(st)
    before = src.clone()
    st.write_block(0, share=True, **{field: src})
    stored = getattr(st, field)
    assert field not in st.shared
    assert not same_memory(stored, src)
    assert torch.equal(stored.reshape(before.shape), before)
    # Writing the source's field (or recomputing the advantages) leaves the copy as it was.
    st.clear()
    st.write_block(0, rewards=torch.full((T, N), 100.0, device=device))
    st.saved_hidden_states_actor[0].fill_(-1.0)
    st.compute_returns(torch.zeros(N, device=device), 0.9, 0.9, normalize_advantage=True)
    assert torch.equal(getattr(st, field).reshape(before.shape), before)


def test_share_of_own_field_keeps_compute_returns_from_overwriting_values(device):
    st = make(device)
    st.write_block(0, rewards=torch.ones(T, N, device=device))
    st.compute_returns(torch.zeros(N, device=device), 0.9, 0.9, normalize_advantage=False)
    st.write_block(0, share=True, values=st.advantages)
    before = st.values.clone()
    st.compute_returns(torch.zeros(N, device=device), 0.9, 0.9, normalize_advantage=True)
    assert torch.equal(st.values, before)


def test_share_reads_own_rows_as_before_the_call(device):
    # rewards and values are swapped in one call: each reads the other's old rows.
    st = make(device)
    r, v = torch.ones(T, N, device=device), torch.full((T, N), 2.0, device=device)
    st.write_block(0, rewards=r, values=v)
    st.write_block(0, share=True, rewards=st.values, values=st.rewards)
    assert torch.equal(st.rewards.view(T, N), v) and torch.equal(st.values.view(T, N), r)
    assert not same_memory(st.rewards, st.values) and not st.shared


def test_share_of_a_shared_field_is_copied_not_taken_twice(device):
    # Another field's taken tensor is the caller's memory, but taking it again would put two
    # fields on one memory (contract §9.2): the second field gets a copy.
    st = make(device)
    outside = torch.ones(T, N, device=device)
    st.write_block(0, share=True, rewards=outside)
    st.write_block(0, share=True, values=st.rewards)
    assert st.shared == {"rewards"} and not same_memory(st.values, outside)
    assert torch.equal(st.values.reshape(T, N), outside)
    st.clear()
    st.add_transition(Transition(rewards=torch.zeros(N, device=device)))
    assert torch.equal(outside, torch.ones(T, N, device=device))  # never written


def test_share_of_the_fields_own_tensor_changes_nothing(device):
    st = make(device)
    values = st.values
    st.write_block(0, share=True, values=st.values)
    assert st.values is values and not st.shared


# ---------------------------------------------------------------- 2. start of write_block
@pytest.mark.parametrize(
    "start",
    [np.int64(1), np.int32(1), np.uint8(1), torch.tensor(1)],
    ids=["np.int64", "np.int32", "np.uint8", "torch int tensor"],
)
def test_integer_like_start_keeps_step_a_python_int(start):
    st = make()
    assert st.write_block(start, rewards=torch.ones(1, N)) == 1
    assert type(st.step) is int and st.step == 2
    # add_transition writes one step's row: a [num_layers, N, hidden] state fits it.
    st.add_transition(Transition(rewards=torch.ones(N), hidden_states=(torch.zeros(1, N, 4), None)))
    assert st.step == 3 and st.saved_hidden_states_actor is not None


@pytest.mark.parametrize(
    "start",
    [True, False, np.bool_(True), torch.tensor(True), 1.0, torch.tensor(1.0), "1", None],
    ids=["True", "False", "np.True_", "bool tensor", "1.0", "float tensor", "str", "None"],
)
def test_start_that_is_no_int_is_a_type_error_naming_it(start):
    st = make()
    with pytest.raises(TypeError, match="start"):
        st.write_block(start, rewards=torch.ones(1, N))
    assert st.step == 0 and not st.rewards.any()


def test_start_is_checked_before_the_blocks():
    st = make()
    with pytest.raises(TypeError, match="start"):
        st.write_block(1.5, rewards=[1.0, 2.0])


@pytest.mark.parametrize(
    ("start", "error"), [(-1, ValueError), (np.int64(-1), ValueError), (3, OverflowError)]
)
def test_start_ranges_still_checked(start, error):
    st = make()
    with pytest.raises(error):
        st.write_block(start, rewards=torch.ones(1, N))
    assert st.step == 0


# ---------------------------------------------------------------- 3. dict observation keys
@pytest.mark.parametrize(
    "spec",
    [
        {0: (3,), 1: (2,)},
        {"a": (3,), 1: (2,)},
        {1: (3,), "1": (2,)},
        {"outer": {2: (3,)}},
        {(0, 1): (3,)},
        {0: torch.zeros(N, 3)},
    ],
    ids=["ints", "one int", "colliding after str()", "nested", "tuple", "example tensor"],
)
def test_observation_keys_must_be_str(spec):
    with pytest.raises(TypeError, match="keys must be str"):
        RolloutStorage("rl", N, T, spec, (1,))
    with pytest.raises(TypeError, match="privileged_observations"):
        RolloutStorage("rl", N, T, (1,), (1,), privileged_observations=spec)


def test_str_keys_still_fit_writes():
    obs = {"a": torch.ones(N, 3), "b": {"c": torch.ones(N, 2)}}
    st = RolloutStorage("rl", N, T, obs, (1,))
    st.add_transition(Transition(observations=obs))
    assert st.observations["b"]["c"][0].sum() == 2 * N


# ---------------------------------------------------------------- 4. empty hidden-state blocks
@pytest.mark.parametrize("lstm", [False, True], ids=["gru", "lstm"])
def test_empty_hidden_block_on_a_lazy_storage_writes_nothing(lstm):
    st = make()
    h = torch.empty(0, 1, N, 4)
    state = (h, h.clone()) if lstm else h
    assert st.write_block(0, rewards=torch.empty(0, N), hidden_states=(state, None)) == 0
    assert st.step == 0 and not st.rewards.any()
    # The layout it gave is kept: a later state of the same shape fits.
    step = (torch.ones(1, N, 4), torch.ones(1, N, 4)) if lstm else torch.ones(1, N, 4)
    st.add_transition(Transition(rewards=torch.ones(N), hidden_states=(step, None)))
    assert st.saved_hidden_states_actor[0][0].sum() == N * 4


def test_empty_hidden_block_of_the_wrong_shape_is_refused():
    st = make()
    with pytest.raises(ValueError, match="hidden states must be"):
        st.write_block(0, hidden_states=(torch.empty(0, 1, N + 1, 4), None))
    assert st.saved_hidden_states_actor is None


# ---------------------------------------------------------------- 5. constructor shapes
@pytest.mark.parametrize(
    ("kwargs", "shape"),
    [
        ({"observations": (3, torch.float64)}, ("observations", (3,))),
        ({"observations": 3}, ("observations", (3,))),
        ({"observations": np.int64(3)}, ("observations", (3,))),
        ({"distribution_params": [3, (2,)]}, ("distribution_params/0", (3,))),
        ({"distribution_params": (3,)}, ("distribution_params/0", (3,))),
    ],
    ids=["(int, dtype)", "int", "numpy int", "int parameter", "one int parameter"],
)
def test_an_int_is_a_flat_shape_as_for_actions_shape(kwargs, shape):
    args = {"observations": (1,), **kwargs}
    st = RolloutStorage("rl", N, T, args.pop("observations"), 3, **args)
    name, per_env = shape
    assert tuple(st.tensors[name].shape) == (T, N, *per_env)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"observations": (2.5, torch.float32)}, "observations"),
        ({"observations": ((3,), "float32")}, "observations"),
        ({"observations": [[3]]}, "observations"),
        ({"observations": {"a": 1.5}}, r"observations\['a'\]"),
        ({"privileged_observations": "x"}, "privileged_observations"),
        ({"distribution_params": 3}, "distribution_params"),
        ({"distribution_params": [(2,), 2.0]}, r"distribution_params\[1\]"),
        ({"distribution_params": [None]}, r"distribution_params\[0\]"),
        ({"actions_shape": 2.0}, "actions_shape"),
        ({"actions_shape": True}, "actions_shape"),
    ],
    ids=[
        "float in (shape, dtype)",
        "str dtype",
        "nested list",
        "float leaf",
        "str",
        "int distribution_params",
        "float parameter",
        "None parameter",
        "float actions_shape",
        "bool actions_shape",
    ],
)
def test_a_spec_that_is_no_shape_is_a_type_error_naming_its_argument(kwargs, named):
    args = {"observations": (1,), "actions_shape": (1,), **kwargs}
    with pytest.raises(TypeError, match=named):
        RolloutStorage("rl", N, T, args.pop("observations"), args.pop("actions_shape"), **args)


@pytest.mark.parametrize(
    "actions_shape",
    [3, np.int64(3), (3,), [3], torch.Size([3]), np.array([3]), (np.int64(3),)],
    ids=["int", "numpy int", "tuple", "list", "torch.Size", "numpy array", "numpy ints"],
)
def test_actions_shape_forms_still_taken(actions_shape):
    st = RolloutStorage("rl", N, T, (1,), actions_shape)
    assert st.actions_shape == (3,) and all(type(d) is int for d in st.actions_shape)
    assert st.distribution_params[0].shape == (T, N, 3)

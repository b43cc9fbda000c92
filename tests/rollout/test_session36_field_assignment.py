"""An assigned storage field is the tensor every reader reads.

rsl_rl's ``PPO.compute_returns`` ends with ``storage.advantages = storage.returns -
storage.values`` and normalises by assigning again. The fields were plain attributes beside
``storage.tensors``, which the flat generator reads: it handed out the old advantages (zero
after a fresh storage) while the recurrent generator read the new ones, so feed-forward PPO
trained on nothing, silently.
"""

from __future__ import annotations

import pytest
import torch

from episodes.rollout import RolloutStorage

T, N = 3, 4


def _filled(**kwargs):
    st = RolloutStorage("rl", N, T, (2,), (1,), **kwargs)
    gen = torch.Generator().manual_seed(0)
    st.rewards.copy_(torch.randn(T, N, 1, generator=gen))
    st.values.copy_(torch.randn(T, N, 1, generator=gen))
    st.dones.copy_(torch.rand(T, N, 1, generator=gen) < 0.3)
    return st


def _rsl_style_advantages(st):
    st.compute_returns(torch.zeros(N), 0.99, 0.95, normalize_advantage=False)
    st.advantages = st.returns - st.values
    st.advantages = (st.advantages - st.advantages.mean()) / (st.advantages.std() + 1e-8)
    return st.advantages


def _sorted(values):
    return torch.sort(values.flatten()).values


READERS = {
    "flat generator": lambda st: torch.cat([b.advantages for b in st.mini_batch_generator(2, 1)]),
    "recurrent generator": lambda st: torch.cat(
        [b.advantages for b in st.recurrent_mini_batch_generator(1, 1)]
    ),
    "tensors": lambda st: st.tensors["advantages"],
    "attribute": lambda st: st.advantages,
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_sees_assigned_advantages(reader):
    st = _filled()
    want = _rsl_style_advantages(st).clone()
    assert torch.allclose(_sorted(READERS[reader](st)), _sorted(want))


def test_a_later_compute_returns_writes_into_the_assigned_tensor():
    st = _filled()
    _rsl_style_advantages(st)
    st.compute_returns(torch.zeros(N), 0.99, 0.95, normalize_advantage=True)
    assert st.advantages is st.tensors["advantages"]
    assert torch.allclose(st.advantages.std(), torch.tensor(1.0), atol=1e-5)


def test_an_assignment_in_inference_mode_is_kept_as_a_normal_tensor():
    st = _filled()
    with torch.inference_mode():
        _rsl_style_advantages(st)
    assert not st.advantages.is_inference()
    st.compute_returns(torch.zeros(N), 0.99, 0.95)  # writes in place outside inference mode


REFUSED = {
    "other shape": ("advantages", lambda: torch.zeros(T, N)),
    "other dtype": ("advantages", lambda: torch.zeros(T, N, 1, dtype=torch.float64)),
    "other device": ("advantages", lambda: torch.zeros(T, N, 1, device="meta")),
    "not a tensor": ("returns", lambda: [[0.0]] * T),
    "a field of several tensors": ("distribution_params", lambda: (torch.zeros(T, N, 1),)),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_misfit_assignment_is_refused_and_changes_nothing(name):
    field, make = REFUSED[name]
    st = _filled(distribution_params=[(1,)])
    before = {k: v.clone() for k, v in st.tensors.items()}
    old = getattr(st, field)
    with pytest.raises(ValueError, match=f"RolloutStorage.{field}"):
        setattr(st, field, make())
    assert getattr(st, field) is old
    assert all(torch.equal(st.tensors[k], v) for k, v in before.items())


def test_fields_the_storage_does_not_hold_are_plain_attributes():
    st = _filled()
    assert st.privileged_actions is None
    st.privileged_actions = "anything"
    assert st.privileged_actions == "anything" and "privileged_actions" not in st.tensors


def test_an_assigned_tensor_replaces_a_shared_one():
    st = _filled()
    taken = torch.zeros(T, N, 1)
    st.write_block(0, values=taken, share=True)
    assert "values" in st.shared
    st.values = torch.ones(T, N, 1)
    assert "values" not in st.shared and st.tensors["values"].sum() == T * N
    assert taken.sum() == 0


def test_another_fields_tensor_is_assigned_as_a_copy():
    # Shared memory: compute_returns writing the advantages would overwrite the returns.
    st = _filled()
    want = _filled()
    st.advantages = st.returns
    assert st.tensors["advantages"].untyped_storage().data_ptr() != st.returns.data_ptr()
    st.compute_returns(torch.zeros(N), 0.9, 0.95)
    want.compute_returns(torch.zeros(N), 0.9, 0.95)
    assert torch.equal(st.returns, want.returns) and torch.equal(st.advantages, want.advantages)


def test_an_assigned_tensor_requiring_grad_is_held_detached():
    st = _filled()
    weight = torch.ones(1, requires_grad=True)
    st.values = st.values * weight
    assert not st.values.requires_grad
    st.compute_returns(torch.zeros(N), 0.9, 0.95)  # an out= write refuses grad tensors

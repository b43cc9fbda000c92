"""``write_block(share=True)``: whole columns taken as the storage's tensors, never written."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hst

from episodes.rollout import RolloutStorage, Transition

T, N = 4, 3


def make(device, obs=(2,)):
    return RolloutStorage("rl", N, T, obs, (2,), device=device)


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# (case, field, value factory, taken?) -- a value is taken only when it can stand in as it is.
CASES = [
    ("whole observations", "observations", lambda d: torch.randn(T, N, 2, device=d), True),
    ("[T, N] for a [T, N, 1] field", "values", lambda d: torch.randn(T, N, device=d), True),
    ("a view of a bigger block", "values", lambda d: torch.randn(T + 2, N, device=d)[1:-1], True),
    ("other dtype", "values", lambda d: torch.randn(T, N, dtype=torch.float64, device=d), False),
    (
        "not contiguous",
        "observations",
        lambda d: torch.randn(T, 2, N, device=d).transpose(1, 2),
        False,
    ),
    ("needs grad", "values", lambda d: torch.randn(T, N, device=d, requires_grad=True), False),
]


@pytest.mark.parametrize(
    ("field", "make_value", "taken"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_what_is_taken(device, field, make_value, taken):
    st = make(device)
    value = make_value(device)
    st.write_block(0, share=True, **{field: value})
    stored = getattr(st, field)
    assert torch.equal(stored.reshape(value.shape), value.detach().to(stored.dtype))
    assert same_memory(stored, value) is taken
    assert (field in st.shared) is taken
    assert st.tensors[field] is stored  # the mapping and the field name the same tensor


def test_partial_blocks_and_default_writes_are_copied(device):
    st = make(device)
    rewards = torch.ones(T, N, device=device)
    st.write_block(0, share=True, rewards=rewards[:2])  # not all T steps
    st.write_block(0, rewards=rewards)  # share not asked
    assert not st.shared
    assert not same_memory(st.rewards, rewards)


@pytest.mark.parametrize(
    "later_write",
    ["add_transition", "write_block rows", "write_block whole", "compute_returns"],
)
def test_the_storage_never_writes_into_a_taken_tensor(device, later_write):
    st = make(device)
    outside = {
        "observations": torch.randn(T, N, 2, device=device),
        "values": torch.randn(T, N, device=device),
        "rewards": torch.randn(T, N, device=device),
    }
    before = {k: v.clone() for k, v in outside.items()}
    st.write_block(0, share=True, **outside)
    assert st.shared == {"observations", "values", "rewards"}
    if later_write == "add_transition":
        st.clear()
        st.add_transition(
            Transition(
                observations=torch.zeros(N, 2, device=device),
                values=torch.zeros(N, 1, device=device),
                rewards=torch.zeros(N, device=device),
            )
        )
        assert torch.equal(st.observations[1:], before["observations"][1:])  # rows kept
        assert not st.observations[0].any()
    elif later_write == "write_block rows":
        st.write_block(1, observations=torch.zeros(2, N, 2, device=device))
        assert torch.equal(st.observations[0], before["observations"][0])
        assert not st.observations[1:3].any()
    elif later_write == "write_block whole":
        st.write_block(0, values=torch.zeros(T, N, device=device))
        assert not st.values.any()
    else:
        st.compute_returns(torch.zeros(N, device=device), 0.9, 0.95)  # writes returns only
    for name, value in outside.items():
        assert torch.equal(value, before[name]), name


def test_own_copies_every_shared_tensor(device):
    st = make(device, obs={"a": (2,), "b": (1,)})
    obs = {"a": torch.randn(T, N, 2, device=device), "b": torch.randn(T, N, 1, device=device)}
    st.write_block(0, share=True, observations=obs)
    assert st.shared == {"observations/a", "observations/b"}
    assert same_memory(st.observations["a"], obs["a"])
    st.own()
    assert not st.shared
    assert torch.equal(st.observations["b"], obs["b"])
    st.observations["a"].zero_()
    assert obs["a"].abs().sum() > 0


def test_shared_distribution_params_and_gather(device):
    st = make(device)
    mean, std = torch.randn(T, N, 2, device=device), torch.rand(T, N, 2, device=device)
    st.write_block(0, share=True, distribution_params=(mean, std))
    assert all(same_memory(a, b) for a, b in zip(st.distribution_params, (mean, std)))
    index = torch.tensor([0, 5, T * N - 1], device=device)
    got = st.gather(index, ["distribution_params/0"])["distribution_params/0"]
    assert torch.equal(got, mean.reshape(T * N, 2)[index])


@settings(max_examples=40, deadline=None)
@given(hst.lists(hst.sampled_from(["share", "copy", "row", "own"]), min_size=1, max_size=6))
def test_sharing_never_changes_what_is_stored(ops):
    """Any sequence of shared, copied and per-row writes stores what a copying storage does,
    and leaves every tensor handed in as it was."""
    sharing, copying = make("cpu"), make("cpu")
    handed = []
    for k, op in enumerate(ops):
        block = torch.full((T, N, 2), float(k))
        if op == "own":
            sharing.own()
            continue
        if op == "row":
            sharing.write_block(k % T, observations=block[:1].clone())
            copying.write_block(k % T, observations=block[:1].clone())
            continue
        handed.append((block, block.clone()))
        sharing.write_block(0, share=op == "share", observations=block)
        copying.write_block(0, observations=block)
        assert torch.equal(sharing.observations, copying.observations)
    assert torch.equal(sharing.observations, copying.observations)
    for given_block, snapshot in handed:
        assert torch.equal(given_block, snapshot)


@pytest.mark.parametrize(
    "copier",
    [
        pytest.param(lambda st: pickle.loads(pickle.dumps(st)), id="pickle"),
        pytest.param(copy.deepcopy, id="deepcopy"),
        pytest.param(
            lambda st: torch.load(_saved(st), weights_only=False, map_location=st.device),
            id="torch.save",
        ),
    ],
)
def test_copies_of_a_sharing_storage_are_compact_and_own_their_tensors(device, copier):
    st = make(device, obs={"pos": (2,), "vel": (1,)})
    block = torch.randn(T + 6, N, device=device)  # the caller's block, bigger than the window
    st.write_block(0, share=True, values=block[3 : 3 + T])
    st.write_block(0, observations={"pos": torch.randn(T, N, 2), "vel": torch.randn(T, N, 1)})
    st.compute_returns(torch.zeros(N, device=device), gamma=0.9, lam=0.95)
    twin = copier(st)
    assert twin.shared == frozenset()
    assert set(twin.tensors) == set(st.tensors)
    for name, tensor in st.tensors.items():
        assert torch.equal(twin.tensors[name], tensor), name
        assert not same_memory(twin.tensors[name], tensor), name
    assert twin.values.untyped_storage().nbytes() == T * N * 4  # the window only, not the block
    assert twin.observations["pos"] is twin.tensors["observations/pos"]
    twin.values.fill_(7.0)  # the copy is its own: the caller's block is left alone
    assert not (block == 7.0).any()
    assert st.shared == frozenset({"values"})  # and the original still shares


def _saved(st: RolloutStorage) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(st, buffer)
    buffer.seek(0)
    return buffer

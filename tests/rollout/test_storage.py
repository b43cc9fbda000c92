from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as hst

from episodes.rollout import RolloutStorage, Transition, compute_gae
from tests.rollout._helpers import random_steps, stack_steps


def fill(storage, steps):
    for s in steps:
        storage.add_transition(Transition(**s))


def make_rl(device, t=5, n=4, **kw):
    return RolloutStorage("rl", n, t, (3,), (2,), device=device, **kw)


def test_transition_alias_and_clear():
    assert RolloutStorage.Transition is Transition
    tr = Transition(rewards=torch.zeros(2), hidden_states=(torch.zeros(1), None))
    tr.clear()
    assert tr.rewards is None and tr.hidden_states == (None, None)


@pytest.mark.parametrize("bad", ["ppo", "RL", "", "distill"])
def test_bad_training_type(bad):
    with pytest.raises(ValueError, match="'rl', 'distillation'"):
        RolloutStorage(bad, 2, 3, (1,), (1,))


def test_allocation_by_training_type(device):
    rl = make_rl(device)
    assert rl.values is not None and rl.returns is not None and rl.privileged_actions is None
    assert len(rl.distribution_params) == 2
    dis = RolloutStorage("distillation", 4, 5, (3,), (2,), device=device)
    assert dis.values is None and dis.advantages is None and dis.distribution_params is None
    assert dis.privileged_actions.shape == (5, 4, 2)
    for x in (rl.observations, rl.actions, rl.rewards, rl.dones, dis.privileged_actions):
        assert x.device.type == device.type


def test_observation_specs(device):
    spec = {
        "img": ((2, 2), torch.uint8),
        "vec": torch.zeros(4, 5, dtype=torch.float64),
        "nested": {"x": (3,)},
    }
    st = RolloutStorage("rl", 4, 2, spec, (1,), device=device, distribution_params=[(1,)])
    assert st.observations["img"].shape == (2, 4, 2, 2)
    assert st.observations["img"].dtype == torch.uint8
    assert st.observations["vec"].dtype == torch.float64
    assert st.observations["nested"]["x"].shape == (2, 4, 3)
    with pytest.raises(ValueError):
        RolloutStorage("rl", 4, 2, torch.zeros(3, 5), (1,))
    with pytest.raises(TypeError):
        RolloutStorage("rl", 4, 2, "obs", (1,))


@pytest.mark.parametrize("obs_dict", [False, True], ids=["tensor_obs", "dict_obs"])
@pytest.mark.parametrize("hidden", [None, "gru", "lstm"])
def test_add_transition_stores_everything(device, obs_dict, hidden):
    t, n = 5, 4
    steps = random_steps(t, n, device, obs_dict=obs_dict, hidden=hidden)
    obs = steps[0]["observations"]
    st = RolloutStorage("rl", n, t, obs, (2,), device=device)
    fill(st, steps)
    assert st.step == t
    if obs_dict:
        assert torch.equal(st.observations["policy"], stack_steps(steps, "observations")["policy"])
        assert st.observations["extra"]["ids"].dtype == torch.int64
        assert torch.equal(
            st.observations["extra"]["ids"], stack_steps(steps, "observations")["extra"]["ids"]
        )
    else:
        assert torch.equal(st.observations, stack_steps(steps, "observations"))
    assert torch.equal(st.actions, stack_steps(steps, "actions"))
    assert torch.equal(st.rewards.squeeze(-1), stack_steps(steps, "rewards"))
    assert torch.equal(st.dones.squeeze(-1), stack_steps(steps, "dones").bool())
    assert torch.equal(st.values, stack_steps(steps, "values"))
    assert torch.equal(st.actions_log_prob.squeeze(-1), stack_steps(steps, "actions_log_prob"))
    for got, want in zip(
        st.distribution_params, stack_steps(steps, "distribution_params"), strict=True
    ):
        assert torch.equal(got, want)
    if hidden is None:
        assert st.saved_hidden_states_actor is None
    else:
        ha = stack_steps([{"h": s["hidden_states"][0]} for s in steps], "h")
        ha = ha if isinstance(ha, tuple) else (ha,)
        assert len(st.saved_hidden_states_actor) == len(ha)
        for got, want in zip(st.saved_hidden_states_actor, ha, strict=True):
            assert got.shape == (t, 2, n, 4) and torch.equal(got, want)


@pytest.mark.parametrize("how", ["add_transition", "write_block", "write_block share"])
def test_values_that_require_grad_are_stored_as_data(device, how):
    # A policy's outputs may still carry their graph; the storage must not keep it, or
    # returns and mini-batches would backpropagate into the rollout's forward passes.
    t, n = 3, 2
    weight = torch.ones(1, device=device, requires_grad=True)
    values = torch.randn(t, n, 1, device=device) * weight
    hidden = torch.randn(t, 1, n, 4, device=device) * weight
    st = RolloutStorage("rl", n, t, (3,), (2,), device=device, actor_hidden_state=(1, 4))
    if how == "add_transition":
        for k in range(t):
            st.add_transition(Transition(values=values[k], hidden_states=(hidden[k], None)))
    else:
        st.write_block(0, share=how.endswith("share"), values=values, hidden_states=(hidden, None))
    st.compute_returns(torch.zeros(n, 1, device=device), gamma=0.9, lam=0.95)
    stored = [st.values, st.returns, st.advantages, *st.saved_hidden_states_actor]
    assert not any(x.requires_grad for x in stored)
    assert torch.equal(st.values, values.detach())


def test_overflow_and_clear(device):
    st = make_rl(device, t=2)
    steps = random_steps(3, 4, device)
    fill(st, steps[:2])
    with pytest.raises(OverflowError):
        st.add_transition(Transition(**steps[2]))
    st.clear()
    assert st.step == 0
    st.add_transition(Transition(**steps[2]))
    assert torch.equal(st.actions[0], steps[2]["actions"])


def test_write_block_bit_identical(device):
    t, n = 6, 4
    steps = random_steps(t, n, device, obs_dict=True, hidden="lstm")
    a = RolloutStorage(
        "rl",
        n,
        t,
        steps[0]["observations"],
        (2,),
        device=device,
        actor_hidden_state=((2, 4), (2, 4)),
        critic_hidden_state=((2, 4), (2, 4)),
    )
    b = RolloutStorage("rl", n, t, steps[0]["observations"], (2,), device=device)
    fill(a, steps)
    fields = {
        k: stack_steps(steps, k)
        for k in (
            "observations",
            "actions",
            "rewards",
            "dones",
            "values",
            "actions_log_prob",
            "distribution_params",
        )
    }
    hid = tuple(stack_steps([{"h": s["hidden_states"][i]} for s in steps], "h") for i in (0, 1))
    assert (
        b.write_block(
            0,
            **{
                k: (v[:2] if not isinstance(v, (dict, tuple)) else v)
                for k, v in fields.items()
                if k == "rewards"
            },
        )
        == 2
    )
    b.write_block(
        0,
        hidden_states=tuple(tuple(c[:4] for c in h) for h in hid),
        **{k: _head(v, 4) for k, v in fields.items()},
    )
    b.write_block(
        4,
        hidden_states=tuple(tuple(c[4:] for c in h) for h in hid),
        **{k: _tail(v, 4) for k, v in fields.items()},
    )
    assert b.step == t
    last = torch.randn(n, 1, device=device)
    a.compute_returns(last, 0.99, 0.95)
    b.compute_returns(last, 0.99, 0.95)
    for name in ("actions", "rewards", "dones", "values", "returns", "advantages"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(a.observations["policy"], b.observations["policy"])
    for x, y in zip(
        a.saved_hidden_states_actor + a.saved_hidden_states_critic,
        b.saved_hidden_states_actor + b.saved_hidden_states_critic,
        strict=True,
    ):
        assert torch.equal(x, y)
    with pytest.raises(OverflowError):
        b.write_block(5, rewards=torch.zeros(2, n))
    with pytest.raises(ValueError, match="unknown"):
        b.write_block(0, advantages=torch.zeros(1, n))
    with pytest.raises(ValueError, match="same leading length"):
        b.write_block(0, rewards=torch.zeros(1, n), values=torch.zeros(2, n, 1))


def _head(v, k):
    if isinstance(v, dict):
        return {kk: _head(vv, k) for kk, vv in v.items()}
    if isinstance(v, tuple):
        return tuple(_head(vv, k) for vv in v)
    return v[:k]


def _tail(v, k):
    if isinstance(v, dict):
        return {kk: _tail(vv, k) for kk, vv in v.items()}
    if isinstance(v, tuple):
        return tuple(_tail(vv, k) for vv in v)
    return v[k:]


@pytest.mark.parametrize("normalize", [True, False])
def test_compute_returns(device, normalize):
    t, n = 7, 5
    steps = random_steps(t, n, device)
    st = make_rl(device, t=t, n=n)
    fill(st, steps)
    last = torch.randn(n, 1, device=device)
    st.compute_returns(last, 0.9, 0.8, normalize_advantage=normalize)
    adv = compute_gae(st.rewards, st.values, st.dones, last, 0.9, 0.8)
    torch.testing.assert_close(st.returns, adv + st.values)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        assert abs(float(st.advantages.mean())) < 1e-5
    torch.testing.assert_close(st.advantages, adv)
    dis = RolloutStorage("distillation", n, t, (3,), (2,), device=device)
    with pytest.raises(ValueError):
        dis.compute_returns(last, 0.9, 0.8)


def test_distillation_ignores_rl_fields(device):
    steps = random_steps(3, 4, device)
    st = RolloutStorage("distillation", 4, 3, (3,), (2,), device=device)
    fill(st, steps)
    assert torch.equal(st.privileged_actions, stack_steps(steps, "privileged_actions"))


def test_dtypes_preserved(device):
    st = RolloutStorage(
        "rl", 3, 2, (2,), (1,), device=device, dtype=torch.float64, actions_dtype=torch.int64
    )
    assert st.values.dtype == torch.float64 and st.actions.dtype == torch.int64
    assert st.dones.dtype == torch.bool


# ---------------------------------------------------------------- named tensors and flat access

LAYOUT_CASES = {
    "rl_tensor_obs": (
        dict(training_type="rl", observations=(3,)),
        {
            "observations": "observations",
            "actions": "actions",
            "rewards": "rewards",
            "dones": "dones",
            "values": "values",
            "actions_log_prob": "actions_log_prob",
            "returns": "returns",
            "advantages": "advantages",
            "distribution_params": ("distribution_params/0", "distribution_params/1"),
        },
    ),
    "rl_dict_obs_privileged": (
        dict(
            training_type="rl",
            observations={"img": ((2, 2), torch.uint8), "nested": {"x": ()}},
            privileged_observations=(5,),
            distribution_params=[(4,)],
        ),
        {
            "observations": {"img": "observations/img", "nested": {"x": "observations/nested/x"}},
            "privileged_observations": "privileged_observations",
            "actions": "actions",
            "rewards": "rewards",
            "dones": "dones",
            "values": "values",
            "actions_log_prob": "actions_log_prob",
            "returns": "returns",
            "advantages": "advantages",
            "distribution_params": ("distribution_params/0",),
        },
    ),
    "distillation": (
        dict(training_type="distillation", observations={"policy": (3,)}),
        {
            "observations": {"policy": "observations/policy"},
            "actions": "actions",
            "rewards": "rewards",
            "dones": "dones",
            "privileged_actions": "privileged_actions",
        },
    ),
}


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    if isinstance(tree, tuple):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def _public(storage, field, names):
    """The public attribute for ``field`` rebuilt from ``storage.tensors`` by ``names``."""
    if isinstance(names, dict):
        return {k: _public(storage, field, v) for k, v in names.items()}
    if isinstance(names, tuple):
        return tuple(storage.tensors[n] for n in names)
    return storage.tensors[names]


def _same_objects(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_objects(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    return a is b


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_tensors_are_the_public_fields(device, case):
    kwargs, want_names = LAYOUT_CASES[case]
    kwargs = dict(kwargs)  # the table is shared by every device's run
    training_type = kwargs.pop("training_type")
    observations = kwargs.pop("observations")
    st = RolloutStorage(training_type, 4, 3, observations, (2,), device=device, **kwargs)
    assert dict(st.field_names) == want_names
    assert sorted(st.tensors) == sorted(n for v in want_names.values() for n in _leaves(v))
    for field, names in want_names.items():
        assert _same_objects(_public(st, field, names), getattr(st, field)), field
    for name, tensor in st.tensors.items():
        assert tensor.shape[:2] == (3, 4) and tensor.is_contiguous(), name
        assert tensor.device.type == device.type
    with pytest.raises(TypeError):
        st.tensors["actions"] = torch.zeros(3, 4, 2)  # read-only: write into the tensors


def test_flat_views_write_through(device):
    st = RolloutStorage("rl", 4, 3, {"img": ((2, 2), torch.uint8)}, (2,), device=device)
    flat = st.flat()
    assert set(flat) == set(st.tensors)
    assert flat["observations/img"].shape == (12, 2, 2) and flat["rewards"].shape == (12, 1)
    flat["actions"][4 * 2 + 1] = 7.0  # row t * N + n
    assert torch.equal(st.actions[2, 1], torch.full((2,), 7.0, device=device))
    assert list(st.flat("values")) == ["values"]


GATHER_CASES = {
    "scalar_obs": (),
    "vector_obs": (3,),
    "matrix_obs": (2, 2),
    "one_wide_matrix": (1, 1),
    "empty_obs": (0,),
}


@pytest.mark.parametrize("case", list(GATHER_CASES))
def test_gather_equals_indexing_the_flat_views(device, case):
    st = RolloutStorage("rl", 4, 3, GATHER_CASES[case], (2,), device=device)
    for tensor in st.tensors.values():
        tensor.copy_(torch.arange(tensor.numel(), device=device).reshape(tensor.shape))
    index = torch.tensor([11, 0, 5, 5, 7], device=device)
    got = st.gather(index)
    assert set(got) == set(st.tensors)
    for name, rows in st.flat().items():
        assert torch.equal(got[name], rows[index]), name
    empty = st.gather(torch.zeros(0, dtype=torch.long, device=device), ["observations"])
    assert empty["observations"].shape == (0, *GATHER_CASES[case])


def test_flat_access_rejects_unknown_names():
    st = RolloutStorage("rl", 2, 3, {"a": (1,)}, (1,))
    with pytest.raises(KeyError, match="'observations'"):
        st.flat(["observations"])  # dict observations are stored per key
    with pytest.raises(KeyError, match="privileged_actions"):
        st.gather(torch.tensor([0]), ["actions", "privileged_actions"])


def test_colliding_observation_names_are_an_error():
    with pytest.raises(ValueError, match="'observations/a/b'"):
        RolloutStorage("rl", 2, 3, {"a/b": (1,), "a": {"b": (2,)}}, (1,))


@given(
    t=hst.integers(1, 4),
    n=hst.integers(1, 4),
    obs_shape=hst.lists(hst.integers(0, 3), max_size=3).map(tuple),
    data=hst.data(),
)
def test_gather_is_row_indexing_of_flat(t, n, obs_shape, data):
    st = RolloutStorage("rl", n, t, {"o": obs_shape}, (1,), distribution_params=[(2, 1)])
    for tensor in st.tensors.values():
        tensor.copy_(torch.randn(tensor.shape).to(tensor.dtype))
    picks = data.draw(hst.lists(hst.integers(0, t * n - 1), max_size=2 * t * n), label="index")
    index = torch.tensor(picks, dtype=torch.long)
    got = st.gather(index)
    for name, rows in st.flat().items():
        assert torch.equal(got[name], rows[index]), name


@pytest.mark.parametrize(
    ("name", "write"),
    [
        (
            "transposed actions in add_transition",
            lambda st: st.add_transition(
                Transition(
                    observations=torch.zeros(3, 4),
                    actions=torch.zeros(2, 3),
                    rewards=torch.zeros(3),
                    dones=torch.zeros(3),
                    values=torch.zeros(3),
                    actions_log_prob=torch.zeros(3),
                    distribution_params=(torch.zeros(3, 2), torch.zeros(3, 2)),
                )
            ),
        ),
        (
            "observations of another item shape",
            lambda st: st.write_block(0, observations=torch.zeros(2, 3, 2, 2)),
        ),
        (
            "the same, shared",
            lambda st: st.write_block(0, share=True, observations=torch.zeros(2, 3, 2, 2)),
        ),
    ],
)
def test_blocks_of_the_right_size_but_the_wrong_shape_are_refused(name, write):
    st = RolloutStorage("rl", 3, 2, (4,), (2,))
    with pytest.raises(ValueError, match="does not fit rows"):
        write(st)
    assert not st.shared


def test_write_block_measures_every_leaf_of_every_field():
    st = RolloutStorage("rl", 2, 4, {"a": (2,), "b": (3,)}, (1,))
    with pytest.raises(ValueError, match="same leading length"):
        st.write_block(0, observations={"a": torch.ones(4, 2, 2), "b": torch.ones(1, 2, 3)})
    assert st.observations["a"].abs().sum() == 0  # nothing written
    h = torch.ones(4, 1, 2, 5)
    with pytest.raises(ValueError, match="same leading length"):
        st.write_block(0, rewards=torch.ones(4, 2), hidden_states=(None, h[:1]))
    with pytest.raises(ValueError, match="same leading length"):
        st.write_block(0, rewards=torch.ones(4, 2), hidden_states=((h, h[:1]), None))
    assert st.write_block(0, hidden_states=(None, h)) == 4  # a critic-only state is a block


def _filled_gru_storage(share: bool) -> RolloutStorage:
    """3 envs x 4 steps, obs (2,), a GRU actor state (1 layer, 4 units), rewards all 1."""
    st = RolloutStorage("rl", 3, 4, (2,), (1,), distribution_params=((1,), (1,)))
    st.write_block(
        0,
        share=share,
        observations=torch.ones(4, 3, 2),
        rewards=torch.ones(4, 3),
        values=torch.ones(4, 3),
        hidden_states=(torch.ones(4, 1, 3, 4), None),
    )
    return st


# Each write is refused (with this error and message); the fields before the bad one used to
# be written already, and a bad write into a shared tensor replaced it with uninitialised memory.
REFUSED_WRITES: dict[str, tuple[type[Exception], str, Callable[[RolloutStorage], Any]]] = {
    "values of the wrong shape after rewards": (
        ValueError,
        r"^values: a value of shape \(4, 3, 2\) does not fit rows of shape \(4, 3, 1\)$",
        lambda st: st.write_block(0, rewards=torch.zeros(4, 3), values=torch.zeros(4, 3, 2)),
    ),
    "one distribution param of two": (
        ValueError,
        r"^distribution_params: expected 2 tensors, got 1$",
        lambda st: st.write_block(
            0, rewards=torch.zeros(4, 3), distribution_params=(torch.zeros(4, 3, 1),)
        ),
    ),
    "an LSTM pair for a GRU storage": (
        ValueError,
        r"^actor hidden state has 2 components, expected 1$",
        lambda st: st.write_block(
            0, rewards=torch.zeros(4, 3), hidden_states=((torch.zeros(4, 1, 3, 4),) * 2, None)
        ),
    ),
    "a hidden state of one env, broadcast before": (
        ValueError,
        r"^actor hidden state: a value of shape \(4, 1, 1, 4\) does not fit rows of shape "
        r"\(4, 1, 3, 4\)$",
        lambda st: st.write_block(
            0, rewards=torch.zeros(4, 3), hidden_states=(torch.zeros(4, 1, 1, 4), None)
        ),
    ),
    "a hidden state of one unit, broadcast before": (
        ValueError,
        r"^actor hidden state: a value of shape \(1, 3, 1\) does not fit rows of shape "
        r"\(1, 3, 4\)$",
        lambda st: st.add_transition(
            Transition(rewards=torch.zeros(3), hidden_states=(torch.zeros(1, 3, 1), None))
        ),
    ),
    "observations of another size into a shared tensor": (
        ValueError,
        r"^observations: a value of shape \(4, 3, 5\) does not fit rows of shape \(4, 3, 2\)$",
        lambda st: st.write_block(0, rewards=torch.zeros(4, 3), observations=torch.zeros(4, 3, 5)),
    ),
    "a list instead of a tensor": (
        TypeError,
        r"^rewards: blocks must be torch tensors, got list$",
        lambda st: st.write_block(0, rewards=[[0.0] * 3] * 4),
    ),
    "a list in add_transition": (
        TypeError,
        r"^values: expected a torch.Tensor, got list$",
        lambda st: st.add_transition(Transition(rewards=torch.zeros(3), values=[0.0] * 3)),
    ),
}


@pytest.mark.parametrize("share", [False, True], ids=["own", "shared"])
@pytest.mark.parametrize("case", list(REFUSED_WRITES))
def test_a_refused_write_leaves_the_storage_unchanged(case, share):
    st = _filled_gru_storage(share)
    if case.endswith("add_transition") or "unit" in case:
        st.clear()
    before = {name: tensor.clone() for name, tensor in st.tensors.items()}
    hidden = [t.clone() for t in st.saved_hidden_states_actor]
    shared, step = set(st.shared), st.step
    error, message, write = REFUSED_WRITES[case]
    with pytest.raises(error, match=message) as refused:
        write(st)
    assert type(refused.value) is error
    assert st.step == step and set(st.shared) == shared
    for name, tensor in st.tensors.items():
        assert torch.equal(tensor, before[name]), name
        assert getattr(st, name.split("/")[0]) is not None
    assert st.observations is st.tensors["observations"]
    assert all(torch.equal(a, b) for a, b in zip(st.saved_hidden_states_actor, hidden))


@pytest.mark.parametrize("how", ["add_transition", "write_block"])
def test_an_lstm_state_whose_parts_differ_in_size_is_stored(device, how):
    # An LSTM with proj_size has h [L, N, proj] and c [L, N, hidden]: every part was sized
    # like the first, and c was refused.
    t, n = 3, 2
    h, c = torch.randn(t, 1, n, 4, device=device), torch.randn(t, 1, n, 8, device=device)
    st = RolloutStorage("rl", n, t, (3,), (2,), device=device)
    if how == "add_transition":
        for k in range(t):
            st.add_transition(Transition(hidden_states=((h[k], c[k]), None)))
    else:
        st.write_block(0, hidden_states=((h, c), None))
    saved_h, saved_c = st.saved_hidden_states_actor
    assert torch.equal(saved_h, h) and torch.equal(saved_c, c)


def test_last_values_straight_from_the_critic_are_taken(device):
    # A last value needing grad broke the in-place scans ("functions with out=...").
    st = make_rl(device, t=4, n=3)
    st.write_block(
        0, rewards=torch.ones(4, 3, device=device), values=torch.zeros(4, 3, device=device)
    )
    weight = torch.ones(1, device=device, requires_grad=True)
    st.compute_returns(torch.full((3, 1), 0.5, device=device) * weight, gamma=0.9, lam=0.95)
    assert not st.returns.requires_grad and torch.isfinite(st.advantages).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_a_hidden_state_given_as_a_shape_takes_the_storages_dtype(device, dtype):
    # It was float32 whatever the storage's dtype (a state given as a tensor keeps its own).
    st = RolloutStorage(
        "rl", 2, 3, (3,), (1,), device=device, actor_hidden_state=(1, 4), dtype=dtype
    )
    assert st.saved_hidden_states_actor[0].dtype == dtype == st.values.dtype

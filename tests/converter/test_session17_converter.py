"""A reused storage holds nothing stale, CPU spellings are one device, fields never alias.

1. A given ``storage=`` holding fields the conversion would not fill (privileged
   observations, hidden states the keys do not name) is refused, unchanged: the generators
   would hand out an earlier rollout's contents as this one's (contract §10).
2. ``device="cpu:0"`` names the CPU a ``"cpu"`` storage lives on, and the reverse.
3. ``write_block(share=True)`` never lets two fields take one memory: not one block given for
   two fields, nor a block (or field) another field took before (contract §9.2).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA = 0.9


def zeros_fn(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs))


def chunk(h: float = 1.0, **extras: object) -> SingleAgentEpisode:
    outputs = {
        "vf_preds": [0.0, 0.0],
        "action_logp": [0.0, 0.0],
        "h": [np.full((1, 4), h, np.float32)] * 2,
        **extras,
    }
    return SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs=outputs,
    )


def convert(storage: RolloutStorage | None = None, **kw: object) -> object:
    return episodes_to_rollout([chunk()], gamma=GAMMA, value_fn=zeros_fn, storage=storage, **kw)


def snapshot(st: RolloutStorage) -> dict[str, torch.Tensor]:
    saved = {name: t.clone() for name, t in st.tensors.items()}
    for which in ("actor", "critic"):
        for i, t in enumerate(getattr(st, f"saved_hidden_states_{which}") or ()):
            saved[f"{which}/{i}"] = t.clone()
    return saved


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------- 1. fields a reused storage would keep stale
def _after_actor_hidden() -> RolloutStorage:
    """The storage of a conversion that recorded the actor's hidden state (h = 7)."""
    return episodes_to_rollout(
        [chunk(7.0)], gamma=GAMMA, value_fn=zeros_fn, keys=ColumnKeys(actor_hidden=("h",))
    ).storage


def _after_hidden_written() -> RolloutStorage:
    """A storage the converter took (and checked) before, given hidden states by a write since."""
    st = convert().storage
    assert convert(st).storage is st  # checked and accepted: that layout is remembered
    st.write_block(0, hidden_states=(torch.full((2, 1, 1, 4), 7.0), None))
    return st


def _int_actions(**kw: object) -> RolloutStorage:
    return RolloutStorage("rl", 1, 2, ((2,), torch.float32), (1,), actions_dtype=torch.int64,
                          distribution_params=(), **kw)  # fmt: skip


STALE = [  # (case, storage, refused field)
    ("actor hidden of an earlier rollout", _after_actor_hidden, "actor hidden states"),
    ("hidden states written after a check", _after_hidden_written, "actor hidden states"),
    ("critic hidden spec", lambda: _int_actions(critic_hidden_state=(1, 4)), "critic hidden"),
    (
        "privileged observations",
        lambda: _int_actions(privileged_observations=(3,)),
        "privileged_observations",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("make", "field"), [c[1:] for c in STALE], ids=[c[0] for c in STALE])
def test_storage_with_fields_the_chunks_leave_is_refused_unchanged(make, field):
    st = make()
    for t in st.tensors.values():
        t.fill_(99)  # "an earlier rollout's" contents
    before, step = snapshot(st), st.step
    with pytest.raises(ValueError, match=f"storage holds {field}.*do not fill"):
        convert(st)
    assert same(snapshot(st), before) and st.step == step


def test_storage_whose_hidden_states_the_keys_name_is_still_reused():
    keys = ColumnKeys(actor_hidden=("h",))
    st = _after_actor_hidden()
    rollout = episodes_to_rollout([chunk(1.0)], gamma=GAMMA, value_fn=zeros_fn, keys=keys,
                                  storage=st)  # fmt: skip
    assert rollout.storage is st
    assert st.saved_hidden_states_actor[0].flatten().tolist() == [1.0] * 8
    hand_built = _int_actions(actor_hidden_state=(1, 4))
    assert convert(hand_built, keys=keys).storage is hand_built


# ------------------------------------------------------------- 2. CPU devices by any spelling
CPU = [("cpu", "cpu:0"), ("cpu:0", "cpu"), ("cpu:0", "cpu:0"), ("cpu", "cpu")]


@pytest.mark.parametrize(("held", "asked"), CPU, ids=[f"{h} storage, {a}" for h, a in CPU])
def test_cpu_storage_is_filled_whatever_the_cpu_spelling(held, asked):
    st = _int_actions(device=held)
    rollout = convert(st, device=asked)
    assert rollout.storage is st and st.rewards.flatten().tolist() == [1.0, 1.0]


def test_another_device_than_the_storages_is_still_refused():
    st = _int_actions(device="cpu:0")
    with pytest.raises(ValueError, match="differs from the given storage's device"):
        convert(st, device="meta")


# ------------------------------------------------------------- 3. no two fields on one memory
T, N = 3, 2


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _one_block_two_fields(st):
    x = torch.ones(T, N, 1)
    st.write_block(0, share=True, values=x, actions_log_prob=x)
    return x, ("values", "actions_log_prob")


def _rewards_and_values(st):
    x = torch.ones(T, N, 1)
    st.write_block(0, share=True, rewards=x, values=x)
    return x, ("rewards", "values")


def _a_shared_field_given_again(st):
    x = torch.ones(T, N, 1)
    st.write_block(0, share=True, rewards=x)
    st.write_block(0, share=True, values=st.rewards)
    return x, ("rewards", "values")


def _a_taken_block_given_again(st):
    x = torch.ones(T, N)
    st.write_block(0, share=True, rewards=x)
    st.write_block(0, share=True, values=x)
    return x, ("rewards", "values")


def _both_distribution_parameters(st):
    x = torch.ones(T, N, 1)
    st.write_block(0, share=True, distribution_params=(x, x))
    return x, ("distribution_params/0", "distribution_params/1")


ALIASES = [
    ("values=x, actions_log_prob=x", _one_block_two_fields),
    ("rewards=x, values=x", _rewards_and_values),
    ("values=st.rewards once rewards is shared", _a_shared_field_given_again),
    ("values=x once rewards took x", _a_taken_block_given_again),
    ("distribution_params=(x, x)", _both_distribution_parameters),
]


@pytest.mark.parametrize("write", [c[1] for c in ALIASES], ids=[c[0] for c in ALIASES])
def test_share_never_lets_two_fields_take_one_memory(write):
    st = RolloutStorage("rl", N, T, (2,), (1,))
    x, (first, second) = write(st)
    a, b = st.tensors[first], st.tensors[second]
    assert not same_memory(a, b) and st.shared == {first}  # the first takes it, as documented
    assert same_memory(a, x) and torch.equal(b.view(T, N), torch.ones(T, N))
    x.fill_(5.0)  # a write from outside changes the field that took it, not the other
    assert torch.equal(b.view(T, N), torch.ones(T, N))


def test_share_takes_disjoint_parts_of_one_allocation_and_retakes_a_fields_own():
    st = RolloutStorage("rl", N, T, (2,), (1,))
    big = torch.zeros(2, T, N)
    st.write_block(0, share=True, rewards=big[0], values=big[1])  # no bytes in common
    assert st.shared == {"rewards", "values"}
    st.write_block(0, share=True, rewards=big[0])  # the same block again: kept
    assert st.shared == {"rewards", "values"} and same_memory(st.rewards, big)


def test_converter_never_puts_one_extra_output_in_two_fields():
    keys = ColumnKeys(values="x", log_probs="x")
    ep = chunk(x=[np.float32(0.5), np.float32(0.25)])
    st = episodes_to_rollout([ep], gamma=GAMMA, value_fn=zeros_fn, keys=keys).storage
    assert not same_memory(st.values, st.actions_log_prob)
    assert st.values.flatten().tolist() == st.actions_log_prob.flatten().tolist() == [0.5, 0.25]


def _policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    return (obs[:, 2] > 0).astype(np.int64), {"x": obs[:, 1].astype(np.float32)}


FIELDS = {"values", "actions_log_prob"}


def test_fast_path_never_puts_one_extra_output_in_two_fields():
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    chunks = EnvRunner(env, _policy, seed=0, window="vector_steps").sample(8)
    keys = ColumnKeys(values="x", log_probs="x")
    st = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zeros_fn, keys=keys).storage
    assert not same_memory(st.values, st.actions_log_prob) and len(st.shared & FIELDS) == 1
    assert torch.equal(st.values, st.actions_log_prob)
    st.values.add_(1.0)  # a write into one field leaves the other
    assert not torch.equal(st.values, st.actions_log_prob)


@pytest.mark.parametrize("order", ["rewards-first", "values-first"])
def test_share_takes_blocks_that_rotate_between_fields_in_any_keyword_order(order):
    # Double buffering: a block one field held is handed to another field in the write that
    # replaces it; no two fields end up on one memory, so both are taken whatever the order.
    T, N = 4, 2
    a, b, c = torch.ones(T, N), torch.full((T, N), 2.0), torch.full((T, N), 3.0)
    st = RolloutStorage("rl", N, T, [3], [1], distribution_params=())
    st.write_block(0, share=True, rewards=a, values=b)
    st.clear()
    kw = {"rewards": b, "values": c}
    if order == "values-first":
        kw = {"values": c, "rewards": b}
    st.write_block(0, share=True, **kw)
    assert st.shared == {"rewards", "values"}
    assert st.rewards.data_ptr() == b.data_ptr() and st.values.data_ptr() == c.data_ptr()

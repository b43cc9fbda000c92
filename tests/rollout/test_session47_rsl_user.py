"""An rsl_rl user's findings on the rollout storage (session 47).

1. A storage written part-way (``0 < step < T``, no ``valid``) is refused by
   ``compute_returns`` and every generator: its other steps would be read as transitions.
2. A numpy hidden state given to a fresh storage is named as a write names it.
3. ``distribution_params`` of another count or shape than the storage's say how to make it.
4. What the docs say about reused storages, ``time_outs`` and recurrent batches across epochs.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch

from episodes.rollout import RolloutStorage, Transition

N, T, L, H = 2, 4, 1, 3


def _step(storage: RolloutStorage, k: int = 0, **extra: Any) -> Transition:
    fields: dict[str, Any] = dict(
        observations=torch.full((N, 2), float(k)),
        actions=torch.ones(N, 1),
        rewards=torch.ones(N),
        dones=torch.zeros(N),
    )
    if storage.training_type == "rl":
        fields.update(
            values=torch.ones(N, 1),
            actions_log_prob=torch.zeros(N),
            distribution_params=(torch.zeros(N, 1), torch.ones(N, 1)),
        )
    else:
        fields["privileged_actions"] = torch.ones(N, 1)
    fields.update(extra)
    return Transition(**fields)


def _storage(training_type: str = "rl", written: int = 2, **kwargs: Any) -> RolloutStorage:
    st = RolloutStorage(training_type, N, T, (2,), (1,), **kwargs)
    for k in range(written):
        st.add_transition(_step(st, k))
    return st


def _snapshot(st: RolloutStorage) -> dict[str, Any]:
    state = {name: t.clone() for name, t in st.tensors.items()}
    for which in ("actor", "critic"):
        saved = getattr(st, f"saved_hidden_states_{which}")
        state[which] = None if saved is None else [t.clone() for t in saved]
    state["step"], state["valid"], state["refills"] = st.step, st.valid, st._refills
    return state


def _assert_unchanged(st: RolloutStorage, before: dict[str, Any]) -> None:
    after = _snapshot(st)
    assert after.keys() == before.keys()
    for key, old in before.items():
        new = after[key]
        if isinstance(old, torch.Tensor):
            assert torch.equal(new, old), key
        elif isinstance(old, list):
            assert isinstance(new, list) and all(map(torch.equal, new, old)), key
        else:
            assert new is old or new == old, key


# ------------------------------------------------------------------ 1. part-way written
READERS: dict[str, tuple[str, Callable[[RolloutStorage], Any]]] = {
    "compute_returns": ("rl", lambda st: st.compute_returns(torch.zeros(N), 0.99, 0.95)),
    "mini_batch_generator": ("rl", lambda st: list(st.mini_batch_generator(2, 1))),
    "recurrent_mini_batch_generator": (
        "rl",
        lambda st: list(st.recurrent_mini_batch_generator(1, 1)),
    ),
    "generator": ("distillation", lambda st: list(st.generator())),
}


@pytest.mark.parametrize("written", [1, 2, T - 1])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_storage_written_part_way_is_refused(reader: str, written: int) -> None:
    """At step 2 of T=4, GAE and the batches ran over the two unwritten (zero) steps."""
    training_type, read = READERS[reader]
    st = _storage(training_type, written)
    before = _snapshot(st)
    message = rf"{reader}: the storage holds {written} of its T={T} steps"
    with pytest.raises(ValueError, match=message) as err:
        read(st)
    assert "clear()" in str(err.value) and "storage.valid" in str(err.value)
    _assert_unchanged(st, before)


def _directly(st: RolloutStorage) -> None:
    """Tensors filled in place, ``step`` left at 0: users (and tests) fill them so."""
    st.rewards.fill_(1.0)


def _clear_after_writing(st: RolloutStorage) -> None:
    st.add_transition(_step(st))
    st.clear()


def _full(st: RolloutStorage) -> None:
    for k in range(T):
        st.add_transition(_step(st, k))


def _block(st: RolloutStorage) -> None:
    st.write_block(0, rewards=torch.ones(T, N), dones=torch.zeros(T, N))


def _blocks_in_two(st: RolloutStorage) -> None:
    st.write_block(0, rewards=torch.ones(2, N))
    st.write_block(2, rewards=torch.ones(T - 2, N))


def _part_way_with_valid(st: RolloutStorage) -> None:
    st.add_transition(_step(st))
    st.add_transition(_step(st, 1))
    st.valid = torch.arange(T).view(T, 1).expand(T, N) < st.step


FILLS = {
    "nothing written (step 0)": _directly,
    "cleared after a write": _clear_after_writing,
    "every step added": _full,
    "one block of T steps": _block,
    "blocks covering T": _blocks_in_two,
    "part-way with valid": _part_way_with_valid,
}


@pytest.mark.parametrize("fill", sorted(FILLS))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_storages_filled_otherwise_are_read(reader: str, fill: str) -> None:
    training_type, read = READERS[reader]
    st = RolloutStorage(training_type, N, T, (2,), (1,))
    FILLS[fill](st)
    read(st)  # no error


def test_the_arguments_own_refusals_come_first() -> None:
    """A bad ``last_values`` is named as before, on a storage written part-way too."""
    st = _storage()
    before = _snapshot(st)
    with pytest.raises(TypeError, match="last_values: expected a torch.Tensor"):
        st.compute_returns([0.0] * N, 0.99, 0.95)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gamma"):
        st.compute_returns(torch.zeros(N), 1.5, 0.95)
    with pytest.raises(ValueError, match="num_mini_batches"):
        st.mini_batch_generator(0, 1)
    with pytest.raises(ValueError, match="num_mini_batches"):
        st.recurrent_mini_batch_generator(N + 1, 1)
    _assert_unchanged(st, before)


def test_filling_the_rest_makes_it_readable() -> None:
    st = _storage()
    with pytest.raises(ValueError, match="holds 2 of its T=4"):
        st.compute_returns(torch.zeros(N), 0.99, 0.95)
    for k in range(2, T):
        st.add_transition(_step(st, k))
    st.compute_returns(torch.zeros(N), 1.0, 1.0, normalize_advantage=False)
    assert st.returns[:, 0, 0].tolist() == [4.0, 3.0, 2.0, 1.0]


# ------------------------------------------------------------------ 2. numpy hidden states
def _numpy_state() -> np.ndarray:
    return np.zeros((L, N, H), np.float32)


HIDDEN = {
    "actor GRU": ((_numpy_state, None), "actor"),
    "critic GRU": ((None, _numpy_state), "critic"),
    "actor LSTM, c numpy": (((lambda: torch.zeros(L, N, H), _numpy_state), None), "actor"),
    "critic LSTM, both numpy": ((None, (_numpy_state, _numpy_state)), "critic"),
}


def _map(fn: Callable[[Any], Any], part: Any) -> Any:
    """``fn`` of a state's components: None, one, or a tuple of them."""
    if part is None:
        return None
    return tuple(map(fn, part)) if isinstance(part, tuple) else fn(part)


def _made(part: Any) -> Any:
    """A state of the case: its factories called."""
    return _map(lambda make: make(), part)


@pytest.mark.parametrize("case", sorted(HIDDEN))
@pytest.mark.parametrize("filled", [False, True], ids=["fresh", "states held"])
def test_a_numpy_hidden_state_is_named_as_a_write_names_it(case: str, filled: bool) -> None:
    """On a fresh storage it read "actor_hidden_state: cannot interpret hidden-state spec
    array([[[0., ...]]])": a constructor argument never passed, and the whole array."""
    (actor, critic), which = HIDDEN[case]
    st = RolloutStorage("rl", N, 2, (2,), (1,))
    if filled:  # a first write of tensors of the same shapes allocates the saved states
        as_tensors = partial(_map, torch.as_tensor)
        st.add_transition(
            _step(st, hidden_states=(as_tensors(_made(actor)), as_tensors(_made(critic))))
        )
    before = _snapshot(st)
    state = (_made(actor), _made(critic))
    with pytest.raises(TypeError) as err:
        st.add_transition(_step(st, hidden_states=state))
    assert str(err.value) == f"{which} hidden state: expected a torch.Tensor, got ndarray"
    _assert_unchanged(st, before)


def test_a_numpy_spec_given_to_the_constructor_is_not_printed() -> None:
    with pytest.raises(TypeError, match="actor_hidden_state") as err:
        RolloutStorage("rl", N, T, (2,), (1,), actor_hidden_state=np.zeros((L, N, H)))
    assert "array(" not in str(err.value) and "a numpy array of shape (2, 3)" in str(err.value)


def test_a_first_tensor_state_is_still_allocated_from_the_write() -> None:
    st = RolloutStorage("rl", N, 2, (2,), (1,))
    h = torch.ones(L, N, H, dtype=torch.float64)
    st.add_transition(_step(st, hidden_states=(h, (h, h))))
    assert [t.shape for t in st.saved_hidden_states_critic] == [(2, L, N, H)] * 2
    assert st.saved_hidden_states_actor[0].dtype == torch.float64  # the state's own
    assert st.saved_hidden_states_actor[0][0].eq(1.0).all()


# ------------------------------------------------------------------ 3. distribution params
DIST_CASES = {
    # (params of one step, the distribution_params the message names)
    "categorical logits": ((torch.zeros(N, 5),), "[(5,)]"),
    "two (N, 5) params": ((torch.zeros(N, 5), torch.zeros(N, 5)), "[(5,), (5,)]"),
    "three params": ((torch.zeros(N, 1),) * 3, "[(1,), (1,), (1,)]"),
    "a list of one": ([torch.zeros(N, 2, 3)], "[(2, 3)]"),
}


@pytest.mark.parametrize("how", ["add_transition", "write_block"])
@pytest.mark.parametrize("case", sorted(DIST_CASES))
def test_distribution_params_the_storage_cannot_take_name_the_remedy(case: str, how: str) -> None:
    params, named = DIST_CASES[case]
    st = RolloutStorage("rl", N, T, (2,), (1,))
    before = _snapshot(st)
    if how == "add_transition":
        write = lambda: st.add_transition(_step(st, distribution_params=params))  # noqa: E731
    else:
        blocks = type(params)(p.expand(T, *p.shape) for p in params)
        write = lambda: st.write_block(0, distribution_params=blocks)  # noqa: E731
    with pytest.raises(ValueError) as err:
        write()
    message = str(err.value)
    assert f"RolloutStorage(..., distribution_params={named})" in message
    assert "(actions_shape, actions_shape)" in message
    _assert_unchanged(st, before)
    # The remedy works: a storage made so takes them.
    shapes = [tuple(p.shape[1:]) for p in params]
    fits = RolloutStorage("rl", N, T, (2,), (1,), distribution_params=shapes)
    fits.add_transition(_step(fits, distribution_params=tuple(params)))
    assert fits.step == 1


NO_REMEDY = {
    # refused for something else than the storage's shapes: the message as it was
    "complex": ((torch.zeros(N, 1, dtype=torch.complex64),) * 2, "cannot hold"),
    "other N": ((torch.zeros(N + 1, 1),) * 2, "does not fit rows"),
    "no tensors": ((1.0, 2.0), "expected a torch.Tensor"),
    "meta": ((torch.zeros(N, 1, device="meta"),) * 2, "distribution_params/0"),
    # numpy arrays of other shapes: a storage made as the remedy said would refuse them too
    "numpy logits": ((np.zeros((N, 5), np.float32),), "expected 2 tensors, got 1"),
}


@pytest.mark.parametrize("case", sorted(NO_REMEDY))
def test_other_refusals_of_distribution_params_keep_their_words(case: str) -> None:
    params, words = NO_REMEDY[case]
    st = RolloutStorage("rl", N, T, (2,), (1,))
    with pytest.raises((TypeError, ValueError), match=words) as err:
        st.add_transition(_step(st, distribution_params=params))
    assert "RolloutStorage(..., distribution_params=" not in str(err.value)


@pytest.mark.parametrize("pickled", [False, True])
def test_a_storage_given_its_shapes_is_refused_in_the_words_it_was(pickled: bool) -> None:
    """The remedy speaks of the default: a storage given its shapes keeps the plain words."""
    st = RolloutStorage("rl", N, T, (2,), (1,), distribution_params=[(1,), (1,)])
    if pickled:
        st = pickle.loads(pickle.dumps(st))
    with pytest.raises(ValueError) as err:
        st.add_transition(_step(st, distribution_params=(torch.zeros(N, 5),)))
    assert str(err.value) == "distribution_params: expected 2 tensors, got 1"


def test_a_pickled_default_storage_still_names_the_remedy() -> None:
    st = pickle.loads(pickle.dumps(RolloutStorage("rl", N, T, (2,), (1,))))
    with pytest.raises(ValueError, match=r"distribution_params=\[\(5,\)\]"):
        st.add_transition(_step(st, distribution_params=(torch.zeros(N, 5),)))


def test_fitting_distribution_params_are_stored() -> None:
    """``[N]`` params serve ``[N, 1]`` rows, as before."""
    st = RolloutStorage("rl", N, T, (2,), (1,))
    st.add_transition(_step(st, distribution_params=(torch.ones(N), torch.full((N,), 2.0))))
    assert st.distribution_params[1][0, :, 0].tolist() == [2.0, 2.0]


# ------------------------------------------------------------------ 4. documented behaviour
def test_time_outs_are_not_stored_nor_bootstrapped() -> None:
    """docs/api.md: ``time_outs`` is accepted and ignored; bootstrap before the write."""
    st = RolloutStorage("rl", N, 1, (2,), (1,))
    st.add_transition(
        _step(st, values=torch.full((N, 1), 10.0), dones=torch.ones(N), time_outs=torch.ones(N))
    )
    assert st.rewards[0, :, 0].tolist() == [1.0, 1.0]


def test_a_refilled_storage_hands_out_the_last_computed_returns() -> None:
    """docs/api.md: refilling does not recompute (or clear) returns and advantages."""
    st = RolloutStorage("rl", N, 2, (2,), (1,))
    for k in range(2):
        st.add_transition(_step(st, k))
    st.compute_returns(torch.zeros(N), 1.0, 1.0, normalize_advantage=False)
    old = st.returns.clone()
    st.clear()
    for k in range(2):
        st.add_transition(_step(st, k, rewards=torch.full((N,), 5.0)))
    assert torch.equal(st.returns, old)
    batch = next(st.mini_batch_generator(1, 1))
    assert sorted(batch.returns.flatten().tolist()) == sorted(old.flatten().tolist())


def test_recurrent_batches_hand_out_the_same_hidden_states_every_epoch() -> None:
    """docs/api.md: an in-place change of a batch's hidden state shows in the next epoch."""
    st = RolloutStorage("rl", N, 2, (2,), (1,))
    for k in range(2):
        h = torch.full((L, N, H), float(k + 1))
        st.add_transition(_step(st, k, hidden_states=(h, (h, h))))
    first, second = st.recurrent_mini_batch_generator(1, num_epochs=2)
    assert first.hidden_states[0] is second.hidden_states[0]
    first.hidden_states[0].zero_()
    assert second.hidden_states[0].eq(0).all()
    assert st.saved_hidden_states_actor[0].ne(0).all()  # the storage's own are not written


def _distillation_chunk() -> Any:
    from episodes import SingleAgentEpisode

    return SingleAgentEpisode(
        observations=[np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([2.0, 3.0])],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"teacher": [1, 0]},
    )


def test_distillation_conversion_requires_a_gamma_it_does_not_use() -> None:
    """docs/api.md (``storage.generator()``): required, checked, and changes nothing."""
    from episodes.converter import ColumnKeys, episodes_to_rollout

    keys = ColumnKeys(privileged_actions="teacher")
    convert = partial(episodes_to_rollout, training_type="distillation", keys=keys)
    with pytest.raises(TypeError, match="gamma"):
        convert([_distillation_chunk()])
    with pytest.raises(ValueError, match="gamma"):
        convert([_distillation_chunk()], gamma=1.5)
    one, zero = (convert([_distillation_chunk()], gamma=g).storage for g in (1.0, 0.0))
    assert one.tensors.keys() == zero.tensors.keys()
    assert all(torch.equal(one.tensors[k], zero.tensors[k]) for k in one.tensors)
    assert one.rewards[:, 0, 0].tolist() == [1.0, 2.0]  # the truncation is not bootstrapped

"""A recurrent step takes ``add_transition``'s fast path, and writes or refuses as ``_write``.

Once a storage holds its hidden-state tensors, a step whose hidden states are plain tensors
of their rows' shapes (a GRU's ``h``, an LSTM's ``(h, c)``; the actor's, the critic's or
both), none in the storage's memory, is copied by ``episodes.rollout.fast_rows`` like the
other fields. The general path is forced by calling ``_write`` as ``add_transition`` did
before: over random sequences of valid and invalid recurrent steps (dtypes the storage casts
or refuses, wrong shapes and component counts, sources that require grad, inference tensors,
transposed ones, numpy-backed ones, sources lying in the storage's own memory or sharing
memory with another field of the step), both paths must leave bit-identical storages, raise
the same exceptions, leave a refused storage unchanged, and hand out the same recurrent
mini-batches afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

from episodes.rollout import RolloutStorage, fast_rows
from episodes.rollout.fast_rows import _plain_pairs
from tests.rollout._grad_modes import run_in_mode

Transition = RolloutStorage.Transition
OBS = 6  # >= layers * hidden size: a row of observations can be viewed as a hidden state


def _general(storage: RolloutStorage, transition: Any) -> None:
    """``add_transition`` as it was before the fast path: every step through ``_write``."""
    if storage.step >= storage.num_transitions_per_env:
        raise OverflowError(
            f"rollout storage is full ({storage.num_transitions_per_env} steps); call clear() first"
        )
    storage._write(storage.step, storage._fields_of(transition))
    storage.step += 1


def _bytes(t: torch.Tensor) -> bytes:
    # Read from a copy: .numpy() of the storage's own memory would mark it not resizable,
    # and so steer later steps' aliasing checks (torch's own memory is resizable).
    return bytes(t.detach().cpu().clone().reshape(-1).view(torch.uint8).numpy())


def _tensor_state(t: torch.Tensor) -> tuple:
    grad = (t.requires_grad, t.grad_fn is None)
    return (t.dtype, tuple(t.shape), *grad, t.is_inference(), _bytes(t))


def _state(storage: RolloutStorage, before: dict[str, Any]) -> Any:
    """Everything a write may change, comparable across two storages built alike."""
    tensors = {n: (*_tensor_state(t), t is before.get(n)) for n, t in storage.tensors.items()}
    hidden = []
    for which in ("actor", "critic"):
        saved = getattr(storage, f"saved_hidden_states_{which}")
        hidden.append(
            None
            if saved is None
            else (
                type(saved).__name__,
                saved is before.get(which),
                [(*_tensor_state(h), h is k) for h, k in zip(saved, before.get(which) or saved)],
            )
        )
    return storage.step, storage._refills, sorted(storage.shared), tensors, hidden


def _before(storage: RolloutStorage) -> dict[str, Any]:
    before: dict[str, Any] = dict(storage.tensors)
    before["actor"] = storage.saved_hidden_states_actor
    before["critic"] = storage.saved_hidden_states_critic
    return before


def _outcome(storage: RolloutStorage, transition: Any, write: Callable, mode: str) -> Any:
    before = _before(storage)
    snapshot = _state(storage, before)
    error = None
    try:
        run_in_mode(mode, write, storage, transition)
    except Exception as e:  # noqa: BLE001 - compared by type and message
        error = (type(e), str(e))
    after = _state(storage, before)
    if error is not None:
        assert after == snapshot, f"a refused step changed the storage: {error}"
    return error, after


# ------------------------------------------------------------------ storages and steps

_DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i8": torch.int8,
    "u8": torch.uint8,
    "bool": torch.bool,
    "c64": torch.complex64,
}


def _storage(config: dict[str, Any]) -> RolloutStorage:
    layers, size, n = config["layers"], config["size"], config["n"]

    def spec(kind: str) -> Any:
        if kind == "none" or not config["declared"]:
            return None
        shape = (layers, size)
        return (shape, shape) if kind == "lstm" else shape

    return RolloutStorage(
        "rl",
        n,
        config["t"],
        (OBS,),
        (2,),
        actor_hidden_state=spec(config["actor"]),
        critic_hidden_state=spec(config["critic"]),
        dtype=config["dtype"],
    )


def _values(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    if dtype == torch.bool:
        return x > 0
    if not (dtype.is_floating_point or dtype.is_complex):
        x = x.round().abs()
    return x.to(dtype)


class _Sub(torch.Tensor):
    pass


def _component(
    kind: str, storage: RolloutStorage, obs: torch.Tensor, g: torch.Generator, k: int
) -> Any:
    """One hidden-state component made as ``kind`` says, for ``storage``'s hidden rows."""
    layers, n, size = storage._test_layers, storage.num_envs, storage._test_size  # type: ignore[attr-defined]
    shape = (layers, n, size)
    dtype = storage.rewards.dtype
    if kind in _DTYPES:
        return _values(shape, _DTYPES[kind], g)
    if kind == "grad":
        return _values(shape, dtype, g).requires_grad_()
    if kind == "grad_graph":
        return _values(shape, dtype, g).requires_grad_() * 2
    if kind == "inference":
        with torch.inference_mode():
            return _values(shape, dtype, g)
    if kind == "transposed":
        return _values((size, n, layers), dtype, g).permute(2, 1, 0)
    if kind == "numpy":
        return torch.from_numpy(_values(shape, dtype, g).numpy().copy())
    if kind == "wider":
        return _values((layers, n + 1, size), dtype, g)
    if kind == "trailing":  # [L, N] for [L, N, 1] rows: taken by _write when size is 1
        return _values((layers, n) if size == 1 else (layers, n, size, 1), dtype, g)
    if kind == "extra_one":
        return _values((*shape, 1), dtype, g)
    if kind == "flat":
        return _values((layers * n * size,), dtype, g)
    if kind == "neg":
        return torch._neg_view(_values(shape, dtype, g))
    if kind == "param":
        return torch.nn.Parameter(_values(shape, dtype, g))
    if kind == "subclass":
        return _values(shape, dtype, g).as_subclass(_Sub)
    if kind == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if kind == "list":
        return _values(shape, dtype, g).tolist()
    if kind == "step_obs":  # the memory of this step's observations
        return obs.reshape(-1)[: layers * n * size].view(shape)
    if kind.startswith("own"):  # the storage's memory: its observations or saved states
        saved = storage.saved_hidden_states_actor or storage.saved_hidden_states_critic
        at = (storage.step + k) % storage.num_transitions_per_env  # k = 0: the row written
        if kind in ("own_obs", "own_obs_numpy") or saved is None:
            row = storage.observations[at].reshape(-1)[: layers * n * size].view(shape)
            return torch.from_numpy(row.numpy()) if kind == "own_obs_numpy" else row
        row = saved[k % len(saved)][at]
        if row.shape != shape:
            return _values(shape, dtype, g)
        if kind == "own_numpy" and row.dtype != torch.bfloat16:
            return torch.from_numpy(row.numpy())
        return row.detach() if kind == "own_detach" else row
    raise AssertionError(kind)


_GOOD = ["f32", "f32", "f32", "f64"]
_TRICKY = ["grad", "grad_graph", "inference", "transposed", "numpy", "neg", "trailing"]
_TRICKY += ["step_obs", "own_obs", "own_obs_numpy", "own_saved", "own_detach", "own_numpy"]
_KINDS = list(_DTYPES) + ["wider", "extra_one", "flat", "param", "subclass", "meta", "list"]
_kinds = st.one_of(st.sampled_from(_GOOD), st.sampled_from(_TRICKY), st.sampled_from(_KINDS))


def _state_value(recipe: tuple, storage: RolloutStorage, obs: Any, g: Any, last: list) -> Any:
    """A state (GRU or LSTM form, or a wrong one) from ``(form, kinds)``."""
    form, kinds, k = recipe
    comps = [_component(kind, storage, obs, g, k) for kind in kinds]
    if form == "same" and last:  # the other state's very first component, shared
        comps[0] = last[0]
    last[:] = comps
    if form == "none":
        return None
    if form == "tensor":
        return comps[0]
    if form == "one":
        return (comps[0],)
    if form == "list":
        return list(comps)
    return tuple(comps)  # "tuple", "same"


_state_recipes = st.tuples(
    st.sampled_from(["tuple"] * 4 + ["tensor"] * 4 + ["none", "one", "list", "same"]),
    st.lists(_kinds, min_size=1, max_size=3),
    st.integers(0, 3),
)


def _hidden_value(recipe: tuple, storage: RolloutStorage, obs: Any, g: Any) -> Any:
    pair, actor, critic = recipe
    last: list = []
    # Each state in its storage's form unless the recipe says otherwise.
    a = _state_value(_fit(actor, storage, "actor"), storage, obs, g, last)
    c = _state_value(_fit(critic, storage, "critic"), storage, obs, g, last)
    if pair == "list":
        return [a, c]
    if pair == "triple":
        return (a, c, None)
    if pair == "none":
        return None
    return (a, c)


def _fit(recipe: tuple, storage: RolloutStorage, which: str) -> tuple:
    """The recipe with its form made right for the storage's kind of state, most of the time."""
    form, kinds, k = recipe
    kind = storage._test_kinds[which]  # type: ignore[attr-defined]
    if kind == "none":
        return ("none", kinds, k) if k % 4 else recipe
    count = 2 if kind == "lstm" else 1
    if form in ("tuple", "tensor") or (form == "same" and k % 2):
        kinds = (kinds * 2)[:count]
        form = "tuple" if kind == "lstm" else form
    return form, kinds, k


_step_recipes = st.tuples(
    st.sampled_from(["tuple"] * 8 + ["list", "triple", "none"]),
    _state_recipes,
    _state_recipes,
)

_configs = st.fixed_dictionaries(
    {
        "n": st.integers(1, 8),
        "t": st.integers(1, 5),
        "layers": st.integers(1, 2),
        "size": st.integers(1, 3),
        "actor": st.sampled_from(["gru", "lstm"]),
        "critic": st.sampled_from(["none", "gru", "lstm"]),
        "declared": st.booleans(),
        "dtype": st.sampled_from([torch.float32, torch.float64]),
    }
)

# Between steps: a plain step, clear, the saved states replaced, moved or shared, a bad field.
_ops = st.sampled_from(
    ["step"] * 8 + ["clear", "reassign", "set_", "share_actor", "bad_rewards", "own", "take"]
)


def _transition(storage: RolloutStorage, recipe: tuple, g: torch.Generator) -> Any:
    n = storage.num_envs
    obs = torch.randn(n, OBS, generator=g)
    return Transition(
        observations=obs,
        actions=torch.randn(n, 2, generator=g),
        rewards=torch.randn(n, generator=g),
        dones=torch.rand(n, generator=g) < 0.3,
        values=torch.randn(n, 1, generator=g),
        actions_log_prob=torch.randn(n, generator=g),
        distribution_params=(torch.randn(n, 2, generator=g), torch.rand(n, 2, generator=g)),
        hidden_states=_hidden_value(recipe, storage, obs, g),
    )


def _apply(storage: RolloutStorage, op: str, recipe: tuple, g: torch.Generator) -> Any:
    """``op`` as a step (returned, to write) or a change made to the storage here."""
    if op == "step":
        return _transition(storage, recipe, g)
    if op == "bad_rewards":
        transition = _transition(storage, recipe, g)
        transition.rewards = [0.0] * storage.num_envs
        return transition
    saved = storage.saved_hidden_states_actor
    if op == "clear":
        storage.clear()
    elif op == "reassign" and saved is not None:
        storage.saved_hidden_states_actor = [h.clone() for h in saved]
    elif op == "set_" and saved is not None:
        saved[0].set_(saved[0].clone())
    elif op == "share_actor" and saved is not None:
        storage.saved_hidden_states_critic = saved  # one list for both states
    elif op == "take":
        storage.write_block(0, share=True, values=torch.randn(storage.values.shape, generator=g))
    elif op == "own":
        storage.own()
    return None


def _batches(storage: RolloutStorage) -> Any:
    """The recurrent mini-batches (every field, as bytes) after ``compute_returns``."""
    out: list[Any] = []

    def flat(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return _tensor_state(x)
        if isinstance(x, (tuple, list)):
            return [flat(v) for v in x]
        if isinstance(x, dict):
            return {k: flat(v) for k, v in x.items()}
        return x

    try:
        storage.compute_returns(torch.ones(storage.num_envs), 0.9, 0.8)
        for batch in storage.recurrent_mini_batch_generator(1, num_epochs=1):
            out.append({k: flat(v) for k, v in vars(batch).items()})
    except Exception as e:  # noqa: BLE001 - compared by type and message
        out.append((type(e), str(e)))
    return out


def _run(config: dict, plan: list, write: Callable, seed: int) -> tuple[list, list, Any]:
    g = torch.Generator().manual_seed(seed)
    storage = _storage(config)
    storage._test_layers, storage._test_size = config["layers"], config["size"]  # type: ignore[attr-defined]
    storage._test_kinds = {"actor": config["actor"], "critic": config["critic"]}  # type: ignore[attr-defined]
    outcomes, taken = [], []
    for op, recipe, mode in plan:
        transition = _apply(storage, op, recipe, g)
        if transition is None:
            outcomes.append(_state(storage, _before(storage)))
            continue
        if write is _general:  # asked of the general run only: the fast run makes its views
            fields = storage._fields_of(transition)  # as it writes, inside inference mode too
            step = storage.step
            taken.append(
                step < storage.num_transitions_per_env
                and _plain_pairs(storage, step, fields) is not None
            )
        outcomes.append(_outcome(storage, transition, write, mode))
    return outcomes, taken, _batches(storage)


@settings(max_examples=400, deadline=None)
@given(
    config=_configs,
    plan=st.lists(
        st.tuples(_ops, _step_recipes, st.sampled_from(["grad", "grad", "no_grad", "inference"])),
        min_size=1,
        max_size=7,
    ),
    seed=st.integers(0, 2**16),
)
def test_recurrent_steps_fast_and_general_agree(config, plan, seed):
    fast = _run(config, plan, RolloutStorage.add_transition, seed)
    general = _run(config, plan, _general, seed)
    event(f"fast path taken: {sum(general[1])} of {len(general[1])} steps")
    assert fast[0] == general[0]
    assert fast[2] == general[2]


def _gru(kind: str, k: int = 1, form: str = "tensor") -> tuple:
    return (form, [kind], k)


_PLAIN = ("tuple", _gru("f32"), _gru("f32"))
_GRUS = dict(n=2, t=3, layers=1, size=3, actor="gru", critic="gru", declared=True)
_LSTMS = dict(_GRUS, actor="lstm", critic="lstm", layers=2, size=2)
_ALIASED = {  # name -> (config, the step's hidden states): a source the step overwrites first
    "actor state views the observations row written": (_GRUS, (_gru("own_obs", 0), _gru("f32"))),
    "the same through numpy": (_GRUS, (_gru("own_obs_numpy", 0), _gru("f32"))),
    "critic state is the actor's row written": (_GRUS, (_gru("f32"), _gru("own_saved", 0))),
    "the same, detached": (_GRUS, (_gru("f32"), _gru("own_detach", 0))),
    "the same through numpy ": (_GRUS, (_gru("f32"), _gru("own_numpy", 0))),
    "actor state is its own row written": (_GRUS, (_gru("own_saved", 0), _gru("f32"))),
    "a state from another row": (_GRUS, (_gru("own_saved", 1), _gru("own_obs", 2))),
    "critic state is the actor's": (_GRUS, (_gru("f32"), _gru("f32", 1, "same"))),
    "states view this step's observations": (_LSTMS, (_gru("step_obs"), _gru("step_obs"))),
    "LSTM c is the observations row written": (
        _LSTMS,
        (("tuple", ["f32", "own_obs"], 0), ("tuple", ["own_saved", "f64"], 0)),
    ),
}


@pytest.mark.parametrize("case", list(_ALIASED))
def test_sources_sharing_memory_are_read_as_given(case):
    config, (actor, critic) = _ALIASED[case]
    config = dict(config, dtype=torch.float32)
    plan = [("step", _PLAIN, "grad")] * 2 + [("clear", _PLAIN, "grad")]
    plan += [("step", ("tuple", actor, critic), "grad"), ("step", _PLAIN, "grad")]
    fast = _run(config, plan, RolloutStorage.add_transition, 3)
    general = _run(config, plan, _general, 3)
    assert fast[0] == general[0]
    assert fast[0][3][0] is None  # written, not refused
    assert fast[2] == general[2]


# ------------------------------------------------------------------ the fast path is taken

_TAKEN = {  # name -> (actor, critic, declared, n, layers, size, source dtype, mode)
    "GRU actor, critic None, declared, N=1": ("gru", "none", True, 1, 1, 4, "f32", "grad"),
    "GRU both, allocated by the first step, N=8": ("gru", "gru", False, 8, 1, 4, "f32", "grad"),
    "LSTM both, 2 layers, declared": ("lstm", "lstm", True, 3, 2, 4, "f32", "inference"),
    "LSTM actor, GRU critic, allocated": ("lstm", "gru", False, 2, 2, 3, "f32", "no_grad"),
    "float64 states into float32 rows": ("lstm", "none", True, 4, 1, 5, "f64", "grad"),
    "states that require grad: stored detached": ("gru", "lstm", True, 2, 1, 3, "grad", "grad"),
    "hidden size 1": ("gru", "gru", True, 5, 2, 1, "f32", "grad"),
}


@pytest.mark.parametrize("case", list(_TAKEN))
def test_plain_recurrent_steps_skip_the_general_write(case, monkeypatch):
    actor, critic, declared, n, layers, size, kind, mode = _TAKEN[case]
    config = dict(n=n, t=4, layers=layers, size=size, actor=actor, critic=critic)
    config.update(declared=declared, dtype=torch.float32)
    recipe = ("tuple", ("tuple", [kind], 1), ("tuple", [kind], 1))
    reference = _run(config, [("step", recipe, mode)] * 4, _general, 7)
    storage = _storage(config)
    storage._test_layers, storage._test_size = layers, size  # type: ignore[attr-defined]
    storage._test_kinds = {"actor": actor, "critic": critic}  # type: ignore[attr-defined]
    g = torch.Generator().manual_seed(7)
    general = RolloutStorage._write
    calls = []

    def counted(self: RolloutStorage, *args: Any, **kwargs: Any) -> None:
        calls.append(self.step)
        general(self, *args, **kwargs)

    monkeypatch.setattr(RolloutStorage, "_write", counted)
    outcomes = []
    for _ in range(4):
        transition = _transition(storage, recipe, g)
        outcomes.append(_outcome(storage, transition, RolloutStorage.add_transition, mode))
    assert calls == ([] if declared else [0])  # only a first state goes to _write
    assert outcomes == reference[0]
    assert _batches(storage) == reference[2]
    for saved in (storage.saved_hidden_states_actor, storage.saved_hidden_states_critic or ()):
        assert not any(h.requires_grad or h.grad_fn or h.is_inference() for h in saved)
    assert fast_rows._VIEWS[storage]  # the hidden rows' views are kept


def test_hidden_rows_follow_replaced_saved_tensors():
    """A saved list or tensor replaced between steps is written, not the views of the old one."""
    storage = RolloutStorage("rl", 2, 3, (OBS,), (2,), actor_hidden_state=(1, 4))
    old = storage.saved_hidden_states_actor[0]
    h = torch.ones(1, 2, 4)
    storage.add_transition(Transition(rewards=torch.ones(2), hidden_states=(h, None)))
    storage.saved_hidden_states_actor = [torch.zeros(3, 1, 2, 4)]
    storage.add_transition(Transition(rewards=torch.ones(2), hidden_states=(h * 2, None)))
    storage.saved_hidden_states_actor[0].set_(torch.zeros(3, 1, 2, 4))
    storage.add_transition(Transition(rewards=torch.ones(2), hidden_states=(h * 3, None)))
    assert old[0].eq(1).all() and old[1:].eq(0).all()
    assert storage.saved_hidden_states_actor[0][2].eq(3).all()
    assert storage.saved_hidden_states_actor[0][:2].eq(0).all()

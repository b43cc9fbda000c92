"""``add_transition``'s one-step fast path writes, and refuses, exactly as ``_write`` does.

``add_transition`` hands a step of plain tensors (each of its row's shape, a dtype the row
takes as it is, none in the storage's memory, nothing shared, no hidden state) to
``episodes.rollout.fast_rows``, which copies them at once; anything else goes to
``RolloutStorage._write`` as before. The general path is forced here by calling ``_write``
the way ``add_transition`` did before the fast path: the two must leave bit-identical
storages (tensors, dtypes, shared set, hidden states, field bindings, step) and raise the same
exception (type and message) over random valid and invalid steps, in storages that took
tensors, had fields assigned, were cleared or hold hidden states.
"""

from __future__ import annotations

import copy
import gc
import pickle
import warnings
import weakref
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

# ------------------------------------------------------------------ the two paths


def _general(storage: RolloutStorage, transition: Any) -> None:
    """``add_transition`` as it was before the fast path: every step through ``_write``."""
    if storage.step >= storage.num_transitions_per_env:
        raise OverflowError(
            f"rollout storage is full ({storage.num_transitions_per_env} steps); call clear() first"
        )
    storage._write(storage.step, storage._fields_of(transition))
    storage.step += 1


def _fast_taken(storage: RolloutStorage, transition: Any) -> bool:
    fields = storage._fields_of(transition)
    return _plain_pairs(storage, storage.step, fields) is not None


def _bytes(t: torch.Tensor) -> bytes:
    # A clone: .numpy() of the storage's own tensor would pin its memory, which changes how
    # a source lying in the storage is recognised.
    return bytes(t.detach().cpu().clone().reshape(-1).view(torch.uint8).numpy())


def _state(storage: RolloutStorage, before: dict[str, torch.Tensor]) -> Any:
    """Everything a write may change, comparable across two storages built alike."""
    tensors = {
        name: (
            t.dtype,
            tuple(t.shape),
            t.requires_grad,
            t.grad_fn is None,
            t.is_inference(),
            t is before.get(name),  # kept, or replaced (a shared one copied, ...)
            _bytes(t),
        )
        for name, t in storage.tensors.items()
    }
    hidden = [
        None if saved is None else [(tuple(h.shape), h.dtype, _bytes(h)) for h in saved]
        for saved in (storage.saved_hidden_states_actor, storage.saved_hidden_states_critic)
    ]
    bound = {
        field: (
            [t is storage.tensors[n] for t, n in zip(value, storage.field_names[field])]
            if isinstance(value, tuple)
            else value is storage.tensors.get(storage.field_names.get(field) or "")
            if isinstance(value, torch.Tensor)
            else type(value).__name__
        )
        for field, value in (
            (f, getattr(storage, f))
            for f in ("observations", "actions", "dones", "values", "distribution_params")
        )
    }
    return storage.step, sorted(storage.shared), tensors, hidden, bound


def _outcome(
    storage: RolloutStorage, transition: Any, write: Callable, mode: str, unchanged: bool
) -> Any:
    before = dict(storage.tensors)
    snapshot = _state(storage, before)
    error = None
    try:
        run_in_mode(mode, write, storage, transition)
    except Exception as e:  # noqa: BLE001 - compared by type and message
        error = (type(e), str(e))
    after = _state(storage, before)
    if error is not None and unchanged:
        assert after == snapshot, f"a refused call changed the storage: {error}"
    return error, after


# ------------------------------------------------------------------ building storages and steps

_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.int8,
    torch.bool,
    torch.complex64,
]


def _values(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator, big: bool) -> Any:
    x = torch.randn(shape, generator=g, dtype=torch.float64) * (400 if big else 3)
    if dtype == torch.bool:
        return x > 0
    if dtype.is_complex:
        return x.to(dtype)
    if not dtype.is_floating_point:
        x = x.round()
    return x.to(dtype)


def _leaf(recipe: tuple, storage: RolloutStorage, name: str, g: torch.Generator) -> Any:
    """One field's source, made from ``recipe`` for the tensor ``name`` of ``storage``."""
    tensor = storage.tensors.get(name)
    n = storage.num_envs
    row_shape = tuple(tensor.shape[1:]) if tensor is not None else (n, 2)
    dtype = tensor.dtype if tensor is not None else torch.float32
    kind = recipe[0]
    if kind == "none":
        return None
    if kind == "exact":
        return _values(row_shape, dtype, g, big=False)
    if kind == "flat":  # [N] for [N, 1] rows, else as the row
        shape = row_shape[:1] if row_shape[1:] == (1,) else row_shape
        return _values(shape, dtype, g, big=False)
    if kind == "dtype":
        return _values(row_shape, _DTYPES[recipe[1]], g, big=recipe[2])
    if kind == "shape":
        shapes = [
            (*row_shape, 1),
            (n + 1, *row_shape[1:]),
            row_shape[1:] or (2,),
            (),
            (*row_shape[:1], 2, *row_shape[1:]),
            tuple(reversed(row_shape)) + (1,),
            tuple(reversed(row_shape)),  # as many elements, another shape
        ]
        return _values(shapes[recipe[1] % len(shapes)], dtype, g, big=False)
    if kind == "noncontig":
        wide = _values((*row_shape[:1], 2, *row_shape[1:]), dtype, g, big=False)
        return wide[:, 0]  # every other element
    if kind == "transposed":
        x = _values(tuple(reversed(row_shape)), dtype, g, big=False)
        return x.permute(*reversed(range(x.dim())))
    if kind == "grad":
        x = _values(row_shape, torch.float32 if not dtype.is_floating_point else dtype, g, False)
        x = x.requires_grad_()
        return x * 2 if recipe[1] else x
    if kind == "inference":
        x = _values(row_shape, dtype, g, big=False)
        with torch.inference_mode():
            return x.clone()
    if kind == "numpy":
        x = _values(row_shape, dtype, g, big=False)
        return torch.from_numpy(x.numpy().copy()) if dtype != torch.bfloat16 else x
    if kind in ("alias", "alias_detach", "alias_numpy", "alias_other"):
        k = recipe[1] % storage.num_transitions_per_env
        source = tensor
        if source is None:
            return _values(row_shape, dtype, g, big=False)
        if kind == "alias_other":  # a row of another tensor of the same row shape
            same = [t for m, t in storage.tensors.items() if m != name and t.shape == source.shape]
            source = same[recipe[1] % len(same)] if same else source
        row = source[k]
        if kind == "alias_detach":
            return row.detach()
        if kind == "alias_numpy":
            return torch.from_numpy(row.numpy())
        return row
    if kind == "list":
        return _values(row_shape, dtype, g, big=False).tolist()
    if kind == "meta":
        return torch.empty(row_shape, dtype=dtype, device="meta")
    if kind == "sparse":
        return _values(row_shape, torch.float32, g, big=False).to_sparse()
    if kind == "param":
        return torch.nn.Parameter(_values(row_shape, torch.float32, g, big=False))
    if kind == "subclass":
        return _values(row_shape, dtype, g, big=False).as_subclass(_Sub)
    if kind == "neg":  # a lazily negated view (neg bit)
        return torch._neg_view(_values(row_shape, torch.float32, g, big=False))
    raise AssertionError(kind)


def _nested(layout: torch.layout) -> torch.Tensor:
    with warnings.catch_warnings():  # the strided layout's "prototype stage" warning
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor(
            [torch.zeros(2), torch.zeros(2), torch.zeros(2)], layout=layout
        )


class _Sub(torch.Tensor):
    pass


_KINDS_SIMPLE = ["none", "exact", "flat", "noncontig", "transposed", "inference", "numpy"]
_KINDS_BAD = ["list", "meta", "sparse", "param", "subclass", "neg"]
_recipes = st.one_of(
    st.sampled_from(_KINDS_SIMPLE).map(lambda k: (k,)),
    st.sampled_from(["exact", "flat"]).map(lambda k: (k,)),  # the common case, weighted
    st.tuples(st.just("dtype"), st.integers(0, len(_DTYPES) - 1), st.booleans()),
    st.tuples(st.just("shape"), st.integers(0, 6)),
    st.tuples(st.just("grad"), st.booleans()),
    st.tuples(
        st.sampled_from(["alias", "alias_detach", "alias_numpy", "alias_other"]),
        st.integers(0, 3),
    ),
    st.sampled_from(_KINDS_BAD).map(lambda k: (k,)),
)


def _field(recipe: Any, storage: RolloutStorage, field: str, g: torch.Generator) -> Any:
    names = storage.field_names.get(field)
    if field == "distribution_params":
        form, leaves = recipe
        if names is None:
            names = ("distribution_params/0", "distribution_params/1")
        values = tuple(_leaf(r, storage, n, g) for r, n in zip(leaves, names))
        if form == "list":
            return list(values)
        if form == "short":
            return values[:1]
        if form == "stacked" and all(isinstance(v, torch.Tensor) for v in values):
            try:
                return torch.stack(values)
            except RuntimeError:
                return values
        return values
    if isinstance(names, dict):  # dict observations: each leaf its own recipe
        if recipe[0] == "none":
            return None
        return {k: _leaf(("exact",), storage, v, g) for k, v in names.items()}
    return _leaf(recipe, storage, names or field, g)


_FIELDS = (
    "observations",
    "privileged_observations",
    "actions",
    "privileged_actions",
    "rewards",
    "dones",
    "values",
    "actions_log_prob",
)


def _hidden(recipe: str, n: int, g: torch.Generator) -> Any:
    def h() -> torch.Tensor:
        return torch.randn(1, n, 3, generator=g)

    return {
        "pair": (None, None),
        "none": None,
        "list": [None, None],
        "triple": (None, None, None),
        "gru": (h(), None),
        "both": (h(), h()),
    }[recipe]


_configs = st.fixed_dictionaries(
    {
        "training_type": st.sampled_from(["rl", "distillation"]),
        "n": st.integers(1, 3),
        "t": st.integers(1, 3),
        "obs": st.sampled_from(["3", "1", "scalar", "uint8", "dict"]),
        "privileged": st.booleans(),
        "actions": st.sampled_from(["float", "int64", "uint8", "bool"]),
        "dtype": st.sampled_from([torch.float32, torch.float64]),
    }
)


def _storage(config: dict[str, Any]) -> RolloutStorage:
    obs = {
        "3": (3,),
        "1": (1,),
        "scalar": (),
        "uint8": ((2,), torch.uint8),
        "dict": {"a": (2,), "b": ((1,), torch.int64)},
    }[config["obs"]]
    actions_dtype = {"float": None, "int64": torch.int64, "uint8": torch.uint8}
    return RolloutStorage(
        config["training_type"],
        config["n"],
        config["t"],
        obs,
        (2,),
        privileged_observations=(2,) if config["privileged"] else None,
        dtype=config["dtype"],
        actions_dtype=actions_dtype.get(config["actions"], torch.bool),
    )


def _plain_transition(storage: RolloutStorage, g: torch.Generator, hidden: Any = None) -> Any:
    fields = {f: _field(("exact",), storage, f, g) for f in _FIELDS}
    params = _field(("tuple", [("exact",)] * 2), storage, "distribution_params", g)
    return Transition(**fields, distribution_params=params, hidden_states=hidden or (None, None))


def _prelude(storage: RolloutStorage, ops: list[tuple[str, int]], g: torch.Generator) -> None:
    """Brings ``storage`` into a state (taken tensors, assigned fields, hidden states, ...)."""
    t, n = storage.num_transitions_per_env, storage.num_envs
    for op, k in ops:
        name = sorted(storage.tensors)[k % len(storage.tensors)]
        tensor = storage.tensors[name]
        try:
            if op == "add":
                storage.add_transition(_plain_transition(storage, g))
            elif op == "add_inference":  # row views first made inside inference mode
                with torch.inference_mode():
                    storage.add_transition(_plain_transition(storage, g))
            elif op == "set_":  # the same tensor object, moved to other memory
                tensor.set_(tensor.clone())
            elif op == "data":
                tensor.data = tensor.clone()
            elif op == "resize_":  # the same object and address, fewer elements a row
                if tensor.dim() == 3 and tensor.shape[2] > 1:
                    tensor.resize_(*tensor.shape[:2], tensor.shape[2] - 1)
            elif op == "add_hidden":
                hidden = (torch.randn(1, n, 3, generator=g), None)
                storage.add_transition(_plain_transition(storage, g, hidden))
            elif op == "clear":
                storage.clear()
            elif op == "own":
                storage.own()
            elif op == "share":
                field = name.split("/")[0]
                block = _values(tuple(tensor.shape), tensor.dtype, g, big=False)
                if field == "distribution_params":
                    value: Any = tuple(
                        block if m == name else storage.tensors[m].clone()
                        for m in storage.field_names[field]
                    )
                elif field in ("observations", "privileged_observations") and "/" in name:
                    value = {
                        key: block if m == name else storage.tensors[m].clone()
                        for key, m in storage.field_names[field].items()
                    }
                else:
                    value = block
                if field in ("returns", "advantages"):
                    continue
                storage.write_block(0, share=True, **{field: value})
            elif op == "assign" and "/" not in name:
                setattr(storage, name, _values(tuple(tensor.shape), tensor.dtype, g, big=False))
            elif op == "assign_view":  # a field assigned a view of another one's memory
                if "/" not in name and name != "observations":
                    setattr(storage, name, tensor.clone()[:, :])
        except (ValueError, TypeError, OverflowError, KeyError):
            pass
    if storage.step >= t:
        storage.clear()


_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "add", "add_inference", "add_hidden", "clear", "own", "share", "assign"]
            + ["assign_view", "set_", "data", "resize_"]
        ),
        st.integers(0, 20),
    ),
    max_size=4,
)


def _both(
    config: dict[str, Any],
    ops: list[tuple[str, int]],
    make: Callable[[RolloutStorage, torch.Generator], Any],
    mode: str = "grad",
    seed: int = 0,
    unchanged: bool = True,
) -> tuple[Any, Any, bool]:
    """The fast and the general outcome of one step in two storages built alike."""
    results, taken = [], []
    for write in (RolloutStorage.add_transition, _general):
        g = torch.Generator().manual_seed(seed)
        storage = _storage(config)
        _prelude(storage, ops, g)
        transition = make(storage, g)
        taken.append(_fast_taken(storage, transition))
        results.append(_outcome(storage, transition, write, mode, unchanged))
    return results[0], results[1], taken[0]


# ------------------------------------------------------------------ the property


# Steps the fast path may take (most fields such), with a few fields of any kind.
_usual = st.sampled_from(["exact", "exact", "flat", "none", "noncontig", "transposed", "inference"])


@st.composite
def _step_recipes(draw: Any) -> tuple[dict[str, Any], Any]:
    recipes = {f: (draw(_usual),) for f in _FIELDS}
    leaves = [(draw(_usual),), (draw(_usual),)]
    for field, recipe in draw(st.lists(st.tuples(st.sampled_from(_FIELDS + ("d",)), _recipes))):
        if field == "d":
            leaves[draw(st.integers(0, 1))] = recipe
        else:
            recipes[field] = recipe
    form = draw(st.sampled_from(["tuple", "tuple", "tuple", "list", "short", "stacked"]))
    return recipes, (form, leaves)


@settings(max_examples=400, deadline=None)
@given(
    config=_configs,
    ops=_ops,
    step=_step_recipes(),
    hidden=st.sampled_from(["pair"] * 5 + ["none", "list", "triple", "gru", "both"]),
    mode=st.sampled_from(["grad", "no_grad", "inference"]),
    seed=st.integers(0, 2**16),
)
def test_fast_path_is_the_general_path(config, ops, step, hidden, mode, seed):
    recipes, params = step

    def make(storage: RolloutStorage, g: torch.Generator) -> Any:
        fields = {f: _field(recipes[f], storage, f, g) for f in _FIELDS}
        dist = _field(params, storage, "distribution_params", g)
        hid = _hidden(hidden, storage.num_envs, g)
        return Transition(**fields, distribution_params=dist, hidden_states=hid)

    # Whether _write leaves a refused storage unchanged is its own tests' matter (a copy that
    # torch refuses part-way, as of a negated view into bool, is not checked before).
    fast, general, taken = _both(config, ops, make, mode, seed, unchanged=False)
    event(f"fast path taken: {taken}; refused: {fast[0] is not None}")
    assert fast == general


@settings(max_examples=100, deadline=None)
@given(config=_configs, ops=_ops, mode=st.sampled_from(["grad", "inference"]), seed=st.integers())
def test_plain_steps_take_the_fast_path_and_match(config, ops, mode, seed):
    def make(storage: RolloutStorage, g: torch.Generator) -> Any:
        return _plain_transition(storage, g)

    fast, general, taken = _both(config, ops, make, mode, seed % 2**16)
    assert fast == general
    assert fast[0] is None  # a plain step is written
    _, _, taken_fresh = _both(config, [], make, mode, seed % 2**16)
    assert taken_fresh == (config["obs"] != "dict")  # dict observations go to _write


# ------------------------------------------------------------------ named edge cases


def _rl(n: int = 3, t: int = 4, **kw: Any) -> dict[str, Any]:
    config = {
        "training_type": "rl",
        "n": n,
        "t": t,
        "obs": "3",
        "privileged": False,
        "actions": "float",
        "dtype": torch.float32,
    }
    config.update(kw)
    return config


def _with(**changes: Any) -> Callable[[RolloutStorage, torch.Generator], Any]:
    """A plain step with some fields changed: each ``field=fn(storage, g)``."""

    def make(storage: RolloutStorage, g: torch.Generator) -> Any:
        transition = _plain_transition(storage, g)
        for field, fn in changes.items():
            setattr(transition, field, fn(storage, g))
        return transition

    return make


def _r(*recipe: Any, field: str = "") -> Callable[[RolloutStorage, torch.Generator], Any]:
    return lambda storage, g: _leaf(recipe, storage, field, g)


# name -> (config, prelude ops, step maker, mode, fast path taken, error type or None)
CASES: dict[str, tuple[dict, list, Callable, str, bool, type | None]] = {
    "plain rl step": (_rl(), [], _with(), "grad", True, None),
    "plain distillation step": (_rl(training_type="distillation"), [], _with(), "grad", True, None),
    "privileged observations": (_rl(privileged=True), [], _with(), "grad", True, None),
    "scalar observations [N]": (_rl(obs="scalar"), [], _with(), "grad", True, None),
    "observations of shape (1,) given as [N]": (
        _rl(obs="1"),
        [],
        _with(observations=_r("flat", field="observations")),
        "grad",
        True,
        None,
    ),
    "rewards [N, 1]": (
        _rl(),
        [],
        _with(rewards=lambda s, g: torch.randn(s.num_envs, 1, generator=g)),
        "grad",
        True,
        None,
    ),
    "rewards [N, 1, 1]: trailing ones, to _write": (
        _rl(),
        [],
        _with(rewards=lambda s, g: torch.randn(s.num_envs, 1, 1, generator=g)),
        "grad",
        False,
        None,
    ),
    "dones as floats into bool": (
        _rl(),
        [],
        _with(dones=lambda s, g: torch.tensor([0.0, 1.0, float("nan")])),
        "grad",
        True,
        None,
    ),
    "dones as int64 into bool": (
        _rl(),
        [],
        _with(dones=lambda s, g: torch.tensor([0, 5, -1])),
        "grad",
        True,
        None,
    ),
    "dones as complex: refused": (
        _rl(),
        [],
        _with(dones=lambda s, g: torch.zeros(3, dtype=torch.complex64)),
        "grad",
        False,
        ValueError,
    ),
    "float64 observations into float32": (
        _rl(),
        [],
        _with(observations=lambda s, g: torch.randn(3, 3, dtype=torch.float64, generator=g) * 1e40),
        "grad",
        True,
        None,
    ),
    "int64 actions into uint8: range read, in range": (
        _rl(actions="uint8"),
        [],
        _with(actions=lambda s, g: torch.tensor([[0, 255]] * 3)),
        "grad",
        False,
        None,
    ),
    "int64 actions into uint8: out of range, refused": (
        _rl(actions="uint8"),
        [],
        _with(actions=lambda s, g: torch.tensor([[0, 300]] * 3)),
        "grad",
        False,
        ValueError,
    ),
    "uint8 actions into int64": (
        _rl(actions="int64"),
        [],
        _with(actions=lambda s, g: torch.tensor([[0, 255]] * 3, dtype=torch.uint8)),
        "grad",
        True,
        None,
    ),
    "float actions into int64: refused": (
        _rl(actions="int64"),
        [],
        _with(actions=lambda s, g: torch.full((3, 2), 0.7)),
        "grad",
        False,
        ValueError,
    ),
    "wrong shape: refused": (
        _rl(),
        [],
        _with(observations=lambda s, g: torch.randn(3, 4, generator=g)),
        "grad",
        False,
        ValueError,
    ),
    "broadcastable row: refused, not broadcast": (
        _rl(),
        [],
        _with(observations=lambda s, g: torch.randn(3, generator=g)),
        "grad",
        False,
        ValueError,
    ),
    "non-contiguous source": (
        _rl(),
        [],
        _with(observations=_r("noncontig", field="observations")),
        "grad",
        True,
        None,
    ),
    "a source that requires grad is detached": (
        _rl(),
        [],
        _with(values=_r("grad", True, field="values")),
        "grad",
        True,
        None,
    ),
    "a Parameter: to _write": (
        _rl(),
        [],
        _with(values=_r("param", field="values")),
        "grad",
        False,
        None,
    ),
    "an inference tensor source": (
        _rl(),
        [],
        _with(actions=_r("inference", field="actions")),
        "grad",
        True,
        None,
    ),
    "inside inference mode": (_rl(), [], _with(), "inference", True, None),
    "numpy-backed source outside the storage: copied at once": (
        _rl(),
        [],
        _with(actions=_r("numpy", field="actions")),
        "grad",
        True,
        None,
    ),
    "a row of the storage itself": (
        _rl(),
        [("add", 0), ("add", 0)],
        _with(observations=_r("alias", 0, field="observations")),
        "grad",
        False,
        None,
    ),
    "a detached row of the storage": (
        _rl(),
        [("add", 0)],
        _with(observations=_r("alias_detach", 1, field="observations")),
        "grad",
        False,
        None,
    ),
    "numpy twin of a storage row": (
        _rl(),
        [("add", 0)],
        _with(values=_r("alias_numpy", 0, field="values")),
        "grad",
        False,
        None,
    ),
    "a row of another field (returns for values)": (
        _rl(),
        [],
        _with(values=lambda s, g: s.returns[0]),
        "grad",
        False,
        None,
    ),
    "a shared field after write_block(share=True)": (
        _rl(),
        [("share", 6)],  # sorted names: 6 is "observations"
        _with(),
        "grad",
        False,
        None,
    ),
    "assigned field, then a step": (_rl(), [("assign", 9)], _with(), "grad", True, None),
    "a step, then one into an assigned field": (
        _rl(),
        [("add", 0), ("assign", 9)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a step, a taken field, own(), a step": (
        _rl(),
        [("add", 0), ("share", 6), ("own", 0)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a step in inference mode, then one outside": (
        _rl(),
        [("add_inference", 0), ("clear", 0), ("add_inference", 0)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a step, a field moved by set_, a step": (
        _rl(),
        [("add", 0), ("set_", 6), ("clear", 0), ("add", 0)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a step, a field's .data replaced, a step": (
        _rl(),
        [("add", 0), ("data", 8), ("clear", 0), ("add", 0)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a field resized in place, then a step of its old shape: refused": (
        _rl(),
        [("add", 0), ("resize_", 6), ("clear", 0)],
        _with(observations=lambda s, g: torch.randn(3, 3, generator=g)),
        "grad",
        False,
        ValueError,
    ),
    "[2, N] actions for [N, 2] rows: refused": (
        _rl(),
        [("add", 0)],
        _with(actions=lambda s, g: torch.randn(2, 3, generator=g)),
        "grad",
        False,
        ValueError,
    ),
    "cleared, then a step": (_rl(), [("add", 0), ("clear", 0)], _with(), "grad", True, None),
    "saved hidden states, a step without": (
        _rl(),
        [("add_hidden", 0)],
        _with(),
        "grad",
        True,
        None,
    ),
    "a row of the saved hidden states: to _write": (
        _rl(),
        [("add_hidden", 0)],
        _with(observations=lambda s, g: s.saved_hidden_states_actor[0][0, 0]),
        "grad",
        False,
        None,
    ),
    "hidden states given: to _write": (
        _rl(),
        [],
        _with(hidden_states=lambda s, g: (torch.randn(1, 3, 4, generator=g), None)),
        "grad",
        False,
        None,
    ),
    "hidden states None": (_rl(), [], _with(hidden_states=lambda s, g: None), "grad", True, None),
    "hidden states [None, None]: to _write": (
        _rl(),
        [],
        _with(hidden_states=lambda s, g: [None, None]),
        "grad",
        False,
        None,
    ),
    "hidden states of three parts: refused": (
        _rl(),
        [],
        _with(hidden_states=lambda s, g: (None, None, None)),
        "grad",
        False,
        ValueError,
    ),
    "distribution params as a list: to _write": (
        _rl(),
        [],
        _with(distribution_params=lambda s, g: [torch.zeros(3, 2), torch.ones(3, 2)]),
        "grad",
        False,
        None,
    ),
    "distribution params stacked: to _write": (
        _rl(),
        [],
        _with(distribution_params=lambda s, g: torch.zeros(2, 3, 2)),
        "grad",
        False,
        None,
    ),
    "distribution params of one: refused": (
        _rl(),
        [],
        _with(distribution_params=lambda s, g: (torch.zeros(3, 2),)),
        "grad",
        False,
        ValueError,
    ),
    "a meta source: refused": (
        _rl(),
        [],
        _with(rewards=_r("meta", field="rewards")),
        "grad",
        False,
        ValueError,
    ),
    "a sparse source: refused": (
        _rl(),
        [],
        _with(actions=_r("sparse", field="actions")),
        "grad",
        False,
        ValueError,
    ),
    "a nested source: refused": (
        _rl(),
        [],
        _with(actions=lambda s, g: _nested(torch.strided)),
        "grad",
        False,
        ValueError,
    ),
    "a jagged nested source: refused": (
        _rl(),
        [],
        _with(actions=lambda s, g: _nested(torch.jagged)),
        "grad",
        False,
        ValueError,
    ),
    "a list: refused": (
        _rl(),
        [],
        _with(rewards=lambda s, g: [1.0, 2.0, 3.0]),
        "grad",
        False,
        TypeError,
    ),
    "a tensor subclass: to _write": (
        _rl(),
        [],
        _with(actions=_r("subclass", field="actions")),
        "grad",
        False,
        None,
    ),
    "dict observations: to _write": (_rl(obs="dict"), [], _with(), "grad", False, None),
    "privileged observations to a storage without": (
        _rl(),
        [],
        _with(privileged_observations=lambda s, g: torch.zeros(3, 2)),
        "grad",
        True,  # not stored: skipped, as rsl_rl's add_transition does
        None,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_edge_case(name):
    config, ops, make, mode, taken, error = CASES[name]
    fast, general, was_taken = _both(config, ops, make, mode)
    assert fast == general
    assert was_taken == taken
    assert (fast[0][0] if fast[0] else None) is error


def test_full_storage_overflows_on_both_paths():
    outcomes = []
    for write in (RolloutStorage.add_transition, _general):
        storage = _storage(_rl(t=1))
        g = torch.Generator().manual_seed(0)
        storage.add_transition(_plain_transition(storage, g))
        outcomes.append(_outcome(storage, _plain_transition(storage, g), write, "grad", True))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] is not None and outcomes[0][0][0] is OverflowError


def test_source_requiring_grad_leaves_no_graph():
    storage = _storage(_rl())
    values = torch.randn(3, 1, requires_grad=True) * 2
    transition = _plain_transition(storage, torch.Generator().manual_seed(0))
    transition.values = values
    storage.add_transition(transition)
    assert not storage.values.requires_grad and storage.values.grad_fn is None
    assert torch.equal(storage.values[0], values.detach())


def test_a_storage_tensor_that_requires_grad_refuses_as_before():
    def make(storage: RolloutStorage, g: torch.Generator) -> Any:
        storage.values.requires_grad_()
        return _plain_transition(storage, g)

    # _write copies the fields before the values, then torch refuses: both paths alike.
    fast, general, taken = _both(_rl(), [], make, "grad", unchanged=False)
    assert not taken
    assert fast == general and fast[0] is not None


# ------------------------------------------------------------------ the kept row views


def _filled(storage: RolloutStorage, seed: int = 0) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    steps = [_plain_transition(storage, g) for _ in range(storage.num_transitions_per_env)]
    storage.clear()
    for transition in steps:
        storage.add_transition(transition)
    return steps


@pytest.mark.parametrize(
    "copy_of",
    [
        pytest.param(lambda s: pickle.loads(pickle.dumps(s)), id="pickle"),
        pytest.param(copy.deepcopy, id="deepcopy"),
        pytest.param(copy.copy, id="copy"),
    ],
)
def test_copies_write_their_own_tensors(copy_of):
    storage = _storage(_rl())
    _filled(storage)
    other = copy_of(storage)
    before = {n: t.clone() for n, t in storage.tensors.items()}
    expected = _storage(_rl())
    for st_ in (other, expected):
        _filled(st_, seed=1)
    for name, t in other.tensors.items():
        assert torch.equal(t, expected.tensors[name]), name
    shares = {n for n, t in storage.tensors.items() if t is other.tensors[n]}
    for name, t in storage.tensors.items():  # written only where the copy shares a tensor
        assert torch.equal(t, other.tensors[name] if name in shares else before[name]), name


def test_tensors_let_go_are_not_kept():
    storage = _storage(_rl())
    _filled(storage)
    old = weakref.ref(storage.observations)
    storage.write_block(0, share=True, observations=torch.zeros(4, 3, 3))
    gc.collect()
    assert old() is None  # taken: the old tensor's row views went with the binding
    old = weakref.ref(storage.values)
    storage.values = torch.zeros(4, 3, 1)
    storage.own()
    _filled(storage)
    gc.collect()
    assert old() is None  # assigned: its views made anew at the next step
    held, gone = len(fast_rows._VIEWS), weakref.ref(storage)
    del storage
    gc.collect()
    assert gone() is None and len(fast_rows._VIEWS) < held  # its views go with it


def test_a_tensor_changed_in_place_gets_new_views():
    storage = _storage(_rl())
    _filled(storage)
    moved = torch.zeros(4, 3, 1)
    storage.rewards.set_(moved)  # the same object, in other memory
    step = _filled(storage, seed=2)
    assert torch.equal(moved, torch.stack([s.rewards for s in step]))


def test_a_negated_view_into_bool_dones_is_written_as_flags():
    # A negated view (neg bit) of floats into bool dones: torch has no bool kernel for the
    # negation its copy makes, and refused it part-way (after the fields before it); the
    # general write resolves the negation first, and the fast path leaves such a view to it.
    def make(storage: RolloutStorage, g: torch.Generator) -> Any:
        transition = _plain_transition(storage, g)
        transition.dones = torch._neg_view(torch.tensor([1.0, 0.0, 2.0])[: storage.num_envs])
        return transition

    fast, general, taken = _both(_rl(), [("add", 0)], make, "grad", unchanged=False)
    assert not taken and fast == general
    assert fast[0] is None
    storage = _storage(_rl())
    storage.add_transition(make(storage, torch.Generator().manual_seed(0)))
    assert storage.dones[0, :, 0].tolist() == [True, False, True][: storage.num_envs]

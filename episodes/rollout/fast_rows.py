"""The common one-step write of :meth:`RolloutStorage.add_transition`, without detours.

A step of a PPO rollout is a handful of fresh policy and environment outputs, each a plain
tensor of its row's shape. For those, :meth:`RolloutStorage._write`'s checks
(:func:`~episodes.rollout.leaves.checked_rows`), its aliasing rules
(:func:`~episodes.rollout.aliasing.unalias`) and its copies come down to one copy per leaf, in
the same order. :func:`write_row` makes just those copies when every field is such a tensor,
and hands anything else to ``_write`` as it came: nothing is written before every field is
known to qualify, so what ``_write`` refuses it refuses with its own message. A recurrent
step's hidden states are such fields too, once the storage holds its hidden-state tensors
(the first state is left to ``_write``, which allocates them): each component is copied into
``saved[step]`` as ``_write`` copies it, and the saved lists are assigned again as it does.

The row views it copies into are kept per storage tensor (:class:`_Rows`), and each is used
only while the storage still holds that very tensor, at the same address, shape, dtype and
layout: a tensor rebound (``write_block(share=True)``, ``own``, an assigned field) or changed
in place (``set_``, ``.data =``) gets new views. :func:`bind_fields` forgets a storage's views
whenever its fields are bound anew (a ``_write`` that takes or replaces a tensor binds them);
a field assigned a new tensor (``storage.values = t``) keeps the old tensor's views, and so the
old tensor, until a step writes that field again or the storage goes. Views are made as steps
write rows, so a step that falls back to ``_write`` (a first hidden state, numpy-backed
sources, a forward-mode AD level) costs no more than ``_write`` itself, whatever ``T``.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any

import torch
import torch.autograd.forward_ad as _forward_ad

from . import fields as _fields
from .leaves import _may_wrap

if TYPE_CHECKING:
    from .storage import RolloutStorage
    from .transition import Transition

__all__ = ["bind_fields", "step_fields", "write_row"]

_Tensor, _STRIDED = torch.Tensor, torch.strided
# torch 2.2's storages cannot tell whether they are torch's own (resizable): no fast path.
_RESIZABLE = hasattr(torch.UntypedStorage, "resizable")
_QUANTIZED = {
    getattr(torch, n, None) for n in ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")
}
# Row views are kept for rollouts of up to this many steps (rsl_rl's are 24-100): at most a
# few hundred kB a field; longer ones make a step's views as it writes them.
_KEPT_STEPS = 256
_FULL, _FLAT = 1, 2  # a source of its row's shape; [N] for an [N, 1] row


class _Rows:
    """The row views of one storage tensor, each made the first time a step writes that row.

    Kept with what the views depend on (the tensor, its address, shape, dtype), and whether
    a copy into them is one into ``tensor[step]``: a plain, normal, contiguous tensor.
    """

    __slots__ = ("tensor", "ptr", "shape", "dtype", "plain", "row", "n", "steps", "full", "flat")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor, self.ptr = tensor, tensor.data_ptr()
        self.shape, self.dtype = tensor.shape, tensor.dtype
        self.plain = (
            type(tensor) is _Tensor and not tensor.is_inference() and tensor.is_contiguous()
        )
        self.row = tensor.shape[1:]
        # N for [T, N, 1] tensors, whose rows take [N] sources (-1: no [N] source fits).
        self.n = tensor.shape[1] if tensor.dim() == 3 and tensor.shape[2] == 1 else -1
        self.steps = tensor.shape[0]
        self.full: dict[int, torch.Tensor] = {}  # made as steps write them: no O(T) setup
        self.flat: dict[int, torch.Tensor] = {}

    def make(self, step: int, kind: int) -> torch.Tensor:
        # Made as outside inference mode, whatever mode this step runs in: a view made in it
        # carries that mark into later steps' writes (autograd checks it when grad is on).
        with torch.inference_mode(False):
            view = self.tensor[step] if kind == _FULL else self.tensor[step, :, 0]
        if self.steps <= _KEPT_STEPS:  # a view costs about 0.6 kB: not kept for long rollouts
            (self.full if kind == _FULL else self.flat)[step] = view
        return view


#: Storage -> tensor name -> its row views; a storage's entry goes with the storage.
_VIEWS: weakref.WeakKeyDictionary[Any, dict[str, _Rows]] = weakref.WeakKeyDictionary()


def _views_of(storage: RolloutStorage) -> dict[str, _Rows]:
    try:
        views = _VIEWS.get(storage)
        if views is None:
            views = _VIEWS[storage] = {}
        return views
    except TypeError:  # a subclass that cannot be a key (no __hash__): views for this step
        return {}


def _forget(storage: RolloutStorage) -> None:
    try:
        _VIEWS.pop(storage, None)
    except TypeError:
        pass


def bind_fields(storage: RolloutStorage) -> None:
    """:func:`.fields.bind_fields`, and the storage's row views are forgotten.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (1,), (1,))
        >>> bind_fields(st)
        >>> st.rewards is st.tensors["rewards"]
        True
    """
    _fields.bind_fields(storage)
    _forget(storage)


def step_fields(storage: RolloutStorage, t: Transition) -> dict[str, Any]:
    """The fields of ``t`` that ``add_transition`` writes into ``storage`` (None: skipped).

    Example:
        >>> from episodes.rollout import RolloutStorage, Transition
        >>> sorted(step_fields(RolloutStorage("distillation", 2, 3, (1,), (1,)), Transition()))
        ['actions', 'dones', 'hidden_states', 'observations', 'privileged_actions', 'rewards']
    """
    fields: dict[str, Any] = {
        "observations": t.observations,
        "actions": t.actions,
        "rewards": t.rewards,
        "dones": t.dones,
        "hidden_states": t.hidden_states,
    }
    # Skipped by a storage built without them, as rsl_rl's add_transition does (its PPO
    # sets them on every transition); write_block refuses them by name.
    if storage.privileged_observations is not None:
        fields["privileged_observations"] = t.privileged_observations
    if storage.training_type == "rl":
        fields.update(
            values=t.values,
            actions_log_prob=t.actions_log_prob,
            distribution_params=t.distribution_params,
        )
    else:
        fields["privileged_actions"] = t.privileged_actions
    return fields


def write_row(storage: RolloutStorage, step: Any, fields: dict[str, Any]) -> None:
    """Writes ``fields`` (as :func:`step_fields` lists them) into row ``step``.

    The same as ``storage._write(step, fields)``: the same values, errors and aliasing rules.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (1,), (1,))
        >>> write_row(st, 1, {"rewards": torch.tensor([1.0, 2.0]), "values": None})
        >>> st.rewards[:, :, 0].tolist()
        [[0.0, 0.0], [1.0, 2.0], [0.0, 0.0]]
    """
    pairs = _plain_pairs(storage, step, fields)
    if pairs is None:  # a tensor _write rebinds makes it bind the fields: views forgotten then
        storage._write(step, fields)
        return
    rows, sources, kept = pairs
    for name in kept:  # _write assigns the saved hidden states it wrote: a refill, counted
        setattr(storage, name, getattr(storage, name))
    # One copy_ each, as _write makes them (torch._foreach_copy_ would be one call, but it
    # reads a negated view otherwise: it copies one into bool dones that copy_ refuses).
    for row, src in zip(rows, sources):
        row.copy_(src)


def _plain_pairs(
    storage: RolloutStorage, step: Any, fields: dict[str, Any]
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[str]] | None:
    """The rows ``_write`` would copy into, their sources and the attributes it reassigns.

    In ``_write``'s order; the attributes are the saved hidden states it assigns again.
    None: leave the step to ``_write``.
    Not None only when: ``step`` is an int, no tensor is shared (``write_block(share=True)``:
    a write replaces it first), any hidden state meets saved tensors already made
    (:func:`_hidden_pairs`), every field is a plain tensor (a tuple of them for a field of
    several tensors, such as the distribution parameters or an LSTM's state) that fits its
    row as it is (:func:`_row`), and no source can lie in the storage's memory (the test of
    ``aliasing._all_fresh``, which ``_write`` passes then too: it copies every source as it
    is). Reads no data; fields are checked as ``_write`` reads them, by name.
    """
    if not _RESIZABLE or type(step) is not int or step < 0 or storage._shared:
        return None
    # Forward-mode AD first, before any view is made: a dual source has no requires_grad,
    # yet copy_ would carry its tangent into the storage, where _write's detach drops it.
    if getattr(_forward_ad, "_current_level", 0) >= 0:
        return None
    tensors = storage._tensors
    pairs: list[tuple[str, torch.Tensor, Any]] = []  # (tensor name, tensor, source)
    puts: list[tuple[str, torch.Tensor, Any]] = []  # written after the others, as _write's
    kept: list[str] = []
    for name, value in fields.items():
        if value is None:
            continue
        if name == "hidden_states":  # copied in its place among the fields, as _write's
            if not _hidden_pairs(storage, value, pairs, kept):
                return None
            continue
        dst = tensors.get(name)
        if dst is not None:
            pairs.append((name, dst, value))
            continue
        names = storage.field_names.get(name)
        if type(names) is not tuple or type(value) is not tuple or len(value) != len(names):
            return None  # dict observations, a stacked tensor, a field not stored
        for tensor_name, leaf in zip(names, value):
            dst = tensors.get(tensor_name)
            if dst is None:
                return None
            puts.append((tensor_name, dst, leaf))
    pairs += puts
    # aliasing._all_fresh: torch's own (resizable) memory that starts no storage tensor's;
    # judged before any view is made, so that numpy-backed sources cost no views.
    starts = {t.untyped_storage().data_ptr() for t in tensors.values()}
    for saved in (storage.saved_hidden_states_actor, storage.saved_hidden_states_critic):
        starts.update(t.untyped_storage().data_ptr() for t in saved or ())
    spans: list[tuple[int, int]] | None = None
    for _, _, src in pairs:
        if type(src) is not _Tensor or src.layout is not _STRIDED or src.is_meta or src.is_nested:
            return None  # checked_rows names what is wrong
        memory = src.untyped_storage()
        start = memory.data_ptr()
        if start in starts:
            return None
        if not memory.resizable():  # numpy's memory (from_numpy): it may lie inside ours
            if spans is None:
                spans = _spans(storage)
            stop = start + memory.nbytes()
            if any(start < end and begin < stop for begin, end in spans):
                return None
    views = _views_of(storage)
    rows = []
    for name, dst, src in pairs:
        row = _row(views, name, dst, src, step)
        if row is None:
            return None
        rows.append(row)
    return rows, [src.detach() if src.requires_grad else src for _, _, src in pairs], kept


def _hidden_pairs(
    storage: RolloutStorage, value: Any, pairs: list[tuple[str, Any, Any]], kept: list[str]
) -> bool:
    """Adds a step's hidden states to ``pairs`` and ``kept``; False: leave it to ``_write``.

    Each component goes to ``pairs`` with its saved tensor, as ``_write`` pairs them
    (``hidden_pair``, then ``hidden_writes``); ``kept`` gets the attributes it assigns again.

    Taken: an ``(actor, critic)`` tuple of states that are None, a plain tensor (a GRU's)
    or a tuple of them (an LSTM's ``(h, c)``), each meeting a list (or tuple) of as many
    saved plain tensors. Not: a state the storage has no tensors for yet (``_write``
    allocates them), lists (rsl_rl's states are tuples), nor anything ``_write`` refuses.
    """
    if type(value) is not tuple or len(value) != 2:
        return False
    for which, state in zip(("actor", "critic"), value):
        if state is None:
            continue
        attr = f"saved_hidden_states_{which}"
        saved = getattr(storage, attr)
        if type(state) is _Tensor:
            comps: Any = (state,)
        elif type(state) is tuple:
            comps = state
        else:
            return False
        if (type(saved) is not list and type(saved) is not tuple) or len(saved) != len(comps):
            return False  # None: the first state, allocated by _write; or it names what's wrong
        for i, (dst, src) in enumerate(zip(saved, comps)):
            if type(dst) is not _Tensor:
                return False
            pairs.append((f"hidden_states/{which}/{i}", dst, src))
        kept.append(attr)
    return True


def _spans(storage: RolloutStorage) -> list[tuple[int, int]]:
    """The ``[start, stop)`` addresses of every allocation the storage's tensors lie in."""
    held = [*storage._tensors.values()]
    for saved in (storage.saved_hidden_states_actor, storage.saved_hidden_states_critic):
        held.extend(saved or ())
    memories = [t.untyped_storage() for t in held]
    return [(m.data_ptr(), m.data_ptr() + m.nbytes()) for m in memories]


def _row(
    views: dict[str, _Rows], name: str, dst: torch.Tensor, src: Any, step: int
) -> torch.Tensor | None:
    """The view of ``dst[step]`` that ``src`` is copied into as it is, else None.

    ``src`` fits as ``checked_rows`` takes it without reading its values: a plain dense tensor
    with data, of its row's dtype or one :func:`_plain_cast` allows, of its row's shape
    (or ``[N]`` for ``[N, 1]`` rows: then the view is ``dst[step, :, 0]``). ``dst`` a plain
    tensor that autograd and inference mode let be written in place, as every storage tensor
    is: then a copy into a view made before is ``dst[step].copy_(src)``.
    """
    entry = views.get(name)
    if (  # views of another tensor, or of this one before it moved or changed its layout
        entry is None
        or entry.tensor is not dst
        or dst.data_ptr() != entry.ptr
        or dst.shape != entry.shape
        or dst.dtype is not entry.dtype
        or not dst.is_contiguous()
    ):
        entry = views[name] = _Rows(dst)
    dtype = entry.dtype
    if (
        type(src) is not _Tensor
        or (src.dtype is not dtype and not _plain_cast(src.dtype, dtype))
        or src.layout is not _STRIDED
        or src.is_meta
        or src.is_nested
        or src.is_neg()  # a lazily negated view: copy_rows resolves it for bool fields
        or not entry.plain
        or dst.requires_grad
    ):
        return None  # checked_rows casts, refuses or names what is wrong
    shape = src.shape
    if shape == entry.row:
        made = entry.full
        kind = _FULL
    elif len(shape) == 1 and shape[0] == entry.n:
        made = entry.flat
        kind = _FLAT
    else:
        return None
    if step >= entry.steps:
        return None  # beyond the rows: _write says so
    view = made.get(step)
    return entry.make(step, kind) if view is None else view


@functools.cache
def _plain_cast(src: torch.dtype, dst: torch.dtype) -> bool:
    """Whether :func:`checked_rows` takes ``src`` values into ``dst`` with nothing left to read.

    Flags into bool (dones as floats or ints), a wider or narrower float, a wider int; not a
    narrower int, whose range it reads (:func:`check_int_range`), nor what it refuses.
    """
    if src in _QUANTIZED:
        return False
    if dst == torch.bool:
        return not src.is_complex
    try:
        return torch.can_cast(src, dst) and not _may_wrap(src, dst)
    except Exception:  # a dtype torch cannot compare: checked_rows says what is wrong
        return False

"""A storage's public fields, bound to its tensors, and what assigning one does.

The generators read :attr:`RolloutStorage.tensors`; code written for rsl_rl's storage assigns
fields (its ``PPO.compute_returns`` ends with ``storage.advantages = storage.returns -
storage.values``, then normalises by assigning again). An assigned tensor therefore becomes
the field's tensor in ``tensors`` too, so every reader sees it: without that the flat
generator handed out the old advantages while the recurrent one read the new.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from .nested import map_tree
from .specs import normal_tensors

if TYPE_CHECKING:
    from .storage import RolloutStorage

__all__ = ["FIELDS", "REFILLS", "adopted", "bind_fields", "storage_repr"]

#: The public fields backed by :attr:`RolloutStorage.tensors`.
FIELDS = frozenset(
    (
        "observations",
        "privileged_observations",
        "actions",
        "rewards",
        "dones",
        "values",
        "actions_log_prob",
        "returns",
        "advantages",
        "privileged_actions",
        "distribution_params",
    )
)

#: The attributes whose assignment refills a storage (``clear``, ``add_transition`` and
#: ``write_block`` set ``step``; the converter sets ``valid``): a generator made before one
#: refuses its next batch. Not ``returns`` and ``advantages``, which ``compute_returns`` (or
#: rsl_rl's ``PPO.compute_returns``, by assigning them) may redo between epochs: every
#: generator reads them at each batch.
REFILLS = frozenset(
    FIELDS - {"returns", "advantages"}
    | {"step", "valid", "saved_hidden_states_actor", "saved_hidden_states_critic"}
)


def bind_fields(storage: RolloutStorage) -> None:
    """Sets every public field to its tensors (nested as ``field_names`` says), or None.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (1,), (1,))
        >>> bind_fields(st)
        >>> st.advantages is st.tensors["advantages"], st.privileged_actions
        (True, None)
    """
    tensors = storage._tensors
    for name in FIELDS:
        names = storage.field_names.get(name)
        if name == "distribution_params":  # a tuple of names, not nested as a tree
            value = None if names is None else tuple(tensors[n] for n in names)
        else:
            value = map_tree(tensors.__getitem__, names)
        object.__setattr__(storage, name, value)


def storage_repr(storage: RolloutStorage) -> str:
    """``repr(storage)``: its type, sizes, write cursor, device and dtype, never its tensors.

    Read from the attributes alone (no device is asked anything), so it works in any state:
    cleared, shared, even half-built by a constructor that raised.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> storage_repr(RolloutStorage("rl", 2, 3, (4,), (1,)))
        "RolloutStorage(training_type='rl', T=3, N=2, step=0, device=cpu, dtype=torch.float32)"
    """
    state = vars(storage)
    rewards = state.get("_tensors", {}).get("rewards")
    shared = sorted(state.get("_shared", ()))
    parts = [
        f"training_type={state.get('training_type', '?')!r}",
        f"T={state.get('num_transitions_per_env', '?')}",
        f"N={state.get('num_envs', '?')}",
        f"step={state.get('step', '?')}",
        f"device={state.get('device', '?')}",
        f"dtype={'?' if rewards is None else rewards.dtype}",
        *([f"shared={shared}"] if shared else []),
        *(["masked=True"] if state.get("valid") is not None else []),
    ]
    return f"{type(storage).__name__}({', '.join(parts)})"


def _pickled_state(storage: RolloutStorage) -> dict[str, Any]:
    """``storage.__getstate__()``: copies of shared tensors (one may view a bigger block).

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (1,), (1,))
        >>> state = _pickled_state(st)
        >>> state["tensors"], "rewards" in state, sorted(state["_tensors"])[:2]
        (None, False, ['actions', 'actions_log_prob'])
    """
    state = {k: v for k, v in storage.__dict__.items() if k not in storage.field_names}
    own = {k: t.clone() if k in storage._shared else t for k, t in storage._tensors.items()}
    state.update(_tensors=own, _shared=set(), field_names=dict(storage.field_names), tensors=None)
    return state


def _restore_state(storage: RolloutStorage, state: dict[str, Any]) -> None:
    """``storage.__setstate__(state)``: the state of :func:`_pickled_state`, fields bound.

    Example:
        >>> import pickle
        >>> from episodes.rollout import RolloutStorage
        >>> st = pickle.loads(pickle.dumps(RolloutStorage("rl", 2, 3, (1,), (1,))))
        >>> st.rewards is st.tensors["rewards"]
        True
    """
    storage.__dict__.update(state)
    storage.field_names = MappingProxyType(storage.field_names)
    storage.tensors = MappingProxyType(storage._tensors)
    storage._bind_fields()


def adopted(storage: RolloutStorage, name: str, value: Any) -> Any:
    """The value ``storage.<name> = value`` binds: a one-tensor field's tensor is replaced.

    A tensor of the field's shape, dtype and device becomes the field's tensor in ``tensors``
    (the storage holds it from then on, and later writes, such as ``compute_returns``, go
    into it, as rsl_rl's storage writes into an assigned tensor). It is held detached, as
    ``write_block`` holds values; a copy is held instead of an inference tensor (as
    ``PPO.compute_returns`` under ``torch.inference_mode`` assigns), of a tensor in the memory
    of another field or hidden state (``storage.advantages = storage.returns``: no two fields
    share memory), and of a tensor that is not contiguous. Fields of several tensors
    (dict observations, distribution parameters) are written into, not assigned; a field the
    storage does not hold is a plain attribute, as before.

    Raises:
        ValueError: Another value for a field of one tensor, or any value for a field of
            several; nothing changes.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (1,), (1,))
        >>> st.advantages = torch.ones(3, 2, 1)
        >>> st.tensors["advantages"].sum().item()
        6.0
    """
    names = storage.field_names.get(name)
    if names is None:
        return value
    if not isinstance(names, str):
        raise ValueError(
            f"RolloutStorage.{name} holds several tensors and is not assigned: write into "
            f"them (storage.{name}[...].copy_(...))"
        )
    old = storage._tensors[names]
    if not (
        isinstance(value, torch.Tensor)
        and value.shape == old.shape
        and value.dtype == old.dtype
        and value.device == old.device
    ):
        got = (
            f"{tuple(value.shape)} {value.dtype} on {value.device}"
            if isinstance(value, torch.Tensor)
            else type(value).__name__
        )
        raise ValueError(
            f"RolloutStorage.{name} takes a tensor of shape {tuple(old.shape)}, {old.dtype} on "
            f"{old.device}, got {got}: cast it, or write into the field "
            f"(storage.{name}.copy_(...))"
        )
    value = value.detach()  # as write_block stores values: no graph kept across calls
    if value.is_inference() or _in_other_field(storage, names, value):
        # An inference tensor would refuse later writes outside inference mode; memory of
        # another field would be overwritten by writes into this one (compute_returns).
        with normal_tensors():
            value = value.clone(memory_format=torch.contiguous_format)
    value = value.contiguous()
    storage._tensors[names] = value
    storage._shared.discard(names)  # the caller handed this one over
    return value


def _in_other_field(storage: RolloutStorage, names: str, value: torch.Tensor) -> bool:
    """Whether ``value`` lies in the allocation of another field's or a hidden state's tensor."""
    if value.device.type == "meta":
        return False
    memory = value.untyped_storage().data_ptr()
    others = [t for name, t in storage._tensors.items() if name != names]
    for side in ("actor", "critic"):
        others += getattr(storage, f"saved_hidden_states_{side}", None) or []
    return any(t.untyped_storage().data_ptr() == memory for t in others)

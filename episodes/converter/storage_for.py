"""The storage a rollout is written into: a new one, or the caller's once it fits.

A given storage is checked against the one a conversion would make (built on the ``meta``
device: shapes without memory) before it is cleared, so a refused conversion leaves it as it
was; the layout it was last found to take is remembered, so a storage reused rollout after
rollout is checked once.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from episodes.converter.columns import ColumnKeys, TimeMajorColumns
from episodes.converter.from_blocks import item_shape
from episodes.converter.refusals import (
    check_extra_steps,
    check_storage_layout,
    check_storage_size,
    numeric_column,
)
from episodes.rollout import RolloutStorage
from episodes.rollout.leaves import check_int_range, paired
from episodes.rollout.specs import normal_tensors
from episodes.runner import SampledChunks
from episodes.structs import map_leaves

__all__ = ["as_tensors", "default_device", "ready_storage"]


#: The fields a conversion writes whole into the storage it makes (every element, or the
#: tensor taken): allocated, not zeroed. The returns and advantages stay zeros.
_WRITTEN = frozenset(
    ("observations", "actions", "rewards", "dones", "values", "actions_log_prob")
    + ("distribution_params", "privileged_actions", "hidden_states")
)


def _new_storage(
    cols: TimeMajorColumns,
    obs: Any,
    actions: torch.Tensor,
    training_type: str,
    keys: ColumnKeys,
    device: torch.device,
    dtype: torch.dtype,
) -> RolloutStorage:
    horizon, num_envs = cols.dones.shape
    example_obs = map_leaves(lambda leaf: leaf[0], obs)
    dist_shapes: tuple[tuple[int, ...], ...] | None = None
    if training_type == "rl":  # distillation stores no distribution parameters
        # No keys, no parameters: () keeps the storage from making up a zero mean and std.
        dist_shapes = tuple(item_shape(cols.extras, k) for k in keys.distribution)

    def hidden_spec(names: Sequence[str]) -> Any:
        if not names:
            return None
        specs = tuple(item_shape(cols.extras, k) for k in names)
        for key, shape in zip(names, specs):
            if len(shape) != 2:  # rsl_rl's layout; RLlib's recurrent modules record [hidden]
                raise ValueError(
                    f"hidden-state column {key!r} holds items of shape {shape}: each step's "
                    "state must be [num_layers, hidden] (add a layer axis to [hidden] states)"
                )
        return specs[0] if len(specs) == 1 else specs

    return RolloutStorage._unzeroed(
        _WRITTEN,
        training_type,
        num_envs,
        horizon,
        example_obs,
        tuple(actions.shape[2:]),
        device,
        distribution_params=dist_shapes,
        actor_hidden_state=hidden_spec(keys.actor_hidden),
        critic_hidden_state=hidden_spec(keys.critic_hidden),
        dtype=dtype,
        actions_dtype=actions.dtype,
    )


def default_device(episodes: Sequence[Any], storage: RolloutStorage | None) -> torch.device:
    """The storage's device, else the recording's (blocks on a torch device), else the CPU.

    Example:
        >>> default_device([], None)
        device(type='cpu')
    """
    if storage is not None:
        return torch.device(storage.device)
    return recording_device(episodes) or torch.device("cpu")


def recording_device(episodes: Sequence[Any]) -> torch.device | None:
    """The device a torch-tensor env recorded ``episodes`` on, or None (numpy, or mixed).

    A runner's ``SampledChunks`` of such an env, or a ``GroupSample`` whose runners all
    recorded on one device; anything else (built or loaded chunks) is None.

    Example:
        >>> recording_device([]) is None
        True
    """
    if isinstance(episodes, SampledChunks) and episodes.recording.device is not None:
        return torch.device(episodes.recording.device.device)
    offer = getattr(episodes, "side_by_side", None)  # a GroupSample: its runners' samples
    if callable(offer):
        parts = list(offer())
        if parts and all(
            isinstance(p, SampledChunks) and p.recording.device is not None for p in parts
        ):
            devices = {torch.device(p.recording.device.device) for p in parts}
            if len(devices) == 1:
                return devices.pop()
    return None


def taking_tensors(fn: Any, device: torch.device) -> Any:
    """``fn`` given torch tensors on ``device`` wherever it would get numpy columns.

    A torch env's recording hands ``value_fn`` and ``obs_fn`` tensors on its device on the
    converter's fast path; a general path (``layout="per_chunk"``, a written chunk) reads
    host copies, and a critic written for the first must work on the second.

    Example:
        >>> seen = taking_tensors(lambda obs: type(obs).__name__, torch.device("cpu"))
        >>> seen(np.zeros(2)), seen({"a": torch.zeros(2)}), taking_tensors(None, None)
        ('Tensor', 'dict', None)
    """
    if fn is None:
        return None

    def convert(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return leaf
        leaf = np.asarray(leaf)
        # torch cannot mark a tensor read-only: a mapped or frozen host column is copied.
        return torch.as_tensor(leaf if leaf.flags.writeable else leaf.copy(), device=device)

    def on_device(observations: Any) -> Any:
        return fn(map_leaves(convert, observations))

    return on_device


def as_tensors(
    array: Any, device: torch.device, dtype: torch.dtype | None = None, name: str = "columns"
) -> Any:
    """``array``'s leaves as tensors on ``device`` (in ``dtype`` if given): the storage's fields.

    Tensors (a device recording's columns) are moved or cast only. numpy leaves are viewed
    where they are writable, else copied (torch cannot mark a tensor read-only, and the
    storage may take it as its own); leaves holding no numbers (a Text space's strings,
    objects) are a ``TypeError`` naming the column ``name``
    (:func:`~episodes.converter.refusals.numeric_column`), and so are numbers of a dtype no
    tensor holds (``np.longdouble``, ``np.clongdouble``), unless a float ``dtype`` is given:
    they are then rounded into it on the host, as any float is. The views, and the tensors a move
    or a cast makes, are normal tensors inside ``torch.inference_mode`` too, and an inference
    tensor (columns gathered in inference mode) is copied into one: a storage takes them, and
    a loss outside inference mode can use them.

    Example:
        >>> as_tensors({"a": np.zeros(2)}, torch.device("cpu"), torch.float64)["a"].dtype
        torch.float64
        >>> as_tensors(np.array(["a"]), torch.device("cpu"), name="actions")
        Traceback (most recent call last):
        ...
        TypeError: RolloutStorage holds numbers, but these chunks' actions hold <U1 values: ...
        >>> as_tensors(np.ones(2, np.longdouble), torch.device("cpu"), torch.float32).dtype
        torch.float32
        >>> as_tensors(np.ones(2, np.longdouble), torch.device("cpu"), name="actions")
        Traceback (most recent call last):
        ...
        TypeError: RolloutStorage holds numbers, but these chunks' actions hold ...: cast them ...
    """

    def convert(leaf: Any) -> torch.Tensor:
        if isinstance(leaf, torch.Tensor):  # from blocks on a device: moved or cast only
            moved = leaf.to(device=device, dtype=dtype or leaf.dtype)
            # Gathered in inference mode: copied once, into a tensor the storage may take.
            return moved.clone() if moved.is_inference() else moved
        leaf = numeric_column(np.ascontiguousarray(leaf), name)  # strings: named, not torch's
        if leaf.dtype.type in _NO_TENSOR:
            leaf = _into_float(leaf, dtype, name)
        t = torch.from_numpy(leaf if leaf.flags.writeable else leaf.copy())
        return t.to(device=device, dtype=dtype or t.dtype)

    with normal_tensors():  # from_numpy in inference mode would make inference views
        return map_leaves(convert, array)


# numpy number types no tensor holds, and the numpy type of each float field's dtype.
_NO_TENSOR = (np.longdouble, np.clongdouble)
_HOST_FLOATS = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}


def _into_float(leaf: np.ndarray, dtype: torch.dtype | None, name: str) -> np.ndarray:
    """A longdouble ``leaf`` rounded into the float field's ``dtype``, else the ``TypeError``."""
    if dtype is None or leaf.dtype.kind != "f":  # the field would keep the column's dtype
        raise TypeError(
            f"RolloutStorage holds numbers, but these chunks' {name} hold {leaf.dtype} values, "
            "which no tensor holds: cast them to float64 (complex128) first"
        )
    with np.errstate(over="ignore"):  # beyond the field's range: inf, as torch's cast gives
        return leaf.astype(_HOST_FLOATS.get(dtype, np.float64))


def ready_storage(
    storage: RolloutStorage | None,
    cols: TimeMajorColumns,
    obs: Any,
    actions: torch.Tensor,
    training_type: str,
    keys: ColumnKeys,
    device: torch.device,
    dtype: torch.dtype,
    teacher: torch.Tensor | None = None,
) -> RolloutStorage:
    """A new storage for the columns, or the given one, cleared once it is known to take them.

    A new one's fields that the conversion writes whole are not zeroed (``_WRITTEN``): the
    caller writes every element of them (``write_block``, a gather) before they are read.

    Everything that could refuse the columns is checked here, before a storage is touched:
    the layout, and the values of the ``obs``, ``actions`` and ``teacher`` (privileged
    actions) tensors that a narrower int field of the given storage would wrap (what
    ``write_block`` refuses after the clear otherwise). Fields of the storage's own dtypes
    cost nothing: only ints cast into a narrower int field are read. ``obs`` and ``actions``
    may be ``[1, N, ...]`` examples where they have the storage's dtypes.

    Example:
        >>> import numpy as np
        >>> cols = TimeMajorColumns(observations=np.zeros((3, 2, 4), np.float32),
        ...     actions=np.zeros((3, 2), np.int64), rewards=np.zeros((3, 2)),
        ...     dones=np.zeros((3, 2), bool), truncated=np.zeros((3, 2), bool),
        ...     extras={"vf_preds": np.zeros((3, 2)), "action_logp": np.zeros((3, 2))})
        >>> obs, actions = torch.zeros(3, 2, 4), torch.zeros(3, 2, 1, dtype=torch.long)
        >>> st = ready_storage(None, cols, obs, actions, "rl", ColumnKeys(),
        ...                    torch.device("cpu"), torch.float32)
        >>> ready_storage(st, cols, obs, actions, "rl", ColumnKeys(),
        ...               torch.device("cpu"), torch.float32) is st
        True
    """
    check_extra_steps(cols.extras, actions, training_type, keys)
    if storage is None:
        return _new_storage(cols, obs, actions, training_type, keys, device, dtype)
    check_storage_size(storage, *cols.dones.shape)
    # The layout a storage was last found to take is remembered: a storage reused rollout
    # after rollout is checked once (building the meta storage costs about 80 us).
    # A write may have given it hidden states since: those are refused unless the keys name them.
    layout = (
        *_layout_of(cols, obs, actions, training_type, keys, dtype),
        storage.saved_hidden_states_actor is None,
        storage.saved_hidden_states_critic is None,
    )
    if _CHECKED.get(storage) != layout:
        meta = torch.device("meta")
        check_storage_layout(
            storage, _new_storage(cols, obs, actions, training_type, keys, meta, dtype)
        )
        _CHECKED[storage] = layout
    _check_int_ranges(storage, obs, actions, teacher)
    storage.clear()
    return storage


def _check_int_ranges(
    storage: RolloutStorage, obs: Any, actions: torch.Tensor, teacher: torch.Tensor | None
) -> None:
    """Refuses ints a narrower int field of ``storage`` would wrap, as ``write_block`` would."""
    tensors = storage.tensors
    names = storage.field_names.get("observations")
    # Paired by the names' structure, which the layout check compared; in write_block's order.
    written = [] if names is None else list(paired(names, obs, "observations"))
    written += [("actions", actions), ("privileged_actions", teacher)]
    for name, values in written:
        held = tensors.get(name)
        if values is not None and held is not None:
            check_int_range(values, held.dtype, name)


_CHECKED: weakref.WeakKeyDictionary[RolloutStorage, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _layout_of(
    cols: TimeMajorColumns,
    obs: Any,
    actions: torch.Tensor,
    training_type: str,
    keys: ColumnKeys,
    dtype: torch.dtype,
) -> tuple[Any, ...]:
    """What decides the storage ``_new_storage`` would make for these columns."""
    extras = [*keys.distribution, *keys.actor_hidden, *keys.critic_hidden]
    return (
        training_type,
        keys,
        dtype,
        repr(map_leaves(lambda leaf: (tuple(leaf.shape[2:]), leaf.dtype), obs)),
        tuple(actions.shape[2:]),
        actions.dtype,
        tuple(item_shape(cols.extras, k) for k in extras),
    )

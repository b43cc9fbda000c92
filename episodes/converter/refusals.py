"""What the rollout converter refuses, and why: checks kept apart from the layout code.

Example:
    >>> import torch
    >>> flat_actions(torch.zeros(2, 3)).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

# Kept apart so that episodes_to_batch imports no torch; named here where importers look.
from episodes.converter.column_refusals import check_storable_extra as check_storable_extra
from episodes.converter.column_refusals import checked_obs_fn_output as checked_obs_fn_output
from episodes.converter.column_refusals import storable_extra as storable_extra
from episodes.rollout.devices import checked_device
from episodes.rollout.leaves import same_but_trailing_ones
from episodes.runner import SampledChunks
from episodes.structs import map_leaves


def flat_actions(actions: Any) -> torch.Tensor:
    """The actions as one tensor, or a clear error for Dict/Tuple actions.

    Example:
        >>> flat_actions({"move": torch.zeros(2)})
        Traceback (most recent call last):
        ...
        ValueError: RolloutStorage holds one action tensor per step, but these chunks' ...
    """
    if isinstance(actions, torch.Tensor):
        return actions
    raise ValueError(
        "RolloutStorage holds one action tensor per step, but these chunks' actions are a "
        f"{type(actions).__name__} of leaves: flatten them into one array per step first "
        "(e.g. gymnasium.spaces.flatten), or use episodes_to_batch"
    )


def numeric_column(leaf: np.ndarray, name: str) -> np.ndarray:
    """``leaf`` if a tensor can hold it (numbers or bools), else a ``TypeError`` naming ``name``.

    A Text space's strings, bytes and Python objects have no tensor: torch's own error would
    name neither the column nor what to do.

    Example:
        >>> numeric_column(np.zeros(2), "actions").shape
        (2,)
        >>> numeric_column(np.array(["ab"]), "actions")
        Traceback (most recent call last):
        ...
        TypeError: RolloutStorage holds numbers, but these chunks' actions hold <U2 values: ...
    """
    if leaf.dtype.kind not in "biufc":
        raise TypeError(
            f"RolloutStorage holds numbers, but these chunks' {name} hold {leaf.dtype} values: "
            "encode them as numbers first, or use episodes_to_batch"
        )
    return leaf


def float_dtype(dtype: Any, storage: Any) -> torch.dtype:
    """The float dtype of the storage's real-valued fields: ``dtype``, else the storage's.

    Without ``dtype`` a given storage keeps its own (that of its rewards), as ``device=None``
    keeps its device; without either, ``torch.float32``. Rewards, values and log-probs are real
    numbers: an integer, bool or complex dtype would truncate or change them. A given storage
    is filled as it is: a ``dtype`` other than its own is refused, as neither could be kept.

    Example:
        >>> float_dtype(None, None), float_dtype(torch.float64, None)
        (torch.float32, torch.float64)
        >>> float_dtype(torch.int64, None)
        Traceback (most recent call last):
        ...
        ValueError: dtype must be a real floating-point torch dtype, got torch.int64
    """
    if dtype is None:
        dtype = torch.float32 if storage is None else storage.rewards.dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a real floating-point torch dtype, got {dtype!r}")
    if storage is not None and dtype != storage.rewards.dtype:
        raise ValueError(
            f"dtype={dtype} differs from the given storage's {storage.rewards.dtype}: the "
            "storage is filled in its own dtype; pass dtype=None, or no storage"
        )
    return dtype


def storage_device(device: Any, storage: Any) -> torch.device | None:
    """``device`` as a ``torch.device`` (None stays None), refused if a given storage is elsewhere.

    Without a storage it must be a device this process can fill
    (:func:`~episodes.rollout.devices.checked_device`: ``"cuda"`` without one and ``"meta"``
    are a ``DeviceError``, a ``ValueError`` and ``RuntimeError`` both, naming ``device``).

    A given storage is filled where it is: ``device`` may only name its device (``"cuda"`` is
    the current CUDA device, ``"cpu:0"`` the CPU), and then the storage's own spelling is
    returned.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> storage = RolloutStorage("rl", 2, 3, [4], [1])
        >>> storage_device("cpu:0", storage), storage_device(None, storage)
        (device(type='cpu'), None)
        >>> storage_device("meta", storage)
        Traceback (most recent call last):
        ...
        ValueError: device=meta differs from the given storage's device cpu: the storage is ...
    """
    if device is None:
        return None
    if storage is None:  # a device this process can fill (no meta): named where refused
        return checked_device(device)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        checked_device(device)  # refuses what torch cannot read, naming ``device``
        raise
    held = torch.device(storage.device)
    # Types first: resolving "cuda" asks CUDA for its current device, which may not exist.
    if device.type != held.type or _resolved(device) != _resolved(held):
        raise ValueError(
            f"device={device} differs from the given storage's device {held}: the storage is "
            "filled where it is; pass device=None, or no storage"
        )
    return held


def _resolved(device: torch.device) -> torch.device:
    """``device`` as a tensor made there has it (``cuda`` -> ``cuda:k``, ``cpu:0`` -> ``cpu``)."""
    if device.type in ("cpu", "meta"):  # one device each: torch drops their index
        return torch.device(device.type)
    if device.index is not None:
        return device
    module = getattr(torch, device.type, None)
    current = getattr(module, "current_device", None)
    index = current() if callable(current) else 0
    return torch.device(device.type, index)


def refuse_masked_windows(samples: Sequence[Any], wanted: list[str]) -> None:
    """A vector-step window with reset steps is only laid out from the runner's blocks.

    ``wanted`` are the extra outputs the keys ask for: the usual reason the fast path stepped
    aside is that the policy did not record one of them, which is what the error then says.

    Example:
        >>> refuse_masked_windows([], ["vf_preds"])  # nothing sampled with reset steps: fine
    """
    masked = [
        sample
        for sample in samples
        if isinstance(sample, SampledChunks)
        and sample.recording.vector_steps
        and sample.recording.dead_cells() is not None
    ]
    for sample in masked:
        recorded = sorted(sample.recording.blocks.extras)
        missing = [key for key in wanted if key not in recorded]
        if missing:
            raise KeyError(
                f"the policy recorded no extra output {missing[0]!r}; it records {recorded} "
                "(configure ColumnKeys)"
            )
    if masked:
        message = (
            "these chunks come from a runner recording vector steps, and their window holds "
            "reset steps: only the fast path lays it out (the chunks' lengths differ per "
            "env). For training_type 'rl' it needs value_fn, or a bootstrap value in the "
            "custom_data of every chunk that ends truncated or still runs (ColumnKeys."
            "bootstrap_value), and chunks left as sampled (no setter, append, concat, pop or "
            "replaced column: any write to a built chunk); copy the chunks you want to "
            "change, or use layout='per_chunk'"
        )
        if len(masked) > 1:
            message += (
                "; several runners' samples are laid out together only where their "
                "observations, actions and extra outputs have one dtype each"
            )
        if any(not sample.numpy_episodes and sample.built() for sample in masked):
            # Such chunks are copied into lists as they are built: a read counts as a change.
            message += (
                ". List-mode chunks (numpy_episodes=False) count as changed once one is "
                "built, by a read too: convert them before reading any"
            )
        raise ValueError(message)


def missing_bootstrap(ids: Sequence[Any], key: str) -> ValueError:
    """The refusal of chunks without a bootstrap value: the remedy, the count, three ids.

    Example:
        >>> print(missing_bootstrap(["a", "b", "c", "d"], "v"))  # doctest: +ELLIPSIS
        pass value_fn, or store custom_data['v'] ...: 4 of them (episode ids 'a', ... and 1 more)
    """
    more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""  # not all: 4096 envs, 300 kB
    return ValueError(
        f"pass value_fn, or store custom_data[{key!r}] in every chunk that ends truncated or "
        f"still runs: these chunks need a bootstrap value and hold none: {len(ids)} of them "
        f"(episode ids {', '.join(map(repr, ids[:3]))}{more})"
    )


def check_storage_size(storage: Any, num_steps: int, num_envs: int) -> None:
    """Refuses a given storage that is not ``num_steps`` x ``num_envs`` transitions.

    A longer storage would keep an earlier rollout's rows past ``num_steps`` and hand them
    to the generators as if they were this rollout's.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> storage = RolloutStorage("rl", 2, 5, [3], [1])
        >>> check_storage_size(storage, 5, 2)
        >>> check_storage_size(storage, 3, 2)
        Traceback (most recent call last):
        ...
        ValueError: the given storage holds T=5 x N=2 transitions, but these chunks make T=3 x N=2
    """
    have = (storage.num_transitions_per_env, storage.num_envs)
    if have != (num_steps, num_envs):
        raise ValueError(
            f"the given storage holds T={have[0]} x N={have[1]} transitions, but these chunks "
            f"make T={num_steps} x N={num_envs}"
        )


def check_storage_layout(storage: Any, wanted: Any) -> None:
    """Refuses a given storage whose fields cannot take these chunks'.

    Checked before the storage is touched, so a refused conversion leaves it as it was. A
    field must be as wide in kind as the chunks' (float chunks into an int field would be
    truncated); a narrower float dtype is the storage's precision, and a narrower int one
    takes the chunks' values if they fit: that needs the values, so the write checks it
    (``RolloutStorage.write_block`` refuses an int64 300 for a uint8 field).

    ``wanted`` is the storage a conversion would make for the chunks (on the ``meta`` device:
    shapes without memory). A field the given storage has beyond ``wanted``'s (privileged
    observations, hidden states the keys do not name) is refused too: the conversion would
    not write it, and the generators would hand its earlier rollout's contents out as this
    rollout's (as a longer storage would its rows, :func:`check_storage_size`).

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> storage = RolloutStorage("rl", 2, 5, [3], [1])
        >>> check_storage_layout(storage, RolloutStorage("rl", 2, 5, [3], [1]))
        >>> check_storage_layout(storage, RolloutStorage("rl", 2, 5, [4], [1]))
        Traceback (most recent call last):
        ...
        ValueError: the given storage's observations hold steps of shape (3,), these chunks' ...
        >>> extra = RolloutStorage("rl", 2, 5, [3], [1], privileged_observations=[2])
        >>> check_storage_layout(extra, RolloutStorage("rl", 2, 5, [3], [1]))
        Traceback (most recent call last):
        ...
        ValueError: the given storage holds privileged_observations, which these chunks do not ...
    """
    if storage.training_type != wanted.training_type:
        raise ValueError(
            f"the given storage is for training_type {storage.training_type!r}, "
            f"not {wanted.training_type!r}"
        )
    _refuse_unfilled(storage, wanted)
    for field, names in wanted.field_names.items():
        # A write fills a field's every leaf: other dict keys or another number of parts
        # would fail part-way.
        mine = storage.field_names.get(field)
        if mine is not None and _shape_of(mine) != _shape_of(names):
            raise ValueError(
                f"the given storage's {field} are {_shape_of(mine)}, these chunks' "
                f"{_shape_of(names)}"
            )
    have = storage.tensors
    for name, tensor in wanted.tensors.items():
        mine = have.get(name)
        if mine is None:
            raise ValueError(f"the given storage has no {name} field, which these chunks fill")
        if not same_but_trailing_ones(mine.shape, tensor.shape):
            raise ValueError(
                f"the given storage's {name} hold steps of shape {tuple(mine.shape[2:])}, "
                f"these chunks' are {tuple(tensor.shape[2:])}"
            )
        _check_dtype(name, mine.dtype, tensor.dtype)
    for which in ("actor", "critic"):
        mine, theirs = (getattr(s, f"saved_hidden_states_{which}") for s in (storage, wanted))
        if mine is None or theirs is None:
            continue  # none to write (refused above if the storage has some), or allocated
        have, want = ([tuple(t.shape) for t in states] for states in (mine, theirs))
        if have != want:
            raise ValueError(
                f"the given storage's {which} hidden states are {have}, these chunks' {want}"
            )
        for held, written in zip(mine, theirs):
            _check_dtype(f"{which} hidden states", held.dtype, written.dtype)


def _refuse_unfilled(storage: Any, wanted: Any) -> None:
    """Refuses fields (and hidden states) of ``storage`` that a write of ``wanted``'s leaves."""
    unfilled = [field for field in storage.field_names if field not in wanted.field_names]
    for which in ("actor", "critic"):
        if getattr(storage, f"saved_hidden_states_{which}") is not None and (
            getattr(wanted, f"saved_hidden_states_{which}") is None
        ):
            unfilled.append(f"{which} hidden states (ColumnKeys.{which}_hidden names none)")
    if unfilled:
        raise ValueError(
            f"the given storage holds {unfilled[0]}, which these chunks do not fill: the "
            "generators would hand out its earlier contents as this rollout's; give a "
            "storage without them, or none"
        )


def _check_dtype(name: str, mine: torch.dtype, theirs: torch.dtype) -> None:
    """Refuses a field whose dtype is of a lower kind than the chunks' (float into int, ...).

    A write casts into the field as it is, and would truncate 0.7 to 0 without a word. A
    narrower float dtype (float64 into float32) is the storage's precision: taken. A narrower
    int dtype (int64 into uint8) is taken here; the write refuses values it would wrap.
    """
    if not torch.can_cast(theirs, mine):
        raise ValueError(
            f"the given storage's {name} are {mine}, which cannot hold these chunks' {theirs} "
            "values without loss; give a storage of that kind, or none"
        )


def _shape_of(names: Any) -> Any:
    """The nesting of a field's tensor names: dict keys and part counts, not the names."""
    if isinstance(names, dict):
        return {key: _shape_of(value) for key, value in names.items()}
    if isinstance(names, (tuple, list)):
        return f"{len(names)} parts"
    return "one tensor"


def check_extra_steps(extras: Any, actions: torch.Tensor, training_type: str, keys: Any) -> None:
    """Refuses extra outputs whose steps do not hold what their storage field takes.

    Values and log-probabilities take one number a step, privileged actions as many as the
    actions (``[T, N, ...]`` ``actions``). Missing outputs are refused where they are read.

    Example:
        >>> import numpy as np
        >>> from episodes.converter import ColumnKeys
        >>> check_extra_steps({"vf_preds": np.zeros((3, 2, 2)), "action_logp": np.zeros((3, 2))},
        ...                   torch.zeros(3, 2, 1), "rl", ColumnKeys())
        Traceback (most recent call last):
        ...
        ValueError: extra output 'vf_preds' has steps of shape (2,), but values take 1 number(s) ...
    """
    # Imported here: from_blocks imports columns, which imports this module.
    from episodes.converter.from_blocks import item_shape

    if training_type == "rl":
        fields = [(keys.values, "values", 1), (keys.log_probs, "actions_log_prob", 1)]
    else:
        size = math.prod(actions.shape[2:])
        fields = [(str(keys.privileged_actions), "privileged_actions", size)]
    for key, field, size in fields:
        try:
            shape = item_shape(extras, key)
        except KeyError:
            continue
        if math.prod(shape) != size:
            raise ValueError(
                f"extra output {key!r} has steps of shape {tuple(shape)}, but {field} take {size} "
                "number(s) per step"
            )


def teacher_in_dtype(values: Any, teacher: torch.Tensor, target: torch.dtype) -> torch.Tensor:
    """``teacher`` (the privileged actions, ``values`` as tensors) in the actions' ``target`` dtype.

    Refused as ``write_block`` refuses them (0.7 into int actions would be 0), and so are
    values beyond a narrower int dtype's range (300 into int8 would be 44), read on the host.
    Floats into int actions are kept when every value is finite, whole and in range (a
    teacher's argmax as float32): nothing is lost.

    Example:
        >>> values = np.array([1.0, 0.0], np.float32)
        >>> teacher_in_dtype(values, torch.from_numpy(values), torch.int64).tolist()
        [1, 0]
        >>> teacher_in_dtype(values + 0.5, torch.from_numpy(values + 0.5), torch.int64)
        Traceback (most recent call last):
        ...
        ValueError: privileged_actions: the actions are torch.int64, the teacher's ...
    """
    if teacher.dtype == target:
        return teacher
    problem = f"{teacher.dtype} values, which it cannot hold without loss"
    if target.is_floating_point or target.is_complex:
        if torch.can_cast(teacher.dtype, target):
            return teacher.to(target)
    elif not teacher.dtype.is_complex:  # into ints: only range (and fractions) can lose them
        host = _host(values)
        if teacher.dtype.is_floating_point and not (
            np.isfinite(host).all() and (host == np.floor(host)).all()
        ):
            raise ValueError(
                f"privileged_actions: the actions are {target}, the teacher's {teacher.dtype} "
                "values include fractions or non-finite ones, which it cannot hold; record the "
                "teacher's actions in the student's dtype"
            )
        lo, hi = (int(host.min()), int(host.max())) if host.size else (0, 0)
        info = torch.iinfo(target) if target != torch.bool else None
        held = (0, 1) if info is None else (info.min, info.max)
        if held[0] <= lo and hi <= held[1]:
            return teacher.to(target)
        problem = f"values in [{lo}, {hi}], beyond its range [{held[0]}, {held[1]}]"
    raise ValueError(
        f"privileged_actions: the actions are {target}, the teacher's {problem}; record the "
        "teacher's actions in the student's dtype"
    )


def _host(values: Any) -> np.ndarray:
    """``values`` as a host numpy array; floats as float64 (numpy has no bfloat16), exactly."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu()
        return (values.double() if values.dtype.is_floating_point else values).numpy()
    return np.asarray(values)


def obs_fn_input(observations: Any) -> Any:
    """``observations`` as handed to ``obs_fn``: views (of a runner's blocks) become copies.

    On the fast path, aligned windows read views of the runner's blocks, which the chunks
    and earlier storages share; an ``obs_fn`` that works in place (``obs -= mean``) would
    rewrite them. The general path hands it freshly stacked columns, so this path copies
    where it would hand out a view; arrays that own their memory are handed over as they are.

    Example:
        >>> block = np.zeros((2, 3))
        >>> handed = obs_fn_input({"a": block[:1], "b": np.ones(2)})
        >>> np.shares_memory(handed["a"], block), handed["b"].base is None
        (False, True)
    """

    def owned(leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray):
            return leaf if leaf.base is None else leaf.copy()
        if isinstance(leaf, torch.Tensor):
            return leaf if leaf._base is None else leaf.clone()
        return leaf

    return map_leaves(owned, observations)

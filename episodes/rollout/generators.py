"""Mini-batch generators over a :class:`RolloutStorage`.

They read the storage through its public fields, ``field_names`` and ``gather`` only, and
its count of refills: a generator made before a refill (``clear``, ``add_transition``,
``write_block``, an assigned ``valid`` or field other than returns and advantages:
``fields.REFILLS``) refuses its next batch, one int compared per batch. Their arguments and
the storage's ``valid`` are checked at the call (a bad one raises there, not at the first
batch); the batches are made lazily. None of the loops below copies data to
the host: every host synchronisation (learning the number of valid cells, of trajectories and
where each mini-batch's end) happens once per call, before the first batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import torch

from episodes.indexing import as_flag, whole_number

from .leaves import data_tensor, same_but_trailing_ones
from .nested import map_tree
from .trajectories import pad_with_layout, trajectory_layout
from .transition import HiddenState

if TYPE_CHECKING:
    from .storage import RolloutStorage

__all__ = [
    "DistillationBatch",
    "RLBatch",
    "distillation_generator",
    "mini_batch_generator",
    "normalize_into",
    "normalize_over",
    "recurrent_mini_batch_generator",
    "split_sizes",
]


@dataclass(eq=False)
class RLBatch:
    """A mini-batch for PPO-style updates.

    Flat batches hold ``[B, ...]`` tensors; recurrent batches hold padded ``[T, num_traj, ...]``
    observations with ``masks`` and ``[T, n_envs, ...]`` for the other fields.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 4, 2, (3,), (1,))  # 4 envs, 2 steps
        >>> flat = next(st.mini_batch_generator(2, num_epochs=1))
        >>> flat.observations.shape, flat.returns.shape, flat.masks, flat.hidden_states
        (torch.Size([4, 3]), torch.Size([4, 1]), None, (None, None))
        >>> rec = next(st.recurrent_mini_batch_generator(2, num_epochs=1))
        >>> rec.observations.shape, rec.actions.shape, rec.masks.shape
        (torch.Size([2, 2, 3]), torch.Size([2, 2, 1]), torch.Size([2, 2]))
    """

    observations: Any
    actions: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    old_actions_log_prob: torch.Tensor
    old_distribution_params: tuple[torch.Tensor, ...]
    hidden_states: tuple[HiddenState, HiddenState] = (None, None)
    masks: torch.Tensor | None = None
    privileged_observations: Any = None
    #: Recurrent batches of a storage with ``valid`` cells: ``[T, n_envs]``, False where a
    #: cell holds no transition (weight the loss with it); None otherwise (flat batches hold
    #: valid cells only).
    valid: torch.Tensor | None = None


@dataclass(eq=False)
class DistillationBatch:
    """One time step of a distillation rollout: ``[N, ...]`` tensors.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("distillation", 2, 3, (4,), (1,))  # 2 envs, 3 steps
        >>> batches = list(st.generator())  # one per time step
        >>> len(batches), batches[0].observations.shape, batches[0].privileged_actions.shape
        (3, torch.Size([2, 4]), torch.Size([2, 1]))
    """

    observations: Any
    actions: torch.Tensor
    privileged_actions: torch.Tensor
    dones: torch.Tensor
    privileged_observations: Any = None
    #: ``[N]`` bool, False where this step holds no transition (the storage's ``valid``);
    #: None when every step does.
    valid: torch.Tensor | None = None


def split_sizes(total: int, parts: int, what: str = "items") -> list[int]:
    """Sizes of ``parts`` near-equal parts of ``total`` (``np.array_split`` style).

    Example:
        >>> split_sizes(10, 3)
        [4, 3, 3]
    """
    if not 1 <= parts <= total:
        raise ValueError(
            f"num_mini_batches must be between 1 and the number of {what} to split ({total}), "
            f"got {parts}: each mini-batch holds at least one"
        )
    base, rem = divmod(total, parts)
    return [base + (i < rem) for i in range(parts)]


def _normalized(adv: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    if valid is None:
        if adv.numel() < 2:  # normalize_over's clamped n - 1: std 0, not NaN, so 0 / 1e-8
            return adv - adv.mean()
        if adv.element_size() < 4:  # float16's 1e-8 is 0: equal advantages would give 0 / 0
            wide = adv.float()
            return ((wide - wide.mean()) / (wide.std() + 1e-8)).to(adv.dtype)
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    return normalize_over(adv.clone(), valid)


def normalize_over(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Normalises ``values`` in place to zero mean and unit std over the ``valid`` cells.

    The unbiased std (as ``torch.std``) plus ``1e-8``, from masked sums: no boolean indexing,
    so nothing waits for the device. Its divisor ``n - 1`` is clamped to at least 1: one valid
    cell normalises to 0 (``torch.std`` would give NaN), and none leaves the cells finite.
    Cells outside ``valid`` are never read (a NaN, an inf or a 1e20 there changes nothing)
    and are set to 0: a cell without a transition has advantage 0 (contract 9.3).

    Raises:
        TypeError: an argument that is not a tensor.
        ValueError: ``values`` not floating point, a tensor without data or not dense, or a
            ``valid`` whose shape differs from ``values``' by more than trailing 1s; nothing
            is written then.

    Example:
        >>> values = torch.tensor([[1.0, float("nan")], [3.0, 1e20]])
        >>> normalize_over(values, torch.tensor([[True, False], [True, False]])).tolist()
        [[-0.7071067690849304, 0.0], [0.7071067690849304, 0.0]]
    """
    _check_cells(values, valid, values=values)
    # Worked in float32 at least: float16 sums overflow past 65504 (a count of 98304 cells is
    # inf), a mean rounded to float16 centres nothing, and 1e-8 is 0 there.
    work = values if values.element_size() >= 4 else values.float()
    # Selected away before any arithmetic, not weighted by 0: 0 * NaN is NaN, and a 1e20
    # squared is inf in float32.
    empty = torch.logical_not(valid.reshape(values.shape))
    count = (empty.numel() - empty.sum()).to(work.dtype).clamp_(min=1)  # none valid: not NaN
    work.sub_(work.masked_fill(empty, 0.0).sum() / count)
    centred = work.masked_fill(empty, 0.0).reshape(-1)
    spread = torch.dot(centred, centred)
    spread = spread.div_((count - 1).clamp_(min=1)).sqrt_()
    # Shifted and scaled, such a cell would be -mean / std: a loss not weighted by valid (or
    # a padded trajectory's masks) would then train on cells that hold no transition.
    work.div_(spread.add_(1e-8)).masked_fill_(empty, 0.0)
    return values if work is values else values.copy_(work)


def _check_cells(like: Any, valid: Any, **tensors: Any) -> None:
    """Refuses what a normalisation would fail on part-way (or resize ``out`` for).

    ``tensors`` (``like`` first) must be floating tensors of ``like``'s shape, and ``valid``
    (when given) of that shape up to trailing 1s.
    """
    for name, arg in tensors.items():
        if not data_tensor(arg, name).is_floating_point():
            raise ValueError(f"{name} must be floating point, got {arg.dtype}")
        if arg.shape != like.shape:  # torch.div(out=) would resize out with only a warning
            raise ValueError(f"{name} has shape {tuple(arg.shape)}, expected {tuple(like.shape)}")
    if valid is not None and not same_but_trailing_ones(
        data_tensor(valid, "valid").shape, like.shape
    ):
        raise ValueError(f"valid has shape {tuple(valid.shape)}, expected {tuple(like.shape)}")


def _divided(values: torch.Tensor, std: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``values / std`` into ``out``, ``std`` being the float32-or-wider spread plus 1e-8.

    Half precision divides in ``std``'s dtype: 1e-8 is 0 in float16, and a constant (or
    single) cell's 0 / 0 would be NaN where wider dtypes give 0.
    """
    if values.dtype == std.dtype:
        return torch.div(values, std, out=out)
    return out.copy_(values.to(std.dtype).div_(std))


def normalize_into(
    out: torch.Tensor, advantages: torch.Tensor, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """Writes ``advantages`` normalised over all cells (or the ``valid`` ones) into ``out``.

    Zero mean and unit unbiased std (as ``torch.std``) plus ``1e-8``, the divisor ``n - 1``
    clamped to at least 1 as in :func:`normalize_over`: a single cell becomes 0, with or
    without a ``valid`` mask (``torch.std`` of one value is NaN), and so does every cell
    outside ``valid``. ``advantages`` may be used as scratch space.

    Raises:
        TypeError: an argument that is not a tensor.
        ValueError: ``out`` and ``advantages`` not floating point or of different shapes, a
            tensor without data or not dense, or a ``valid`` of another shape (trailing 1s
            aside); checked before ``out`` is written.

    Example:
        >>> out = torch.empty(4)
        >>> [round(x, 4) for x in normalize_into(out, torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist()]
        [-1.1619, -0.3873, 0.3873, 1.1619]
        >>> normalize_into(torch.empty(1, 1), torch.tensor([[2.0]])).tolist()
        [[0.0]]
    """
    _check_cells(advantages, valid, advantages=advantages, out=out)
    if valid is not None:
        return normalize_over(out.copy_(advantages), valid)
    # Two-pass unbiased std, with the sum of squares as one BLAS dot, worked in float32 at
    # least (float16 squares overflow past 65504, and a mean rounded to float16 centres
    # nothing). reshape: a recurrent batch's slice is no view.
    work = advantages if advantages.element_size() >= 4 else advantages.float()
    centered = work.sub_(work.mean()).reshape(-1)
    std = torch.dot(centered, centered).div_(max(centered.numel() - 1, 1)).sqrt_()
    return _divided(work, std.add_(1e-8), out)


def _require(storage: RolloutStorage, training_type: str, what: str) -> torch.Tensor | None:
    """Refuses a storage of another training type; returns its ``valid`` once checked."""
    if not hasattr(storage, "training_type"):  # read as a storage: its fields, nothing more
        raise TypeError(f"{what} needs a RolloutStorage, got {type(storage).__name__}")
    if storage.training_type != training_type:
        raise ValueError(
            f"{what} needs training_type {training_type!r}, got {storage.training_type!r}"
        )
    # valid is a plain attribute: an [N, T] mask (or a [T * N] one) would be read as cells
    # of other steps and envs without a word, so its shape is checked where it is read.
    valid, want = storage.valid, (storage.num_transitions_per_env, storage.num_envs)
    if valid is not None and (not isinstance(valid, torch.Tensor) or valid.shape != want):
        got = tuple(valid.shape) if isinstance(valid, torch.Tensor) else type(valid).__name__
        raise ValueError(f"storage.valid must be a [T, N] = {list(want)} mask, got {got}")
    return valid


def _check_filled(storage: RolloutStorage, what: str) -> None:
    """Refuses a storage written part-way (``0 < step < T``) that has no ``valid`` mask."""
    step, steps = storage.step, storage.num_transitions_per_env
    if 0 < step < steps and storage.valid is None:
        raise ValueError(
            f"{what}: the storage holds {step} of its T={steps} steps (step={step}); the "
            "others would be read as transitions: write them (add_transition, write_block), "
            "call clear() first if you filled the tensors directly, or set storage.valid"
        )


def _changed(what: str) -> RuntimeError:
    """The error of a generator whose storage was refilled since it was made."""
    return RuntimeError(
        f"the storage changed (clear, add_transition, write_block, or an assigned valid or "
        f"field) while its {what} was in use; make a new generator"
    )


def _counts(num_mini_batches: Any, num_epochs: Any) -> tuple[int, int]:
    """The generators' counts as ints (``2.0`` and ``True`` refused), checked at the call."""
    return (
        whole_number(num_mini_batches, "num_mini_batches", 1),
        whole_number(num_epochs, "num_epochs", 0),
    )


def mini_batch_generator(
    storage: RolloutStorage,
    num_mini_batches: int,
    num_epochs: int = 8,
    *,
    generator: torch.Generator | None = None,
    normalize_advantage_per_mini_batch: bool | None = None,
) -> Iterator[RLBatch]:
    """Yield shuffled flat mini-batches of the ``T * N`` samples, ``num_epochs`` times.

    Every epoch draws a fresh ``torch.randperm`` on the storage's device and splits it into
    ``num_mini_batches`` parts whose sizes differ by at most one (the remainder is spread over
    the first batches), so every sample is used exactly once per epoch. When the storage has
    ``valid`` cells, only those are samples (learning how many takes one host
    synchronisation per call).

    Args:
        storage: an ``"rl"`` storage with returns computed.
        num_mini_batches: number of mini-batches per epoch, ``1 <= . <=`` the number of
            samples: ``T * N``, or the valid cells when the storage's ``valid`` is set.
        num_epochs: number of passes.
        generator: optional ``torch.Generator`` on the storage's device, for determinism.
        normalize_advantage_per_mini_batch: normalise each batch's advantages; defaults to the
            storage's setting.

    Raises:
        ValueError: at the call, not at the first batch: a storage of another training type,
            ``num_mini_batches`` or ``num_epochs`` that is not an int in range (``2.0`` too),
            or a storage ``valid`` that is not ``[T, N]``.
        TypeError: at the call: ``storage`` is no storage, or ``generator`` no
            ``torch.Generator``.
        RuntimeError: when a batch is asked for after the storage was refilled (``clear``,
            ``add_transition``, ``write_block``, an assigned ``valid`` or field) since the
            call: its cells were chosen on the storage as it was then; make a new generator.
            ``compute_returns`` is no refill: the advantages and returns are read at each
            batch.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 5, 2, (3,), (1,))
        >>> [b.actions.shape[0] for b in st.mini_batch_generator(3, num_epochs=1)]
        [4, 3, 3]
    """
    valid, made = _require(storage, "rl", "mini_batch_generator"), storage._refills
    num_mini_batches, num_epochs = _counts(num_mini_batches, num_epochs)
    if generator is not None and not isinstance(generator, torch.Generator):
        # Else torch.randperm refuses it at the first batch, not at the call.
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    cells = None if valid is None else valid.reshape(-1).nonzero().squeeze(1)
    total = storage.num_transitions_per_env * storage.num_envs if cells is None else len(cells)
    split_sizes(total, num_mini_batches, "transitions")  # validates
    normalize = _per_mini_batch(storage, normalize_advantage_per_mini_batch)
    _check_filled(storage, "mini_batch_generator")
    # Checked above, at the call; the batches are gathered lazily.
    return _flat_batches(storage, num_mini_batches, num_epochs, generator, normalize, cells, made)


def _flat_batches(
    storage: RolloutStorage,
    num_mini_batches: int,
    num_epochs: int,
    generator: torch.Generator | None,
    normalize: bool,
    cells: torch.Tensor | None,
    made: int,  # the storage's refills at the call
) -> Iterator[RLBatch]:
    total = storage.num_transitions_per_env * storage.num_envs if cells is None else len(cells)
    names = storage.field_names
    # Rewards and dones are not part of a batch: gather everything else.
    wanted = [name for name in storage.tensors if name not in ("rewards", "dones")]
    for _ in range(num_epochs):
        if storage._refills != made:  # before the draw: a refused batch draws nothing
            raise _changed("mini_batch_generator")
        perm = torch.randperm(total, device=storage.device, generator=generator)
        if cells is not None:
            perm = cells[perm]
        for index in perm.tensor_split(num_mini_batches):
            if storage._refills != made:
                raise _changed("mini_batch_generator")
            rows = storage.gather(index, wanted)
            pick = rows.__getitem__
            adv = rows["advantages"]
            yield RLBatch(
                observations=map_tree(pick, names["observations"]),
                actions=rows["actions"],
                values=rows["values"],
                advantages=_normalized(adv) if normalize else adv,
                returns=rows["returns"],
                old_actions_log_prob=rows["actions_log_prob"],
                old_distribution_params=tuple(map(pick, names["distribution_params"])),
                privileged_observations=map_tree(pick, names.get("privileged_observations")),
            )


def _first_states(
    saved: list[torch.Tensor] | None,
    start_time: torch.Tensor,
    start_env: torch.Tensor,
    traj_bounds: list[int],
) -> list[HiddenState]:
    """Per mini-batch ``[num_layers, num_traj, hidden]`` states at trajectory starts."""
    if saved is None:
        return [None] * (len(traj_bounds) - 1)
    # [T, L, N, H] indexed at (t_j, :, n_j) -> [num_traj, L, H]: one gather for all batches.
    firsts = [s[start_time, :, start_env] for s in saved]
    out: list[HiddenState] = []
    for a, b in zip(traj_bounds[:-1], traj_bounds[1:], strict=True):
        comps = tuple(f[a:b].transpose(0, 1).contiguous() for f in firsts)
        out.append(comps[0] if len(comps) == 1 else comps)
    return out


def recurrent_mini_batch_generator(
    storage: RolloutStorage,
    num_mini_batches: int,
    num_epochs: int = 8,
    *,
    normalize_advantage_per_mini_batch: bool | None = None,
) -> Iterator[RLBatch]:
    """Yield mini-batches of whole envs with their trajectories split at dones and padded.

    Envs are grouped in order into ``num_mini_batches`` groups. With ``N`` not divisible by
    ``num_mini_batches`` the ``N % num_mini_batches`` remainder envs are **spread**: the first
    groups get one extra env each (``np.array_split`` style), so no env is dropped (rsl_rl drops
    them). When divisible the grouping equals rsl_rl's ``N // num_mini_batches`` per group.
    The grouping is the same every epoch.

    The split/pad, the hidden-state gather and the batch boundaries are computed once per call
    (two host synchronisations, at the first batch); the loops only slice. The arguments and
    the storage's ``valid`` are checked at the call, as :func:`mini_batch_generator`'s:
    ``num_mini_batches`` is an int in ``[1, N]``.

    Each batch has ``observations`` ``[T, num_traj, ...]`` (zero-padded) with ``masks``
    ``[T, num_traj]``, the other fields ``[T, n_envs, ...]`` and ``hidden_states`` ``(actor,
    critic)``, each the state at every trajectory's first step, ``[num_layers, num_traj,
    hidden]`` (a tensor for GRU, a tuple for LSTM, ``None`` when not stored). With the
    storage's ``valid`` cells set, ``valid`` is their ``[T, n_envs]`` slice (a cell without a
    transition, or a run of them, is a trajectory of its own, as GAE ends the episode there,
    whether ``dones`` is set (the converter's are) or not) and the per-batch advantage
    normalisation uses valid cells only and gives the others advantage 0.

    A batch asked for after the storage was refilled since the call is a ``RuntimeError``,
    as :func:`mini_batch_generator`'s (its trajectories and observations were laid out on
    the storage as it was); ``compute_returns`` in between is no refill.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 4, 3, (2,), (1,))
        >>> [b.masks.shape for b in st.recurrent_mini_batch_generator(2, num_epochs=1)]
        [torch.Size([3, 2]), torch.Size([3, 2])]
    """
    valid, made = _require(storage, "rl", "recurrent_mini_batch_generator"), storage._refills
    num_mini_batches, num_epochs = _counts(num_mini_batches, num_epochs)
    normalize = _per_mini_batch(storage, normalize_advantage_per_mini_batch)
    sizes = split_sizes(storage.num_envs, num_mini_batches, "envs")
    _check_filled(storage, "recurrent_mini_batch_generator")
    # Checked above, at the call; the layout (its host syncs) waits for the first batch.
    return _recurrent_batches(storage, sizes, num_epochs, normalize, valid, made)


def _per_mini_batch(storage: RolloutStorage, given: Any) -> bool:
    if given is None:
        return bool(storage.normalize_advantage_per_mini_batch)
    return as_flag(given, "normalize_advantage_per_mini_batch")


def _recurrent_batches(
    storage: RolloutStorage,
    sizes: list[int],
    num_epochs: int,
    normalize: bool,
    valid_cells: torch.Tensor | None,
    made: int,  # the storage's refills at the call
) -> Iterator[RLBatch]:
    what = "recurrent_mini_batch_generator"
    if num_epochs and storage._refills != made:  # before the layout's host syncs
        raise _changed(what)
    num_mini_batches = len(sizes)
    env_bounds = [0]
    for s in sizes:
        env_bounds.append(env_bounds[-1] + s)
    ends = storage.dones
    if valid_cells is not None:
        # A run of cells without transitions is a trajectory of its own, done or not (GAE
        # ends the episode there too): split where validity changes, so a run of padding
        # stays one trajectory rather than one per cell.
        ends = storage.dones.reshape(valid_cells.shape).bool().clone()
        ends[:-1] |= valid_cells[:-1] != valid_cells[1:]
    layout = trajectory_layout(ends)
    obs = pad_with_layout(storage.observations, layout)
    priv = None
    if storage.privileged_observations is not None:
        priv = pad_with_layout(storage.privileged_observations, layout)
    # One read of the offsets (N + 1 ints), before the loops: uploading the bounds to index
    # them on the device would be a second wait.
    offsets: list[int] = layout.traj_offsets.tolist()
    traj_bounds = [offsets[bound] for bound in env_bounds]
    h_actor = _first_states(
        storage.saved_hidden_states_actor, layout.start_time, layout.start_env, traj_bounds
    )
    h_critic = _first_states(
        storage.saved_hidden_states_critic, layout.start_time, layout.start_env, traj_bounds
    )
    assert storage.values is not None and storage.advantages is not None
    assert storage.returns is not None and storage.actions_log_prob is not None
    dist = storage.distribution_params or ()
    for _ in range(num_epochs):
        for i in range(num_mini_batches):
            if storage._refills != made:
                raise _changed(what)
            e0, e1 = env_bounds[i], env_bounds[i + 1]
            j0, j1 = traj_bounds[i], traj_bounds[i + 1]
            adv = storage.advantages[:, e0:e1]
            valid = None if valid_cells is None else valid_cells[:, e0:e1]
            trajectories = itemgetter((slice(None), slice(j0, j1)))  # x[:, j0:j1]
            yield RLBatch(
                observations=map_tree(trajectories, obs),
                actions=storage.actions[:, e0:e1],
                values=storage.values[:, e0:e1],
                advantages=_normalized(adv, valid) if normalize else adv,
                returns=storage.returns[:, e0:e1],
                old_actions_log_prob=storage.actions_log_prob[:, e0:e1],
                old_distribution_params=tuple(p[:, e0:e1] for p in dist),
                hidden_states=(h_actor[i], h_critic[i]),
                masks=layout.masks[:, j0:j1],
                privileged_observations=map_tree(trajectories, priv),
                valid=valid,
            )


def distillation_generator(storage: RolloutStorage) -> Iterator[DistillationBatch]:
    """Yield one :class:`DistillationBatch` per time step, in time order.

    A batch asked for after the storage was refilled since the call is a ``RuntimeError``,
    as :func:`mini_batch_generator`'s (its ``valid`` was read then).

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("distillation", 2, 3, (4,), (1,))
        >>> [b.privileged_actions.shape for b in st.generator()][0]
        torch.Size([2, 1])
    """
    valid, made = _require(storage, "distillation", "generator"), storage._refills
    _check_filled(storage, "generator")
    return _steps(storage, valid, made)


def _steps(
    storage: RolloutStorage, valid: torch.Tensor | None, made: int
) -> Iterator[DistillationBatch]:
    assert storage.privileged_actions is not None
    for t in range(storage.num_transitions_per_env):
        if storage._refills != made:  # the storage's refills at the call
            raise _changed("generator")
        step = itemgetter(t)
        yield DistillationBatch(
            observations=map_tree(step, storage.observations),
            actions=storage.actions[t],
            privileged_actions=storage.privileged_actions[t],
            dones=storage.dones[t],
            privileged_observations=map_tree(step, storage.privileged_observations),
            valid=None if valid is None else valid[t],
        )

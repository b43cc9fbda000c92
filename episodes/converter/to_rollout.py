"""Episodes -> a filled torch :class:`~episodes.rollout.RolloutStorage`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from episodes.converter.bootstrap import bootstrap_truncated_rewards
from episodes.converter.columns import (
    ColumnKeys,
    ObsFn,
    TimeMajorColumns,
    extra_keys_for,
    time_major,
)
from episodes.converter.from_blocks import (
    LazyGroups,
    block_columns,
    early_taken,
    flat_observations,
    gather_into,
)
from episodes.converter.groups import column_groups
from episodes.converter.inputs import chunk_sequence, real_values, rollout_arguments
from episodes.converter.observation_batch import last_observations
from episodes.converter.refusals import (
    flat_actions,
    float_dtype,
    missing_bootstrap,
    refuse_masked_windows,
    storage_device,
    teacher_in_dtype,
)
from episodes.converter.side_by_side import (
    side_by_side_columns,
    side_by_side_groups,
    side_by_side_parts,
)
from episodes.converter.storage_for import (
    as_tensors,
    default_device,
    ready_storage,
    recording_device,
    taking_tensors,
)
from episodes.episode import SingleAgentEpisode
from episodes.indexing import discount_factor
from episodes.rollout import RolloutStorage
from episodes.rollout.held import clear_unheld_outputs
from episodes.runner import SampledChunks

ValueFn = Callable[[Any], Any]


@dataclass(eq=False)
class Rollout:
    """A filled storage plus what ``compute_returns`` and the learner need next.

    Attributes:
        storage: The filled storage (``step == T``).
        last_values: ``[N, 1]`` values of each env's last observation (0 where the env's last
            episode ended inside the window); pass to ``storage.compute_returns``.
        mask: ``[T, N]`` bool, True on cells that hold a transition: the real (not padded)
            steps of ``layout="per_chunk"``, the steps other than next-step reset steps of a
            runner recording vector steps (``EnvRunner(window="vector_steps")``); None when
            every cell holds one. The storage's ``valid`` is the same tensor.
        groups: The chunks of each column, in time order (built when read, if the rollout
            came straight from a runner's blocks).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...     rewards=[1.0, 1.0], terminated=True, len_lookback_buffer=0,
        ...     extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [-0.7, -0.7]})
        >>> r = episodes_to_rollout([ep], gamma=0.9, value_fn=lambda obs: obs)
        >>> r.storage.step, r.last_values.tolist(), r.mask, len(r.groups[0])
        (2, [[0.0]], None, 1)
    """

    storage: RolloutStorage
    last_values: torch.Tensor
    mask: torch.Tensor | None
    groups: Sequence[Sequence[SingleAgentEpisode]]

    def __repr__(self) -> str:  # the dataclass repr listed every group's chunks
        storage = self.storage
        return (
            f"Rollout(T={storage.num_transitions_per_env}, N={storage.num_envs}, "
            f"device={storage.device}, masked={self.mask is not None})"
        )


def bootstrap_values(
    chunks: Sequence[SingleAgentEpisode],
    *,
    value_fn: ValueFn | None,
    keys: ColumnKeys,
    obs_fn: ObsFn | None = None,
) -> np.ndarray:
    """``V`` of each chunk's last observation, float64 ``[len(chunks)]``.

    From ``value_fn`` (called once on the batched, ``obs_fn``-transformed observations), or,
    without one, from ``chunk.custom_data[keys.bootstrap_value]``.

    Raises:
        ValueError: Neither source is available for some chunk; or ``value_fn`` gave, or a
            chunk stores, something other than one real number (int or float) per chunk:
            None, a bool, a complex number, a string, another number of values (naming
            ``value_fn``, or the chunk and the key).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 3], actions=[1], rewards=[1.0])
        >>> bootstrap_values([ep], value_fn=lambda obs: obs * 2.0, keys=ColumnKeys()).tolist()
        [6.0]
    """
    chunks = chunk_sequence(chunks, "bootstrap_values", flat=True)  # read more than once
    if not chunks:
        return np.zeros(0)
    if value_fn is not None:
        values = value_fn(last_observations(chunks, obs_fn))
        return real_values(values, len(chunks), "value_fn returned")
    key = keys.bootstrap_value
    missing = [c.id_ for c in chunks if key not in c.custom_data]
    if missing:
        raise missing_bootstrap(missing, key)
    where = "the chunk of episode {!r} starting at t={} holds custom_data[{!r}] ="
    return np.concatenate(
        [real_values(c.custom_data[key], 1, where.format(c.id_, c.t_started, key)) for c in chunks]
    )


def _hidden(
    extras: dict[str, np.ndarray], names: Sequence[str], device: torch.device, dtype: torch.dtype
) -> Any:
    if not names:
        return None
    # Stored per step as [num_layers, hidden]; the storage wants [T, num_layers, N, hidden].
    parts = [as_tensors(extras[k], device, dtype).permute(0, 2, 1, 3) for k in names]
    return parts[0] if len(parts) == 1 else tuple(parts)


def episodes_to_rollout(
    episodes: Sequence[Any],
    *,
    gamma: float,
    value_fn: ValueFn | None = None,
    keys: ColumnKeys | None = None,
    training_type: str = "rl",
    device: str | torch.device | None = None,
    obs_fn: ObsFn | None = None,
    layout: str = "per_env",
    storage: RolloutStorage | None = None,
    dtype: torch.dtype | None = None,
    copy: bool = False,
) -> Rollout:
    """Flattens episode chunks into a ``[T, N, ...]`` rollout storage, bootstrapped exactly.

    Layouts: ``"per_env"`` lays the chunks of each env end to end along T (every env must hold
    the same number of steps, as the env runner guarantees), with ``dones`` at episode ends;
    ``"per_chunk"`` gives each chunk its own column, zero-padded, with a mask. A stepless chunk
    that ended its episode ends that episode's latest chunk (see :func:`column_groups`).

    Chunks straight from :meth:`EnvRunner.sample <episodes.runner.EnvRunner.sample>` (a
    :class:`~episodes.runner.SampledChunks`) take a fast path with ``"per_env"``: the columns
    are read from the runner's blocks, one copy per field and no chunk built, unless a chunk
    was changed in a way the blocks do not see (see :mod:`episodes.converter.from_blocks`).
    Both paths give the same storage.

    Bootstrapping: a truncated episode's last reward gets ``gamma * V(final observation)``
    (computed in float64, then cast), a terminated one nothing; an env whose last chunk is still
    running contributes ``V(last observation)`` to ``last_values``. ``V`` comes from
    ``value_fn`` (one batched call on ``obs_fn``-transformed observations; for a distributed
    ``GroupSample``, one per runner's part) or from
    ``custom_data[keys.bootstrap_value]``.

    Args:
        episodes: Chunks (a flat list as the env runner returns, or per-env lists).
        gamma: Discount factor used for the bootstrap, in ``[0, 1]``.
        value_fn: Batched observations -> values (numpy or torch), for the bootstrap.
        keys: Which extra-model-outputs hold values, log-probs, distribution parameters,
            privileged actions and hidden states.
        training_type: ``"rl"`` or ``"distillation"``.
        device: Where the storage lives; None: the given ``storage``'s device (another is
            refused), else the device the runner recorded on (a torch-tensor env's), else the
            CPU. One not usable here (``"cuda"`` without one, ``"meta"``) is a ``DeviceError``
            (:func:`~episodes.rollout.devices.checked_device`), before anything is read.
        obs_fn: Transforms the ``[T, N, ...]`` observation columns row by row (flatten,
            one-hot, ...): the result for a row may not depend on the other rows.
        layout: ``"per_env"`` or ``"per_chunk"``.
        storage: An existing storage of matching size to fill (cleared first).
        dtype: Float dtype of the storage; None: the given storage's (its rewards'; another
            is refused), else ``torch.float32``, as ``device=None`` follows the given storage.
        copy: Copy every field into the storage's own tensors. By default a ``[T, N, ...]``
            column that already has the storage's dtype, device and layout is taken as it is
            (:meth:`RolloutStorage.write_block` with ``share=True``): on the fast path with
            aligned windows (the runner's vector-steps window, same-step and disabled
            autoreset) observations, actions and extra outputs are then views of the runner's
            blocks, which the chunks view too. Read such a storage; write into its fields only
            after :meth:`RolloutStorage.own` (nothing in the library writes into them).

    Returns:
        A :class:`Rollout`: the storage, ``last_values`` and the mask.

    Raises:
        ValueError: ``gamma`` outside ``[0, 1]``, a ``dtype`` that is not a float dtype, a
            ``dtype`` or ``device`` other than a given storage's, chunks of one episode out of
            time order, chunks (or envs) whose fields differ in nesting, step shape or kind,
            teacher actions the actions' dtype cannot hold, or a storage that cannot take them
            (ints a narrower int field would wrap too), rewards that are not one number a step
            (vectors, one-item arrays), all before a given storage is cleared.
        TypeError: Rewards that are not real numbers (complex, strings, objects: refused, as
            the above, before a given storage is cleared); observations that are neither an
            array nor a dict of arrays (a Tuple space's), which the storage cannot hold (before
            ``value_fn`` sees them); and, before anything is read, ``keys`` that are not a
            :class:`ColumnKeys`, a ``storage`` that is not a :class:`RolloutStorage`, a
            ``copy`` that is not a bool, a ``value_fn`` or ``obs_fn`` that is not callable.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...     rewards=[1.0, 1.0], truncated=True, len_lookback_buffer=0,
        ...     extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [-0.7, -0.7],
        ...                          "logits": [[0.0, 0.0], [0.0, 0.0]]})
        >>> r = episodes_to_rollout([ep], gamma=0.5, value_fn=lambda obs: obs * 10,
        ...                         keys=ColumnKeys(distribution=("logits",)))
        >>> r.storage.rewards[:, 0, 0].tolist()
        [1.0, 11.0]
    """
    if layout not in ("per_env", "per_chunk"):
        raise ValueError(f"layout must be 'per_env' or 'per_chunk', got {layout!r}")
    if training_type not in ("rl", "distillation"):
        raise ValueError(f"training_type must be 'rl' or 'distillation', got {training_type!r}")
    keys, copy = rollout_arguments(keys, storage, copy, value_fn, obs_fn)
    episodes = chunk_sequence(episodes, "episodes_to_rollout")  # read more than once
    extra_keys_for(keys, training_type)
    gamma = discount_factor(gamma)  # the check every n-step computation makes
    # Both refused before anything is read or touched when they conflict with a given storage.
    dtype = float_dtype(dtype, storage)
    device = storage_device(device, storage) or default_device(episodes, storage)
    recorded_on = recording_device(episodes)
    if recorded_on is not None:  # the general path reads the chunks' host mirror
        value_fn, obs_fn = (taking_tensors(fn, recorded_on) for fn in (value_fn, obs_fn))
    fast = None
    if layout == "per_env":
        fast = block_columns(
            episodes,
            keys,
            value_fn=value_fn,
            gamma=gamma,
            training_type=training_type,
            obs_fn=obs_fn,
            defer_observations=device.type == "cpu",
        )
    if fast is not None:
        cols, rewards, last_values = fast
        storage = _write_from_blocks(
            episodes,  # type: ignore[arg-type]
            cols,
            rewards,
            storage,
            training_type=training_type,
            keys=keys,
            device=device,
            dtype=dtype,
            share=not copy,
        )
        groups = LazyGroups(episodes)
        mask = _valid_cells(storage, cols.mask, device)
        return Rollout(storage, as_tensors(last_values, device, dtype), mask, groups)
    parts = side_by_side_parts(episodes) if layout == "per_env" else None
    if parts is not None:
        joined = side_by_side_columns(
            parts,
            keys,
            value_fn=value_fn,
            gamma=gamma,
            training_type=training_type,
            obs_fn=obs_fn,
        )
        if joined is not None:
            cols, rewards, last_values = joined
            storage = _write_columns(
                cols, rewards, storage, training_type, keys, device, dtype, share=not copy
            )
            groups = side_by_side_groups(episodes, parts)
            mask = _valid_cells(storage, cols.mask, device)
            return Rollout(storage, as_tensors(last_values, device, dtype), mask, groups)
    if layout == "per_env":
        refuse_masked_windows(
            [episodes] if parts is None else parts, extra_keys_for(keys, training_type)
        )
    env_groups = column_groups(episodes, layout)
    cols = time_major(
        env_groups, keys, obs_fn, training_type=training_type, pad=layout == "per_chunk"
    )
    rewards = cols.rewards.astype(np.float64)
    last_values = np.zeros((cols.dones.shape[1], 1))
    flat_observations(cols.observations)  # refused before value_fn sees them
    if training_type == "rl":  # distillation has no returns to bootstrap: no value is asked for
        rewards = _bootstrap(cols, rewards, last_values, gamma, value_fn, keys, obs_fn)
    storage = _write_columns(
        cols, rewards, storage, training_type, keys, device, dtype, share=not copy
    )
    # Padding only where chunks differ in length: chunks of one length need no mask.
    if cols.mask is not None and bool(np.all(cols.mask)):
        cols.mask = None
    mask = _valid_cells(storage, cols.mask, device, blocks=False)
    return Rollout(storage, as_tensors(last_values, device, dtype), mask, env_groups)


def _teacher_actions(cols: TimeMajorColumns, keys: ColumnKeys, actions: Any) -> torch.Tensor:
    """The privileged actions in the actions' dtype, checked before the storage is touched."""
    values = cols.extras[str(keys.privileged_actions)]
    teacher = as_tensors(values, actions.device, name=f"{keys.privileged_actions!r} outputs")
    return teacher_in_dtype(values, teacher, actions.dtype)


def _valid_cells(
    storage: RolloutStorage, mask: Any, device: torch.device, blocks: bool = True
) -> torch.Tensor | None:
    """The ``[T, N]`` mask of cells holding a transition (None: all), also the storage's.

    From ``blocks`` (a runner's reset steps) the policy's float outputs there are set to 0,
    in the blocks themselves where the storage views them: no chunk holds those cells. The
    general path's masked cells are its padding, zeros already.
    """
    storage.valid = None if mask is None else as_tensors(mask, device)
    if blocks:
        clear_unheld_outputs(storage, write_shared=True)
    return storage.valid


def _write_columns(
    cols: TimeMajorColumns,
    rewards: np.ndarray,
    storage: RolloutStorage | None,
    training_type: str,
    keys: ColumnKeys,
    device: torch.device,
    dtype: torch.dtype,
    *,
    share: bool,
) -> RolloutStorage:
    """Fills a new storage, or clears and fills ``storage``, from ``[T, N, ...]`` columns.

    With ``share`` the columns that fit are taken rather than copied (``write_block``).
    """
    obs = flat_observations(as_tensors(cols.observations, device, name="observations"))
    actions = flat_actions(as_tensors(cols.actions, device, name="actions"))
    if actions.dim() == 2:
        actions = actions.unsqueeze(-1)
    teacher = _teacher_actions(cols, keys, actions) if training_type == "distillation" else None
    storage = ready_storage(
        storage, cols, obs, actions, training_type, keys, device, dtype, teacher
    )
    fields = dict(_storage_fields(cols, rewards, actions, training_type, keys, dtype, teacher))
    storage.write_block(0, share=share, observations=obs, actions=actions, **fields)
    return storage


def _write_from_blocks(
    chunks: SampledChunks,
    cols: TimeMajorColumns,
    rewards: np.ndarray,
    storage: RolloutStorage | None,
    *,
    training_type: str,
    keys: ColumnKeys,
    device: torch.device,
    dtype: torch.dtype,
    share: bool,
) -> RolloutStorage:
    """Fills a storage from a runner's blocks (the fast path), field by field.

    When ``block_columns`` deferred the observations (and actions), they and the extra
    outputs are gathered straight into the storage's tensors (which it must own for that);
    the rest is written one field at a time, so at most one field's temporary columns exist
    at once. With ``share``, aligned windows' views of the blocks are taken, not copied.
    """
    deferred = cols.observations is None
    if deferred and storage is not None:
        early_taken(chunks, cols, storage)  # so their values are checked before the clear
    taken = {"observations": cols.observations, "actions": cols.actions}
    obs, actions = (
        as_tensors(chunks.example(name) if value is None else value, device, name=name)
        for name, value in taken.items()
    )
    flat_observations(obs)
    actions = flat_actions(actions)
    if actions.dim() == 2:
        actions = actions.unsqueeze(-1)
    teacher = _teacher_actions(cols, keys, actions) if training_type == "distillation" else None
    storage = ready_storage(
        storage, cols, obs, actions, training_type, keys, device, dtype, teacher
    )
    direct: dict[str, Any] = {}
    if deferred:
        storage.own()  # gathered in place: never into blocks an earlier rollout shares
        if taken["observations"] is None:
            obs = _gathered(chunks, "observations", storage.observations, device)
        if taken["actions"] is None:
            actions = _gathered(chunks, "actions", storage.actions, device)
            if actions.dim() == 2:
                actions = actions.unsqueeze(-1)
        direct = _gather_extras(chunks, storage, keys, training_type)
    storage.write_block(0, share=share, observations=obs, actions=actions)
    cols.observations = cols.actions = obs = None
    fields = _storage_fields(cols, rewards, actions, training_type, keys, dtype, teacher, direct)
    for name, value in fields:
        storage.write_block(0, share=share, **{name: value})
    for name, value in direct.items():
        storage.write_block(0, **{name: value})  # its own tensors: nothing is copied
    return storage


def _gathered(chunks: SampledChunks, name: str, target: Any, device: torch.device) -> Any:
    """Field ``name`` gathered into ``target`` (returned), or as new tensors if it does not fit."""
    if gather_into(chunks, name, target):
        return target
    return as_tensors(chunks.take(name), device, name=name)


def _gather_extras(
    chunks: SampledChunks, storage: RolloutStorage, keys: ColumnKeys, training_type: str
) -> dict[str, Any]:
    """The ``rl`` extra outputs gathered straight into the storage, by ``write_block`` name."""
    if training_type != "rl":
        return {}
    direct: dict[str, Any] = {}
    if gather_into(chunks, "extra:" + keys.values, storage.values):
        direct["values"] = storage.values
    if gather_into(chunks, "extra:" + keys.log_probs, storage.actions_log_prob):
        direct["actions_log_prob"] = storage.actions_log_prob
    params = storage.distribution_params
    if (
        keys.distribution
        and params is not None
        and len(params) == len(keys.distribution)
        and all(gather_into(chunks, "extra:" + k, t) for k, t in zip(keys.distribution, params))
    ):
        direct["distribution_params"] = tuple(params)
    return direct


def _bootstrap(
    cols: TimeMajorColumns,
    rewards: np.ndarray,
    last_values: np.ndarray,
    gamma: float,
    value_fn: ValueFn | None,
    keys: ColumnKeys,
    obs_fn: ObsFn | None,
) -> np.ndarray:
    """Bootstrapped float64 rewards; fills ``last_values`` ``[N, 1]`` of still-running envs.

    One batched value call serves both: truncated episodes' final observations first, then
    the last observations of the envs whose episode is still running.
    """
    needs_value = [c for _, _, c in cols.truncated_steps]
    ongoing = [(n, c) for n, c in enumerate(cols.ongoing) if c is not None]
    values = bootstrap_values(
        needs_value + [c for _, c in ongoing], value_fn=value_fn, keys=keys, obs_fn=obs_fn
    )
    for (n, _), value in zip(ongoing, values[len(needs_value) :]):
        last_values[n, 0] = value
    if not needs_value:
        return rewards
    final_values = np.zeros_like(rewards)
    for (t, n, _), value in zip(cols.truncated_steps, values[: len(needs_value)]):
        final_values[t, n] = value
    return bootstrap_truncated_rewards(rewards, cols.truncated, final_values, gamma)


def _storage_fields(
    cols: TimeMajorColumns,
    rewards: np.ndarray,
    actions: torch.Tensor,
    training_type: str,
    keys: ColumnKeys,
    dtype: torch.dtype,
    teacher: torch.Tensor | None = None,
    skip: Collection[str] = (),
) -> Iterator[tuple[str, Any]]:
    """``write_block`` fields other than observations and actions, as ``[T, N, ...]`` tensors.

    Built one at a time as they are iterated, so a caller writing each before asking for the
    next holds one field's temporaries at a time; fields named in ``skip`` are not built.
    ``teacher``: the privileged actions (distillation), as :func:`_teacher_actions` gives them.
    """
    device = actions.device
    shape = (*cols.dones.shape, 1)
    yield "rewards", as_tensors(rewards, device, dtype).unsqueeze(-1)
    yield "dones", as_tensors(cols.dones, device)
    if training_type == "rl":
        if "values" not in skip:
            yield "values", as_tensors(cols.extras[keys.values], device, dtype).reshape(shape)
        if "actions_log_prob" not in skip:
            logp = as_tensors(cols.extras[keys.log_probs], device, dtype).reshape(shape)
            yield "actions_log_prob", logp
        if keys.distribution and "distribution_params" not in skip:
            params = tuple(as_tensors(cols.extras[k], device, dtype) for k in keys.distribution)
            yield "distribution_params", params
    else:
        assert teacher is not None
        yield "privileged_actions", teacher.reshape(actions.shape)
    if keys.actor_hidden or keys.critic_hidden:
        yield (
            "hidden_states",
            (
                _hidden(cols.extras, keys.actor_hidden, device, dtype),
                _hidden(cols.extras, keys.critic_hidden, device, dtype),
            ),
        )

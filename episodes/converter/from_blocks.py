"""The converter's fast path: a runner's recorded blocks straight to time-major columns.

``EnvRunner.sample()`` returns a :class:`~episodes.runner.SampledChunks` whose chunks are views
into ``[rows, N, ...]`` blocks. When none of its built chunks was changed in a way the blocks do
not see, the ``[T, N, ...]`` columns are read from the blocks: no chunk is built, nothing is
restacked, and the truncation bootstrap is one batched value call. The result is exactly what
the general path gives on the same chunks (see ``tests/runner/test_batched_equals_per_step.py``).

Example:
    >>> import gymnasium as gym
    >>> from episodes.runner import EnvRunner
    >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    >>> def policy(obs):
    ...     n = len(obs)
    ...     return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}
    >>> chunks = EnvRunner(env, policy, seed=0).sample(4)
    >>> cols = block_columns(chunks, ColumnKeys(), value_fn=lambda o: o[:, 0], gamma=0.9)
    >>> cols[0].rewards.shape, chunks.built()
    ((4, 2), [])
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from episodes.converter.columns import (
    ColumnKeys,
    ObsFn,
    TimeMajorColumns,
    extra_keys_for,
)
from episodes.converter.inputs import real_values
from episodes.converter.lazy_groups import LazyGroups as LazyGroups  # where importers look
from episodes.converter.lazy_groups import env_bounds as env_bounds
from episodes.converter.observation_batch import transform_batch
from episodes.converter.refusals import (
    check_storable_extra,
    checked_obs_fn_output,
    obs_fn_input,
)
from episodes.indexing import discount_factor
from episodes.runner import SampledChunks

ValueFn = Callable[[Any], Any]


def flat_observations(observations: Any) -> Any:
    """The observations as they are if the storage can hold them, else a clear ``TypeError``.

    A storage field is a tensor, or a (nested) dict of tensors for Dict observations; a
    Tuple space's parts have no names to store them under, and an empty Dict space's
    observations nothing to store. numpy or torch leaves alike: the converter checks the
    columns before a value function sees them, and again as tensors.

    Example:
        >>> flat_observations({"a": np.zeros(2)})["a"].shape
        (2,)
        >>> flat_observations((np.zeros(2), np.zeros(2)))
        Traceback (most recent call last):
        ...
        TypeError: RolloutStorage holds a tensor or a dict of tensors per observation, but ...
        >>> flat_observations({"pos": np.zeros(2), "t": (np.zeros(2),)})  # a Tuple part
        Traceback (most recent call last):
        ...
        TypeError: ... observations are a dict whose parts are not all arrays ('t' a tuple): ...
        >>> flat_observations({"text": np.array(["ab"])})
        Traceback (most recent call last):
        ...
        TypeError: RolloutStorage holds numbers, but these chunks' observations hold <U2 ...
    """

    def holds(leaf: Any) -> bool:
        if isinstance(leaf, Mapping):
            return all(holds(value) for value in leaf.values())
        if isinstance(leaf, np.ndarray):
            if leaf.dtype.kind not in "biuf":  # a Text space's strings, objects
                raise TypeError(
                    f"RolloutStorage holds numbers, but these chunks' observations hold "
                    f"{leaf.dtype} values: pass obs_fn to encode them as numbers"
                )
            return True
        import torch

        return isinstance(leaf, torch.Tensor)

    def filled(value: Any) -> bool:  # an empty Dict space's observations hold no leaf
        return not isinstance(value, Mapping) or any(filled(v) for v in value.values())

    if holds(observations) and not filled(observations):
        raise TypeError(
            "RolloutStorage holds a tensor or a dict of tensors per observation, but these "
            "chunks' observations hold no array (an empty Dict space's): nothing to store; pass "
            "obs_fn to make them one array (or a dict of arrays) per step, what a given obs_fn "
            "must return"
        )
    if holds(observations):
        return observations
    # A Dict space's observations are dicts: a part that is no array is a Tuple inside.
    advice = "" if isinstance(observations, Mapping) else ", or record them with a Dict space"
    raise TypeError(
        "RolloutStorage holds a tensor or a dict of tensors per observation, but these chunks' "
        f"observations are {_parts(observations)}: pass obs_fn to make them one array (or a "
        f"dict of arrays) per step, what a given obs_fn must return{advice}"
    )


def _parts(observations: Any) -> str:
    """How observations that are no tensor or dict of tensors nest, in the refusal's words."""
    if isinstance(observations, Mapping):
        inner = sorted(
            (str(key), type(value).__name__)
            for key, value in observations.items()
            if isinstance(value, (tuple, list))
        )
        where = ", ".join(f"{key!r} a {kind}" for key, kind in inner) or "a part nested deeper"
        return f"a dict whose parts are not all arrays ({where})"
    return f"a {type(observations).__name__} of parts"


def block_columns(
    episodes: Any,
    keys: ColumnKeys,
    *,
    value_fn: ValueFn | None,
    gamma: float,
    training_type: str = "rl",
    obs_fn: ObsFn | None = None,
    defer_observations: bool = False,
) -> tuple[TimeMajorColumns, np.ndarray, np.ndarray] | None:
    """Columns, bootstrapped float64 rewards and ``[N, 1]`` last values, read from the blocks.

    Extra outputs are read when asked for (:class:`LazyExtras`). With ``defer_observations``
    (and no ``obs_fn``), observations and actions that would need a gather are left out
    (``None``): the caller gathers them straight into its storage with :func:`gather_into`.

    Without ``value_fn``, ``rl`` takes the values from ``custom_data[keys.bootstrap_value]``
    of the chunks that need one (truncated endings and the envs still running; only those
    are built), as :func:`~episodes.converter.bootstrap_values` does on the general path.

    Returns None when the fast path does not apply (not a :class:`SampledChunks`, a built
    chunk changed, an extra key is missing, or ``rl`` without ``value_fn`` where a chunk that
    needs a value holds none): the caller takes the general path, which gives the same
    result or the same error.

    Raises:
        ValueError: An extra output the keys name is not one array of real numbers per step
            (a dict or tuple of arrays, strings): the general path's error, before
            ``value_fn`` is called; or ``value_fn`` (or a stored bootstrap value) gave
            something other than one real number per observation
            (:func:`~episodes.converter.inputs.real_values`).

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> def policy(obs):
        ...     return np.zeros(len(obs), np.int64), {"vf_preds": np.ones(len(obs)),
        ...                                           "action_logp": np.zeros(len(obs))}
        >>> cols, rewards, last = block_columns(EnvRunner(env, policy, seed=0).sample(3),
        ...     ColumnKeys(), value_fn=lambda obs: np.full(len(obs), 2.0), gamma=0.5)
        >>> rewards.dtype, last.tolist()  # both envs still running: V(last obs) each
        (dtype('float64'), [[2.0], [2.0]])
        >>> block_columns([], ColumnKeys(), value_fn=None, gamma=0.5) is None  # general path
        True
    """
    applies, value_fn = fast_value_fn(episodes, keys, value_fn, training_type)
    if not applies:
        return None
    if episodes.recording.device is not None:
        # Imported here: that module imports LazyExtras from this one.
        from episodes.converter.from_device_blocks import device_block_columns

        return device_block_columns(  # type: ignore[return-value]
            episodes,
            keys,
            value_fn=value_fn,
            gamma=gamma,
            training_type=training_type,
            obs_fn=obs_fn,
        )
    laid = host_block_columns(episodes, keys, training_type, obs_fn, defer_observations)
    if laid is None:
        return None
    cols, rewards = laid
    # Before the value call: a Tuple space's observations reach no value_fn, as on the
    # general path (the storage could not hold them).
    flat_observations(
        episodes.example("observations") if cols.observations is None else cols.observations
    )
    rewards, last_values = block_bootstrap(
        episodes, cols, rewards, value_fn, gamma, training_type, obs_fn
    )
    return cols, rewards, last_values


def fast_value_fn(
    episodes: Any, keys: ColumnKeys, value_fn: ValueFn | None, training_type: str
) -> tuple[bool, ValueFn | None]:
    """Whether the fast path applies, and the value function it bootstraps with.

    It does not apply to anything but an unchanged, non-empty :class:`SampledChunks`, nor
    for ``rl`` without ``value_fn`` where a chunk that needs a value stores none
    (:func:`stored_value_fn`), nor where an extra output the keys name was not recorded
    (:func:`_storable_extras`).

    Example:
        >>> fast_value_fn([], ColumnKeys(), None, "rl")
        (False, None)
    """
    if not isinstance(episodes, SampledChunks) or len(episodes) == 0 or not episodes.unchanged():
        return False, None
    if training_type == "rl" and value_fn is None:
        value_fn = stored_value_fn(episodes, keys)
        # Asked again: a list-mode chunk it built owns lists the blocks cannot watch.
        if value_fn is None or not episodes.unchanged():
            return False, None
    if not _storable_extras(episodes, extra_keys_for(keys, training_type)):
        return False, None
    return True, value_fn


def host_block_columns(
    episodes: SampledChunks,
    keys: ColumnKeys,
    training_type: str,
    obs_fn: ObsFn | None,
    defer_observations: bool = False,
) -> tuple[TimeMajorColumns, np.ndarray] | None:
    """Host blocks' columns and float64 rewards, not bootstrapped (None: no fast path).

    For chunks :func:`fast_value_fn` takes. Nothing is asked of a value function, and the
    observations are not checked (:func:`flat_observations`) yet.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> def policy(obs):
        ...     return np.zeros(len(obs), np.int64), {"vf_preds": np.ones(len(obs)),
        ...                                           "action_logp": np.zeros(len(obs))}
        >>> cols, rewards = host_block_columns(EnvRunner(env, policy, seed=0).sample(3),
        ...                                    ColumnKeys(), "rl", None)
        >>> cols.actions.shape, rewards.dtype
        ((3, 2), dtype('float64'))
    """
    raw = episodes.time_major(
        extra_keys_for(keys, training_type), lazy_extras=True, observations=False
    )
    if raw is None:
        return None
    raw["extras"] = LazyExtras(episodes, extra_keys_for(keys, training_type))
    if defer_observations and obs_fn is None and episodes.gather_plan("observations"):
        observations = raw["actions"] = None
    else:
        observations = episodes.take("observations")
        raw["actions"] = episodes.take("actions")
    cols = raw_columns(raw, observations, obs_fn)
    return cols, mask_dead_cells(episodes, cols, np.asarray(cols.rewards, np.float64))


def block_bootstrap(
    episodes: SampledChunks,
    cols: TimeMajorColumns,
    rewards: np.ndarray,
    value_fn: ValueFn | None,
    gamma: float,
    training_type: str,
    obs_fn: ObsFn | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrapped rewards and ``[N, 1]`` last values of host columns: one value call.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> def policy(obs):
        ...     return np.zeros(len(obs), np.int64), {"vf_preds": np.ones(len(obs)),
        ...                                           "action_logp": np.zeros(len(obs))}
        >>> chunks = EnvRunner(env, policy, seed=0).sample(3)
        >>> cols, rewards = host_block_columns(chunks, ColumnKeys(), "rl", None)
        >>> _, last = block_bootstrap(chunks, cols, rewards, lambda o: np.full(len(o), 2.0),
        ...                           0.5, "rl", None)
        >>> last.tolist()
        [[2.0], [2.0]]
    """
    last_values = np.zeros((cols.dones.shape[1], 1))
    if training_type != "rl":
        return rewards, last_values
    assert value_fn is not None
    steps, envs, ongoing, needs_value = episodes.bootstrap_observations()
    count = len(steps) + len(ongoing)
    if count == 0:
        return rewards, last_values
    values = value_fn(transform_batch(needs_value, obs_fn, rows=count))
    values = real_values(values, count, "value_fn returned")
    last_values[ongoing, 0] = values[len(steps) :]
    if len(steps):
        rewards = _bootstrapped_cells(
            rewards, cols.truncated, steps, envs, values[: len(steps)], gamma
        )
    return rewards, last_values


def _bootstrapped_cells(
    rewards: np.ndarray,
    truncated: np.ndarray,
    steps: np.ndarray,
    envs: np.ndarray,
    values: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """``bootstrap_truncated_rewards`` with final values ``values`` at ``(steps, envs)`` only.

    For float64 ``[T, N]`` rewards, final values 0 elsewhere, without its ``[T, N]`` temporaries.

    The same numbers bit for bit (``r + 0.0`` everywhere, ``-0.0`` rewards included, then
    ``r + gamma * v`` at the truncated cells among those given) in one new array: the final
    values, the bonus and the sum were three ``[T, N]`` float64 arrays at once.

    Example:
        >>> rewards = np.array([[1.0, -0.0], [2.0, 3.0]])
        >>> truncated = np.array([[False, False], [True, False]])
        >>> _bootstrapped_cells(rewards, truncated, np.array([1]), np.array([0]),
        ...                    np.array([10.0]), 0.5).tolist()
        [[1.0, 0.0], [7.0, 3.0]]
    """
    gamma = discount_factor(gamma)  # the check bootstrap_truncated_rewards makes
    out = np.add(rewards, 0.0, dtype=np.float64)
    hit = np.asarray(truncated)[steps, envs]
    steps, envs = steps[hit], envs[hit]
    out[steps, envs] = rewards[steps, envs] + gamma * np.asarray(values, np.float64)[hit]
    return out


def bootstrap_chunks(chunks: SampledChunks) -> np.ndarray:
    """Indices of the chunks whose last observations ``bootstrap_observations`` batches.

    In its order: every episode that ended truncated (not terminated), then the chunk of
    every env still running at the window's end. None is built.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=2)
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
        >>> bootstrap_chunks(chunks).tolist(), chunks.env_indices.tolist(), chunks.built()
        ([0, 2, 1, 3], [0, 0, 1, 1], [])
    """
    rec = chunks.recording
    table = rec.table
    cut = np.flatnonzero(table.truncated & ~table.terminated)
    last = np.flatnonzero(table.last_step == rec.num_steps - 1)
    running = last[~(table.terminated[last] | table.truncated[last])]
    return np.concatenate([cut, running])


def stored_value_fn(chunks: SampledChunks, keys: ColumnKeys) -> ValueFn | None:
    """A value function answering with the chunks' stored bootstrap values, or None.

    The values are ``custom_data[keys.bootstrap_value]`` of the :func:`bootstrap_chunks`
    (built to be read: only those), float64 in ``bootstrap_observations``' order, so the fast
    path bootstraps with them exactly as with ``value_fn``'s; the observations it is called
    with are not read. None when one of those chunks holds no such value.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
        >>> stored_value_fn(chunks, ColumnKeys()) is None  # nothing stored yet
        True
        >>> for k, value in zip(bootstrap_chunks(chunks).tolist(), [0.5, 1.5]):
        ...     chunks[k].custom_data["bootstrap_value"] = value
        >>> stored_value_fn(chunks, ColumnKeys())(None).tolist()
        [0.5, 1.5]
    """
    # Imported here: to_rollout imports this module.
    from episodes.converter.to_rollout import bootstrap_values

    indices = bootstrap_chunks(chunks).tolist()
    # A chunk never built holds no value anyone stored; building it to look would spoil a
    # list-mode sample (its chunks count as changed once built) for a retry with value_fn.
    # A copy or pickle of the sample carries the custom data of chunks it did not build.
    for k in indices:
        stored = chunks.stored_custom_data(k)
        if stored is None or keys.bootstrap_value not in stored:
            return None  # the general path names the chunks (or refuses a masked window)
    needed = [chunks[k] for k in indices]  # a carried chunk is built with its custom data
    # Read (and checked) when called: where the general path reads them, after the layout.
    return lambda observations: bootstrap_values(needed, value_fn=None, keys=keys)


def _storable_extras(chunks: SampledChunks, extra_keys: list[str]) -> bool:
    """Whether the fast path may lay out these keys (False: the general path decides).

    False where a key was not recorded (the general path names it), or holds Python objects.

    Each recorded key must be one array of real numbers a step (:func:`check_storable_extra`,
    as the general path refuses it), checked before the value call and before anything is
    written into a storage; one block example per key: its structure and dtype, not its
    steps, are looked at.
    """
    examples = []
    for key in extra_keys:
        try:
            examples.append((key, chunks.example("extra:" + key)))
        except KeyError:
            return False
    for key, example in examples:
        if getattr(example, "dtype", None) == np.dtype(object):
            # Python objects a step: in list mode a chunk reads them back as numbers, so only
            # the general path, which reads the chunks' rows, can say whether they are.
            return False
        check_storable_extra(key, example)
    return True


def mask_dead_cells(chunks: SampledChunks, cols: TimeMajorColumns, rewards: Any) -> Any:
    """Masks the window's cells that hold no transition; returns the rewards with them zeroed.

    Only a runner recording vector steps (``window="vector_steps"``) has such cells: the
    next-step reset steps. They get ``dones`` (so GAE neither reads nor feeds them), reward 0
    and ``mask`` False. numpy columns or tensors on a device alike; nothing is written in place.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0,
        ...                    window="vector_steps")
        >>> chunks = runner.sample(40)
        >>> raw = chunks.time_major([])
        >>> cols = raw_columns(raw, raw["observations"], None)
        >>> rewards = mask_dead_cells(chunks, cols, raw["rewards"])
        >>> dead = ~cols.mask  # the reset steps
        >>> int(dead.sum()), float(rewards[dead].sum()), bool(cols.dones[dead].all())
        (5, 0.0, True)
    """
    dead = chunks.recording.dead_cells()
    if dead is None:
        return rewards
    cols.dones = cols.dones | dead
    cols.mask = ~dead
    if isinstance(dead, np.ndarray):
        return np.where(dead, 0.0, rewards)
    import torch

    return torch.where(dead, 0.0, rewards)


def raw_columns(raw: dict[str, Any], observations: Any, obs_fn: ObsFn | None) -> TimeMajorColumns:
    """``TimeMajorColumns`` of a :meth:`SampledChunks.time_major` dict, ``obs_fn`` applied.

    Example:
        >>> raw = {"actions": np.zeros((2, 1)), "rewards": np.ones((2, 1)),
        ...        "dones": np.zeros((2, 1), bool), "truncated": np.zeros((2, 1), bool),
        ...        "extras": {}}
        >>> raw_columns(raw, np.arange(2.0)[:, None], lambda obs: obs * 10).observations.tolist()
        [[0.0], [10.0]]
    """
    return TimeMajorColumns(
        observations=observations
        if obs_fn is None
        else checked_obs_fn_output(obs_fn(obs_fn_input(observations)), tuple(raw["dones"].shape)),
        actions=raw["actions"],
        rewards=raw["rewards"],
        dones=raw["dones"],
        truncated=raw["truncated"],
        extras=raw["extras"],
    )


def gather_into(chunks: SampledChunks, name: str, out: Any) -> bool:
    """Gathers field ``name`` of the window into the ``[T, N, ...]`` CPU tensor(s) ``out``.

    One ``index_select`` per leaf, straight into ``out`` (no temporary array). False, with
    nothing written, when ``out`` does not match the field (structure, dtype) or the window
    needs no gather.

    Example:
        >>> import gymnasium as gym, torch
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space), seed=0).sample(3)
        >>> gather_into(chunks, "observations", torch.zeros(3, 2, 4))  # aligned: views
        False
    """
    import torch

    from episodes.rollout import select_rows
    from episodes.structs import flatten

    plan = chunks.gather_plan(name)
    if plan is None or not _gathers(plan, out):
        return False
    leaves, index = plan
    targets = flatten(out)[0]
    flat = torch.from_numpy(np.ascontiguousarray(index.reshape(-1)))
    for target, leaf in zip(targets, leaves):
        rows = target.view(index.size, *leaf.shape[1:])
        if leaf.flags.writeable:
            source = torch.from_numpy(leaf)
        else:
            with warnings.catch_warnings():  # read-only shared blocks are only read here
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                source = torch.from_numpy(leaf)
        select_rows(source, flat, out=rows)
    return True


def _gathers(plan: tuple[list[np.ndarray], np.ndarray], out: Any) -> bool:
    """Whether a gather plan's leaves go straight into ``out`` (structure, dtype, CPU, size)."""
    import torch

    from episodes.structs import flatten

    leaves, index = plan
    targets = flatten(out)[0]
    return len(targets) == len(leaves) and all(
        isinstance(t, torch.Tensor)
        and t.device.type == "cpu"
        and t.is_contiguous()
        and t.dtype == _torch_dtype(leaf.dtype)
        and t.numel() == index.size * int(np.prod(leaf.shape[1:], dtype=np.int64))
        for t, leaf in zip(targets, leaves)
    )


def early_taken(chunks: SampledChunks, cols: TimeMajorColumns, storage: Any) -> None:
    """Takes the deferred observations and actions that will not gather into ``storage``.

    :func:`gather_into` writes a field only into tensors of its own dtype (and layout);
    another field is taken and cast by ``write_block``, which refuses ints a narrower int
    field would wrap. Taken before the storage is cleared (into ``cols``), such values are
    checked first, and a refused conversion leaves the storage as it was.

    Example:
        >>> import gymnasium as gym, torch
        >>> from episodes.rollout import RolloutStorage
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
        >>> cols = raw_columns({**chunks.time_major([]), "actions": None}, None, None)
        >>> storage = RolloutStorage("rl", 2, 12, (4,), (1,), actions_dtype=torch.int8)
        >>> early_taken(chunks, cols, storage)  # float32 observations gather; int64 actions not
        >>> cols.observations is None, cols.actions.shape
        (True, (12, 2))
    """
    for name in ("observations", "actions"):
        plan = chunks.gather_plan(name)
        if plan is None or not _gathers(plan, getattr(storage, name)):
            setattr(cols, name, chunks.take(name))


@functools.cache
def _torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype ``torch.from_numpy`` gives an array of numpy ``dtype``."""
    import torch

    return torch.from_numpy(np.empty(0, dtype)).dtype


def item_shape(extras: Mapping[str, Any], key: str) -> tuple[int, ...]:
    """The per-step shape of extra output ``key`` of ``[T, N, ...]`` columns (not read if lazy).

    Example:
        >>> item_shape({"logits": np.zeros((4, 2, 3))}, "logits")
        (3,)
    """
    if isinstance(extras, LazyExtras):
        return extras.item_shape(key)
    return tuple(extras[key].shape[2:])


class LazyExtras(Mapping[str, Any]):
    """Extra-output columns ``[T, N, ...]`` read from the blocks each time one is asked for.

    Not cached: the converter writes each into the storage and drops it before the next.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> def policy(obs):
        ...     return np.zeros(len(obs), np.int64), {"vf_preds": np.ones(len(obs))}
        >>> extras = LazyExtras(EnvRunner(env, policy, seed=0).sample(3), ["vf_preds"])
        >>> extras["vf_preds"].shape, extras.item_shape("vf_preds")
        ((3, 2), ())
    """

    def __init__(self, chunks: SampledChunks, keys: Sequence[str]):
        self._chunks = chunks
        self._keys = list(keys)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return self._chunks.take("extra:" + key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def item_shape(self, key: str) -> tuple[int, ...]:
        """The per-step shape of ``key``.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> def policy(obs):
            ...     return np.zeros(len(obs), np.int64), {"logits": np.zeros((len(obs), 2))}
            >>> extras = LazyExtras(EnvRunner(env, policy, seed=0).sample(3), ["logits"])
            >>> extras.item_shape("logits")
            (2,)
        """
        return self._chunks.item_shape("extra:" + key)

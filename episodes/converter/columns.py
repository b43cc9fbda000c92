"""Episode chunks -> time-major numpy columns ``[T, N, ...]`` (no torch here).

Chunks of the same env are laid end to end along T; ``dones`` mark the last step of every
episode that ended inside the window. Each chunk also reports which observations still need a
value for bootstrapping: the final observation of a truncated episode, and the last observation
of an env whose last chunk is still running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from episodes.buffer.plain_arrays import check_items_unmasked
from episodes.buffer.stack_errors import unstackable
from episodes.connectors.joining import lossless_ints
from episodes.connectors.learner import check_end_joins
from episodes.connectors.list_rows import layout_rows
from episodes.converter.alike import (
    SpaceMatch,
    agreed_space,
    alike_chunk,
    check_alike_envs,
    env_label,
    env_space,
)
from episodes.converter.column_refusals import (
    checked_obs_fn_output,
    storable_extra,
)
from episodes.converter.reward_steps import step_rewards
from episodes.converter.stray_ends import place_stray_ends
from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag
from episodes.spaces import nest_as_space, unstackable_space
from episodes.spaces.batching import check_sortable_keys
from episodes.spaces.item_walks import other_mapping
from episodes.structs import id_key, map_alike, map_leaves, short_repr

ObsFn = Callable[[Any], Any]


@dataclass(frozen=True)
class ColumnKeys:
    """Which extra-model-outputs hold what the learner needs.

    Attributes:
        values: Value predictions ``V(o_t)`` for the observation each action was taken in.
        log_probs: Log-probabilities of the taken actions.
        distribution: Keys of the action-distribution parameters (e.g. ``("mean", "std")`` or
            ``("logits",)``); empty to store none.
        privileged_actions: Teacher actions, for distillation.
        actor_hidden: Keys of the actor's recurrent state components at each step (``("h",)``
            for a GRU, ``("h", "c")`` for an LSTM), each ``[num_layers, hidden]`` per step.
        critic_hidden: The same for the critic.
        bootstrap_value: ``custom_data`` key holding ``V`` of a chunk's last observation, used
            when no value function is given.

    Raises:
        TypeError: A single key that is not a str (``privileged_actions`` may be None), or
            tuple keys that are not a tuple or list of str; a bare str (``("logits")``, the
            comma missing) is refused rather than split into one-letter keys.

    Example:
        >>> keys = ColumnKeys(distribution=("mean", "std"), actor_hidden=("h",))
        >>> keys.values, extra_keys_for(keys, "rl")
        ('vf_preds', ['vf_preds', 'action_logp', 'mean', 'std', 'h'])
        >>> ColumnKeys(distribution=("logits"))  # a str, not a tuple: refused, not split
        Traceback (most recent call last):
        ...
        TypeError: ColumnKeys.distribution must be a tuple of keys, got the str 'logits'; ...
    """

    values: str = "vf_preds"
    log_probs: str = "action_logp"
    distribution: tuple[str, ...] = ()
    privileged_actions: str | None = None
    actor_hidden: tuple[str, ...] = ()
    critic_hidden: tuple[str, ...] = ()
    bootstrap_value: str = "bootstrap_value"

    def __post_init__(self) -> None:
        for name in ("values", "log_probs", "privileged_actions", "bootstrap_value"):
            value = getattr(self, name)
            if not isinstance(value, str) and not (value is None and name == "privileged_actions"):
                optional = " (or None)" if name == "privileged_actions" else ""
                raise TypeError(
                    f"ColumnKeys.{name} must be a str{optional}: the key of one output, "
                    f"got {type(value).__name__} ({short_repr(value)})"
                )
        for name in ("distribution", "actor_hidden", "critic_hidden"):
            value = getattr(self, name)
            if isinstance(value, str):  # ("logits") is a str: its letters would be the keys
                raise TypeError(
                    f"ColumnKeys.{name} must be a tuple of keys, got the str {short_repr(value)}; "
                    f"a single key needs a trailing comma: ({short_repr(value)},)"
                )
            if not isinstance(value, (tuple, list)) or not all(isinstance(k, str) for k in value):
                raise TypeError(
                    f"ColumnKeys.{name} must be a tuple (or list) of str keys, got "
                    f"{type(value).__name__} ({short_repr(value)})"
                )
            object.__setattr__(self, name, tuple(value))  # a list, kept hashable


@dataclass(eq=False)
class TimeMajorColumns:
    """The columns of ``N`` envs over ``T`` steps, plus what still needs a bootstrap value.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 0.0],
        ...     extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [-1.0, -1.0]},
        ...     truncated=True, len_lookback_buffer=0)
        >>> cols = time_major([[ep]], ColumnKeys())
        >>> cols.observations[:, 0].tolist(), cols.truncated[:, 0].tolist(), cols.ongoing
        ([0, 1], [False, True], [None])
        >>> [(t, n) for t, n, _ in cols.truncated_steps]  # step 1 of env 0 needs V(o_2)
        [(1, 0)]
    """

    observations: Any
    actions: Any
    rewards: np.ndarray
    dones: np.ndarray
    truncated: np.ndarray
    extras: dict[str, np.ndarray]
    #: (t, n, chunk) for the last step of every truncated episode.
    truncated_steps: list[tuple[int, int, SingleAgentEpisode]] = field(default_factory=list)
    #: chunk per env whose episode is still running at the end of the window (else None).
    ongoing: list[SingleAgentEpisode | None] = field(default_factory=list)
    #: ``[T, N]`` bool, True on real steps, when columns were padded.
    mask: np.ndarray | None = None


def rows(chunk: SingleAgentEpisode, column: str, key: str | None = None) -> Any:
    """One row per step of ``chunk`` as a batched numpy struct (observations: o_t before a_t).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 0.0],
        ...                         len_lookback_buffer=0)
        >>> rows(ep, "observations").tolist(), rows(ep, "actions").tolist()
        ([0, 1], [1, 0])
    """
    n = len(chunk)
    if column == "observations":
        buffer, data = chunk.observations, chunk.get_observations(slice(0, n))
    elif column == "extra":
        if key is None:
            raise TypeError("rows(chunk, 'extra', key) needs the output's key, got None")
        if key not in chunk.extra_model_outputs:
            raise KeyError(
                f"episode {chunk.id_} has no extra-model-output {key!r}; it records "
                f"{sorted(chunk.extra_model_outputs)} (configure ColumnKeys)"
            )
        buffer, data = chunk.extra_model_outputs[key], chunk.get_extra_model_outputs(key)
    else:
        buffer, data = getattr(chunk, column), getattr(chunk, f"get_{column}")()
    # By the column's mode, not the type read: a numpy'd column of list-structured items
    # (an observation [x, y]) reads a list of leaves, already batched.
    what = f"extra_model_outputs[{key!r}]" if column == "extra" else column
    return data if buffer.finalized else _laid_out(data, buffer.space, what, chunk)


def layout_batch(items: Any, space: Any, what: str) -> Any:
    """List-mode ``items`` batched with their space's layout, or a ``ValueError`` naming ``what``.

    Items of a Sequence, Graph or OneOf space have no fixed layout: batched as they come, equal
    lengths would give one column per position and ragged ones numpy's own error. A masked
    array with masked entries among them is refused too, as ``to_numpy`` refuses it: batched,
    its mask would be lost and its masked values read as data. Items that differ in shape or
    nesting are named (the first and one unlike it), as ``to_numpy`` names them.

    Example:
        >>> import gymnasium as gym
        >>> layout_batch([(1, 2), (0, 1)], gym.spaces.Sequence(gym.spaces.Discrete(3)), "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: a Sequence space's items have no fixed layout ...
        >>> layout_batch([np.ma.masked_array([1.0, 2.0], mask=[0, 1])], None, "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: item 0 of 1: a numpy masked array with masked entries cannot be ...
        >>> layout_batch([np.zeros(2), np.zeros(3)], None, "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: the items do not stack: item 0 has shape (2,), item 1 has shape (3,)
    """
    return _laid_out(items, space, what, None)


def _laid_out(items: Any, space: Any, what: str, chunk: SingleAgentEpisode | None) -> Any:
    """:func:`layout_batch`, naming ``chunk`` too (if given) where its items differ."""
    kind = None if space is None else unstackable_space(space)
    if kind is not None:
        raise ValueError(
            f"{what}: a {kind} space's items have no fixed layout and cannot form a training column"
        )
    try:
        return layout_rows(items, space, what)  # batch_with_layout, masked entries refused
    except ValueError as err:  # numpy's or dm-tree's words: name the items that differ
        try:  # unless a refusal of ours came first (a masked entry, keys that do not sort)
            check_items_unmasked(items)
            check_sortable_keys(space)
            named = unstackable(items)
        except ValueError:
            named = None
        if named is None:
            if other_mapping(items) is None:
                raise
            named = err  # batch's refusal of a Mapping that is no dict: name the column
        if chunk is not None:
            what += f" of the chunk of episode {chunk.id_!r} starting at t={chunk.t_started}"
        raise ValueError(f"{what}: {named}") from err


def _concat(parts: list[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    return map_alike(lambda leaves: np.concatenate(lossless_ints(leaves)), parts)


def _stack_envs(
    per_env: list[Any],
    field: str,
    labels: list[str],
    spaces: list[Any] | None = None,
    match: SpaceMatch | None = None,
) -> Any:
    """Env columns ``[T, ...]`` stacked along axis 1, once their steps are alike (else refused).

    :func:`~episodes.converter.alike.check_alike_envs` decides; equal spaces are joined as
    numpy promotes them (Python ints next to floats in one Box), ints as ints
    (:func:`~episodes.connectors.joining.lossless_ints`).
    """
    check_alike_envs(per_env, field, labels, spaces, match)
    try:
        return map_alike(lambda leaves: np.stack(lossless_ints(leaves), axis=1), list(per_env))
    except ValueError as err:
        raise ValueError(f"{field}: the envs' rows do not join: {err}") from None


def extra_keys_for(keys: ColumnKeys, training_type: str) -> list[str]:
    """The extra-model-output keys a training type reads.

    Example:
        >>> extra_keys_for(ColumnKeys(distribution=("logits",)), "rl")
        ['vf_preds', 'action_logp', 'logits']
    """
    if training_type == "distillation":
        if keys.privileged_actions is None:
            raise ValueError("distillation needs ColumnKeys(privileged_actions=...)")
        wanted = [keys.privileged_actions]
    else:
        wanted = [keys.values, keys.log_probs, *keys.distribution]
    # Once each: a recurrent actor and critic may share one hidden state.
    return list(dict.fromkeys([*wanted, *keys.actor_hidden, *keys.critic_hidden]))


def _pad(array: Any, length: int) -> Any:
    def pad_leaf(leaf: np.ndarray) -> np.ndarray:
        missing = length - len(leaf)
        if missing == 0:
            return leaf
        filler = np.zeros((missing, *leaf.shape[1:]), dtype=leaf.dtype)
        return np.concatenate([leaf, filler])

    return map_leaves(pad_leaf, array)


def time_major(
    groups: list[list[SingleAgentEpisode]],
    keys: ColumnKeys,
    obs_fn: ObsFn | None = None,
    *,
    training_type: str = "rl",
    pad: bool = False,
) -> TimeMajorColumns:
    """Lays out per-env chunk lists as ``[T, N, ...]`` numpy columns.

    With ``pad=True`` the groups may differ in length: each is zero-padded to the longest, its
    padding one trajectory (done on its last cell only), and a group whose episode is still
    running ends with a done step that needs a bootstrap value (reported in
    ``truncated_steps``), since no column-wide ``last_values`` can serve columns that end at
    different steps. ``mask`` is then set.

    Raises:
        ValueError: Without ``pad``, the envs hold different numbers of steps; or no steps;
            or chunks (or envs) whose observations, actions or extra outputs differ in
            nesting, per-step shape or kind, named with the field (envs of other spaces);
            or an extra output that is not one array of real numbers per step
            (:func:`~episodes.converter.column_refusals.storable_extra`: a step recorded as a
            Python list is one array, as the runner takes it); or rewards that are not one
            number a step (:func:`~episodes.converter.reward_steps.step_rewards`); or a
            stepless end filed under another env that ends none of its episode's chunks
            (:func:`~episodes.converter.stray_ends.place_stray_ends`, which moves the others).
        TypeError: Rewards that are not real numbers (complex, strings, objects); a ``pad``
            that is no bool.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 0.0],
        ...     extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [-1.0, -1.0]},
        ...     terminated=True, len_lookback_buffer=0)
        >>> cols = time_major([[ep]], ColumnKeys())
        >>> cols.rewards.shape, cols.dones[:, 0].tolist()
        ((2, 1), [False, True])
    """
    pad = as_flag(pad, "pad")  # "no" would pad
    # Listed once (a generator of groups would be used up by the first pass).
    listed = [groups] if isinstance(groups, SingleAgentEpisode) else list(groups)
    if any(isinstance(group, SingleAgentEpisode) for group in listed):
        raise TypeError(
            "time_major takes per-env lists of chunks (as group_by_env gives them), got "
            "chunks: group them first"
        )
    groups = place_stray_ends([list(group) for group in listed])
    lengths = [sum(len(c) for c in group) for group in groups]
    if not lengths or min(lengths) == 0 or (len(set(lengths)) != 1 and not pad):
        if not any(lengths):
            raise ValueError(f"no chunk holds a step: there is nothing to convert; got {lengths}")
        if pad:  # laid out per chunk already: only chunks without steps get here
            raise ValueError(f"every column needs at least one step; got {lengths}")
        uneven = "every env needs the same, non-zero number of steps; got"
        if min(lengths) == 0:  # 'per_chunk' would refuse a column without steps as well
            raise ValueError(f"{uneven} {lengths}")
        raise ValueError(
            f"{uneven} {lengths}. Pass one chunk per env column with layout='per_chunk' for "
            "uneven chunks"
        )
    horizon = max(lengths)
    extra_keys = extra_keys_for(keys, training_type)
    match = SpaceMatch()  # each pair of space objects compared once in this call
    columns = [
        _env_column(n, group, extra_keys, horizon if pad else None, keys.bootstrap_value, match)
        for n, group in enumerate(groups)
    ]
    labels = [env_label(n, group, pad) for n, group in enumerate(groups)]
    spaces = {
        a: [env_space(g, f"{a}_space", match) for g in groups] for a in ("observation", "action")
    }
    observations = _stack_envs(
        [c.observations for c in columns], "observations", labels, spaces["observation"], match
    )
    observations = nest_as_space(observations, agreed_space(spaces["observation"], match))
    if obs_fn is not None:
        lead = (horizon, len(columns))
        observations = checked_obs_fn_output(obs_fn(observations), lead)
    return TimeMajorColumns(
        observations=observations,
        actions=nest_as_space(
            _stack_envs([c.actions for c in columns], "actions", labels, spaces["action"], match),
            agreed_space(spaces["action"], match),
        ),
        rewards=np.stack([c.rewards for c in columns], axis=1),
        dones=np.stack([c.dones for c in columns], axis=1),
        truncated=np.stack([c.truncated for c in columns], axis=1),
        extras={
            k: _stack_envs([c.extras[k] for c in columns], f"extra output {k!r}", labels)
            for k in extra_keys
        },
        truncated_steps=[step for c in columns for step in c.truncated_steps],
        ongoing=[c.ongoing[0] for c in columns],
        mask=np.arange(horizon)[:, None] < np.asarray(lengths)[None, :] if pad else None,
    )


@dataclass
class _Piece:
    """A chunk with steps, and how its episode stands where those steps end."""

    chunk: SingleAgentEpisode
    terminated: bool
    truncated: bool
    #: Whose last observation (and ``custom_data``) bootstraps a truncation: the chunk, or
    #: the stepless chunk that ended the episode after it.
    final: SingleAgentEpisode

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def _pieces(n: int, group: list[SingleAgentEpisode], bootstrap_key: str) -> list[_Piece]:
    """Env ``n``'s chunks with steps, each with how its episode ends where its steps end.

    A chunk's own flags, except where a later chunk of its episode without steps, starting at
    its end, ended the episode (a valid way to store an end: ``io.shards.piece_ends``): its
    last step is then the episode's last, as in the joined episode. Other stepless chunks
    hold nothing to lay out.
    """
    kept = [c for c in group if len(c) or c.is_done]
    check_time_order(n, kept)  # a stepless end continues its episode's latest chunk, not done
    pieces: list[_Piece] = []
    latest: dict[Any, _Piece] = {}
    for chunk in kept:
        if len(chunk):
            piece = _Piece(chunk, chunk.is_terminated, chunk.is_truncated, chunk)
            pieces.append(piece)
            latest[id_key(chunk.id_)] = piece
            continue
        ended = latest.get(id_key(chunk.id_))  # None: the episode's steps lie before this window
        if ended is not None:
            check_end_joins(chunk, ended.chunk)
            ended.terminated, ended.truncated = chunk.is_terminated, chunk.is_truncated
            # concat_episode merges custom_data, the later chunk's winning.
            if bootstrap_key in chunk.custom_data or bootstrap_key not in ended.chunk.custom_data:
                ended.final = chunk
    return pieces


def _env_column(
    n: int,
    group: list[SingleAgentEpisode],
    extra_keys: list[str],
    horizon: int | None,
    bootstrap_key: str,
    match: SpaceMatch,
) -> TimeMajorColumns:
    """Column ``n``: its chunks end to end along T, zero-padded to ``horizon`` if given.

    Returned as a one-env :class:`TimeMajorColumns` without the env axis (``[T, ...]``
    leaves, ``ongoing`` of length one).
    """
    parts: dict[str, list[Any]] = {name: [] for name in ("obs", "act", "rew", "done", "trunc")}
    extra_parts: dict[str, list[Any]] = {k: [] for k in extra_keys}
    truncated_steps: list[tuple[int, int, SingleAgentEpisode]] = []
    offset = 0
    pieces = _pieces(n, group, bootstrap_key)
    seen: dict[str, tuple[SingleAgentEpisode, Any]] = {}  # field -> its first chunk's
    for prev, piece in zip([None, *pieces], pieces):
        chunk = piece.chunk
        if prev is not None and not _same_id(chunk.id_, prev.chunk.id_) and not prev.done:
            # Another episode follows a chunk that is not done: that chunk ends here as a
            # column's last one would, bootstrapped from its last observation.
            parts["done"][-1][-1] = True
            parts["trunc"][-1][-1] = True
            truncated_steps.append((offset - 1, n, prev.chunk))
        length = len(chunk)
        obs, act = rows(chunk, "observations"), rows(chunk, "actions")
        parts["obs"].append(
            alike_chunk(n, seen, "observations", chunk, obs, "observation_space", match)
        )
        parts["act"].append(alike_chunk(n, seen, "actions", chunk, act, "action_space", match))
        parts["rew"].append(step_rewards(chunk, rows))  # one real number a step, or refused
        done = np.zeros(length, bool)
        trunc = np.zeros(length, bool)
        done[-1] = piece.done
        # Terminated wins over truncated (gymnasium reports both when a time limit coincides
        # with a terminal state): a terminal state's value is 0, nothing to bootstrap.
        bootstrapped = piece.truncated and not piece.terminated
        trunc[-1] = bootstrapped
        parts["done"].append(done)
        parts["trunc"].append(trunc)
        for key in extra_keys:
            try:
                extra = rows(chunk, "extra", key)
            except ValueError as err:  # steps of other lengths or nesting: name the key
                raise ValueError(
                    f"extra output {key!r} of episode {chunk.id_!r}: its steps do not form "
                    f"one array ({err})"
                ) from None
            # One [T, ...] array (a list per step is one array); a dict or strings refused.
            extra = storable_extra(key, extra, length)
            extra = alike_chunk(n, seen, f"extra output {key!r}", chunk, extra, None, match)
            extra_parts[key].append(extra)
        offset += length
        if bootstrapped:
            truncated_steps.append((offset - 1, n, piece.final))
    last = pieces[-1]
    ongoing: SingleAgentEpisode | None = None if last.done else last.chunk
    if horizon is not None and not last.done and offset < horizon:
        # This column ends before the others: close it with a bootstrapped done step.
        parts["done"][-1][-1] = True
        parts["trunc"][-1][-1] = True
        truncated_steps.append((offset - 1, n, last.chunk))
        ongoing = None

    def join(pieces: list[Any], field: str = "dones") -> Any:
        try:
            joined = _concat(pieces)
        except ValueError as err:  # ints no int dtype holds (lossless_ints)
            raise ValueError(f"{field} of env {n}: {err}") from None
        return joined if horizon is None else _pad(joined, horizon)

    dones = join(parts["done"])
    if horizon is not None and offset < horizon:
        # The padding is one trajectory, done on its last cell (the last real step is done
        # already): a done on every cell made each its own trajectory in the recurrent
        # generator, padded to T again. Zero rewards and values keep its GAE at 0.
        dones[-1] = True
    return TimeMajorColumns(
        observations=join(parts["obs"], "observations"),
        actions=join(parts["act"], "actions"),
        rewards=join(parts["rew"], "rewards"),
        dones=dones,
        truncated=join(parts["trunc"], "truncateds"),
        extras={k: join(v, f"extra output {k!r}") for k, v in extra_parts.items()},
        truncated_steps=truncated_steps,
        ongoing=[ongoing],
    )


def check_time_order(n: int, chunks: Sequence[SingleAgentEpisode]) -> None:
    """Refuses an env's chunks unless each episode's come in time order, never after its end.

    A chunk of an episode seen earlier in the list (other episodes' chunks may lie between)
    must start where that episode's last chunk stopped, and that chunk must not be done: a
    chunk given twice, or an earlier one after a later one, would count steps twice or run
    time backwards. One dict entry per episode: the work grows with the chunks, not the steps.

    Raises:
        ValueError: Naming env ``n``, the episode and both chunks' times.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> def chunk(id_, t0, done=False):
        ...     return SingleAgentEpisode(id_, observations=[0, 1], actions=[0], rewards=[0.0],
        ...                               t_started=t0, terminated=done, len_lookback_buffer=0)
        >>> check_time_order(0, [chunk("A", 0), chunk("B", 0), chunk("A", 1)])  # fine
        >>> check_time_order(0, [chunk("A", 0, True), chunk("B", 0), chunk("A", 0, True)])
        Traceback (most recent call last):
        ...
        ValueError: env 0: a chunk of episode 'A' starting at t=0 follows its chunk ending at ...
    """
    last: dict[Any, tuple[int, bool]] = {}  # id -> (t where its latest chunk ended, done)
    for chunk in chunks:
        key = id_key(chunk.id_)
        seen = last.get(key)
        if seen is not None and (seen[1] or chunk.t_started != seen[0]):
            ended = " (which ended there)" if seen[1] else ""
            raise ValueError(
                f"env {n}: a chunk of episode {chunk.id_!r} starting at t={chunk.t_started} "
                f"follows its chunk ending at t={seen[0]}{ended}; an env's chunks go in time "
                "order"
            )
        last[key] = (chunk.t, chunk.is_done)


def _same_id(a: Any, b: Any) -> bool:
    """Whether two chunks' ids are one, as a dict's keys match (the time-order check's rule).

    ``!=`` would part the chunks of an id holding a NaN, and fail on an array id.
    """
    key_a, key_b = id_key(a), id_key(b)
    return key_a is key_b or bool(key_a == key_b)

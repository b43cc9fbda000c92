"""Fixed-length sequences (``[B, lookback + T]`` columns) and ``SingleAgentEpisode`` chunks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import SingleAgentEpisode
from episodes.replay.errors import EmptyBufferError
from episodes.replay.metadata import with_clocks, with_meta
from episodes.replay.nested import is_records, take_rows, unpack, unpack_batch, zero_rows
from episodes.replay.nstep import (
    gathers_leaves,
    nest,
    next_leaves,
    next_observations,
    take_leaves,
    walk,
)
from episodes.replay.sampling import add_extras, check_positive, draw_live, episode_slots
from episodes.replay.store import StepStore, fresh_info_list, fresh_infos
from episodes.replay.table import EpisodeTable

__all__ = [
    "build_episode",
    "draw_starts",
    "no_start_error",
    "sample_chunks",
    "sample_sequences",
    "sequence_batch",
    "start_filter",
]


def draw_starts(
    store: StepStore,
    table: EpisodeTable,
    rng: np.random.Generator,
    size: int,
    length: int,
    pad: bool,
    paddable: bool = True,
) -> np.ndarray:
    """Start slots drawn uniformly among those with ``length`` steps left in their episode.

    ``paddable`` says whether the caller's unit can be padded (sequences, not episode chunks),
    which decides the hint of the error.

    Raises:
        EmptyBufferError: No stored episode holds ``length`` steps (and ``pad`` is off).

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> store, table, rng = buf._store, buf._table, np.random.default_rng(0)
        >>> sorted(set(draw_starts(store, table, rng, 20, 2, pad=False).tolist()))
        [0, 1]
        >>> draw_starts(store, table, rng, 1, 4, pad=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.replay.errors.EmptyBufferError: no stored episode holds 4 steps, ...
    """
    starts = draw_live(store, rng, size, None if pad else start_filter(store, table, length))
    if not len(starts):
        raise no_start_error(length, paddable)
    return starts


def start_filter(
    store: StepStore, table: EpisodeTable, length: int
) -> Callable[[np.ndarray], np.ndarray]:
    """Which of some live slots may start an unpadded sequence: ``length`` steps left.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], len_lookback_buffer=0))
        >>> start_filter(buf._store, buf._table, 2)(np.array([0, 1, 2])).tolist()
        [True, True, False]
    """

    def fits(slots: np.ndarray) -> np.ndarray:
        return table.t_end[store.ep[slots]] - store.t[slots] >= length

    return fits


def no_start_error(length: int, paddable: bool = True) -> EmptyBufferError:
    """The error of a sample no stored episode holds ``length`` steps for (see ``draw_starts``).

    Example:
        >>> no_start_error(4, paddable=False)  # doctest: +ELLIPSIS
        EmptyBufferError('no stored episode holds 4 steps, so no episode chunk ...')
    """
    hint = "add longer episodes or pass pad=True" if paddable else "add longer episodes"
    what = "sequence" if paddable else "episode chunk (chunks are never padded)"
    return EmptyBufferError(
        f"no stored episode holds {length} steps, so no {what} of batch_length_T="
        f"{length} fits inside one; {hint}"
    )


def _reach(store: StepStore, table: EpisodeTable, starts: np.ndarray, lookback: int) -> int:
    # The most steps any start's episode holds before it, up to ``lookback``: a lookback far
    # beyond what is stored (10**7) then costs what is stored, not what was asked.
    if not lookback:
        return 0
    held = store.t[starts] - table.t_begin[store.ep[starts]]
    return int(min(lookback, held.max(initial=0)))


def _gather(column: np.ndarray, pos: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = take_rows(column, np.maximum(pos, 0))
    zero_rows(out, ~mask)
    return out


def _nested_obs(
    store: StepStore, table: EpisodeTable, flat: np.ndarray, mask: np.ndarray
) -> tuple[Any, Any]:
    # obs and next_obs of big records (gathers_leaves): each leaf gathered once, then padded.
    assert store.obs is not None
    obs = take_leaves(store.obs.data, flat)
    nxt = [
        leaf.reshape(flat.shape + leaf.shape[1:])
        for leaf in next_leaves(store, table, flat.ravel())
    ]
    for leaf in (*obs, *nxt):
        leaf[~mask] = 0
    return nest(store.obs.data.dtype, obs), nest(store.obs.data.dtype, nxt)


def sequence_batch(
    store: StepStore,
    table: EpisodeTable,
    starts: np.ndarray,
    length: int,
    lookback: int,
    include_infos: bool = False,
    include_extra_model_outputs: bool = False,
    reserved: tuple[str, ...] = (),
) -> dict[str, np.ndarray]:
    """``[B, lookback + length]`` columns of the sequences beginning at ``starts``.

    The first ``lookback`` columns are context (``is_lookback``), taken from the same episode
    and padded where it began later. Every step is a transition ``(o_t, a_t, r_{t+1},
    o_{t+1})``: ``is_first`` marks the episode's first stored step, ``is_last`` its last stored
    step, ``is_terminated``/``is_truncated`` a last step that ended the episode; padded steps
    are zeros with ``mask`` False and ``indices`` -1. ``infos`` (on request) are those of
    ``next_obs`` (the episode's final info at its last stored step), ``{}`` where padded.
    ``reserved`` names columns the caller adds after this call (a prioritized batch's
    ``weights``): an extra model output of that name is refused.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> batch = sequence_batch(buf._store, buf._table, np.array([1]), length=3, lookback=1)
        >>> batch["obs"].tolist(), batch["mask"].tolist()
        ([[0.0, 1.0, 2.0, 0.0]], [[True, True, True, False]])
        >>> batch["is_lookback"].tolist(), batch["is_terminated"].tolist()
        ([[True, False, False, False]], [[False, False, True, False]])
    """
    assert store.obs is not None and store.actions is not None
    parts = []
    if lookback:
        # Columns before every start's episode are padding: only the reach is walked.
        reach = _reach(store, table, starts, lookback)
        parts.append(np.full((len(starts), lookback - reach), -1, np.int64))
        if reach:
            parts.append(walk(store, starts, reach, backward=True))
    pos = np.concatenate([*parts, walk(store, starts, length)], axis=1)
    mask = pos >= 0
    flat = np.maximum(pos, 0)
    at_end = (store.nxt[flat] < 0) & mask
    rows = store.ep[flat]
    if gathers_leaves(store, table):  # big records (images): each leaf gathered once
        obs, next_obs = _nested_obs(store, table, flat, mask)
    else:
        obs = _gather(store.obs.data, pos, mask)
        next_obs = next_observations(store, table, flat.ravel())
        next_obs = next_obs.reshape(flat.shape + next_obs.shape[1:])
        zero_rows(next_obs, ~mask)
    is_lookback = np.zeros(pos.shape, bool)
    is_lookback[:, :lookback] = True
    batch = {
        "obs": obs,
        "actions": _gather(store.actions.data, pos, mask),
        "rewards": _gather(store.rewards, pos, mask),
        "next_obs": next_obs,
        "is_first": (store.prv[flat] < 0) & mask,
        "is_last": at_end,
        "is_terminated": at_end & table.terminated[rows],
        "is_truncated": at_end & table.truncated[rows],
        "is_lookback": is_lookback,
        "mask": mask,
        "indices": np.where(mask, store.uid[flat], -1),
    }
    if include_infos:
        batch["infos"] = _next_infos(store, table, flat, mask)
    nested = store.obs.data.dtype.names is not None or store.actions.data.dtype.names is not None
    if include_extra_model_outputs:
        extras = {key: _gather(column.data, pos, mask) for key, column in store.extras.items()}
        add_extras(batch, extras, reserved)
        nested = nested or any(is_records(values) for values in extras.values())
    if nested:  # nested observations, actions or extras: given back nested
        unpack_batch(batch)
    return batch


def _next_infos(
    store: StepStore, table: EpisodeTable, flat: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    # The info of each step's next_obs, as a transition batch has it (the info that came with
    # r_{t+1}): the next slot's, or at the last stored step the episode's final info. Padded
    # steps get a new {} as an empty info does (the numeric columns hold zeros there).
    nxt = store.nxt[flat]
    infos = store.read_infos(np.maximum(nxt, 0))
    ends = (nxt < 0) & mask
    infos[ends] = table.final_info[store.ep[flat[ends]]]
    infos[~mask] = None
    return fresh_infos(infos)


def sample_sequences(
    store: StepStore,
    table: EpisodeTable,
    rng: np.random.Generator,
    size: int,
    length: int,
    lookback: int,
    pad: bool,
    include_infos: bool,
    include_extra_model_outputs: bool,
) -> dict[str, np.ndarray]:
    """Draws ``size`` starts and returns their :func:`sequence_batch`.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> rng = np.random.default_rng(0)
        >>> batch = sample_sequences(buf._store, buf._table, rng, 4, 2, 0, False, False, False)
        >>> batch["indices"].tolist(), "infos" in batch
        ([[1, 2], [1, 2], [0, 1], [0, 1]], False)
    """
    starts = draw_starts(store, table, rng, size, length, pad)
    return sequence_batch(
        store, table, starts, length, lookback, include_infos, include_extra_model_outputs
    )


def sample_chunks(
    store: StepStore,
    table: EpisodeTable,
    rng: np.random.Generator,
    size: int,
    length: int | None,
    lookback: int,
    spaces: tuple[Any, Any],
) -> list[SingleAgentEpisode]:
    """``size`` numpy'd episode chunks: whole stored episodes, or ``length``-step chunks.

    Whole episodes are drawn uniformly among stored episodes (a position in their stored
    order, oldest first, so the draw does not depend on which table rows they hold: a
    restored buffer draws what the original would); chunks start uniformly among
    the steps with ``length`` steps left in their episode, and carry up to ``lookback`` earlier
    steps of the same episode as their lookback.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> rng = np.random.default_rng(0)
        >>> eps = sample_chunks(buf._store, buf._table, rng, 3, 2, 1, (None, None))
        >>> [(len(ep), ep.t_started, ep.observations.lookback) for ep in eps]
        [(2, 1, 1), (2, 1, 1), (2, 0, 0)]
    """
    if length is None:
        # One vectorized draw of positions in the age order: no pass over every id.
        rows = table.rows_by_age()[rng.integers(0, len(table), size)]
        return [  # whole stored episodes: with their clocks
            with_clocks(
                build_episode(store, table, episode_slots(store, table, r), 0, spaces),
                table.meta[r],
            )
            for r in rows
        ]
    length = check_positive(length, "batch_length_T")
    starts = draw_starts(store, table, rng, size, length, pad=False, paddable=False)
    pos = walk(store, starts, length)
    reach = _reach(store, table, starts, lookback)  # a chunk's lookback is what is stored
    if reach:
        pos = np.concatenate([walk(store, starts, reach, backward=True), pos], axis=1)
    out = []
    for row in pos:
        slots = row[row >= 0]
        out.append(build_episode(store, table, slots, len(slots) - length, spaces))
    return out


def build_episode(
    store: StepStore,
    table: EpisodeTable,
    slots: np.ndarray,
    lookback: int,
    spaces: tuple[Any, Any],
) -> SingleAgentEpisode:
    """A numpy'd episode of the given slots of one episode, the first ``lookback`` as lookback.

    It carries its stored episode's id (None too), ``agent_id``, ``module_id``,
    ``multi_agent_episode_id`` and a copy of its ``custom_data``, but no clocks, as a slice
    has none (:func:`episodes.replay.metadata.with_meta`; a whole stored episode gets them
    from ``with_clocks``).

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
        ...                            rewards=[1.0, 2.0, 3.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> ep = build_episode(buf._store, buf._table, np.array([0, 1, 2]), 1, (None, None))
        >>> ep.id_, len(ep), ep.t_started, ep.is_terminated
        ('a', 2, 1, True)
        >>> ep.get_observations().tolist(), ep.get_rewards().tolist()
        ([1.0, 2.0, 3.0], [2.0, 3.0])
    """
    assert store.obs is not None and store.actions is not None
    row = int(store.ep[slots[0]])
    last = slots[-1]
    at_end = store.nxt[last] < 0
    nxt = store.nxt[last]
    final_info = table.final_info[row] if at_end else store.read_infos(np.array([nxt]))[0]
    raw_infos = np.empty(len(slots) + 1, object)
    raw_infos[:-1] = store.read_infos(slots)
    raw_infos[-1] = final_info
    if gathers_leaves(store, table):  # big records (images): each leaf gathered once
        leaves = take_leaves(store.obs.data, np.append(slots, max(nxt, 0)))
        if at_end:  # the episode's latest observation, as next_observations takes it
            assert table.final_obs is not None
            for leaf, final in zip(leaves, take_leaves(table.final_obs.data, [row])):
                leaf[-1] = final[0]
        observations = nest(store.obs.data.dtype, leaves)
    else:
        observations = np.concatenate(
            [take_rows(store.obs.data, slots), next_observations(store, table, slots[-1:])]
        )
    if is_records(observations):  # nested: a numpy'd nested column
        observations = unpack(observations)
    # The gathers are new arrays (fancy indexing copies): they become the numpy'd columns
    # as they are, holding what ``to_numpy`` would stack from their rows; infos stay a list,
    # as ``to_numpy`` leaves them.
    meta, id_ = table.meta[row], table.ids[row]
    episode = SingleAgentEpisode(
        id_,
        observations=_column(observations, lookback, spaces[0]),
        observation_space=spaces[0],
        infos=_column(fresh_info_list(raw_infos), lookback),
        actions=_column(_unpacked(take_rows(store.actions.data, slots)), lookback, spaces[1]),
        action_space=spaces[1],
        rewards=_column(store.rewards[slots], lookback),
        terminated=bool(at_end and table.terminated[row]),
        truncated=bool(at_end and table.truncated[row]),
        extra_model_outputs={
            k: _column(_unpacked(take_rows(c.data, slots)), lookback)
            for k, c in store.extras.items()
        },
        t_started=int(store.t[slots[lookback]])
        if lookback < len(slots)
        else int(store.t[last]) + 1,
        len_lookback_buffer=lookback,
        agent_id=None if meta is None else meta.agent_id,
        module_id=None if meta is None else meta.module_id,
        multi_agent_episode_id=None if meta is None else meta.multi_agent_episode_id,
    )
    return with_meta(episode, id_, meta)


def _unpacked(rows: np.ndarray) -> Any:
    # Records (nested actions, extras) as the numpy'd nested column they stand for.
    return unpack(rows) if is_records(rows) else rows


def _column(data: Any, lookback: int, space: Any = None) -> InfiniteLookbackBuffer:
    # An array is taken over as a numpy'd column (no copy), a list as a list-mode one.
    return InfiniteLookbackBuffer(data, lookback=lookback, space=space)

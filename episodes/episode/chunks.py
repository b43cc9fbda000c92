"""Chunk operations on episodes: ``cut``, ``slice`` and ``concat``.

They are free functions over a :class:`SingleAgentEpisode` so the class file stays about
recording and reading; the episode's methods delegate here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.batch_writes import in_space_mask
from episodes.episode.fields import FIELDS
from episodes.episode.recording import _is_real
from episodes.indexing import as_int
from episodes.spaces import equal_in_space
from episodes.structs import same_nesting

if TYPE_CHECKING:
    from episodes.episode.single_agent_episode import SingleAgentEpisode


def _successor_builder() -> Any:
    """Generates ``build(cls, episode, columns, t_started, flags)`` from the field table.

    A successor is built without ``__init__``: its columns are fresh copies cut from a valid
    episode, so the checks and wrapping the constructor does for user input would only repeat
    work, and the parent's space checkers are reused. It runs for every cut and slice, and a
    dynamic ``setattr`` per field costs ten times a plain assignment, so the assignments are
    generated once from the table (as dataclasses generate ``__init__``): a new field needs no
    edit here.
    """
    lines = ["def build(cls, episode, columns, t_started, flags):", "    s = cls.__new__(cls)"]
    for field in FIELDS:
        slot, kind = field.slot, field.kind
        if kind in ("id", "space"):
            value = f"episode.{slot}"
        elif kind in ("column", "columns"):
            value = f"columns[{field.name!r}]"
        elif kind == "flag":
            value = f"flags.get({field.name!r}, False)"
        elif kind == "clock":
            value = "None"
        elif kind == "custom":
            value = f"deepcopy(episode.{slot}) if episode.{slot} else {{}}"
        elif field.name == "t_started":
            value = "t_started"
        elif field.name == "t":
            continue  # set below, from the rewards
        else:
            raise ValueError(f"no successor rule for the {kind} field {field.name!r}")
        lines.append(f"    s.{slot} = {value}")
    lines += [
        "    s.t = t_started + len(s.rewards)",
        "    s._obs_check = episode._obs_check",
        "    s._action_check = episode._action_check",
        "    return s",
    ]
    namespace: dict[str, Any] = {"deepcopy": copy.deepcopy}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own field names, not input
    return namespace["build"]


_build_successor = _successor_builder()
_STEP_COLUMNS = ("observations", "infos", "actions", "rewards")


def _successor(
    episode: SingleAgentEpisode,
    columns: dict[str, Any],
    *,
    t_started: int,
    terminated: bool = False,
    truncated: bool = False,
) -> Any:
    flags = {"is_terminated": terminated, "is_truncated": truncated}
    return _build_successor(type(episode), episode, columns, t_started, flags)


def cut(episode: SingleAgentEpisode, len_lookback_buffer: int = 0) -> SingleAgentEpisode:
    """Starts the successor chunk of a not-done episode.

    The successor has the same id, ``t_started == t == episode.t``, length 0 and is not done.
    Its ``ts=0`` observation/info is the episode's last one, and the last
    ``len_lookback_buffer`` items of every column (clamped to what exists) are its lookback.
    It owns its data: appending to it never changes ``episode``.

    Raises:
        AssertionError: The episode is done.
        ValueError: ``len_lookback_buffer`` is negative.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[0.0, 1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = cut(ep, 1)
        >>> nxt.get_observations(), nxt.get_actions(-1, neg_index_as_lookback=True)
        ([2], 1)
    """
    if episode.is_done:
        raise AssertionError("cannot cut a done episode: it has no successor chunk")
    lookback = as_int(len_lookback_buffer, what="len_lookback_buffer")
    if lookback < 0:
        raise ValueError(f"len_lookback_buffer must be >= 0, got {lookback}")

    # Observations and infos keep their last item visible: the successor's ts=0.
    with_last = lookback + 1
    columns = {
        "observations": episode.observations.copy_tail(with_last, 1),
        "infos": episode.infos.copy_tail(with_last, 1),
        "actions": episode.actions.copy_tail(lookback, 0),
        "rewards": episode.rewards.copy_tail(lookback, 0),
        "extra_model_outputs": {
            key: column.copy_tail(lookback, 0)
            for key, column in episode.extra_model_outputs.items()
        },
    }
    return _successor(episode, columns, t_started=episode.t)


def _resolve_bound(bound: Any, default: int, length: int) -> int:
    if bound is None:
        return default
    value = as_int(bound, what="slice bound")
    if value < 0:
        value += length
    return min(max(value, 0), length)


def slice_episode(
    episode: SingleAgentEpisode, slice_: slice, *, len_lookback_buffer: int | None = None
) -> SingleAgentEpisode:
    """A new episode for steps ``start .. stop`` of ``episode`` (negative bounds from the end).

    Observations and infos get one item more than actions and rewards. The lookback in front of
    the slice comes from the data before ``start`` (lookback included): ``len_lookback_buffer``
    items, by default as many as each column had, clamped to what exists. Terminated/truncated
    survive only if the slice reaches the end.

    Raises:
        TypeError: A bound or the step is not an int (a float, a bool), as in buffer reads.
        ValueError: The slice has a step other than 1, or ``len_lookback_buffer`` < 0.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2, 3, 4], actions=[1, 2, 3, 4],
        ...                         rewards=[1.0, 2.0, 3.0, 4.0], len_lookback_buffer=0)
        >>> part = slice_episode(ep, slice(1, 3))
        >>> part.get_observations(), part.get_actions(), part.t_started, part.t
        ([1, 2, 3], [2, 3], 1, 3)
    """
    if not isinstance(slice_, slice):
        raise TypeError(f"slice_ must be a slice, got {type(slice_).__name__}")
    # A float or bool step is a TypeError, as in buffer reads: 1.0 and True only equal 1.
    if slice_.step is not None and as_int(slice_.step, what="slice step") != 1:
        raise ValueError(f"episode slices need step 1 or None, got {slice_.step}")
    if (
        len_lookback_buffer is not None
        and as_int(len_lookback_buffer, what="len_lookback_buffer") < 0
    ):
        raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}")
    length = len(episode)
    start = _resolve_bound(slice_.start, 0, length)
    stop = max(_resolve_bound(slice_.stop, length, length), start)

    if len_lookback_buffer is None:

        def part(column: Any, extra: int) -> Any:
            # Each column keeps its own lookback: all of it exists in front of ``start >= 0``.
            lookback = column.lookback
            return column.copy_range(start, lookback + stop + extra, lookback)

    else:
        wanted = int(len_lookback_buffer)

        def part(column: Any, extra: int) -> Any:
            lookback = min(wanted, column.lookback + start)
            first = column.lookback + start - lookback
            return column.copy_range(first, column.lookback + stop + extra, lookback)

    columns = {
        "observations": part(episode.observations, 1),
        "infos": part(episode.infos, 1),
        "actions": part(episode.actions, 0),
        "rewards": part(episode.rewards, 0),
        "extra_model_outputs": {
            key: part(column, 0) for key, column in episode.extra_model_outputs.items()
        },
    }
    keep_done = stop == length
    return _successor(
        episode,
        columns,
        t_started=episode.t_started + start,
        terminated=episode.is_terminated and keep_done,
        truncated=episode.is_truncated and keep_done,
    )


def concat(episode: SingleAgentEpisode, other: SingleAgentEpisode) -> None:
    """Appends the successor chunk ``other`` to ``episode`` in place.

    Requires the same id, ``episode.t == other.t_started``, ``episode`` not done, the same
    extra-model-output keys, and ``other``'s first observation equal (leaf-wise) to
    ``episode``'s last. Afterwards ``episode.t == other.t``, the flags are ``other``'s,
    ``custom_data`` is updated with ``other``'s (shallowly, as in RLlib). A numpy'd
    ``episode`` checks ``other``'s steps as :meth:`add_env_step` checks a step. Everything is
    checked before anything changes.

    Raises:
        AssertionError: A requirement above does not hold (the message says which).
        ValueError: ``episode`` is numpy'd and ``other`` holds an observation or action outside
            its spaces, a reward that is no real number while the rewards' dtype is open, or
            a value one of its numpy columns cannot hold. Neither episode is changed.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 1.0, terminated=True)
        >>> concat(ep, nxt); ep.get_observations(), ep.is_terminated
        ([0, 1, 2], True)
    """
    if not hasattr(other, "observations") or not hasattr(other, "t_started"):
        raise TypeError(f"can only concat a SingleAgentEpisode, got {type(other).__name__}")
    if other is episode:  # a 0-step chunk passes every check below, then pops its own items
        raise AssertionError("cannot concat an episode with itself")
    if other.id_ != episode.id_:
        raise AssertionError(
            f"cannot concat episodes with different ids: {episode.id_!r} vs {other.id_!r}"
        )
    if episode.is_done:
        raise AssertionError("cannot concat onto a done episode")
    if episode.t != other.t_started:
        raise AssertionError(
            f"cannot concat: self.t ({episode.t}) != other.t_started ({other.t_started})"
        )
    episode.validate()
    other.validate()
    if len(episode.observations) == 0 or len(other.observations) == 0:
        raise AssertionError("cannot concat: both chunks need at least one observation")
    mine, theirs = set(episode.extra_model_outputs), set(other.extra_model_outputs)
    # Keys may only be new where this episode has no steps yet (a chunk cut before the first
    # step that recorded them), or its existing steps would lack them; and a successor with
    # steps must give every key this episode records.
    if (theirs - mine and len(episode) > 0) or (len(other) > 0 and mine - theirs):
        raise AssertionError(
            "cannot concat: extra_model_outputs keys differ: "
            f"{sorted(episode.extra_model_outputs)} vs {sorted(other.extra_model_outputs)}"
        )
    # Storage positions rather than getters: both chunks were just validated as non-empty.
    first_of_other = other.observations.get(0)
    last_of_mine = episode.observations.get(-1)
    space = episode.observation_space or other.observation_space
    if not equal_in_space(first_of_other, last_of_mine, space):
        raise AssertionError(
            "cannot concat: other's first observation differs from self's last observation"
        )
    _join_columns(episode, other)
    episode.t = other.t
    episode.is_terminated = other.is_terminated
    episode.is_truncated = other.is_truncated
    episode.custom_data.update(other.custom_data)
    if other._last_step_time is not None:
        episode._last_step_time = other._last_step_time
        if episode._start_time is None:
            episode._start_time = other._start_time


def _check_steps(episode: SingleAgentEpisode, other: SingleAgentEpisode) -> None:
    """Refuses ``other``'s steps where ``add_env_step`` on the numpy'd ``episode`` would.

    Observations (after the first, which equals ``episode``'s last) and actions must lie in
    ``episode``'s spaces, judged by the checkers ``add_env_step`` uses, and rewards must be
    real numbers while the rewards' dtype is still open (a typed column refuses the rest as it
    stores them, which :func:`_staged_columns` tries first). A numpy'd ``other`` is judged one
    batch per column; a list-mode one item by item, as its steps were given.
    """
    what = (
        ("observation", other.observations, 1, episode._obs_check, episode.observation_space),
        ("action", other.actions, 0, episode._action_check, episode.action_space),
    )
    for name, column, skip, check, space in what:
        if check is None or space is None:
            continue
        refused = _first_refused(column, skip, partial(in_space_mask, space), check)
        if refused is not None:
            raise ValueError(
                f"cannot concat: other's {name}s do not fit this episode's {name} space "
                f"{space} (its {name}s[{refused[0]}], {refused[1]!r}, is not in it); nothing "
                "was changed"
            )
    if not getattr(episode.rewards.store, "typed", True):
        refused = _first_refused(other.rewards, 0, _real_mask, _is_real)
        if refused is not None:
            raise ValueError(
                "cannot concat: other's rewards do not fit this episode's numpy rewards "
                f"column (its rewards[{refused[0]}], {refused[1]!r}, is no real number); "
                "nothing was changed"
            )


def _first_refused(
    column: InfiniteLookbackBuffer,
    skip: int,
    mask: Callable[[Any, int], np.ndarray],
    check: Callable[[Any], bool],
) -> tuple[int, Any] | None:
    """(visible index, item) of the first item after ``skip`` that ``check`` refuses, or None.

    A numpy column is judged whole by ``mask(batch, count)``, which must agree with ``check``.
    """
    store = column.store
    start, stop = column.lookback + skip, len(store)
    if start >= stop:
        return None
    if store.is_numpy:
        accepted = mask(store.window(start, stop), stop - start)
        if accepted.all():
            return None
        first = int(np.argmin(accepted))
        return skip + first, store.get(start + first)
    for index, item in enumerate(store.items(start), skip):
        if not check(item):
            return index, item
    return None


def _real_mask(batch: Any, count: int) -> np.ndarray:
    # Per item, what ``_is_real`` says: a column of numbers holds real numbers only, a column
    # of objects is judged item by item, and items with a shape (or a struct) are no numbers.
    if isinstance(batch, np.ndarray) and batch.ndim == 1:
        if batch.dtype.kind in "biuf":
            return np.ones(count, bool)
        return np.fromiter(map(_is_real, batch), dtype=bool, count=count)
    return np.zeros(count, bool)


_Parts = list[tuple[InfiniteLookbackBuffer, Any]]


def _staged_columns(
    episode: SingleAgentEpisode, other: SingleAgentEpisode
) -> tuple[_Parts, dict[str, InfiniteLookbackBuffer]]:
    """What each column of ``episode`` takes from ``other``, with every write tried first.

    Returns the pairs (``episode``'s column, what the join appends to it) and the whole
    columns of extra-model-output keys new to ``episode``, built here. A numpy column's part is
    staged into an empty store of its layout, which runs every check its own append runs
    (shapes, nesting, dtypes, values that change in the cast), so a misfit is refused here,
    with nothing changed: a runner's chunk keeps viewing its block. Appending the staged
    store, of exactly the column's layout, then cannot fail.
    """
    extras = episode.extra_model_outputs
    parts = [(name, "", getattr(episode, name), getattr(other, name)) for name in _STEP_COLUMNS]
    parts += [
        (f"extra_model_outputs[{key!r}]", key, extras.get(key), theirs)
        for key, theirs in other.extra_model_outputs.items()
    ]
    staged: _Parts = []
    fresh: dict[str, InfiniteLookbackBuffer] = {}
    for name, key, mine, theirs in parts:
        try:
            if mine is None:
                column = InfiniteLookbackBuffer([], space=theirs.space)
                if episode.is_numpy:
                    column.finalize()
                column.concat(theirs)
                fresh[key] = column
            elif mine.store.is_numpy and not _same_layout(mine.store, theirs.store):
                size = len(mine.store)
                scratch = mine.store.copy_range(size, size)  # no items, the column's layout
                scratch.extend_from(theirs.store, theirs.lookback)
                staged.append((mine, scratch))
            else:
                staged.append((mine, theirs))
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"cannot concat: other's {name} do not fit this episode's numpy column "
                f"({error}); nothing was changed"
            ) from error
    return staged, fresh


def _same_layout(mine: Any, theirs: Any) -> bool:
    """Whether numpy store ``theirs`` holds items of exactly ``mine``'s dtypes, shapes, nesting.

    The append of such items (chunks of one runner, or of one numpy'd episode) cannot be
    refused, so they need no staging.
    """
    if not (theirs.is_numpy and mine.typed and theirs.typed):
        return False
    structure, given = mine.structure, theirs.structure
    if (structure is None) != (given is None) or not (
        structure is None or same_nesting(structure, given)
    ):
        return False
    ours, others = mine.leaves, theirs.leaves
    return len(ours) == len(others) and all(
        a.dtype == b.dtype and a.shape[1:] == b.shape[1:] for a, b in zip(ours, others)
    )


def _join_columns(episode: SingleAgentEpisode, other: SingleAgentEpisode) -> None:
    """Appends ``other``'s columns, all checked first: nothing is refused once one is changed."""
    observations, infos, actions, rewards = (
        episode.observations,
        episode.infos,
        episode.actions,
        episode.rewards,
    )
    extras = episode.extra_model_outputs
    # Plain ors, no generators: this runs for every concat, mostly of list-mode chunks.
    steps_numpy = observations.store.is_numpy or actions.store.is_numpy or rewards.store.is_numpy
    if (
        steps_numpy
        or infos.store.is_numpy
        or (extras and any(c.store.is_numpy for c in extras.values()))
    ):
        if steps_numpy:
            _check_steps(episode, other)  # add_env_step's checks, in numpy (or mixed) mode
        staged, fresh = _staged_columns(episode, other)
    else:
        # List mode, the common case while sampling: a list takes any item as it is.
        staged = [
            (observations, other.observations),
            (infos, other.infos),
            (actions, other.actions),
            (rewards, other.rewards),
        ]
        fresh = {}
        for key, theirs in other.extra_model_outputs.items():
            mine = extras.get(key)
            if mine is None:
                mine = fresh[key] = InfiniteLookbackBuffer([], space=theirs.space)
            staged.append((mine, theirs))
    # ``other`` starts with the observation/info this chunk ends with: its copy replaces ours.
    episode.observations.pop()
    episode.infos.pop()
    for mine, part in staged:
        if isinstance(part, InfiniteLookbackBuffer):
            mine.concat(part)
        elif len(part):  # a staged store, of exactly the column's layout
            mine.store.extend_from(part, 0)
    if fresh:
        extras.update(fresh)

"""Chunk operations on episodes: ``cut``, ``slice`` and ``concat``.

They are free functions over a :class:`SingleAgentEpisode` so the class file stays about
recording and reading; the episode's methods delegate here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.subclasses import subclass_attributes
from episodes.episode.custom_copy import copied_custom
from episodes.episode.fields import FIELDS
from episodes.episode.reward_values import first_unreal, needs_real_check
from episodes.episode.state import same_id
from episodes.indexing import as_int
from episodes.spaces import equal_in_space
from episodes.structs import sorted_keys

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
            value = f"copied_custom(episode.{slot}) if episode.{slot} else {{}}"
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
    namespace: dict[str, Any] = {"copied_custom": copied_custom}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own field names, not input
    return namespace["build"]


_build_successor = _successor_builder()


def _successor(
    episode: SingleAgentEpisode,
    columns: dict[str, Any],
    *,
    t_started: int,
    terminated: bool = False,
    truncated: bool = False,
) -> Any:
    flags = {"is_terminated": terminated, "is_truncated": truncated}
    successor = _build_successor(type(episode), episode, columns, t_started, flags)
    if episode._adds_attributes:  # a user's subclass: its own attributes, shared as copy.copy
        base = next(c for c in type(episode).__mro__ if c.__dict__.get("_adds_attributes") is False)
        for name, value in subclass_attributes(episode, base).items():
            object.__setattr__(successor, name, value)
    return successor


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
    start, stop = slice_.start, slice_.stop
    # Plain ints within the episode (the usual ep[a:b]) are their own resolved bounds.
    if not (start.__class__ is int and 0 <= start <= length):
        start = _resolve_bound(start, 0, length)
    if not (stop.__class__ is int and start <= stop <= length):
        stop = max(_resolve_bound(stop, length, length), start)

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

    Requires the same id (NaNs at the same places equal, as ``state.same_id`` compares), the
    same ``agent_id`` where both name one, ``episode.t == other.t_started``, ``episode`` not
    done, the same extra-model-output keys, and ``other``'s first observation equal
    (leaf-wise) to ``episode``'s last. Afterwards ``episode.t == other.t``, the flags are
    ``other``'s, ``custom_data`` is merged with ``other`` winning. Everything is checked
    before anything changes.

    Raises:
        AssertionError: A requirement above does not hold (the message says which).
        ValueError: A numpy'd column of ``episode`` cannot hold ``other``'s items (a string or
            None reward, a wrong-shaped action); the message names the column.

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
    if not same_id(other.id_, episode.id_):
        raise AssertionError(
            f"cannot concat episodes with different ids: {episode.id_!r} vs {other.id_!r}"
        )
    # One id may be shared by two agents' chunks by mistake (the game's id given to both);
    # joined, one agent's steps would continue the other's. None says nothing of the agent.
    agents = (episode.agent_id, other.agent_id)
    if agents[0] is not None and agents[1] is not None and not same_id(*agents):
        raise AssertionError(
            f"cannot concat chunks of different agents: {agents[0]!r} vs {agents[1]!r} "
            f"(both under the id {episode.id_!r}: give each agent's episode its own id)"
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
            f"{sorted_keys(episode.extra_model_outputs)} vs "
            f"{sorted_keys(other.extra_model_outputs)}"
        )
    # Storage positions rather than getters: both chunks were just validated as non-empty.
    first_of_other = other.observations.store.get(other.observations.lookback)
    last_of_mine = episode.observations.store.get(episode.observations.len_incl_lookback() - 1)
    # ``is None``, not truth: an empty Dict is a space, and a 2-D MultiDiscrete warns on len().
    space = episode.observation_space
    if space is None:
        space = other.observation_space
    same = _same_bytes(first_of_other, last_of_mine)  # equal in any space: no walk
    if not same and not equal_in_space(first_of_other, last_of_mine, space):
        raise AssertionError(
            "cannot concat: other's first observation differs from self's last observation"
        )
    # Views of the row the join pops: held, they would make the pop copy the column.
    del first_of_other, last_of_mine
    # As in add_env_step: a column whose dtype is still open, or of objects, takes anything.
    _check_in_spaces(episode, other)
    misfit = needs_real_check(episode.rewards.store) and first_unreal(other.rewards.get())
    if misfit:
        raise ValueError(
            "cannot concat: other's rewards do not fit this episode's numpy column "
            f"({misfit[0]!r} is no real number); nothing was changed"
        )
    _join_columns(episode, other)
    episode.t = other.t
    episode._is_terminated = other._is_terminated
    episode._is_truncated = other._is_truncated
    episode.custom_data.update(other.custom_data)
    if other._last_step_time is not None:
        episode._last_step_time = other._last_step_time
        if episode._start_time is None:
            episode._start_time = other._start_time


def _same_bytes(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are arrays of one number dtype and shape with the same bytes.

    Such arrays are ``data_equal`` (NaNs at the same places), which ``equal_in_space`` asks
    first; anything else (-0.0 against 0.0 too) is left to it.
    """
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray:
        return False
    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind not in "biuf":
        return False
    return a.tobytes() == b.tobytes()


def _check_in_spaces(episode: SingleAgentEpisode, other: SingleAgentEpisode) -> None:
    """A numpy'd ``episode`` takes a list-mode ``other``'s steps only in its spaces (§3.7).

    As ``add_env_step`` checks each step of a numpy'd episode: ``other``'s visible
    observations after its first (which the join drops) and its actions. A numpy'd ``other``
    holds what its columns took (a runner records observations as the env gave them, a
    dataset as they were written): joining its chunks back must not refuse them.
    """
    columns = (  # the episode's own checkers, built once with its spaces (as add_env_step's)
        (episode.observations, other.observations, 1, "observation", episode._obs_check),
        (episode.actions, other.actions, 0, "action", episode._action_check),
    )
    for mine, theirs, skip, what, check in columns:
        if check is None or not mine.store.is_numpy or theirs.store.is_numpy:
            continue
        items = theirs.store.pylist  # a list store's list: no read to build
        items = theirs.get(slice(skip, None)) if items is None else items[theirs.lookback + skip :]
        for item in items:
            if not check(item):
                space = getattr(episode, f"{what}_space")
                raise ValueError(
                    f"cannot concat: other's {what} {item!r} is not in this episode's {what} "
                    f"space {space}; nothing was changed"
                )


def _view_token(store: Any) -> Any:
    """A view store's :meth:`views_token` (None for other stores, or once detached)."""
    views_token = getattr(store, "views_token", None)
    return None if views_token is None else views_token()


def _restore_views(store: Any, taken: Any) -> None:
    store.restore_views(taken)  # a view store's: it gave the token


def _join_columns(episode: SingleAgentEpisode, other: SingleAgentEpisode) -> None:
    """Appends ``other``'s columns; if a numpy column refuses them, restores ``episode``."""
    extras = episode.extra_model_outputs
    # A runner chunk's columns view its blocks; a refused join must leave them views (the
    # sample then still reads as unchanged), not the copies its steps made.
    views: list[tuple[InfiniteLookbackBuffer, Any, Any]] = [
        (column, column.store, _view_token(column.store))
        for column in (
            episode.observations,
            episode.infos,
            episode.actions,
            episode.rewards,
            *extras.values(),
        )
    ]
    # A column the pop below empties forgets the layout its first item chose, and the item
    # put back would choose anew ("ab" as <U2 in a <U4 column): a refusal puts these back.
    emptied = [
        (column, copy.copy(column.store), column.lookback)
        for column in (episode.observations, episode.infos)
        if column.len_incl_lookback() == 1
    ]
    # ``other`` starts with the observation/info this chunk ends with: its copy replaces ours.
    last_observation = episode.observations.pop()
    last_info = episode.infos.pop()
    joined: list[tuple[InfiniteLookbackBuffer, InfiniteLookbackBuffer]] = []
    new_keys: list[str] = []
    name = "observations"
    try:
        for name, mine, theirs in (  # noqa: B007 - the handler below reports `name`
            ("observations", episode.observations, other.observations),
            ("infos", episode.infos, other.infos),
            ("actions", episode.actions, other.actions),
            ("rewards", episode.rewards, other.rewards),
        ):
            mine.concat(theirs)
            joined.append((mine, theirs))
        for key, theirs in other.extra_model_outputs.items():
            name = f"extra_model_outputs[{key!r}]"
            if key not in extras:
                fresh = InfiniteLookbackBuffer([], space=theirs.space)
                if episode.is_numpy:
                    fresh.finalize()
                extras[key] = fresh
                new_keys.append(key)
            extras[key].concat(theirs)
            joined.append((extras[key], theirs))
    except BaseException as error:
        # Whatever failed (a refused value, an error converting one, an interrupt), each
        # joined column grew by exactly the other's visible items: cut those off again.
        for mine, theirs in joined:
            mine.truncate(mine.len_incl_lookback() - len(theirs))
        for key in new_keys:
            del extras[key]
        episode.observations.append(last_observation)
        episode.infos.append(last_info)
        for column, store, lookback in emptied:
            column.store, column.lookback = store, lookback
        for column, held, taken in views:
            if taken is not None and column.store is held:
                _restore_views(held, taken)
        if not isinstance(error, (ValueError, TypeError)):
            raise
        raise ValueError(
            f"cannot concat: other's {name} do not fit this episode's numpy column ({error}); "
            "nothing was changed"
        ) from error

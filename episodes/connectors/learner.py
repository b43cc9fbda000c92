"""AddLearnerColumns: the per-step columns a learner needs, from ``get_data_dict`` rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.connectors.base import Batch, as_arrays, check_episodes, id_rows, join_rows
from episodes.connectors.checked_settings import CheckedSettings, flag
from episodes.connectors.float32 import as_float32
from episodes.connectors.given_batch import check_batch
from episodes.connectors.rllib_keywords import explains_rllib_keywords
from episodes.episode import SingleAgentEpisode
from episodes.episode.agent_ids import check_agent_ids
from episodes.episode.reward_values import REAL_TYPES
from episodes.episode.sample_batch import exact_steps, id_column, time_steps
from episodes.indexing import as_flag
from episodes.spaces import equal_in_space, nest_as_space, unstackable_space
from episodes.structs import deep_copied, id_key

__all__ = ["AddLearnerColumns", "check_end_joins", "check_end_observation", "float32_rewards"]

# The data-dict keys whose values are read from a column (numpy'd: batched already).
_COLUMNS = {"obs": "observations", "actions": "actions"}
_DEFAULT = ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id")
# Every column get_data_dict gives besides the extra outputs (which it files under their names).
_STANDARD = (*_DEFAULT, "infos")


def _column_names(columns: Any) -> tuple[str, ...]:
    if isinstance(columns, str):  # would be read letter by letter
        raise TypeError(f"columns must be a sequence of names, got the string {columns!r}")
    columns = tuple(columns)
    odd = [column for column in columns if not isinstance(column, str)]
    if odd:
        raise TypeError(f"columns must be strings, got {odd!r}")
    return columns


class AddLearnerColumns(
    CheckedSettings, columns=_column_names, extra_model_outputs=flag("extra_model_outputs")
):
    """Adds the learner columns, one row per step (the rows of ``ep.get_data_dict()``).

    Columns: ``obs`` (the observation each action was taken in), ``actions``, ``rewards``
    (float32), ``terminateds``/``truncateds`` (True only on the last row of a done episode),
    ``t``, ``eps_id``, the extra-model-output keys every episode with steps has (a key only
    some have would give a column of another length), and ``infos`` (a list) on request. Columns
    already in the batch (e.g. an ``obs`` written by :class:`FrameStack`) are left alone.

    A column whose space holds a Sequence, Graph or OneOf space (items without a fixed layout,
    which ``to_numpy`` does not stack either) is a list of (copied) items, one per row, as
    ``get_data_dict()`` gives it, not an array; an episode whose space for that column stacks
    next to one whose does not is a ``ValueError`` naming both.

    A chunk without steps that ended its episode (a valid way to store an end, as
    ``io.shards.piece_ends`` reads it) ends the chunk of that episode whose steps stop where
    it starts: that chunk's last row gets its flags, as in the joined episode and as
    :func:`episodes.converter.episodes_to_batch` gives them. So, as there, chunks of two agents
    (``agent_id``) under one episode id are refused: one agent's end would close the other's
    chunk. Give each agent's episode its own id (a game's agents share
    ``multi_agent_episode_id``); chunks whose ``agent_id`` is None are not judged.

    Args:
        columns: Which of the standard columns to add (default all but ``infos``), or
            extra-model-output keys every episode with steps has.
        extra_model_outputs: Add the extra-model-output columns the episodes share.

    Raises:
        TypeError: ``columns`` is a bare string or holds something other than strings.
        KeyError: (at call time) a listed column is neither standard nor an extra output of
            every episode with steps.
        ValueError: (at call time) an extra output to be written is named like a standard
            column (``get_data_dict`` would give one in place of the other), or list and array
            rows would share a column (see above), or two chunks share an episode id but
            name different agents (the message names both chunks and agents).
        TypeError: (at call time) ``episodes`` is not a list of episodes, or an episode's
            rewards are not real numbers (:func:`float32_rewards`).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[5, 6, 7], actions=[0, 1], rewards=[1.0, 0.0],
        ...                         terminated=True, len_lookback_buffer=0)
        >>> out = AddLearnerColumns()([ep], {"obs": "kept"})
        >>> out["obs"], out["actions"], out["terminateds"]
        ('kept', array([0, 1]), array([False,  True]))
    """

    @explains_rllib_keywords
    def __init__(self, columns: Sequence[str] = _DEFAULT, *, extra_model_outputs: bool = True):
        self.columns = _column_names(columns)
        self.extra_model_outputs = as_flag(extra_model_outputs, "extra_model_outputs")

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch) -> Batch:
        """Adds the missing learner columns for ``episodes`` to ``batch``; returns it."""
        episodes = check_episodes(episodes, "AddLearnerColumns")  # an array's as a list
        batch = check_batch(batch, "AddLearnerColumns")
        check_agent_ids(episodes, "AddLearnerColumns")  # ids join a stepless end to its chunk
        with_steps = [episode for episode in episodes if len(episode)]
        shared: list[str] = []
        if self.extra_model_outputs and with_steps:
            common = set.intersection(*(set(ep.extra_model_outputs) for ep in with_steps))
            shared = [key for key in with_steps[0].extra_model_outputs if key in common]
        _check_names(with_steps, [key for key in self.columns if key not in batch], shared, batch)
        keys = [key for key in dict.fromkeys([*self.columns, *shared]) if key not in batch]
        listed = {"infos", *_list_columns(with_steps, keys)}
        ends = stepless_ends(episodes)
        # Column by column where every episode reads plainly; anything odd (a refusal among
        # them) is left to the general path, episode by episode, which says what it says.
        try:
            joined = _quick_columns(with_steps, keys, listed, ends)
        except Exception:  # the general path raises the refusal, in the order it meets it
            joined = None
        if joined is None:
            joined = _general_columns(with_steps, keys, listed, ends)
        batch.update(joined)
        return batch

    def __repr__(self) -> str:
        extra = self.extra_model_outputs
        shown = "" if extra is True else f", extra_model_outputs={extra!r}"
        return f"AddLearnerColumns(columns={self.columns!r}{shown})"


def _general_columns(
    with_steps: list[SingleAgentEpisode],
    keys: list[str],
    listed: set[str],
    ends: dict[Any, list[SingleAgentEpisode]],
) -> dict[str, Any]:
    # The columns read episode by episode from get_data_dict: what _quick_columns must equal.
    parts: dict[str, list[object]] = {}
    for episode in with_steps:
        data = episode.get_data_dict()
        end = stepless_end(ends, episode) if ends and not episode.is_done else None
        for key in keys:  # a key listed in both columns and shared: once
            value = data[key]
            if key in listed:  # copies: changing a batch never reaches the episodes
                parts.setdefault(key, []).append(
                    deep_copied(list(value), key, f" of episode {episode.id_!r}")
                )
            elif key == "rewards":
                rewards = float32_rewards(value, episode.id_, "AddLearnerColumns")
                parts.setdefault(key, []).append(rewards)
            elif key == "eps_id":  # a tuple id is one value per row, not a struct
                parts.setdefault(key, []).append(id_column(episode.id_, len(value)))
            elif key in ("terminateds", "truncateds") and end is not None:
                flags = np.zeros(len(episode), dtype=bool)
                flags[-1] = end.is_terminated if key == "terminateds" else end.is_truncated
                parts.setdefault(key, []).append(flags)
            else:
                column = _COLUMNS.get(key)
                buffer = (
                    getattr(episode, column) if column else episode.extra_model_outputs.get(key)
                )
                finalized = buffer is not None and buffer.finalized
                space = None if buffer is None else buffer.space
                name = f"AddLearnerColumns' {key!r} column"
                rows = as_arrays(value, finalized=finalized, space=space, name=name)
                parts.setdefault(key, []).append(rows)
    # Every column is joined before the batch changes: a refusal leaves it as it was.
    joined: dict[str, Any] = {}
    for key, values in parts.items():
        if key in listed:
            joined[key] = [item for part in values for item in part]  # type: ignore[attr-defined]
            continue
        if key == "eps_id":
            values = id_rows(values)
        elif key == "t":  # steps on either side of int64's top join exactly
            values = exact_steps(values)
        # Every episode with steps gave a part (a key already in the batch is read by none).
        joined[key] = join_rows(values, key, [ep.id_ for ep in with_steps])
    return joined


def _quick_columns(
    with_steps: list[SingleAgentEpisode],
    keys: list[str],
    listed: set[str],
    ends: dict[Any, list[SingleAgentEpisode]],
) -> dict[str, Any] | None:
    # _general_columns read column by column: only the asked-for columns, each straight from
    # its getter (no get_data_dict), rewards cast once and the flags set in one array. Any
    # exception is the caller's cue to take the general path, which raises in its own order.
    if not with_steps:  # no rows, no column (and no end to look up)
        return {}
    if listed.intersection(keys):  # lists of copied items: the general path's business
        return None
    # Each episode's end is looked up as the general path does (a refusal stops it there),
    # whichever columns are asked for.
    found = [stepless_end(ends, ep) if ends and not ep.is_done else None for ep in with_steps]
    flags = [ep if end is None else end for ep, end in zip(with_steps, found)]  # not `or`
    ids = [ep.id_ for ep in with_steps]
    joined: dict[str, Any] = {}
    for key in keys:
        if key in ("terminateds", "truncateds"):
            column = np.zeros(sum(map(len, with_steps)), dtype=bool)
            last = np.cumsum([len(ep) for ep in with_steps]) - 1
            column[last] = [
                end.is_terminated if key == "terminateds" else end.is_truncated for end in flags
            ]
            joined[key] = column
        elif key == "rewards":
            joined[key] = _joined_rewards(with_steps)
        elif key == "eps_id":  # a tuple id is one value per row, not a struct
            rows = [id_column(id_, len(ep)) for id_, ep in zip(ids, with_steps)]
            joined[key] = join_rows(id_rows(rows), key, ids)
        elif key == "t":  # steps on either side of int64's top join exactly
            joined[key] = join_rows(exact_steps([_steps(ep) for ep in with_steps]), key, ids)
        else:
            joined[key] = join_rows(_column_rows(with_steps, key), key, ids)
    return joined


def _steps(episode: SingleAgentEpisode) -> Any:
    if episode.is_numpy:  # as get_data_dict builds them
        return time_steps(episode.t_started, episode.t)
    return as_arrays(list(range(episode.t_started, episode.t)), name=_name("t"))


def _name(key: str) -> str:
    return f"AddLearnerColumns' {key!r} column"


def _joined_rewards(episodes: list[SingleAgentEpisode]) -> np.ndarray:
    # Cast once where every episode's rewards share a real dtype (a cast of the joined rows is
    # the join of the cast ones); else each episode's own cast, as the general path does.
    rows = [np.asarray(ep.rewards.get()) for ep in episodes]
    kinds = {row.dtype for row in rows}
    if len(kinds) == 1 and next(iter(kinds)).kind in "biuf":
        return as_float32(np.concatenate(rows), "AddLearnerColumns' rewards")
    parts = [float32_rewards(r, ep.id_, "AddLearnerColumns") for r, ep in zip(rows, episodes)]
    return join_rows(parts, "rewards", [ep.id_ for ep in episodes])


def _column_rows(episodes: list[SingleAgentEpisode], key: str) -> list[Any]:
    # Each episode's rows of an observation, action or extra-output column, as as_arrays
    # gives them; its checks of a numpy'd column's space are made once per space object.
    checked: dict[int, Any] = {}
    parts = []
    for ep in episodes:
        buffer = _column_buffer(ep, key)
        if key == "obs":
            value = buffer.get(slice(None, buffer.len_incl_lookback() - 1 - buffer.lookback))
        else:
            value = buffer.get()
        space = buffer.space
        if buffer.finalized and (space is None or id(space) in checked):
            parts.append(nest_as_space(value, space))
            continue
        parts.append(as_arrays(value, finalized=buffer.finalized, space=space, name=_name(key)))
        if buffer.finalized:
            checked[id(space)] = space  # held: its id stays its own during the call
    return parts


def float32_rewards(value: Any, id_: Any, who: str, column: str = "rewards") -> np.ndarray:
    """An episode's rewards (a list or array) as float32, refused unless real numbers.

    A float32 cast would keep only the real parts of complex rewards (a list holding one fails
    with Python's bare ``float()`` error instead) and parse strings; as ``get_return`` and the
    replay buffer, such rewards are a ``TypeError`` naming ``who`` and the episode. Decided by
    the dtype, once per call; only an object array (ints beyond int64) has its items' types
    looked at. A finite reward float32 would make inf (1e300) is a
    :class:`~episodes.connectors.float32.Float32RangeError` naming ``who``, its ``column``
    and the episode, as the replay buffer refuses it; inf and NaN rewards are kept.

    Example:
        >>> float32_rewards([1, 2.5], "a", "AddLearnerColumns")
        array([1. , 2.5], dtype=float32)
        >>> try:
        ...     float32_rewards([1 + 2j], "a", "AddLearnerColumns")
        ... except TypeError as err:
        ...     print(str(err).split(" (")[0], "| got", str(err).split("got ")[1])
        AddLearnerColumns: rewards must be real numbers | got complex128 ones in episode 'a'
    """
    rows = np.asarray(value)
    kind = rows.dtype.kind
    odd: str | None = None if kind in "biuf" else str(rows.dtype)
    if kind == "O":  # ints beyond int64; a cast would parse strings among them too
        items = rows.ravel().tolist()
        types = set(map(type, items))
        real = (*REAL_TYPES, np.ndarray)
        odd = next((t.__name__ for t in types if not issubclass(t, real)), None)
        if odd is None and any(issubclass(t, np.ndarray) for t in types):  # a 0-d filler
            odd = next((f"{v.dtype} array" for v in items if _not_real_array(v)), None)
    if odd is not None:
        raise TypeError(
            f"{who}: rewards must be real numbers (bool, int or float), got {odd} ones in "
            f"episode {id_!r}"
        )
    return as_float32(rows, f"{who}' {column!r} column, from episode {id_!r}")


def _not_real_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and (value.ndim > 0 or value.dtype.kind not in "biuf")


def stepless_ends(episodes: Sequence[SingleAgentEpisode]) -> dict[Any, list[SingleAgentEpisode]]:
    """The chunks without steps that ended their episode, by ``(id, t)`` where each starts.

    Such a chunk ends the chunk of its episode whose steps stop at that ``t`` (``chunk.t``):
    that chunk's last step is the episode's last. Looked up, not paired in order, so other
    episodes' chunks may lie between them. Judged only where it ends a chunk
    (:func:`stepless_end`): one whose steps are not here holds nothing and is left out.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> steps = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> end = SingleAgentEpisode("a", observations=[1], t_started=1, terminated=True,
        ...                          len_lookback_buffer=0)
        >>> stepless_ends([steps, end])[("a", steps.t)] == [end]
        True
    """
    ends: dict[Any, list[SingleAgentEpisode]] = {}
    for ep in episodes:
        if not len(ep) and ep.is_done:
            ends.setdefault((id_key(ep.id_), ep.t_started), []).append(ep)  # a list id by value
    return ends


def stepless_end(
    ends: dict[Any, list[SingleAgentEpisode]], episode: SingleAgentEpisode
) -> SingleAgentEpisode | None:
    """The chunk of :func:`stepless_ends` that ends ``episode``'s steps, if any.

    An unhashable id (a list) is matched by value (:func:`~episodes.structs.id_key`).

    Raises:
        ValueError: The end does not join ``episode`` (:func:`check_end_joins`), or two
            chunks end it at the same step (which of them ended it would be list order).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> steps = SingleAgentEpisode(["a"], observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> end = SingleAgentEpisode(["a"], observations=[1], t_started=1, terminated=True,
        ...                          len_lookback_buffer=0)
        >>> stepless_end(stepless_ends([end]), steps) is end
        True
    """
    found = ends.get((id_key(episode.id_), episode.t))
    if not found:
        return None
    if any(other is not found[0] for other in found[1:]):
        raise ValueError(
            f"episode {episode.id_!r}: two chunks without steps end it at t={episode.t}; "
            "no chunk follows the one that ended its episode"
        )
    check_end_joins(found[0], episode)
    return found[0]


def check_end_observation(end: SingleAgentEpisode) -> None:
    """Refuses a chunk without steps that ends its episode but holds no observation.

    Such an end joins no chunk (``concat_episode`` needs an observation on both sides), so no
    joined episode stands behind what a consumer would make of it; a truncation would have
    no observation to bootstrap from.

    Raises:
        ValueError: ``end`` holds no observation, naming its episode and ``t``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> check_end_observation(SingleAgentEpisode("a", t_started=3, truncated=True))
        Traceback (most recent call last):
        ValueError: episode 'a': the chunk without steps that ends it at t=3 holds no ...
    """
    if not len(end.observations):
        raise ValueError(
            f"episode {end.id_!r}: the chunk without steps that ends it at t={end.t_started} "
            "holds no observation, so it joins none of its chunks (concat_episode refuses it); "
            "store an episode's end with its last observation, as cut() at the end makes it"
        )


def check_end_joins(end: SingleAgentEpisode, chunk: SingleAgentEpisode) -> None:
    """Refuses a chunk without steps ending ``chunk``'s episode that does not join ``chunk``.

    It joins where its observation is ``chunk``'s last (compared as ``concat_episode`` does,
    NaNs equal): otherwise no joined episode stands behind the pair, and a truncation would be
    bootstrapped from an observation the steps never reached.

    Raises:
        ValueError: ``end`` holds no observation, or another one, naming the episode and ``t``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> steps = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                            len_lookback_buffer=0)
        >>> check_end_joins(SingleAgentEpisode("a", observations=[1], t_started=1,
        ...                                    truncated=True, len_lookback_buffer=0), steps)
        >>> check_end_joins(SingleAgentEpisode("a", observations=[9], t_started=1,
        ...                                    truncated=True, len_lookback_buffer=0), steps)
        Traceback (most recent call last):
        ValueError: episode 'a': the chunk without steps that ends it at t=1 starts with ...
    """
    check_end_observation(end)
    # ``is None``, not truth: an empty Dict is a space (as concat_episode compares them).
    space = chunk.observation_space
    if space is None:
        space = end.observation_space
    if not equal_in_space(end.observations.get(0), chunk.observations.get(-1), space):
        raise ValueError(
            f"episode {end.id_!r}: the chunk without steps that ends it at t={end.t_started} "
            "starts with an observation that differs from the last one of its chunk ending "
            "there, so the two join no episode (concat_episode refuses them)"
        )


def _column_buffer(episode: SingleAgentEpisode, key: str) -> Any:
    column = _COLUMNS.get(key)
    return getattr(episode, column) if column else episode.extra_model_outputs.get(key)


def _list_columns(episodes: list[SingleAgentEpisode], keys: list[str]) -> set[str]:
    # Items of a Sequence, Graph or OneOf space have no fixed layout: stacked, they gave a
    # column per position, NaN-padded nodes or bare errors. Such a column is a list of items,
    # as get_data_dict gives it; an episode without a space for it follows the others.
    found = set()
    seen: dict[int, tuple[Any, str | None]] = {}  # by space object: episodes share one

    def kind_of(space: Any) -> str | None:
        if id(space) not in seen:
            seen[id(space)] = (space, unstackable_space(space))  # held: its id stays its own
        return seen[id(space)][1]

    for key in keys:
        if key in _STANDARD and key not in _COLUMNS:
            continue
        buffers = [(ep, b) for ep in episodes if (b := _column_buffer(ep, key)) is not None]
        kinds = [(ep, kind_of(b.space)) for ep, b in buffers if b.space is not None]
        listed = next(((ep, kind) for ep, kind in kinds if kind is not None), None)
        if listed is None:
            continue
        # Rows that stack (a stackable space, or numpy'd) cannot join a list of items.
        odd = next((ep for ep, kind in kinds if kind is None), None) or next(
            (ep for ep, b in buffers if b.finalized), None
        )
        if odd is not None:
            raise ValueError(
                f"AddLearnerColumns: the {key!r} column of episode {listed[0].id_!r} holds "
                f"{listed[1]} items, a list of items, but episode {odd.id_!r}'s stack into "
                "arrays; give the episodes one space"
            )
        found.add(key)
    return found


def _check_names(
    episodes: list[SingleAgentEpisode], columns: list[str], shared: list[str], batch: Batch
) -> None:
    # Checked before any row is read, so a refusal names the column rather than a bare key.
    if episodes:
        everywhere = set.intersection(*(set(ep.extra_model_outputs) for ep in episodes))
        unknown = [key for key in columns if key not in _STANDARD and key not in everywhere]
        if unknown:
            raise KeyError(
                f"AddLearnerColumns: no column {unknown[0]!r} to add; the standard columns are "
                f"{list(_STANDARD)} and the extra outputs every episode with steps has "
                f"{sorted(everywhere, key=str)}"
            )
    # get_data_dict files an extra output under its own name, over a standard column's.
    written = {key for key in (*columns, *shared) if key in _STANDARD and key not in batch}
    clashing = sorted({key for ep in episodes for key in ep.extra_model_outputs if key in written})
    if clashing:
        raise ValueError(
            f"AddLearnerColumns: extra model outputs {clashing} are named like standard "
            "columns; rename them"
        )

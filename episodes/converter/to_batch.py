"""Episodes -> a flat batch: a dict of columns, one row per step, for any learner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.connectors.base import id_rows
from episodes.connectors.joining import TextJoinError, join_leaves
from episodes.connectors.learner import stepless_end, stepless_ends
from episodes.converter.alike import agreed_space
from episodes.converter.column_refusals import checked_obs_fn_output
from episodes.converter.columns import ColumnKeys, ObsFn, layout_batch, rows
from episodes.converter.inputs import callable_or_none, column_keys, refuse_one_episode
from episodes.episode import SingleAgentEpisode
from episodes.episode.agent_ids import check_agent_ids
from episodes.episode.sample_batch import exact_steps, id_column, time_steps
from episodes.indexing import as_flag
from episodes.runner import SampledChunks
from episodes.spaces import nest_as_space
from episodes.structs import is_nested, map_alike, map_leaves, sorted_keys

# The columns every batch has; an extra output of one of these names would be appended to it.
_STANDARD_COLUMNS = (
    "obs",
    "next_obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "dones",
    "t",
    "eps_id",
    "chunk",
)


def _concat(name: str, parts: list[Any], chunks: list[Any], indices: list[int]) -> Any:
    """The chunks' rows of column ``name`` joined, or a ``ValueError`` naming it and two chunks.

    ``parts[i]`` are the rows of ``chunks[i]``, ``episodes[indices[i]]``.
    """
    try:
        # join_leaves: numbers beside strings are refused, not turned into strings.
        if is_nested(parts[0]):
            return map_alike(join_leaves, parts)
        return join_leaves(parts)
    except TextJoinError as err:  # of a flat column: its positions are the chunks'
        label = [f"chunk {indices[i]} (episode {chunks[i].id_!r})" for i in (err.text, err.odd)]
        raise ValueError(
            f"the chunks' {name!r} rows do not join: {label[0]} gives {err.dtypes[0]} rows, "
            f"{label[1]} {err.dtypes[1]} ones; {err.why}"
        ) from None
    except (ValueError, TypeError) as err:  # TypeError: parts of other structures
        layouts = [map_leaves(lambda leaf: np.shape(leaf)[1:], part) for part in parts]
        odd = next((i for i, layout in enumerate(layouts) if layout != layouts[0]), None)
        which = ""
        if odd is not None:
            first, other = (f"chunk {indices[i]} (episode {chunks[i].id_!r})" for i in (0, odd))
            which = f"{first} gives rows shaped {layouts[0]}, {other} {layouts[odd]}; "
        raise ValueError(f"the chunks' {name!r} rows do not join: {which}numpy: {err}") from None


def _check_chunks(episodes: Sequence[Any]) -> None:
    """Refuses an item that is not a chunk (a per-env list, say), naming its index and type.

    ``episodes`` must be a sequence: an iterator or generator would be used up by this check.
    """
    refuse_one_episode(episodes, "episodes_to_batch takes a flat sequence of chunks")
    if not isinstance(episodes, Sequence):
        raise TypeError(
            "episodes_to_batch takes a flat sequence of SingleAgentEpisode chunks (a list or "
            f"tuple), got {type(episodes).__name__}; an iterator or generator is read once: "
            "pass list(...) of it"
        )
    if isinstance(episodes, SampledChunks) or callable(getattr(episodes, "side_by_side", None)):
        return  # a runner's or a group's sample holds chunks only (not built just to check)
    for i, chunk in enumerate(episodes):
        if not isinstance(chunk, SingleAgentEpisode):
            hint = " (flatten per-env lists first)" if isinstance(chunk, (list, tuple)) else ""
            raise TypeError(
                "episodes_to_batch takes a flat sequence of SingleAgentEpisode chunks: "
                f"episodes[{i}] has type {type(chunk).__name__}{hint}"
            )
    check_agent_ids(episodes, "episodes_to_batch")  # ids join a stepless end to its chunk


def episodes_to_batch(
    episodes: Sequence[SingleAgentEpisode],
    *,
    keys: ColumnKeys | None = None,
    extra_model_outputs: bool = True,
    obs_fn: ObsFn | None = None,
) -> dict[str, Any]:
    """Concatenates the steps of all chunks into flat columns (no torch).

    Columns: ``obs`` (the observation each action was taken in), ``next_obs``, ``actions``,
    ``rewards``, ``terminateds``, ``truncateds``, ``dones``, ``t``, ``eps_id``, ``chunk`` (the
    chunk's index in ``episodes``) and, with ``extra_model_outputs``, every key the chunks share.
    ``obs_fn`` transforms the batched observations.

    Raises:
        TypeError: ``episodes`` is not a sequence (an iterator or generator, or one episode),
            or an item of it is not a chunk (a per-env list, say), naming its index and
            type; ``keys`` that are not a :class:`ColumnKeys` (or None), an
            ``extra_model_outputs`` that is not a bool, an ``obs_fn`` that is not callable
            (all before anything is read).
        ValueError: No episode has steps, or (with ``extra_model_outputs``) a shared extra
            output is named like a standard column (it would be appended to that column), or
            the chunks' rows of a column do not join (other shapes or nesting), naming the
            column and two chunks.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0],
        ...                         terminated=True, len_lookback_buffer=0)
        >>> b = episodes_to_batch([ep])
        >>> b["obs"].tolist(), b["next_obs"].tolist(), b["dones"].tolist()
        ([0, 1], [1, 2], [False, True])
    """
    column_keys(keys)  # reserved: the flat batch keeps every extra column under its own name
    extra_model_outputs = as_flag(extra_model_outputs, "extra_model_outputs")
    callable_or_none(obs_fn, "obs_fn")
    if isinstance(episodes, np.ndarray) and episodes.ndim == 1:  # rng.choice(episodes, k)'s
        episodes = episodes.tolist()
    _check_chunks(episodes)
    indices = [i for i, c in enumerate(episodes) if len(c)]  # "chunk" numbers all episodes
    chunks = [episodes[i] for i in indices]
    if not chunks:
        raise ValueError("episodes hold no steps to batch")
    shared = set.intersection(*(set(c.extra_model_outputs) for c in chunks))
    clashing = sorted_keys(shared.intersection(_STANDARD_COLUMNS)) if extra_model_outputs else []
    if clashing:
        raise ValueError(
            f"extra model outputs {clashing} are named like standard batch columns; rename "
            "them or pass extra_model_outputs=False"
        )
    columns: dict[str, list[Any]] = {}
    # A chunk without steps that ended its episode (a valid way to store an end, as
    # io.shards.piece_ends reads it) ends the chunk of that episode whose steps stop where it
    # starts: that chunk's last step is the episode's last.
    ends = stepless_ends(episodes)  # the rule AddLearnerColumns follows too

    def add(name: str, value: Any) -> None:
        columns.setdefault(name, []).append(value)

    for index, chunk in zip(indices, chunks):
        n = len(chunk)
        add("obs", rows(chunk, "observations"))
        next_obs = chunk.get_observations(slice(1, n + 1))
        if not chunk.observations.finalized:  # a list of items (numpy'd: batched leaves)
            next_obs = layout_batch(next_obs, chunk.observations.space, "observations")
        add("next_obs", next_obs)
        add("actions", rows(chunk, "actions"))
        add("rewards", np.asarray(rows(chunk, "rewards")))
        # Not from get_data_dict: there an extra output named "terminateds" would replace them.
        terminateds, truncateds = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        end = stepless_end(ends, chunk) if ends and not chunk.is_done else None
        end = chunk if end is None else end  # not `or`: a stepless chunk's len is 0
        terminateds[-1], truncateds[-1] = end.is_terminated, end.is_truncated
        add("terminateds", terminateds)
        add("truncateds", truncateds)
        add("dones", terminateds | truncateds)
        add("t", time_steps(chunk.t_started, chunk.t))
        add("eps_id", id_column(chunk.id_, n))  # a tuple id is one value per row
        add("chunk", np.full(n, index))
        if extra_model_outputs:
            for key in sorted_keys(shared):
                add(key, map_leaves(np.asarray, rows(chunk, "extra", key)))  # dicts too
    # Ids of other types (1 and True, 1 and "1") would be cast to one and merge.
    columns["eps_id"] = id_rows(columns["eps_id"])
    if "t" in columns:
        columns["t"] = exact_steps(columns["t"])
    batch_columns = {name: _concat(name, parts, chunks, indices) for name, parts in columns.items()}
    # Nested as the declared spaces say, once a column (a Tuple part a tuple, whatever form
    # its items were recorded in).
    for names, attribute in (
        (("obs", "next_obs"), "observation_space"),
        (("actions",), "action_space"),
    ):
        space = agreed_space([getattr(chunk, attribute) for chunk in chunks])
        for name in names:
            batch_columns[name] = nest_as_space(batch_columns[name], space)
    if obs_fn is not None:
        lead = (len(batch_columns["rewards"]),)
        for name in ("obs", "next_obs"):
            batch_columns[name] = checked_obs_fn_output(obs_fn(batch_columns[name]), lead)
    return batch_columns

"""Episodes as table rows: one row per step, or one row per episode (chunk).

Step rows are what a learner or a preprocessing job reads: per step ``episode_id``, ``t`` (the
episode's time index of the step), ``obs`` (o_t), ``action``, ``reward``, ``next_obs``
(o_{t+1}), ``terminated``/``truncated`` (true only on the step that ended the episode that way)
and one ``extra.<key>`` column per extra-model-output. Nested observations or actions become
one column per leaf, ``obs.0``, ``obs.1``, ... in ``episodes.structs.flatten`` order.

Episode rows carry the episode object itself (``episode``) next to a few summary columns, so
nothing (lookback, infos, spaces, custom data) is lost on the way.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[1, 0],
    ...                         rewards=[1.0, 0.5], terminated=True, len_lookback_buffer=0)
    >>> cols = step_columns(ep.to_numpy())
    >>> cols["t"].tolist(), cols["next_obs"].tolist(), cols["terminated"].tolist()
    ([0, 1], [1.0, 2.0], [False, True])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tree

from episodes.episode import SingleAgentEpisode
from episodes.indexing import discount_factor, whole_number
from episodes.io import UnstorableValueError
from episodes.io.format import piece_return
from episodes.io.nstep import discount_weights, summable_rewards
from episodes.structs import flatten, is_nested, unflatten

__all__ = [
    "EPISODE_COLUMNS",
    "episode_from_row",
    "episode_row",
    "nstep_columns",
    "step_columns",
]

_INT64 = np.iinfo(np.int64)

#: The columns of an episode row.
EPISODE_COLUMNS = ("id", "t_started", "length", "return", "terminated", "truncated", "episode")


def _leaf_columns(
    name: str,
    batch: Any,
    out: dict[str, Any],
    owners: dict[str, str] | None = None,
    owner: str = "",
) -> None:
    """Adds ``batch``'s column(s) to ``out``; ``owners`` records which output made each one."""
    if is_nested(batch):
        leaves, _ = flatten(batch)
        columns = {f"{name}.{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    else:
        columns = {name: np.asarray(batch)}
    owners = {} if owners is None else owners
    for column, values in columns.items():
        if column in out:
            # Leaf 0 of a nested output "h" and an output named "h.0": one would replace the
            # other without a word.
            first = owners.get(column, column)
            raise ValueError(
                f"the extra model outputs {first!r} and {owner or name!r} would both fill the "
                f"column {column!r}: rename one of them"
            )
        out[column] = values
        owners[column] = owner or name


def step_columns(
    episode: SingleAgentEpisode, *, ends: tuple[bool, bool] | None = None
) -> dict[str, Any]:
    """The steps of a chunk as equal-length columns (lookback not included).

    Args:
        episode: A numpy'd chunk (list-mode chunks: call ``to_numpy()`` first).
        ends: ``(terminated, truncated)``: how the episode ends after the chunk's last step,
            where that is not by the chunk's own flags (a later chunk without steps, starting
            at this one's ``t``, ended it). Default: the chunk's flags.

    Returns:
        A dict of numpy arrays, one entry per step each (see the module docstring).

    Every column keeps the chunk's dtype but ``reward``, which is float64 in every chunk (bools
    and ints too), so that every block of a dataset has one reward type (Arrow cannot join a
    bool block with a float one).

    Raises:
        ValueError: The chunk is in list mode, two extra model outputs would fill one
            column (a nested ``h`` and an ``h.0``), or ``ends`` is no pair of bools.
        UnstorableValueError: A step's time (``t_started`` + its index) does not fit the
            int64 ``t`` column (a v1 dataset may hold any int), or an int reward beyond
            ``2**53`` the float64 ``reward`` column (it would round); it names the episode.
        TypeError: Complex rewards (a float64 column would drop their imaginary parts) or
            rewards that are no numbers, naming the episode.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode("a", observations=[(0.0, 1), (1.0, 2)], actions=[0],
        ...                         rewards=[1.0], extra_model_outputs={"logp": [-0.5]},
        ...                         len_lookback_buffer=0)
        >>> cols = step_columns(ep.to_numpy())
        >>> [name for name in cols if "." in name]  # one column per leaf of a nested observation
        ['obs.0', 'obs.1', 'next_obs.0', 'next_obs.1', 'extra.logp']
        >>> cols["next_obs.1"].tolist(), cols["extra.logp"].tolist()
        ([2], [-0.5])
        >>> step_columns(ep.to_numpy(), ends=(True, False))["terminated"].tolist()
        [True]
    """
    if not episode.is_numpy:
        raise ValueError("step_columns needs a numpy'd episode: call to_numpy() first")
    terminated, truncated = _flags(episode, ends)
    n = len(episode)
    out: dict[str, Any] = {
        "episode_id": _id_rows(str(episode.id_), n),
        "t": _times(episode, n),
    }
    observations = episode.get_observations(slice(0, n + 1))
    _leaf_columns("obs", _rows(observations, 0, n), out)
    _leaf_columns("next_obs", _rows(observations, 1, n + 1), out)
    _leaf_columns("action", episode.get_actions(slice(0, n)), out)
    out["reward"] = _reward_column(episode, n)
    last = np.zeros(n, dtype=bool)
    if n:
        last[-1] = True
    out["terminated"] = last & terminated
    out["truncated"] = last & truncated
    owners: dict[str, str] = {}
    for key in episode.extra_model_outputs:
        values = episode.get_extra_model_outputs(key, slice(0, n))
        _leaf_columns(f"extra.{key}", values, out, owners, key)
    return out


def nstep_columns(
    episode: SingleAgentEpisode,
    n_step: int,
    gamma: float,
    *,
    ends: tuple[bool, bool] | None = None,
    after: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The chunk's steps as ``n_step``-step transitions, one per step.

    Step ``k`` sums ``m = min(n_step, len - k)`` rewards (``len``: the chunk's steps and those
    of ``after`` it uses): ``reward`` is
    ``sum_{j<m} gamma**j * r_{k+j}`` in float64 (per component for vector rewards: shape
    ``(c,)`` rewards sum to shape ``(c,)``, as in ``TransitionDataset``), ``next_obs`` is
    ``o_{k+m}``, ``discount`` is ``gamma**m``
    and ``n_steps`` is ``m``; ``terminated``/``truncated`` say whether ``o_{k+m}`` ends the
    episode that way. So ``reward + discount * (1 - terminated) * V(next_obs)`` is a valid
    target for every step. Near the end of a chunk that continues elsewhere the horizon is
    shorter, unless ``after`` gives the steps that continue it: then the horizons of the
    chunk's last ``n_step - 1`` steps reach into them, as in the episode written whole. The
    other columns are those of :func:`step_columns`, as is ``ends`` (how the episode ends after
    the chunk's last step, where not by the chunk's own flags).

    Args:
        episode: A numpy'd chunk.
        n_step: Steps per transition.
        gamma: The discount.
        ends: See :func:`step_columns`.
        after: The steps after the chunk's last, as ``episodes.io.Dataset.steps`` gives them
            (``episodes.distributed.continuations.read_continuations`` too): ``observations``
            (a batch, as the chunk's: an array, or a struct of arrays; one more than the
            rewards, the first the chunk's last next observation),
            ``rewards``, and ``terminated``/``truncated`` (default False): whether the episode
            ends that way after them. Only the first ``n_step - 1`` are used; None: nothing
            continues the chunk.

    Raises:
        ValueError: ``n_step < 1``, ``gamma`` outside ``[0, 1]``, the chunk is in list mode,
            two extra model outputs would fill one column, ``ends`` is no pair of bools, or
            ``after`` is no such dict, does not fit the chunk (rewards or observation leaves
            of other shapes) or follows a chunk that ended the episode.
        TypeError: Complex rewards or rewards that are no numbers (``get_return`` refuses
            those too); an ``UnstorableValueError`` for steps whose ``t`` int64 cannot hold.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 0, 0],
        ...                         rewards=[1.0, 1.0, 1.0], terminated=True,
        ...                         len_lookback_buffer=0).to_numpy()
        >>> cols = nstep_columns(ep, 2, 0.5)
        >>> cols["reward"].tolist(), cols["next_obs"].tolist(), cols["terminated"].tolist()
        ([1.5, 1.5, 1.0], [2.0, 3.0, 3.0], [False, True, True])
        >>> head = SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 0],
        ...                           rewards=[1.0, 1.0], len_lookback_buffer=0).to_numpy()
        >>> after = {"observations": np.array([2.0, 3.0]), "rewards": np.array([1.0]),
        ...          "terminated": True}  # the steps of the next piece
        >>> cols = nstep_columns(head, 2, 0.5, after=after)
        >>> cols["reward"].tolist(), cols["next_obs"].tolist(), cols["terminated"].tolist()
        ([1.5, 1.5], [2.0, 3.0], [False, True])
    """
    n_step = whole_number(n_step, "n_step", 1)  # 2.5 is no step count
    gamma = discount_factor(gamma)
    out = step_columns(episode, ends=ends)
    n = len(episode)
    rewards = summable_rewards(out["reward"])  # float64; vector rewards sum per component
    observations = episode.get_observations(slice(0, n + 1))
    terminated, truncated = _flags(episode, ends)  # checked by step_columns
    if after is not None:  # the steps continuing the chunk, as far as its horizons reach
        rewards, observations, terminated, truncated = _continued(
            episode, rewards, observations, after, n_step - 1, terminated or truncated
        )
    size = len(rewards)  # the chunk's steps and those continuing it
    k = np.arange(n)
    m = np.minimum(n_step, size - k)
    # No step has more than n rewards left (Monte-Carlo n); terms of weight 0 are left out.
    # The terms are added in step order, as TransitionDataset adds them (discounted_sum).
    weights = discount_weights(gamma, min(n_step, size))
    total = rewards[:n].copy()  # weight 1 for each step's own reward
    # A sum past float max is inf, inf beside -inf NaN: results, as the other readers give
    # them, not RuntimeWarnings (an error under -W error).
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(1, len(weights)):  # one pass per horizon step, all rows at once
            live = k + j < size
            total[live] += weights[j] * rewards[k[live] + j]
    out["reward"] = total
    out["discount"] = np.power(float(gamma), m)
    out["n_steps"] = m.astype(np.int64)
    last = k + m == size
    out["terminated"] = last & terminated
    out["truncated"] = last & truncated
    for key in [key for key in out if key == "next_obs" or key.startswith("next_obs.")]:
        del out[key]
    _leaf_columns("next_obs", _take(observations, k + m), out)
    return out


def _continued(
    episode: SingleAgentEpisode,
    rewards: np.ndarray,
    observations: Any,
    after: Any,
    want: int,
    ended: bool,
) -> tuple[np.ndarray, Any, bool, bool]:
    """The chunk's rewards and observations joined with ``after``'s first ``want`` steps.

    Returns them with how the episode ends after the last step joined.
    """
    where = f"episode {episode.id_!r}: after"
    if not isinstance(after, Mapping) or not {"observations", "rewards"} <= set(after):
        raise ValueError(f"{where} must be a dict with 'observations' and 'rewards'")
    flags = (after.get("terminated", False), after.get("truncated", False))
    if not all(isinstance(flag, (bool, np.bool_)) for flag in flags):
        raise ValueError(f"{where}'s terminated/truncated must be bools, got {flags!r}")
    if ended:
        raise ValueError(f"{where}: the chunk ended the episode, so no steps continue it")
    if is_nested(after["observations"]) != is_nested(observations):
        raise ValueError(f"{where}'s observations do not fit the chunk's")
    more = summable_rewards(np.asarray(after["rewards"]))
    try:
        counts = {len(leaf) for leaf in flatten(after["observations"])[0]}
    except TypeError:  # a leaf without rows
        counts = set()
    if more.ndim == 0 or counts != {len(more) + 1}:
        raise ValueError(
            f"{where} holds {sorted(counts)} observations for its rewards of shape "
            f"{more.shape}: one more observation than rewards, please"
        )
    used = min(want, len(more))
    if used == 0:  # no step joined: after's end flags are the chunk's where after has none
        return (
            rewards,
            observations,
            *((bool(flags[0]), bool(flags[1])) if not len(more) else (False, False)),
        )
    if more.shape[1:] != rewards.shape[1:]:
        raise ValueError(f"{where}'s rewards of shape {more.shape[1:]} differ from the chunk's")
    # The episode ends after the last step joined only if that is the last of after's.
    ends = used == len(more)
    joined = np.concatenate([rewards, more[:used]])
    try:
        if is_nested(observations):
            tree.assert_same_structure(observations, after["observations"], check_types=False)
            mine, structure = flatten(observations)
            theirs = flatten(after["observations"])[0]
            parts = [np.concatenate([a, np.asarray(b)[1 : used + 1]]) for a, b in zip(mine, theirs)]
            obs = unflatten(structure, parts)
        else:
            obs = np.concatenate([observations, np.asarray(after["observations"])[1 : used + 1]])
    except (TypeError, ValueError):
        raise ValueError(f"{where}'s observations do not fit the chunk's") from None
    return joined, obs, bool(flags[0]) and ends, bool(flags[1]) and ends


def _id_rows(id_: str, n: int) -> np.ndarray:
    """``id_`` ``n`` times, whole (``np.full`` would cut a trailing NUL: "a" and "a" + NUL)."""
    rows = np.empty(n, dtype=object)
    rows.fill(id_)
    return rows


def _reward_column(episode: SingleAgentEpisode, n: int) -> np.ndarray:
    stored = np.asarray(episode.get_rewards(slice(0, n)))
    try:
        rewards = summable_rewards(stored)
    except (TypeError, ValueError) as err:
        raise type(err)(f"episode {episode.id_!r}: {err}") from None
    kind = stored.dtype.kind
    if rewards.size and (
        (kind in "iu" and (stored.max() > _EXACT_FLOAT_INTS or stored.min() < -_EXACT_FLOAT_INTS))
        or (kind == "O" and _big_int(stored))  # ints beyond int64
    ):
        raise UnstorableValueError(
            f"episode {episode.id_!r}: int rewards beyond 2**53 do not fit the float64 reward "
            "column of step rows exactly (read episodes instead)"
        )
    return rewards


_EXACT_FLOAT_INTS = 2**53


def _big_int(rewards: np.ndarray) -> bool:
    """Whether an object column holds an int float64 would round (a NaN beside it too)."""
    return any(
        isinstance(v, (int, np.integer)) and abs(int(v)) > _EXACT_FLOAT_INTS
        for v in rewards.ravel().tolist()
    )


def _times(episode: SingleAgentEpisode, n: int) -> np.ndarray:
    """The int64 ``t`` column of the chunk's ``n`` steps; refused where a ``t`` cannot fit."""
    first = int(episode.t_started)
    if n and not (_INT64.min <= first and first + n - 1 <= _INT64.max):
        raise UnstorableValueError(
            f"episode {episode.id_!r}: time steps from {first} do not fit the int64 t column "
            "of step rows (read episodes instead)"
        )
    return np.arange(first, first + n, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)


def _flags(episode: SingleAgentEpisode, ends: Any) -> tuple[bool, bool]:
    """``(terminated, truncated)`` after the chunk's last step: ``ends``, else its own flags."""
    if ends is None:
        return bool(episode.is_terminated), bool(episode.is_truncated)
    pair = tuple(ends) if isinstance(ends, (tuple, list, np.ndarray)) else ()
    if len(pair) != 2 or not all(isinstance(flag, (bool, np.bool_)) for flag in pair):
        raise ValueError(f"ends must be a (terminated, truncated) pair of bools, got {ends!r}")
    return bool(pair[0]), bool(pair[1])


def _take(batch: Any, rows: np.ndarray) -> Any:
    if is_nested(batch):
        leaves, structure = flatten(batch)
        return unflatten(structure, [np.asarray(leaf)[rows] for leaf in leaves])
    return np.asarray(batch)[rows]


def _rows(batch: Any, start: int, stop: int) -> Any:
    if is_nested(batch):
        leaves, structure = flatten(batch)
        return unflatten(structure, [leaf[start:stop] for leaf in leaves])
    return batch[start:stop]


def episode_row(episode: SingleAgentEpisode) -> dict[str, Any]:
    """One row describing ``episode`` and carrying it whole.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> row = episode_row(SingleAgentEpisode("a", observations=[0, 1], actions=[0],
        ...                                      rewards=[2.0], len_lookback_buffer=0))
        >>> row["id"], row["length"], row["return"]
        ('a', 1, 2.0)
    """
    return {
        "id": str(episode.id_),
        "t_started": int(episode.t_started),
        "length": len(episode),
        "return": piece_return(episode),  # NaN for rewards with no return, as a manifest's
        "terminated": bool(episode.is_terminated),
        "truncated": bool(episode.is_truncated),
        "episode": episode,
    }


def episode_from_row(row: Any) -> SingleAgentEpisode:
    """The episode an episode row carries.

    Raises:
        TypeError: The row has no ``episode`` entry holding a ``SingleAgentEpisode``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> episode_from_row({"episode": SingleAgentEpisode("a")}).id_
        'a'
    """
    episode = row.get("episode") if hasattr(row, "get") else None
    if not isinstance(episode, SingleAgentEpisode):
        raise TypeError(
            f"an episode row needs an 'episode' column holding a SingleAgentEpisode, got "
            f"{type(episode).__name__}"
        )
    return episode

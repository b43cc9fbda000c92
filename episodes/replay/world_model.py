"""Sequence batches in the step layout of Dreamer-style world models.

A sequence batch's column is a transition ``(o_t, a_t, r_{t+1}, o_{t+1})``. A Dreamer-style
world model reads steps ``(o_t, a_{t-1}, r_t, is_first_t, is_last_t, is_terminal_t)``
instead: the action and reward that led into each observation, and an episode's final
observation as a step of its own (where ``is_terminal`` is a target of its continuation
head). :func:`dreamer_steps` turns a batch sampled with ``lookback=1`` into that layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The columns :func:`dreamer_steps` reads from a sequence batch.
NEEDED = ("obs", "actions", "rewards", "next_obs", "is_terminated", "is_truncated")
_FLAGS = ("mask", "is_lookback")


def dreamer_steps(batch: dict[str, Any]) -> dict[str, Any]:
    """A ``lookback=1`` sequence batch of ``[B, T]`` columns as ``[B, T]`` world-model steps.

    Sample ``buf.sample(B, batch_length_T=T - 1, lookback=1)`` (``pad`` either way) for
    ``T`` steps a row. Step ``k`` of a row is the observation its column ``k`` transition
    led into (``next_obs[:, k]``, with that column's action, reward and end flags), or, where
    column ``k`` is padding and column ``k + 1`` an episode's first stored step, that first
    observation (action and reward zeros, ``is_first`` True). So every observation of an
    episode is a step, its final one (``is_last``; ``is_terminal`` where the episode
    terminated, not where it was truncated) included, and a row never holds two episodes.
    A running episode's newest observation is a step with ``is_last`` False. Steps with
    ``mask`` False are padding: zeros, flags False; keep them out of the losses.

    Numpy and torch batches (``device=``) alike, nested observations and actions too (each
    leaf). ``infos`` and extra model outputs are not carried; a prioritized batch's
    ``weights`` stay in it, and ``batch["indices"][:, 1]`` are the items its
    ``update_priorities`` sets.

    Returns:
        A dict: ``obs`` (``o_t``), ``actions`` (``a_{t-1}``), ``rewards`` (``r_t``, float32),
        ``is_first``, ``is_last``, ``is_terminal`` and ``mask``, each ``[B, T, ...]``.

    Raises:
        ValueError: ``batch`` lacks a sequence batch's columns (a transition batch), or was
            not sampled with ``lookback=1``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(100, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[5, 6],
        ...                            rewards=[1.0, 2.0], terminated=True,
        ...                            len_lookback_buffer=0))
        >>> d = dreamer_steps(buf.sample(1, batch_length_T=2, lookback=1))
        >>> d["obs"].tolist(), d["actions"].tolist(), d["rewards"].tolist()
        ([[0.0, 1.0, 2.0]], [[0, 5, 6]], [[0.0, 1.0, 2.0]])
        >>> d["is_first"].tolist(), d["is_terminal"].tolist()
        ([[True, False, False]], [[False, False, True]])
    """
    _check(batch)
    mask = batch["mask"]
    torch = _torch_of(mask)
    first = _zeros_like(mask, torch)
    first[:, :-1] = ~mask[:, :-1] & mask[:, 1:]  # padding, then the episode's first step

    def step(after: Any, at_first: Any) -> Any:  # next_obs where real, obs of the next column
        shifted = _cat([at_first[:, 1:], at_first[:, -1:]], torch)
        return _where(mask, after, _where(first, shifted, _zeros_like(after, torch), torch), torch)

    def prev(value: Any) -> Any:
        return _where(mask, value, _zeros_like(value, torch), torch)

    return {
        "obs": _map2(step, batch["next_obs"], batch["obs"]),
        "actions": _map1(prev, batch["actions"]),
        "rewards": prev(batch["rewards"]),
        "is_first": first,
        "is_last": (batch["is_terminated"] | batch["is_truncated"]) & mask,
        "is_terminal": batch["is_terminated"] & mask,
        "mask": mask | first,
    }


def _check(batch: Any) -> None:
    if not isinstance(batch, dict):
        raise ValueError(f"batch must be a sequence batch dict, got {type(batch).__name__}")
    missing = [key for key in NEEDED + _FLAGS if key not in batch]
    if missing:
        raise ValueError(
            f"batch lacks the sequence columns {missing}: dreamer_steps takes "
            "buf.sample(B, batch_length_T=T - 1, lookback=1)"
        )
    lookback = batch["is_lookback"]
    shape = tuple(lookback.shape)
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(
            f"batch columns of shape {shape} are no lookback=1 sequences: dreamer_steps "
            "takes buf.sample(B, batch_length_T=T - 1, lookback=1)"
        )
    if shape[0] and (not bool(lookback[:, 0].all()) or bool(lookback[:, 1:].any())):
        raise ValueError(
            f"batch was sampled with lookback={int(lookback[0].sum())}: dreamer_steps "
            "takes buf.sample(B, batch_length_T=T - 1, lookback=1)"
        )


def _torch_of(array: Any) -> Any:
    if isinstance(array, np.ndarray):
        return None
    import torch  # only reached for a torch batch: torch is loaded already

    return torch


def _zeros_like(value: Any, torch: Any) -> Any:
    return np.zeros_like(value) if torch is None else torch.zeros_like(value)


def _cat(parts: list[Any], torch: Any) -> Any:
    return np.concatenate(parts, axis=1) if torch is None else torch.cat(parts, dim=1)


def _where(cond: Any, yes: Any, no: Any, torch: Any) -> Any:
    cond = cond.reshape(tuple(cond.shape) + (1,) * (len(yes.shape) - 2))
    return np.where(cond, yes, no) if torch is None else torch.where(cond, yes, no)


def _map1(fn: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _map1(fn, leaf) for key, leaf in value.items()}
    if isinstance(value, tuple):
        return tuple(_map1(fn, leaf) for leaf in value)
    return fn(value)


def _map2(fn: Any, a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {key: _map2(fn, a[key], b[key]) for key in a}
    if isinstance(a, tuple):
        return tuple(_map2(fn, x, y) for x, y in zip(a, b, strict=True))
    return fn(a, b)

"""Splitting gymnasium's batched vector-env info dicts into one plain dict per sub-env."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["chunk_infos", "env_info", "FINAL_KEYS", "same_infos"]

#: Keys that same-step autoreset adds to the infos of a finished sub-env.
FINAL_KEYS = ("final_obs", "final_info", "_final_obs", "_final_info")


def env_info(infos: dict[str, Any], index: int, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The info dict of sub-env ``index`` out of a vector env's batched infos.

    Gymnasium batches infos key by key: ``infos[key][i]`` is sub-env ``i``'s value and the
    boolean ``infos["_" + key][i]`` says whether sub-env ``i`` reported the key at all. Nested
    dicts are batched the same way, recursively.

    Args:
        infos: The batched infos from ``VectorEnv.reset`` or ``VectorEnv.step``.
        index: The sub-env.
        drop: Top-level keys to leave out (e.g. :data:`FINAL_KEYS`).

    Returns:
        A plain dict of the keys sub-env ``index`` reported (a key without its ``_key``
        mask counts as reported by every sub-env; a nested dict key is kept, as ``{}``, even
        when the sub-env reported none of its inner keys).

    Raises:
        ValueError: A value holds no item per sub-env (a number or a string).

    Example:
        >>> infos = {"x": np.array([1, 2]), "_x": np.array([False, True])}
        >>> env_info(infos, 0), env_info(infos, 1)
        ({}, {'x': np.int64(2)})
    """
    if not infos:
        return {}
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key in drop or (isinstance(key, str) and key.startswith("_")):
            continue
        mask = infos.get("_" + key) if isinstance(key, str) else None
        if mask is not None and not bool(np.asarray(mask)[index]):
            continue
        if isinstance(value, dict):
            out[key] = env_info(value, index)
            continue
        try:  # a string would give its index-th character, silently
            if isinstance(value, (str, bytes)):
                raise TypeError("a string")
            item = value[index]
        except (TypeError, IndexError, KeyError) as err:
            raise ValueError(
                f"the env's infos[{key!r}] must hold one value per sub-env (gymnasium batches "
                f"infos key by key), got {type(value).__name__} {value!r:.60}"
            ) from err
        # A row of a batched array is a view: an env may write its next infos into the same
        # array, which would change the recorded ones.
        out[key] = item.copy() if isinstance(item, np.ndarray) and item.ndim else item
    return out


def chunk_infos(recording: Any, k: int) -> list[Any]:
    """Chunk ``k``'s infos as a runner recording holds them, lookback rows included.

    Rows where the sub-env reported nothing get an empty dict each (their own); a chunk whose
    ending was kept apart (same-step and disabled modes) ends with that ending's info.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
        >>> chunk_infos(chunks.recording, 0)  # CartPole reports no infos: one dict an obs
        [{}, {}, {}, {}]
    """
    table = recording.table
    env, stop = int(table.env[k]), int(table.stop[k])
    start = int(table.first[k]) - int(table.lookback[k])
    if int(table.final[k]) >= 0:
        final_info = recording.final_infos.get((stop - 1, env)) or {}
        return _rows_infos(recording.infos, env, start, stop) + [final_info]
    return _rows_infos(recording.infos, env, start, stop + 1)


def same_infos(have: list[Any], want: list[Any]) -> bool:
    """Whether a chunk's infos are still ``want``'s dicts (or empty where those are).

    Identity, not equality: a dict written in place is the same object, and stays what a copy
    of the chunk carries; an empty dict counts as the recording's nothing.

    Example:
        >>> info = {"x": 1}
        >>> same_infos([info, {}], [info, {}]), same_infos([{"x": 1}], [info])
        (True, False)
    """
    return len(have) == len(want) and all(
        h is w or (type(h) is dict and not h and not w) for h, w in zip(have, want)
    )


def _rows_infos(infos: dict[tuple[int, int], Any], env: int, start: int, stop: int) -> list[Any]:
    """Sub-env ``env``'s infos of rows ``start:stop``, ``{}`` (each its own) where none."""
    if not infos:  # most envs report nothing: skip the per-row lookups
        return [{} for _ in range(start, stop)]
    return [infos.get((r, env)) or {} for r in range(start, stop)]

"""Splitting gymnasium's batched vector-env info dicts into one plain dict per sub-env."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = [
    "check_batched_infos",
    "chunk_infos",
    "env_info",
    "FINAL_KEYS",
    "is_step_value",
    "step_item",
    "is_tensor",
    "cloned_tensor",
    "reported",
    "same_infos",
]

#: Keys that same-step autoreset adds to the infos of a finished sub-env.
FINAL_KEYS = ("final_obs", "final_info", "_final_obs", "_final_info")


def check_batched_infos(infos: Any, what: str, mode: Any = None) -> None:
    """Refuses infos that are not gymnasium's batched dict (None, no infos, passes).

    Checked as the env returns them, before anything is recorded: a numpy array of per-env
    dicts (gymnasium 0.29's ``final_info``) would otherwise fail in numpy's words about the
    truth value of an array. With ``mode`` next-step, infos holding a final observation are
    refused: only a same-step env reports one, so the env's declared mode is wrong (a
    wrapper's class-level ``metadata`` hides the env's), and recording it as next-step would
    drop every next episode's first transition and bootstrap from the wrong observation.

    Raises:
        TypeError: ``infos``, or its ``final_info``, is not a dict, naming ``what``.
        ValueError: A final observation in a next-step env's step infos.

    Example:
        >>> check_batched_infos({"final_info": {}}, "the env's step infos")
        >>> check_batched_infos([{}, {}], "the env's step infos")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: the env's step infos came as a list: the runner reads gymnasium's ...
    """
    if infos is None:
        return
    if not isinstance(infos, dict):
        raise TypeError(
            f"{what} came as a {type(infos).__name__}: the runner reads gymnasium's batched "
            "dict of infos (no DictInfoToList wrapper)"
        )
    if mode is AutoresetMode.NEXT_STEP and ("final_obs" in infos or "final_observation" in infos):
        key = "final_obs" if "final_obs" in infos else "final_observation"
        raise ValueError(
            f"{what} hold {key!r}, which only a same-step env reports, but the env is read as "
            "next-step (its metadata['autoreset_mode'] says so, or is unset: a wrapper's "
            "class-level metadata hides the env's); set env.metadata['autoreset_mode'] = "
            "gymnasium.vector.AutoresetMode.SAME_STEP before making the runner"
        )
    final = infos.get("final_info")
    if final is not None and not isinstance(final, dict):
        raise TypeError(
            f"{what}: infos['final_info'] is a {type(final).__name__}: the runner reads "
            "gymnasium 1.x's batched dict of the finished sub-envs' infos (an array of "
            "per-env dicts is gymnasium 0.29's layout)"
        )


def mask_key(key: Any) -> str:
    """The key of ``key``'s mask in gymnasium's batched infos: ``f"_{key}"``, whatever its type.

    Example:
        >>> mask_key("x"), mask_key(1)
        ('_x', '_1')
    """
    return f"_{key}"


def env_info(infos: dict[str, Any], index: int, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The info dict of sub-env ``index`` out of a vector env's batched infos.

    Gymnasium batches infos key by key: ``infos[key][i]`` is sub-env ``i``'s value and the
    boolean ``infos[f"_{key}"][i]`` says whether sub-env ``i`` reported the key at all (a key
    of any type: ``_1`` is the mask of ``1``). Nested dicts are batched the same way. A value
    with no item per sub-env (:func:`is_step_value`: a number, a string, None, a 0-d array or
    tensor, such as Isaac Lab's ``extras["log"]`` metrics) is the whole step's: every sub-env
    that reported the key gets that same object.

    Args:
        infos: The batched infos from ``VectorEnv.reset`` or ``VectorEnv.step``.
        index: The sub-env.
        drop: Top-level keys to leave out (e.g. :data:`FINAL_KEYS`).

    Returns:
        A plain dict of the keys sub-env ``index`` reported (a key without its ``_key``
        mask counts as reported by every sub-env; a nested dict key is kept, as ``{}``, even
        when the sub-env reported none of its inner keys).

    Raises:
        ValueError: A value that is neither per sub-env nor the whole step's (an array whose
            first dimension is too short for ``index``), naming its key and shape.

    Example:
        >>> infos = {"x": np.array([1, 2]), "_x": np.array([False, True]), "log": {"r": 0.5}}
        >>> env_info(infos, 0), env_info(infos, 1)
        ({'log': {'r': 0.5}}, {'x': np.int64(2), 'log': {'r': 0.5}})
    """
    if not infos:
        return {}
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key in drop or (isinstance(key, str) and key.startswith("_")):
            continue
        mask = infos.get(mask_key(key))
        if mask is not None and not bool(np.asarray(mask)[index]):
            continue
        if isinstance(value, dict):
            out[key] = env_info(value, index)
            continue
        if isinstance(value, (str, bytes)):  # the whole step's, not one character per sub-env
            out[key] = value
            continue
        try:
            item = value[index]
        except (TypeError, IndexError, KeyError) as err:
            if is_step_value(value):  # shared: the same object in every sub-env's info
                out[key] = step_item(value)
                continue
            raise not_per_env(key, value) from err
        # A row of a batched array is a view: an env may write its next infos into the same
        # array, which would change the recorded ones.
        out[key] = item.copy() if isinstance(item, np.ndarray) and item.ndim else item
    return out


def is_step_value(value: Any) -> bool:
    """Whether an info value holds no item per sub-env: a value of the whole vector step.

    A Python or numpy number, a string or bytes, None, or anything with an empty shape (a
    0-d numpy array or torch tensor). Every sub-env that reported its key shares it.

    Example:
        >>> [is_step_value(v) for v in (0.5, "a", None, np.array(1.0), np.array([1.0]), [1])]
        [True, True, True, True, False, False]
    """
    shape = getattr(value, "shape", None)
    if shape is not None:
        return isinstance(shape, tuple) and not shape  # torch.Size is a tuple
    return value is None or isinstance(value, (str, bytes, numbers.Number))


def step_item(value: Any) -> Any:
    """What a sub-env's info holds of a value of the whole step: a 0-d array's scalar.

    A numpy scalar is what a row of a per-env array reads as, and it cannot be written in
    place: a shared 0-d array would let one sub-env's consumer (``info["m"] += 1``) change
    every other sub-env's info. A 0-d torch tensor is cloned for each sub-env instead (its
    scalar would make a device wait). Other values are shared as they are.

    Example:
        >>> step_item(np.array(1.5)), step_item("a"), type(step_item(np.array(2))).__name__
        (np.float64(1.5), 'a', 'int64')
    """
    if value.__class__ is np.ndarray:
        return value[()]
    return cloned_tensor(value) if is_tensor(value) else value


def cloned_tensor(tensor: Any) -> Any:
    """A detached copy of a torch tensor on its device (no wait for it).

    As given where torch cannot copy its dtype (uint4: refused naming its key where it is
    brought to the host).

    Example:
        >>> import torch
        >>> t = torch.zeros(2)
        >>> copy = cloned_tensor(t)
        >>> copy is not t, copy.tolist()
        (True, [0.0, 0.0])
    """
    try:
        return tensor.detach().clone()
    except (NotImplementedError, RuntimeError):
        return tensor


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (told without importing torch).

    Example:
        >>> is_tensor(np.zeros(2)), is_tensor(0.5)
        (False, False)
    """
    kind = type(value)
    return kind.__module__.startswith("torch") and hasattr(kind, "detach")


def not_per_env(key: Any, value: Any) -> ValueError:
    """The error for ``infos[key]``, neither per sub-env nor the whole step's (:func:`env_info`).

    Example:
        >>> print(not_per_env("x", np.array([0.5])))  # doctest: +ELLIPSIS
        the env's infos['x'] must hold one value per sub-env (...), got ndarray of shape (1,): ...
    """
    shape = getattr(value, "shape", None)
    of = f" of shape {tuple(shape)}" if isinstance(shape, tuple) else ""
    return ValueError(
        f"the env's infos[{key!r}] must hold one value per sub-env (gymnasium batches "
        "infos key by key) or one value of the whole step (a number, a string, None, a 0-d "
        f"array or tensor), got {type(value).__name__}{of}: {value!r:.60}"
    )


def reported(infos: dict[str, Any], num_envs: int, drop: tuple[str, ...] = ()) -> np.ndarray | None:
    """Which sub-envs reported any info key (None: none did), from gymnasium's ``_key`` masks.

    Keys in ``drop`` do not count (as ``env_info(..., drop=...)`` leaves them out). Every
    ``_key`` mask of the other keys, nested dicts' too, must hold one flag per sub-env: read
    only when there are infos, one shape comparison per mask.

    Raises:
        TypeError: ``infos`` is not a dict (a ``DictInfoToList`` wrapper's list).
        ValueError: A mask of another shape than ``(num_envs,)``, or of values that are no
            flags, naming the mask's key (a short mask would drop the last sub-envs' infos, or
            fail in numpy's broadcasting words; a long one would blame its key's values).

    Example:
        >>> reported({"x": np.array([1, 2]), "_x": np.array([False, True])}, 2).tolist()
        [False, True]
        >>> reported({"x": np.array([1, 2]), "_x": np.array([True])}, 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: the env's infos['_x'] must hold one flag per sub-env (gymnasium's mask ...
    """
    if infos is not None and not isinstance(infos, dict):  # first: an array has no truth
        raise TypeError(
            f"the env gave its infos as a {type(infos).__name__}: the runner reads gymnasium's "
            "batched dict of infos (no DictInfoToList wrapper)"
        )
    if not infos:
        return None
    mask: np.ndarray | None = None
    unmasked = False
    for key, value in infos.items():
        if key in drop or (isinstance(key, str) and key.startswith("_")):
            continue
        if isinstance(value, dict) and value:
            _check_masks(value, num_envs, f"[{key!r}]")
        flags = infos.get(mask_key(key))
        if flags is None:
            unmasked = True  # reported by every sub-env; the other masks are still checked
            continue
        flags = _flags(flags, num_envs, f"[{mask_key(key)!r}]", f"[{key!r}]")
        mask = flags.copy() if mask is None else mask | flags  # the env's own array untouched
    return np.ones(num_envs, bool) if unmasked else mask


def _check_masks(infos: dict[str, Any], num_envs: int, where: str) -> None:
    """Checks the ``_key`` masks of a nested info dict (at ``where``), recursively."""
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_"):
            continue
        if isinstance(value, dict) and value:
            _check_masks(value, num_envs, f"{where}[{key!r}]")
        flags = infos.get(mask_key(key))
        if flags is not None:
            _flags(flags, num_envs, f"{where}[{mask_key(key)!r}]", f"{where}[{key!r}]")


def _flags(flags: Any, num_envs: int, where: str, of: str) -> np.ndarray:
    """The mask ``flags`` (at ``where``, of the key at ``of``) as bools, one per sub-env."""
    try:
        array = np.asarray(flags, dtype=bool)
    except (TypeError, ValueError):  # strings, ragged lists: no flags
        array = None
    if array is None or array.shape != (num_envs,):
        got = f"shape {array.shape}" if array is not None else f"a {type(flags).__name__}"
        raise ValueError(
            f"the env's infos{where} must hold one flag per sub-env (gymnasium's mask of the "
            f"sub-envs that reported infos{of}), got {got} for {num_envs} sub-envs"
        )
    return array


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


def _rows_infos(infos: Mapping[tuple[int, int], Any], env: int, start: int, stop: int) -> list[Any]:
    """Sub-env ``env``'s infos of rows ``start:stop``, ``{}`` (each its own) where none.

    ``infos`` is a recording's :class:`~episodes.runner.row_infos.RowInfos`: each info is
    split out of its vector step's batched infos here, once (then the same dict every read).
    """
    if not infos:  # most envs report nothing: skip the per-row lookups
        return [{} for _ in range(start, stop)]
    env_rows = getattr(infos, "env_rows", None)
    if env_rows is not None:
        return env_rows(env, start, stop)
    return [infos.get((r, env)) or {} for r in range(start, stop)]

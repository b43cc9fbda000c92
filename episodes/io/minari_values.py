"""How an episode's values cross to Minari's columns and back.

Minari keeps one pair of spaces per dataset and writes each leaf of a space as an Arrow column
of the space's dtype; Text leaves are lists of strings, infos a flat dict of per-step arrays.
The helpers here check a space Minari can store, cast values to their space's dtype (refusing
casts that would change them), split Minari's per-episode columns into steps, and stack our
per-step info dicts into Minari's columns. Only :class:`EpisodeBuffers` imports ``minari``.

Example:
    >>> import gymnasium as gym
    >>> space = gym.spaces.Dict({"t": gym.spaces.Text(5), "n": gym.spaces.Discrete(3)})
    >>> split_steps({"t": ["ab", "c"], "n": np.array([1, 2])}, space, 2, "observations")
    [{'n': np.int64(1), 't': 'ab'}, {'n': np.int64(2), 't': 'c'}]
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import DatasetError

__all__ = [
    "MAX_MINARI_STEPS",
    "EpisodeBuffers",
    "cast_to_space",
    "check_infos_flag",
    "split_infos",
    "split_steps",
    "stack_infos",
    "text_ends_in_nul",
]

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
_LEAF_SPACES = (*_ARRAY_SPACES, gym.spaces.Discrete)

# pyarrow's scan batch size (``Dataset.to_batches``), which Minari's reader keeps: it cuts an
# episode of more rows than that (steps + 1) in two, whatever the episode's file holds.
MAX_MINARI_STEPS = (1 << 17) - 1

# One info value's place in Minari: "str", or (dtype, shape) of a numeric numpy value.
InfoKind = str | tuple[str, tuple[int, ...]]


def check_infos_flag(infos: Any) -> None:
    """Refuses an ``infos`` flag that is not ``True``, ``False`` or ``None``.

    Example:
        >>> check_infos_flag("no")
        Traceback (most recent call last):
        ...
        TypeError: infos must be True, False or None, got 'no'
    """
    if infos is not None and not isinstance(infos, bool):
        raise TypeError(f"infos must be True, False or None, got {infos!r}")


def cast_to_space(values: Any, space: gym.Space[Any], where: str) -> Any:
    """``values`` (one item per step) with every leaf in its space's dtype, as Minari needs.

    A cast is taken when it keeps the values: integer and bool spaces take only values that
    come back equal, float spaces any number that stays finite (rounded to the space's
    precision, as storing it in that space means). Text leaves become lists of ``str``.

    Raises:
        DatasetError: A leaf of another shape than its space's, or one whose values the cast
            would change, naming ``where``, the leaf, its dtype and the space's dtype.

    Example:
        >>> cast_to_space([[0.5, 1.0]], gym.spaces.Box(0, 1, (2,)), "observations").dtype
        dtype('float32')
        >>> try:
        ...     cast_to_space([300], gym.spaces.Discrete(4, dtype=np.uint8), "actions")
        ... except DatasetError as err:
        ...     print(str(err).split(";")[0])
        actions have dtype int64 and the space's dtype is uint8
    """
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(values, dict) or set(values) != set(space.spaces):
            raise DatasetError(f"{where} are not dicts with the keys {sorted(space.spaces)}")
        return {k: cast_to_space(values[k], s, f"{where}[{k!r}]") for k, s in space.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(values, (tuple, list)) or len(values) != len(space.spaces):
            raise DatasetError(f"{where} are not tuples of {len(space.spaces)} items")
        return tuple(
            cast_to_space(v, s, f"{where}[{i}]")
            for i, (v, s) in enumerate(zip(values, space.spaces, strict=True))
        )
    if isinstance(space, gym.spaces.Text):
        items = list(values)
        if not all(isinstance(item, str) for item in items):
            raise DatasetError(f"{where} hold a value that is not a str (a Text space)")
        return [str(item) for item in items]  # np.str_ too
    array = np.asarray(values)
    if array.shape[1:] != space.shape:
        raise DatasetError(
            f"{where} have items of shape {array.shape[1:]}, their space {space} of {space.shape}"
        )
    dtype = np.dtype(space.dtype)
    cast = _cast(array, dtype)
    if cast is None:
        raise DatasetError(
            f"{where} have dtype {array.dtype} and the space's dtype is {dtype}; casting would "
            "change their values, so Minari cannot store them"
        )
    return cast


def _cast(array: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    if array.dtype == dtype:
        return array
    if array.dtype.kind not in "biuf" or dtype.kind not in "biuf":
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN or a huge float to an int
        cast = array.astype(dtype)
        if dtype.kind == "f":  # rounding is fine, overflowing to inf is not
            kept = bool(np.array_equal(np.isfinite(cast), np.isfinite(array)))
        else:  # compared as values: a uint64 above int64's range does not come back equal
            kept = bool(np.array_equal(cast, array))
    return cast if kept else None


def split_steps(batched: Any, space: gym.Space[Any], n: int, where: str) -> list[Any]:
    """Minari's per-episode values of ``space`` as a list of ``n`` per-step items.

    Walks the space: Dict and Tuple children are split and joined back per step; a Text leaf
    is Minari's list of strings; other leaves are arrays indexed per step (cast to the space's
    dtype where that is safe: Minari's Discrete spaces say int64 whatever their column holds).

    Raises:
        DatasetError: A leaf does not hold ``n`` values.

    Example:
        >>> split_steps((np.array([[1, 2], [3, 4]]), ["a", "b"]),
        ...             gym.spaces.Tuple((gym.spaces.MultiDiscrete([5, 5]), gym.spaces.Text(3))),
        ...             2, "observations")[1]
        (array([3, 4]), 'b')
    """
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(batched, dict):
            raise DatasetError(f"{where} are not a dict as their Dict space says")
        columns = {
            k: split_steps(batched.get(k), s, n, f"{where}[{k!r}]") for k, s in space.items()
        }
        return [{k: column[t] for k, column in columns.items()} for t in range(n)]
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(batched, (tuple, list)) or len(batched) != len(space.spaces):
            raise DatasetError(f"{where} are not a tuple as their Tuple space says")
        parts = [
            split_steps(b, s, n, f"{where}[{i}]")
            for i, (b, s) in enumerate(zip(batched, space.spaces, strict=True))
        ]
        return [tuple(part[t] for part in parts) for t in range(n)]
    if isinstance(space, gym.spaces.Text):
        return [str(item) if isinstance(item, str) else item for item in _sized(batched, n, where)]
    array = np.asarray(_sized(batched, n, where))
    dtype = np.dtype(space.dtype) if isinstance(space, _LEAF_SPACES) else array.dtype
    if array.dtype != dtype and np.can_cast(array.dtype, dtype, "safe"):
        array = array.astype(dtype)
    return list(array)


def _float64_rewards(rewards: np.ndarray[Any, Any], where: str) -> np.ndarray[Any, Any]:
    """``rewards`` as Minari's float64, refused where the cast changes them.

    Integers must come back equal (above 2**53 not all do), other floats stay finite.
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cast = rewards.astype(np.float64)
        if rewards.dtype.kind in "iu":  # compared back where the float is in the int's range
            info = np.iinfo(rewards.dtype)
            fits = (cast >= float(info.min)) & (cast < float(info.max) + 1.0)
            back = np.where(fits, cast, 0.0).astype(rewards.dtype)
            kept = bool(fits.all()) and bool(np.array_equal(back, rewards))
        else:
            kept = bool(np.array_equal(np.isfinite(cast), np.isfinite(rewards)))
    if not kept:
        raise DatasetError(
            f"{where} has rewards of dtype {rewards.dtype} and Minari stores float64 rewards; "
            "casting would change their values, so Minari cannot store them"
        )
    return cast


def _has_text(space: gym.Space[Any]) -> bool:
    if isinstance(space, gym.spaces.Dict):
        return any(_has_text(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(_has_text(s) for s in space.spaces)
    return isinstance(space, gym.spaces.Text)


def text_ends_in_nul(items: list[Any], space: gym.Space[Any]) -> bool:
    r"""True if a Text leaf of ``items`` (per-step values of ``space``) ends in a NUL.

    A numpy'd episode's fixed-width string column would cut such a string (``"a\x00"``
    becomes ``"a"``), so an importer keeps that episode in list mode. Spaces without Text
    leaves are answered without looking at the items.

    Example:
        >>> text = gym.spaces.Text(2, charset="a\x00")
        >>> text_ends_in_nul(["a", "a\x00"], text), text_ends_in_nul(["a"], text)
        (True, False)
    """
    if not _has_text(space):
        return False
    return any(leaf.endswith("\x00") for item in items for leaf in _text_leaves(item, space))


def _text_leaves(item: Any, space: gym.Space[Any]) -> Iterator[str]:
    if isinstance(space, gym.spaces.Dict):
        for key, child in space.items():
            yield from _text_leaves(item[key], child)
    elif isinstance(space, gym.spaces.Tuple):
        for part, child in zip(item, space.spaces, strict=True):
            yield from _text_leaves(part, child)
    elif isinstance(space, gym.spaces.Text) and isinstance(item, str):
        yield item


def _with_texts(cast: Any, items: list[Any] | None, space: gym.Space[Any]) -> Any:
    """``cast`` (batched values of ``space``) with its Text leaves taken from ``items``.

    ``items`` are the episode's per-step values before ``to_numpy`` (None: keep ``cast``),
    whose strings are exact: a numpy string column cuts trailing NULs. Where an item is no
    str (``to_numpy`` made it one), the cast value stays.
    """
    if items is None:
        return cast
    if isinstance(space, gym.spaces.Dict):
        return {k: _with_texts(cast[k], [item[k] for item in items], s) for k, s in space.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(
            _with_texts(c, [item[i] for item in items], s)
            for i, (c, s) in enumerate(zip(cast, space.spaces, strict=True))
        )
    if isinstance(space, gym.spaces.Text):
        return [str(item) if isinstance(item, str) else c for item, c in zip(items, cast)]
    return cast


def _sized(batched: Any, n: int, where: str) -> Any:
    try:
        size = len(batched)
    except TypeError:
        size = None
    if size != n:
        raise DatasetError(f"{where} hold {size} values where the episode has {n}")
    return batched


def _info_kind(value: Any) -> InfoKind | None:
    if isinstance(value, str):  # np.str_ too
        return "str"
    if not isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        return None
    array = np.asarray(value)
    if array.dtype.kind not in "biuf" or array.size == 0:  # a Python int beyond int64: "O"
        return None
    return (array.dtype.str, array.shape)


def _info_layout(info: Any) -> dict[str, InfoKind] | str:
    """One step's info layout ``{key: kind}``, or why Minari cannot store the info."""
    if not isinstance(info, dict):
        return f"it is a {type(info).__name__}, not a dict"
    layout: dict[str, InfoKind] = {}
    for key, value in info.items():
        kind = _info_kind(value) if isinstance(key, str) else None
        if kind is None:
            return (
                f"its value {key!r} is a {type(value).__name__} (Minari keeps str keys "
                "holding a str, bool, int, float or a non-empty numeric numpy value)"
            )
        layout[key] = kind
    return layout


def stack_infos(
    infos: list[Any], layout: dict[str, InfoKind] | None, where: str
) -> tuple[dict[str, Any] | None, dict[str, InfoKind]]:
    """Per-step info dicts as Minari's infos (a dict of per-step columns) and their layout.

    Minari reads infos back as one array per key and cannot read a dataset whose episodes
    lay their infos out differently, so every step of every episode must match ``layout``
    (the first exported step's, ``None`` for that one). Infos empty everywhere store nothing.

    Raises:
        DatasetError: Naming ``where`` and the first step whose info cannot go to Minari or
            differs from the layout.

    Example:
        >>> columns, layout = stack_infos([{"x": 1.0}, {"x": 2.5}], None, "episode 'a'")
        >>> columns, layout
        ({'x': [np.float64(1.0), np.float64(2.5)]}, {'x': ('<f8', ())})
        >>> try:
        ...     stack_infos([{"x": 1.0}, {}], layout, "episode 'b'")
        ... except DatasetError as err:
        ...     print(str(err).split(":")[0])
        episode 'b', step 1
    """
    for t, info in enumerate(infos):
        found = _info_layout(info)
        if isinstance(found, str):
            raise DatasetError(
                f"{where}, step {t}: Minari cannot store this info: {found}; "
                "export with infos=False (the CLI's --no-infos) to leave infos out"
            )
        if layout is None:
            layout = found
        elif found != layout:
            raise DatasetError(
                f"{where}, step {t}: the info {_describe(found)} differs from the first "
                f"exported step's {_describe(layout)}; Minari stores infos as per-step arrays "
                "of one layout in every step of every episode: export with infos=False (the "
                "CLI's --no-infos) to leave infos out"
            )
    layout = {} if layout is None else layout
    if not layout:
        return None, layout
    columns: dict[str, Any] = {}
    for key, kind in layout.items():
        values = [info[key] for info in infos]
        if kind == "str":
            columns[key] = [str(v) for v in values]
        elif kind[1] == ():  # a list: Minari's reader cannot reshape a column of scalars
            columns[key] = list(np.asarray(values, dtype=np.dtype(kind[0])))
        else:
            columns[key] = np.stack([np.asarray(v) for v in values])
    return columns, layout


def _describe(layout: dict[str, InfoKind]) -> str:
    def kind(k: InfoKind) -> str:
        return k if isinstance(k, str) else f"{np.dtype(k[0])}{list(k[1]) if k[1] else ''}"

    return "{" + ", ".join(f"{key!r}: {kind(k)}" for key, k in layout.items()) + "}"


def split_infos(infos: Any, n: int, where: str) -> list[dict[str, Any]] | None:
    """Minari's infos of an episode (per-key columns, nested dicts) as ``n`` per-step dicts.

    ``None`` where Minari stored no infos.

    Raises:
        DatasetError: A column does not hold ``n`` values.

    Example:
        >>> split_infos({"x": np.array([1, 2]), "d": {"s": np.array(["a", "b"])}}, 2, "infos")
        [{'x': np.int64(1), 'd': {'s': np.str_('a')}}, {'x': np.int64(2), 'd': {'s': np.str_('b')}}]
    """
    if not infos:
        return None
    if not isinstance(infos, dict):
        raise DatasetError(f"{where} are a {type(infos).__name__}, not a dict of columns")
    steps: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, column in infos.items():
        if isinstance(column, dict):
            inner = split_infos(column, n, f"{where}[{key!r}]") or [{} for _ in range(n)]
        else:
            inner = list(_sized(column, n, f"{where}[{key!r}]"))
        for step, value in zip(steps, inner, strict=True):
            step[key] = value
    return steps


class EpisodeBuffers:
    """Whole episodes as Minari's episode buffers, all under one pair of spaces.

    Each episode is checked (its own spaces, if set, are the pair's; one float reward per
    step), its values cast to the spaces' dtypes and its info dicts stacked under the layout
    of the first step added: with ``infos=True`` an info that does not fit is a
    ``DatasetError``; with ``None`` (best effort) the infos of every episode are left out then,
    with a warning; with ``False`` they are never stored.

    Example:
        >>> import pytest; _ = pytest.importorskip("minari")  # the optional extra
        >>> space = gym.spaces.Box(-1, 1, (2,))
        >>> buffers = EpisodeBuffers((space, gym.spaces.Discrete(2)), infos=True)
        >>> buffers.add(SingleAgentEpisode("a", observations=[[0.5, 0.0]] * 3, actions=[1, 0],
        ...                                rewards=[1.0, 0.5], infos=[{"k": 1}] * 3,
        ...                                len_lookback_buffer=0))
        >>> stored = buffers.buffers[0]
        >>> stored.observations.dtype, stored.infos
        (dtype('float32'), {'k': [np.int64(1), np.int64(1), np.int64(1)]})
    """

    def __init__(
        self, spaces: tuple[gym.Space[Any], gym.Space[Any]], *, infos: bool | None
    ) -> None:
        check_infos_flag(infos)
        self.spaces = spaces
        self.infos = infos
        self.layout: dict[str, InfoKind] | None = None  # the first step's info layout
        self.buffers: list[Any] = []

    def add(self, episode: SingleAgentEpisode) -> None:
        """Appends ``episode`` (whole, with steps) as the next buffer.

        Raises:
            DatasetError: The episode does not fit the spaces, its values of another dtype
                would change in the cast, or its infos cannot go to Minari.

        Example:
            >>> import pytest; _ = pytest.importorskip("minari")  # the optional extra
            >>> buffers = EpisodeBuffers((gym.spaces.Discrete(3),) * 2, infos=False)
            >>> buffers.add(SingleAgentEpisode("a", observations=[0, 2], actions=[1],
            ...                                rewards=[1.0], len_lookback_buffer=0))
            >>> buffers.buffers[0].actions
            array([1])
        """
        from minari.data_collector import EpisodeBuffer

        where = f"episode {episode.id_!r}"
        own = (episode.observation_space, episode.action_space)
        for name, space, mine in zip(("observation", "action"), self.spaces, own, strict=True):
            if mine is not None and mine != space:
                raise DatasetError(
                    f"{where} has the {name} space {mine}, not the dataset's {space}: a Minari "
                    "dataset has one pair of spaces (export each pair's episodes apart)"
                )
        # Text leaves as given: to_numpy's fixed-width strings drop trailing NULs ("a\x00").
        texts = [
            list(items) if _has_text(space) and not episode.is_numpy else None
            for space, items in zip(
                self.spaces, (episode.get_observations(), episode.get_actions()), strict=True
            )
        ]
        try:  # one without spaces takes the pair, which stacks its items as Minari needs
            if episode.observation_space is None:
                episode.observation_space = self.spaces[0]
            if episode.action_space is None:
                episode.action_space = self.spaces[1]
            episode.to_numpy()
        except (TypeError, ValueError) as err:
            raise DatasetError(f"{where} does not fit its spaces: {err}") from err
        n = len(episode)
        if n > MAX_MINARI_STEPS:
            raise DatasetError(
                f"{where} has {n} steps; Minari's reader cuts an episode of more than "
                f"{MAX_MINARI_STEPS} steps into two (pyarrow's scan batches), so it cannot "
                "be read back"
            )
        rewards = np.asarray(episode.get_rewards())
        if rewards.shape != (n,) or rewards.dtype.kind not in "biuf":
            raise DatasetError(
                f"Minari stores one float reward per step; {where} has rewards of "
                f"shape {rewards.shape[1:]} and dtype {rewards.dtype}"
            )
        float_rewards = _float64_rewards(rewards, where)
        columns = None
        if self.infos is not False:
            try:
                columns, self.layout = stack_infos(episode.get_infos(), self.layout, where)
            except DatasetError as err:
                if self.infos:  # asked for: refused
                    raise
                # Best effort: infos of several layouts (a reset info unlike the step infos,
                # an info added at episode ends) are left out of the whole export, as before
                # infos were exported at all, with a warning saying why.
                # stacklevel 3: the caller of export_minari, the only caller of add.
                warnings.warn(f"infos left out of the Minari export: {err}", stacklevel=3)
                self.infos, columns = False, None
                self.buffers = [dataclasses.replace(b, infos=None) for b in self.buffers]
        observations, actions = (
            _with_texts(cast_to_space(values, space, f"{where} {name}"), given, space)
            for values, space, name, given in zip(
                (episode.get_observations(), episode.get_actions()),
                self.spaces,
                ("observations", "actions"),
                texts,
                strict=True,
            )
        )
        ends = [False] * (n - 1)
        self.buffers.append(
            EpisodeBuffer(
                id=len(self.buffers),
                observations=observations,
                actions=actions,
                rewards=float_rewards.tolist(),
                terminations=[*ends, bool(episode.is_terminated)],
                truncations=[*ends, bool(episode.is_truncated)],
                infos=columns,
            )
        )

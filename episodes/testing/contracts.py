"""Reusable contract tests for connectors.

A connector is a callable ``(episodes: list[SingleAgentEpisode], batch: dict) -> dict``. Every
connector should:

- not mutate its input episodes (:func:`check_does_not_mutate`);
- handle no episodes, empty and just-reset episodes (:func:`check_handles_empty_and_reset`);
- give the same rows on a chunk with enough lookback as on the un-cut episode
  (:func:`check_lookback_across_cuts`);
- be deterministic (:func:`check_deterministic`);
- give the same result on list and numpy episodes (:func:`check_list_numpy_agree`).

Use them as plain functions on your own episodes, or all at once on episodes hypothesis
draws, with :func:`~episodes.testing.suite.check_connector` or the pytest mixin
:class:`~episodes.testing.suite.ConnectorContract` (both in :mod:`episodes.testing.suite`).

Example:
    >>> def count_steps(episodes, batch):
    ...     return {**batch, "steps": [len(ep) for ep in episodes]}
    >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
    >>> check_deterministic(count_steps, [ep, ep])
"""

from __future__ import annotations

import copy
import reprlib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from episodes.connectors.base import check_episodes
from episodes.connectors.float32 import Float32RangeError
from episodes.episode import SingleAgentEpisode
from episodes.testing.compare import _diff, _episode_diff, _rows, outputs_equal
from episodes.testing.reset_items import reset_item
from episodes.testing.snapshot import Snapshot, _space_diff, deep_copy, take_snapshot
from episodes.testing.strategies.episodes import stacks

if TYPE_CHECKING:  # served lazily by __getattr__ below (suite imports this module)
    from episodes.testing.suite import ConnectorContract as ConnectorContract
    from episodes.testing.suite import check_connector as check_connector

__all__ = [
    "Connector",
    "ConnectorContractError",
    "check_deterministic",
    "check_does_not_mutate",
    "check_handles_empty_and_reset",
    "check_list_numpy_agree",
    "check_lookback_across_cuts",
    "outputs_equal",
]

Connector = Callable[[list[SingleAgentEpisode], dict[str, Any]], dict[str, Any]]


def __getattr__(name: str) -> Any:
    # ``ConnectorContract`` and ``check_connector`` moved to ``episodes.testing.suite``, which
    # imports this module; imported from here lazily, older imports keep working.
    if name in ("ConnectorContract", "check_connector"):
        from episodes.testing import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ConnectorContractError(AssertionError):
    """A connector broke one of the contracts (the message says which and how).

    Example:
        >>> calls = []
        >>> def counting(episodes, batch):
        ...     calls.append(1)
        ...     return {"calls": len(calls)}
        >>> try:
        ...     check_deterministic(counting, [])
        ... except ConnectorContractError as err:
        ...     print(str(err).splitlines()[0])
        the connector is not deterministic: output['calls']: values differ:
    """


def _assert_same(a: Any, b: Any, what: str, check_dtype: bool = False) -> None:
    found = _diff(a, b, check_dtype, "output")
    if found:
        raise ConnectorContractError(f"{what}: {found}")


def _call(connector: Connector, episodes_: list[SingleAgentEpisode], batch: Any = None) -> Any:
    out = connector(episodes_, {} if batch is None else batch)
    if out is None:  # a pipeline refuses it; every check would judge None instead of a batch
        raise ConnectorContractError(
            "the connector returned None: a connector must return the batch (the one it was "
            "given, updated in place, or a new one), as ConnectorPipeline requires"
        )
    return out


def _output(connector: Connector, episodes_: list[SingleAgentEpisode], batch: Any = None) -> Any:
    """The connector's output on a copy of ``batch``, copied itself before any later call."""
    return deep_copy(_call(connector, episodes_, deep_copy(batch, what="batch")), what="output")


def check_does_not_mutate(
    connector: Connector, episodes_: list[SingleAgentEpisode], batch: dict[str, Any] | None = None
) -> None:
    """Checks that calling the connector leaves every input episode unchanged.

    The connector gets deep copies of the episodes (yours stay as they are); every field
    (data, lookback, flags, spaces, ``custom_data``) is then compared with a second copy.
    Objects compared by identity (a class without ``__eq__``, ``np.random.Generator``) are
    the same objects in both copies, so replacing one is a change; one changed in place is
    found by pickling it before and after the call (objects that do not pickle, and those the
    spaces hold, are not checked in place). Objects that cannot be deep-copied (a lock) are
    handed to the connector as they are, shared with the caller's episodes. Spaces are
    compared exactly (``==`` of a Box allows ``np.allclose`` bounds). A connector refusing
    with :class:`~episodes.connectors.Float32RangeError` must leave the episodes unchanged
    too: its refusal is raised again if it did.

    Raises:
        ConnectorContractError: An episode changed (before a refusal as well); the message
            names the first changed field with its value before and after the call, or the
            type of the object changed in place.
        TypeError: ``episodes_`` is not a list of episodes (the message names the odd item).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> check_does_not_mutate(lambda eps, batch: {"n": len(eps)}, [ep])
    """
    check_episodes(episodes_, "check_does_not_mutate")
    _unchanged_output(connector, episodes_, batch)


def _unchanged_output(
    connector: Connector, episodes_: list[SingleAgentEpisode], batch: Any = None
) -> Any:
    """The connector's output on copies of ``episodes_``, the call checked for changes."""
    snapshot = take_snapshot(episodes_)
    objects = list(snapshot.given)
    try:
        out = _call(connector, snapshot.given, deep_copy(batch, what="batch"))
    except Float32RangeError as refusal:  # a refusal too must leave its inputs unchanged
        _check_unchanged(snapshot, objects, refusal)
        raise
    _check_unchanged(snapshot, objects)
    return out


def _check_unchanged_and_deterministic(
    connector: Connector, episodes_: list[SingleAgentEpisode]
) -> None:
    """:func:`check_does_not_mutate` and :func:`check_deterministic` on one first call.

    The call checked for changes is the first of the two compared: a connector acting
    differently on its first sight of an episode id (writing into it, or answering otherwise)
    shows it on that call alone, which both contracts then judge.
    """
    check_episodes(episodes_, "check_does_not_mutate")
    first = deep_copy(_unchanged_output(connector, episodes_), what="output")
    second = _output(connector, deep_copy(episodes_, what="episodes_"))
    _assert_same(first, second, "the connector is not deterministic", check_dtype=True)


def _check_unchanged(
    snapshot: Snapshot, objects: list[SingleAgentEpisode], refusal: Exception | None = None
) -> None:
    """Raises if the call changed ``snapshot.given`` (``objects``: its episodes before it)."""
    before, given_ = snapshot.before, snapshot.given
    after = "" if refusal is None else f" (before refusing: {type(refusal).__name__})"
    if len(given_) != len(before) or any(a is not b for a, b in zip(objects, given_)):
        raise ConnectorContractError(
            f"the connector changed the list of input episodes{after} ({len(before)} episodes "
            f"before, {len(given_)} after, or others in their places)"
        ) from refusal
    for i, (old, new) in enumerate(zip(before, given_)):
        try:
            same = old == new
        except Exception:  # an episode left inconsistent may fail to compare
            same = False
        # ``==`` compares Box bounds with np.allclose: spaces are compared exactly too.
        space = None if not same else _space_diff(old, new)
        if not same or space is not None:
            raise ConnectorContractError(
                f"the connector mutated input episode {i} (id {old.id_!r}){after}; the first "
                f"change, before vs after: {space or _episode_diff(old, new)}"
            ) from refusal
    changed = snapshot.changed_in_place()
    if changed is not None:
        i, kinds = changed
        raise ConnectorContractError(
            f"the connector changed in place objects compared by identity that input episode "
            f"{i} (id {before[i].id_!r}) holds{after}: {', '.join(kinds)} (their pickled state "
            "differs after the call)"
        ) from refusal


def _just_reset(
    observation_space: gym.Space[Any], action_space: gym.Space[Any] | None, numpy: bool
) -> SingleAgentEpisode:
    # Copies: a connector changing an episode's space must not change the caller's space.
    observation_space, action_space = copy.deepcopy((observation_space, action_space))
    episode = SingleAgentEpisode(observation_space=observation_space, action_space=action_space)
    # The same item every time, so a failure replays the same way (see reset_items).
    episode.add_env_reset(reset_item(observation_space))
    return episode.to_numpy() if numpy else episode


def check_handles_empty_and_reset(
    connector: Connector,
    observation_space: gym.Space[Any] | None,
    action_space: gym.Space[Any] | None = None,
) -> None:
    """Checks the connector accepts no episodes and just-reset (length 0) episodes.

    Calls it with ``[]``, then with one and two just-reset episodes, in list and numpy mode.
    The spaces are gymnasium spaces (a strategy of spaces is for ``check_connector``, which
    draws one).

    Raises:
        ConnectorContractError: The connector raised (the original error is chained).
        ValueError: ``observation_space`` is None.
        TypeError: ``observation_space`` is not a gymnasium space (a strategy of spaces, say),
            or ``action_space`` neither a space nor None; checked before anything is copied.

    Example:
        >>> check_handles_empty_and_reset(lambda eps, batch: {}, gym.spaces.Discrete(2))
    """
    if observation_space is None:
        raise ValueError("check_handles_empty_and_reset needs an observation space")
    for name, space in (("observation_space", observation_space), ("action_space", action_space)):
        if not (isinstance(space, gym.Space) or (space is None and name == "action_space")):
            raise TypeError(
                f"check_handles_empty_and_reset: {name} must be a gymnasium space"
                f"{' or None' if name == 'action_space' else ''}, got {type(space).__name__} "
                "(check_connector and ConnectorContract draw spaces from a strategy; here draw "
                "one first)"
            )
    cases: list[tuple[str, list[SingleAgentEpisode]]] = [("no episodes", [])]
    # Sequence, Graph and OneOf episodes have no numpy mode, nor those of Dict spaces whose
    # keys do not sort, or of a Text too wide for numpy (the action column is stacked too).
    numpy_mode = stacks(observation_space) and (action_space is None or stacks(action_space))
    for numpy in (False, True) if numpy_mode else (False,):
        mode = "numpy" if numpy else "list"
        one = _just_reset(observation_space, action_space, numpy)
        two = _just_reset(observation_space, action_space, numpy)
        cases += [
            (f"one just-reset {mode} episode", [one]),
            (f"two just-reset {mode} episodes", [one, two]),
        ]
    for what, eps in cases:
        try:
            _call(connector, eps)
        except Exception as err:
            raise ConnectorContractError(f"the connector failed on {what}: {err!r}") from err


def _check_row_keys(row_keys: Any) -> None:
    # Read more than once (a generator would be spent after the first cut), and a string would
    # be read letter by letter: refused here, not deep inside a hypothesis run.
    if row_keys is None:
        return
    if isinstance(row_keys, (str, bytes)) or not isinstance(row_keys, Collection):
        raise TypeError(
            f"row_keys is a collection of output keys such as ['obs'], got {row_keys!r}"
        )
    odd = [key for key in row_keys if not isinstance(key, str)]
    if odd:
        raise TypeError(f"row_keys must be strings (output keys), got {odd!r}")


def check_lookback_across_cuts(
    connector: Connector,
    episode: SingleAgentEpisode,
    start: int,
    stop: int,
    lookback: int,
    *,
    row_keys: Collection[str] | None = None,
) -> None:
    """Checks that the connector's output on a chunk equals its rows of the un-cut episode.

    The chunk is ``episode.slice(slice(start, stop), len_lookback_buffer=lookback)``. Each
    output leaf with ``len(episode)`` rows (one per step) or ``len(episode) + 1`` (one per
    observation) is compared with rows ``start:stop`` (``start:stop + 1``) of the output on
    the whole episode. Dicts and tuples are walked; lists, arrays and tensors hold rows.
    ``lookback`` must cover what the connector reads into the past (e.g. ``k - 1`` for a
    ``k``-frame stack).

    Args:
        connector: The connector under test; it gets one episode.
        episode: The un-cut episode.
        start: First step of the chunk.
        stop: End (exclusive) of the chunk's steps.
        lookback: Lookback the chunk gets.
        row_keys: Top-level output keys that hold rows (a collection, not one str); every
            leaf under them must have one row per step or per observation. None: compare every
            leaf whose row count lines up with the episode and the chunk, and skip the others
            (per-episode values, padded layouts); name the row keys to have lookback rows
            leaking into the output reported.

    Raises:
        ConnectorContractError: The rows differ.
        ValueError: ``start``/``stop`` outside ``0 <= start <= stop <= len(episode)``, or a
            negative ``lookback``.
        TypeError: ``episode`` is not a :class:`SingleAgentEpisode` (a list of one, say), or
            ``row_keys`` is not a collection of str (a bare str or bytes, a generator, a
            number, or keys that are not strings).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 0, 0],
        ...                         rewards=[0.0] * 3, len_lookback_buffer=0)
        >>> def prev_obs(eps, batch):
        ...     ep = eps[0]
        ...     return {"prev": [ep.get_observations(t - 1, neg_index_as_lookback=True, fill=-1)
        ...                      for t in range(len(ep))]}
        >>> check_lookback_across_cuts(prev_obs, ep, 1, 3, lookback=1)
    """
    _check_row_keys(row_keys)
    if not isinstance(episode, SingleAgentEpisode):  # one episode here, not a list
        raise TypeError(
            "check_lookback_across_cuts takes one SingleAgentEpisode, got "
            f"{reprlib.repr(episode)} ({type(episode).__name__})"
        )
    for name, value in (("start", start), ("stop", stop), ("lookback", lookback)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if not 0 <= start <= stop <= len(episode) or lookback < 0:
        # slice() would clamp them: the check would then compare other rows, or none.
        raise ValueError(
            f"need 0 <= start <= stop <= len(episode) = {len(episode)} and lookback >= 0, got "
            f"start={start}, stop={stop}, lookback={lookback}"
        )
    # On copies: the connector must not reach the caller's episode (or its spaces) either.
    chunk = deep_copy(episode, what="episode").slice(
        slice(start, stop), len_lookback_buffer=lookback
    )
    # Each output copied before the next call: a connector may hand out a buffer it reuses.
    full = _output(connector, [deep_copy(episode, what="episode")])
    part = _output(connector, [chunk])
    if row_keys is not None:
        absent = [k for k in row_keys if k not in full and len(episode)]
        if absent:
            raise ConnectorContractError(f"row keys {absent} are not in the output")
        # Outputs without steps may leave their (empty) columns out, as connectors do.
        full = {k: full[k] for k in row_keys if k in full}
        missing = [k for k in row_keys if k not in part and start != stop]
        if missing:
            raise ConnectorContractError(
                f"row keys {missing} are not in the output on the chunk [{start}:{stop}]"
            )
        part = {k: part[k] for k in row_keys if k in part}
    found = _rows(full, part, start, stop, len(episode), row_keys is not None, "output")
    if found:
        raise ConnectorContractError(
            f"output on the chunk [{start}:{stop}] with lookback {lookback} differs from the "
            f"un-cut episode's rows: {found}"
        )


def check_deterministic(
    connector: Connector, episodes_: list[SingleAgentEpisode], batch: dict[str, Any] | None = None
) -> None:
    """Checks that two calls on equal inputs give equal outputs.

    Raises:
        ConnectorContractError: The outputs differ.
        TypeError: ``episodes_`` is not a list of episodes (the message names the odd item).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> check_deterministic(lambda eps, batch: {"n": len(eps)}, [ep])
    """
    check_episodes(episodes_, "check_deterministic")
    # Copied before the next call: state the connector keeps changing would equal itself.
    first = _output(connector, deep_copy(episodes_, what="episodes_"), batch)
    second = _output(connector, deep_copy(episodes_, what="episodes_"), batch)
    _assert_same(first, second, "the connector is not deterministic", check_dtype=True)


def check_list_numpy_agree(
    connector: Connector, episodes_: list[SingleAgentEpisode], batch: dict[str, Any] | None = None
) -> None:
    """Checks the output is the same (values, not dtypes) for list and numpy'd episodes.

    Episodes that ``to_numpy()`` cannot stack (spaces without a numpy mode such as Sequence
    or Graph, ragged extra model outputs or space-less observations) are not compared.

    Raises:
        ConnectorContractError: The outputs differ, or the connector raised (its error
            chained; the message says in which modes, and names an episode without steps:
            a list-mode read of no items is ``[]``, which ``np.stack`` refuses, so a
            connector that does not skip episodes without rows fails on just-reset ones).
        Float32RangeError: The connector refused the episodes so in both modes (its
            documented answer to values float32 cannot hold, raised as it is).
        TypeError: ``episodes_`` is not a list of episodes (the message names the odd item).
        ValueError: An episode is numpy'd already (the runner's default chunks are): the
            check needs the list-mode episodes it turns into numpy copies (record with
            ``EnvRunner(numpy_episodes=False)``).

    Example:
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> check_list_numpy_agree(lambda eps, b: {"o": [e.get_observations() for e in eps]}, [ep])
    """
    check_episodes(episodes_, "check_list_numpy_agree")
    if any(ep.is_numpy for ep in episodes_):
        raise ValueError("check_list_numpy_agree needs list-mode episodes (not numpy'd)")
    if not _all_stack(episodes_):
        return  # Sequence or Graph items have no numpy mode to agree with
    try:
        numpied = [deep_copy(ep, what="episodes_").to_numpy() for ep in episodes_]
    except ValueError:
        return  # items that do not stack (extra outputs, observations without a space)
    outputs: dict[str, Any] = {}
    errors: dict[str, Exception] = {}
    copies = deep_copy(episodes_, what="episodes_")
    for mode, given in (("list-mode", copies), ("numpy'd", numpied)):
        try:
            outputs[mode] = _output(connector, given, batch)
        except Exception as err:  # judged once both modes have run
            errors[mode] = err
    if errors:
        _raise_failure(errors, episodes_)
    _assert_same(
        outputs["list-mode"], outputs["numpy'd"], "list and numpy episodes give different outputs"
    )


def _raise_failure(errors: dict[str, Exception], episodes_: list[SingleAgentEpisode]) -> None:
    """A connector's error in one mode or both, as :func:`check_list_numpy_agree` reports it."""
    mode, err = next(iter(errors.items()))  # the list-mode error, where both modes failed
    if len(errors) == 2 and isinstance(err, Float32RangeError):
        raise err  # its documented refusal of these episodes, in both modes alike
    other = "numpy'd" if mode == "list-mode" else "list-mode"
    which = f"{mode} episodes, not on the {other} ones"
    if len(errors) == 2:
        which = "list-mode and numpy'd episodes alike"
    stepless = next((ep.id_ for ep in episodes_ if not len(ep)), None)
    hint = "" if stepless is None or mode != "list-mode" else _no_rows(stepless)
    raise ConnectorContractError(f"the connector failed on the {which}: {err!r}{hint}") from err


def _no_rows(episode_id: Any) -> str:
    # The usual cause of a failure on episodes without steps: np.stack([]) and the like.
    return (
        f" (episode {episode_id!r} has no steps: a read of no items gives no rows, in list mode"
        " [], which has lost the items' shape; skip episodes that give no rows, as the shipped"
        " connectors do)"
    )


def _all_stack(eps: list[SingleAgentEpisode]) -> bool:
    return all(
        stacks(space)
        for ep in eps
        for space in (ep.observation_space, ep.action_space)
        if space is not None
    )

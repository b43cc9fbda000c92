"""Previous-n actions and rewards for each row, read across chunk borders through the lookback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.connectors.base import (
    Batch,
    EpisodeConnector,
    FillerMemo,
    _window_leaves,
    as_arrays,
    check_episodes,
    join_rows,
    with_fill_dtype,
)
from episodes.connectors.checked_settings import flag
from episodes.connectors.given_batch import check_batch
from episodes.connectors.last_rows import last_prev_actions, last_prev_rewards
from episodes.connectors.learner import float32_rewards
from episodes.connectors.lookback_reach import warn_short_lookback
from episodes.connectors.observations import _needed_fill, _whole_count
from episodes.connectors.rllib_keywords import explains_rllib_keywords
from episodes.connectors.text_fill import refuse_text_fill
from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag

__all__ = ["PrevActionsPrevRewards"]

# What prev_n_rewards holds, float32 scalars, whatever the episode's rewards buffer says.
_REWARDS = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)


class _DefaultCount(int):
    """The counts' default, 1, told apart from a 1 given beside RLlib's keyword by identity."""


# A 1 given as n_actions beside n_prev_actions=3 disagrees; the default gives way.
_DEFAULT_COUNT = _DefaultCount(1)


class PrevActionsPrevRewards(
    EpisodeConnector,
    n_actions=lambda value: _whole_count(value, "PrevActionsPrevRewards' n_actions", 0),
    n_rewards=lambda value: _whole_count(value, "PrevActionsPrevRewards' n_rewards", 0),
    fill=lambda value: _needed_fill(value, "PrevActionsPrevRewards", "steps"),
    one_hot_discrete=flag("one_hot_discrete"),
):
    """Adds ``prev_n_actions`` ``[rows, n_actions, *A]`` and ``prev_n_rewards`` ``[rows, n]``.

    Row ``ts`` gets actions/rewards ``ts-n .. ts-1`` (oldest first), the values of
    ``ep.get_actions(slice(ts - n, ts), neg_index_as_lookback=True, fill=fill,
    one_hot_discrete=...)``, but each episode's whole window range is read once and cut into
    windows with numpy. Positions before the episode (or beyond the lookback) are ``fill``-ed
    (those beyond a chunk's lookback that its episode had with a ``ShortLookbackWarning`` of
    :mod:`episodes.connectors.lookback_reach`: keep ``n`` steps of lookback);
    with one-hot, discrete actions fill as all-zero vectors. ``n_actions=0``/``n_rewards=0``
    leaves the column out. Episodes whose rows do not join (action spaces of other sizes) are a
    ``ValueError`` naming the column and two such episodes, and rewards that are not real
    numbers (complex ones, strings) a ``TypeError`` naming the episode; either way a refused
    call leaves the batch as it was.

    Args:
        n_actions: How many previous actions (an integer >= 0; a float or bool is a
            ``TypeError``).
        n_rewards: How many previous rewards (likewise).
        fill: Filler value (default 0.0).
        one_hot_discrete: One-hot Discrete/MultiDiscrete actions (needs the action space:
            with ``n_actions > 0``, an episode without one is a ``ValueError``).
        inference: Rows per episode (see :mod:`episodes.connectors.base`).
        n_prev_actions: RLlib's keyword for ``n_actions`` (given both, they must agree).
        n_prev_rewards: RLlib's keyword for ``n_rewards`` (likewise).

    Example:
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 0, 0], actions=[1, 0], rewards=[1.0, 2.0],
        ...                         action_space=gym.spaces.Discrete(2), len_lookback_buffer=0)
        >>> out = PrevActionsPrevRewards(1, 2)([ep], {})
        >>> out["prev_n_actions"][:, 0], out["prev_n_rewards"]
        (array([[0., 0.],
               [0., 1.]], dtype=float32), array([[0., 0.],
               [0., 1.]], dtype=float32))
    """

    @explains_rllib_keywords
    def __init__(
        self,
        n_actions: int = _DEFAULT_COUNT,
        n_rewards: int = _DEFAULT_COUNT,
        *,
        fill: Any = 0.0,
        one_hot_discrete: bool = True,
        inference: bool = False,
        n_prev_actions: int | None = None,
        n_prev_rewards: int | None = None,
    ):
        counts = (
            _count(n_actions, n_prev_actions, "n_actions", "n_prev_actions"),
            _count(n_rewards, n_prev_rewards, "n_rewards", "n_prev_rewards"),
        )
        _needed_fill(fill, "PrevActionsPrevRewards", "steps")
        super().__init__(inference=inference)
        self.n_actions, self.n_rewards = counts
        self.fill = fill
        self.one_hot_discrete = as_flag(one_hot_discrete, "one_hot_discrete")  # as reads take it

    def _reach(self, n: int) -> Callable[[SingleAgentEpisode], int]:
        # Items before ts = 0 that an episode's first row reads, as FrameStack._reach.
        def reach(episode: SingleAgentEpisode) -> int:
            size = len(episode)
            if not self.inference:
                return n if size else 0
            return n - (size if size >= n else self.rows(episode)[0])

        return reach

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch) -> Batch:
        """Adds ``prev_n_actions``/``prev_n_rewards`` for ``episodes`` to ``batch``."""
        episodes = check_episodes(episodes, "PrevActionsPrevRewards")  # an array's as a list
        batch = check_batch(batch, "PrevActionsPrevRewards")
        if self.n_actions and self.one_hot_discrete:
            # Without a space the actions cannot be one-hot: skipping it gave [rows, n] for
            # such an episode next to [rows, n, A] for the others (as the getter, refuse).
            spaceless = next((ep for ep in episodes if ep.action_space is None), None)
            if spaceless is not None:
                raise ValueError(
                    "PrevActionsPrevRewards(one_hot_discrete=True) needs the episodes' action "
                    f"space, but episode {spaceless.id_!r} has none; pass "
                    "one_hot_discrete=False for the raw actions"
                )
        who = f"PrevActionsPrevRewards({self.n_actions}, {self.n_rewards})"
        reach = max(self.n_actions, self.n_rewards)
        # Inference rows of episodes at least that many steps long reach before none.
        if not self.inference or min(map(len, episodes), default=reach) < reach:
            for column, n in (("actions", self.n_actions), ("rewards", self.n_rewards)):
                if n and warn_short_lookback(episodes, self._reach(n), column, who, self.fill):
                    break  # one warning per call
        fillers = FillerMemo(self.fill)
        if self.inference:  # the latest rows of all episodes at once, where they are plain
            fast = self._last_rows(episodes, fillers)
            if fast is not None:
                batch.update(fast)
                return batch
        actions, rewards, ids = [], [], []
        for episode in episodes:
            start, stop = self.rows(episode)
            if stop <= start:
                continue
            ids.append(episode.id_)
            if self.n_actions:
                actions.append(self._actions(episode, start, stop, fillers))
            if self.n_rewards:
                rewards.append(self._rewards(episode, start, stop, fillers))
        # Both columns are joined before the batch changes: a refusal leaves it as it was.
        joined = {
            key: join_rows(parts, key, ids)
            for key, parts in (("prev_n_actions", actions), ("prev_n_rewards", rewards))
            if parts
        }
        batch.update(joined)
        return batch

    def _last_rows(
        self, episodes: Sequence[SingleAgentEpisode], fillers: FillerMemo
    ) -> dict[str, np.ndarray] | None:
        # None where the general path has to read (and maybe refuse) the episodes one by one.
        if not episodes or not all(ep.is_reset for ep in episodes):
            return None
        out: dict[str, np.ndarray] = {}
        try:  # a fill the columns refuse: the general path's error
            if self.n_actions:
                fillers.get(episodes[0].action_space, one_hot_discrete=self.one_hot_discrete)
                actions = last_prev_actions(
                    episodes, self.n_actions, self.fill, self.one_hot_discrete
                )
                if actions is None:
                    return None
                out["prev_n_actions"] = actions
            if self.n_rewards:
                fillers.get(_REWARDS)
                rewards = last_prev_rewards(episodes, self.n_rewards, self.fill)
                if rewards is None:
                    return None
                out["prev_n_rewards"] = rewards
        except Exception:  # noqa: BLE001 - the general path raises its own error for it
            return None
        return out

    def _actions(
        self, episode: SingleAgentEpisode, start: int, stop: int, fillers: FillerMemo
    ) -> Any:
        one_hot, space = self.one_hot_discrete, episode.action_space
        # Before the read: a fill that cannot fill the space is refused whether or not a row
        # needs padding; the rows then take the dtype the filler gives them (with a space,
        # the space's), so neither depends on where a chunk was cut.
        filler = fillers.get(space, one_hot_discrete=one_hot)
        if space is None:  # fill itself pads: a string one would turn numbers into strings
            refuse_text_fill(episode.actions, self.fill)
        value = episode.get_actions(
            slice(start - self.n_actions, stop - 1),
            neg_index_as_lookback=True,
            fill=self.fill,
            one_hot_discrete=one_hot,
        )
        finalized = episode.actions.finalized
        name = "PrevActionsPrevRewards' 'prev_n_actions' column"
        rows = as_arrays(value, self.fill, finalized=finalized, space=space, name=name)
        return _window_leaves(with_fill_dtype(rows, filler), self.n_actions)

    def _rewards(
        self, episode: SingleAgentEpisode, start: int, stop: int, fillers: FillerMemo
    ) -> Any:
        # The column holds float32 scalars: the fill is checked against them, as the actions'.
        fillers.get(_REWARDS)
        try:
            value = episode.get_rewards(
                slice(start - self.n_rewards, stop - 1), neg_index_as_lookback=True, fill=self.fill
            )
            rows = as_arrays(value, self.fill, finalized=episode.rewards.finalized)
        except ValueError:  # vector rewards padded with a number, or beside fillers
            _refuse_vector_rewards(episode.rewards.data, episode.id_)  # the lookback's too
            raise
        rewards = float32_rewards(rows, episode.id_, "PrevActionsPrevRewards", "prev_n_rewards")
        if rewards.ndim != 1:
            _refuse_vector_rewards(rewards, episode.id_)
        return _window_leaves(rewards, self.n_rewards)


def _refuse_vector_rewards(rewards: Any, id_: Any) -> None:
    """A ``ValueError`` for rewards that are not one number per step (a multi-objective env's).

    The column is ``[rows, n]``: vector rewards gave ``[rows, n, k]`` where the lookback held
    the window, and the getter's padding error where it did not.
    """
    shapes = set()
    for reward in rewards:
        try:
            shapes.add(np.shape(reward))
        except ValueError:  # a ragged item: the caller's error says more
            return
    shapes.discard(())
    if shapes:
        raise ValueError(
            f"PrevActionsPrevRewards: rewards must be one number per step (its "
            f"'prev_n_rewards' column is [rows, n]), got rewards of shape {min(shapes)} in "
            f"episode {id_!r}"
        )


def _count(ours: Any, rllib: Any, name: str, rllib_name: str) -> int:
    """A count given under our name or RLlib's (a port keeps its keywords); both must agree.

    Example:
        >>> _count(_DEFAULT_COUNT, 3, "n_actions", "n_prev_actions"), _count(2, None, "n", "x")
        (3, 2)
        >>> _count(1, 3, "n_actions", "n_prev_actions")  # a 1 given, not the default
        Traceback (most recent call last):
        ...
        ValueError: PrevActionsPrevRewards got n_actions=1 and n_prev_actions=3: give one of them
    """
    count = _whole_count(ours, f"PrevActionsPrevRewards' {name}", 0)
    if rllib is None:
        return count
    theirs = _whole_count(rllib, f"PrevActionsPrevRewards' {rllib_name}", 0)
    if ours is not _DEFAULT_COUNT and count != theirs:  # RLlib's keyword alone gives theirs
        raise ValueError(
            f"PrevActionsPrevRewards got {name}={count} and {rllib_name}={theirs}: give one of them"
        )
    return theirs

"""SingleAgentEpisode: one agent's trajectory chunk, column by column."""

from __future__ import annotations

import builtins
import uuid
from typing import Any, ClassVar, SupportsIndex, TypeVar, cast

import gymnasium as gym
import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.subclasses import subclass_attributes
from episodes.episode import chunks
from episodes.episode import state as snapshot
from episodes.episode.accessors import ColumnAccessors
from episodes.episode.fields import COLUMNS, FIELDS, FIELDS_BY_NAME
from episodes.episode.given_columns import (
    column_items,
    extra_columns,
    given_column,
    given_extras,
    infos_or_default,
    lookback_of,
)
from episodes.episode.recording import StepRecorder, id_text
from episodes.episode.returns import reward_sum
from episodes.episode.reward_values import check_reward_items, check_stacked_rewards
from episodes.episode.sample_batch import SampleBatch, data_dict, episode_batch
from episodes.indexing import as_int
from episodes.spaces.contains import checker_for

REWARD_SPACE = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
# The space checkers are derived from the spaces; they are not fields of their own.
_DERIVED_SLOTS = ("_obs_check", "_action_check")
_Episode = TypeVar("_Episode", bound="SingleAgentEpisode")  # chunks keep a subclass (§6)


def _checked_space(value: Any) -> Any:
    """The membership checker of an episode's space (None for None); TypeError for a non-space."""
    if value is None:
        return None
    if not isinstance(value, gym.Space):
        raise TypeError(f"a space must be a gymnasium Space or None, got {type(value).__name__}")
    return checker_for(value)


class SingleAgentEpisode(StepRecorder, ColumnAccessors):
    """One agent's trajectory chunk: observations, infos, actions, rewards, model outputs.

    Observations and infos run from the reset observation ``o_0`` to ``o_T``; actions, rewards
    and every extra-model-output from ``t=1`` to ``T``, so a started episode always holds one
    more observation than actions. Every column is an :class:`InfiniteLookbackBuffer`, so
    getters can reach into the previous chunk's data (the lookback).

    Args:
        id_: Episode id (a uuid4 hex when None).
        observations: Observations, a list or a ready buffer. Every column may also be
            another sequence of items (an array's rows) or a dict that is a batched struct
            (``given_columns.column_items``).
        observation_space: Space of one observation.
        infos: Info dicts, one per observation (default ``{}`` each).
        actions: Actions, a list or a ready buffer.
        action_space: Space of one action.
        rewards: Rewards, a list or a ready buffer.
        terminated: Whether the episode ended in a terminal state.
        truncated: Whether the episode was cut off (e.g. a time limit).
        extra_model_outputs: Dict of key -> list or buffer (e.g. ``action_logp``).
        t_started: Global time step of ``ts=0`` (default 0).
        len_lookback_buffer: How many leading items of the given data are lookback; ``"auto"``
            (or anything larger than ``len(rewards)``) makes all given data lookback.
        agent_id: Optional agent id.
        module_id: Optional module id.
        multi_agent_episode_id: Optional id of an enclosing multi-agent episode.

    Example:
        >>> ep = SingleAgentEpisode()
        >>> ep.add_env_reset(0)
        >>> ep.add_env_step(1, action=0, reward=1.0)
        >>> ep.add_env_step(2, action=1, reward=0.5, terminated=True)
        >>> len(ep), ep.get_return(), ep.is_done
        (2, 1.5, True)
    """

    __slots__ = (*(field.slot for field in FIELDS), *_DERIVED_SLOTS)

    #: True on a user's subclass, whose chunks (``cut``, slices) carry the attributes it adds.
    _adds_attributes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._adds_attributes = True

    # For type checkers only: the slots come from the field table above.
    id_: Any  # any value the user gives (a uuid4 hex string by default)
    agent_id: Any
    module_id: Any
    multi_agent_episode_id: Any
    observations: InfiniteLookbackBuffer
    infos: InfiniteLookbackBuffer
    actions: InfiniteLookbackBuffer
    rewards: InfiniteLookbackBuffer
    extra_model_outputs: dict[str, InfiniteLookbackBuffer]
    _is_terminated: bool  # behind the is_terminated / is_truncated properties (bools only)
    _is_truncated: bool
    t_started: int
    t: int
    _custom_data: dict[str, Any]
    _start_time: float | None
    _last_step_time: float | None

    def __init__(
        self,
        id_: Any = None,
        *,
        observations: Any = None,
        observation_space: gym.Space[Any] | None = None,
        infos: Any = None,
        actions: Any = None,
        action_space: gym.Space[Any] | None = None,
        rewards: Any = None,
        terminated: bool | np.bool_ = False,
        truncated: bool | np.bool_ = False,
        extra_model_outputs: dict[str, Any] | None = None,
        t_started: SupportsIndex | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_id: Any = None,
        module_id: Any = None,
        multi_agent_episode_id: Any = None,
    ):
        # Items first: a dict given as a column is a batch, and len() of it would count keys.
        observations, infos, actions, rewards = map(
            column_items, (observations, infos, actions, rewards), COLUMNS
        )
        extras = extra_columns(extra_model_outputs)
        lookback = lookback_of(len_lookback_buffer, len(rewards) if rewards is not None else 0)
        infos = infos_or_default(infos, observations)  # none given: one {} each, as RLlib
        given = [observations, infos, actions, rewards, *extras.values()]
        # The columns take their spaces before the episode is validated: a refused episode
        # leaves the caller's buffers with the spaces they had.
        saved = [(c, c.space) for c in given if isinstance(c, InfiniteLookbackBuffer)]
        try:
            self._assign(  # the columns take the episode's spaces (rewards: REWARD_SPACE)
                {
                    "id_": id_ if id_ is not None else uuid.uuid4().hex,
                    "agent_id": agent_id,
                    "module_id": module_id,
                    "multi_agent_episode_id": multi_agent_episode_id,
                    "observations": given_column(
                        observations, lookback, observation_space, "observations"
                    ),
                    "infos": given_column(infos, lookback, name="infos"),
                    "actions": given_column(actions, lookback, action_space, "actions"),
                    "rewards": given_column(rewards, lookback, name="rewards"),
                    "extra_model_outputs": given_extras(extras, lookback),
                    "is_terminated": terminated,
                    "is_truncated": truncated,
                    "t_started": 0 if t_started is None else as_int(t_started, what="t_started"),
                    "observation_space": observation_space,
                    "action_space": action_space,
                },
                to_columns=True,
            )
            self.validate()
        except BaseException:
            for column, space in saved:
                column.space = space
            raise

    @classmethod
    def from_fields(cls: type[_Episode], values: dict[str, Any]) -> _Episode:
        """An episode from one value per field of the field table, checked for consistency.

        Columns are given as buffers (taken over, not copied), each keeping its own space (the
        episode's spaces are not written into them, as :meth:`from_state` and unpickling keep
        every column's); a field left out takes its default, ``t`` defaults to ``t_started``
        plus the number of rewards, and ``id_`` left out is a fresh uuid4 hex, as in the
        constructor (a given None is kept, so that an episode whose id was set to None reads
        back from its state or from disk as it was).

        Raises:
            TypeError: A column that is not an ``InfiniteLookbackBuffer`` (extra model outputs:
                a dict of them), a flag that is no bool, ``t``/``t_started`` that are no
                integers, clocks that are no numbers, or ``custom_data`` that is not a dict.
            ValueError: A key that is not a field (all are named), or the values are
                inconsistent (column lengths, ``t``).

        Example:
            >>> buf = InfiniteLookbackBuffer
            >>> ep = SingleAgentEpisode.from_fields({"id_": "a", "observations": buf([0, 1]),
            ...     "infos": buf([{}, {}]), "actions": buf([1]), "rewards": buf([0.5]),
            ...     "extra_model_outputs": {}})
            >>> ep.id_, ep.t, ep.get_actions()
            ('a', 1, [1])
        """
        unknown = [key for key in values if key not in FIELDS_BY_NAME]
        if unknown:  # a misspelt flag ("terminated") would silently take its default
            raise ValueError(f"from_fields: {unknown} are not fields of the episode")
        if "id_" not in values:
            values = {**values, "id_": uuid.uuid4().hex}
        episode = cls.__new__(cls)
        try:
            episode._assign(values, to_columns=False)
            episode.validate()
        except AssertionError as err:
            raise ValueError(f"inconsistent episode state: {err}") from err
        return episode

    def _assign(self, values: dict[str, Any], *, to_columns: bool) -> None:
        snapshot.assign_fields(self, values)  # each value checked for its field's kind
        if "t" not in values:
            self.t = self.t_started + len(self.rewards)
        if not to_columns:  # from_fields: every column keeps its own space (contract 7.3)
            self._set_checkers()
            return
        if self.rewards.space is None:
            self.rewards.space = REWARD_SPACE
        # The setters give the columns their spaces and build the checkers.
        obs_space, action_space = self._observation_space, self._action_space
        self.observation_space = obs_space if obs_space is not None else self.observations.space
        self.action_space = action_space if action_space is not None else self.actions.space

    def _set_checkers(self) -> None:
        """The space checkers of the episode's spaces, its columns' spaces left as they are."""
        self._obs_check = _checked_space(self._observation_space)
        self._action_check = _checked_space(self._action_space)

    def field_values(self) -> dict[str, Any]:
        """Every field of the field table by name, live: columns are the buffers themselves.

        What :meth:`get_state` snapshots (copied, spaces as dicts) and :meth:`from_fields`
        takes back.

        Example:
            >>> SingleAgentEpisode("x").field_values()["id_"]
            'x'
        """
        return {field.name: getattr(self, field.slot) for field in FIELDS}

    # ----------------------------------------------------------------------------- properties
    @property
    def observation_space(self) -> gym.Space[Any] | None:
        """Space of one observation (also the observation buffer's, used to check items).

        Example:
            >>> ep = SingleAgentEpisode(observation_space=gym.spaces.Discrete(3))
            >>> ep.observation_space, ep.observations.space
            (Discrete(3), Discrete(3))
        """
        return self._observation_space

    @observation_space.setter
    def observation_space(self, value: gym.Space[Any] | None) -> None:
        check = _checked_space(value)  # before anything changes
        self.observations.space = value
        self._observation_space, self._obs_check = value, check

    @property
    def action_space(self) -> gym.Space[Any] | None:
        """Space of one action (also the action buffer's, used to check items).

        Example:
            >>> SingleAgentEpisode(action_space=gym.spaces.Discrete(2)).action_space
            Discrete(2)
        """
        return self._action_space

    @action_space.setter
    def action_space(self, value: gym.Space[Any] | None) -> None:
        check = _checked_space(value)
        self.actions.space = value
        self._action_space, self._action_check = value, check

    @property
    def custom_data(self) -> dict[str, Any]:
        """A free dict carried through cut, slice, concat and state.

        Example:
            >>> ep = SingleAgentEpisode(observations=[0])
            >>> ep.custom_data["seed"] = 7
            >>> SingleAgentEpisode.from_state(ep.get_state()).custom_data
            {'seed': 7}
        """
        return self._custom_data

    @property
    def is_reset(self) -> bool:
        """True once the episode holds an observation.

        Example:
            >>> SingleAgentEpisode().is_reset, SingleAgentEpisode(observations=[0]).is_reset
            (False, True)
        """
        return self.observations.len_incl_lookback() > self.observations.lookback

    @property
    def is_numpy(self) -> bool:
        """True after :meth:`to_numpy`.

        Example:
            >>> ep = SingleAgentEpisode(observations=[0])
            >>> ep.is_numpy, ep.to_numpy().is_numpy
            (False, True)
        """
        return self.rewards.finalized

    def __len__(self) -> int:
        return self.t - self.t_started

    def env_steps(self) -> int:
        """Number of env steps in this chunk (``len(self)``).

        Example:
            >>> ep = SingleAgentEpisode(
            ...     observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
            ...     len_lookback_buffer=0,
            ... )
            >>> ep.env_steps(), ep.cut().env_steps()
            (2, 0)
        """
        return self.t - self.t_started

    def agent_steps(self) -> int:
        """Number of agent steps in this chunk (``len(self)``; one agent acts every env step).

        Example:
            >>> ep = SingleAgentEpisode(
            ...     observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
            ... )
            >>> ep.agent_steps()
            1
        """
        return self.t - self.t_started

    # --------------------------------------------------------------------------------- checks
    def validate(self) -> None:
        """Checks the length invariants between columns.

        Raises:
            AssertionError: A column has the wrong length or is no buffer (the message says which).

        Example:
            >>> SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[0.0]).validate()
        """
        n_obs = len(self.observations)
        expected = n_obs - 1 if n_obs else 0
        n_rewards = len(self.rewards)
        consistent = (
            len(self.infos) == n_obs
            and len(self.actions) == expected
            and n_rewards == expected
            and all(len(column) == expected for column in self._extra_buffers())
        )
        if not consistent:
            self._raise_inconsistent(n_obs)
        if n_rewards != self.t - self.t_started:
            raise AssertionError(
                f"t={self.t} and t_started={self.t_started} (t - t_started = "
                f"{self.t - self.t_started}) but there are {len(self.rewards)} rewards after "
                "the lookback"
            )

    def _raise_inconsistent(self, n_obs: int) -> None:
        lengths = {
            "infos": len(self.infos),
            "actions": len(self.actions),
            "rewards": len(self.rewards),
            **{f"extra_model_outputs[{k!r}]": len(v) for k, v in self.extra_model_outputs.items()},
        }
        if n_obs == 0:
            raise AssertionError(
                f"an episode without observations must hold no other items, found {lengths}"
            )
        raise AssertionError(
            f"column lengths disagree with {n_obs} observations (expected infos == "
            "observations == actions + 1 == rewards + 1 == each extra-model-output + 1): "
            f"{lengths}"
        )

    # -------------------------------------------------------------------------- conversions
    def to_numpy(self: _Episode) -> _Episode:
        """Turns every column but infos into numpy arrays; returns ``self``.

        Raises:
            ValueError: A column's items cannot be stacked (differing shapes or structures),
                or a reward is no number (a string, None, a dict); the episode stays in list
                mode.

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[0.5])
            >>> ep.to_numpy().get_observations(slice(None, None), neg_index_as_lookback=False)
            array([1])
        """
        self.validate()
        # Every column is stacked before any is switched, so a column that cannot be stacked
        # leaves the whole episode in list mode. Infos stay lists.
        stacked = []
        for name, column in self.named_columns().items():
            if name != "infos" and not column.finalized:
                try:
                    stacked.append((column, column.stacked()))
                except ValueError as error:
                    if name == "rewards":  # a number beside a string: name the odd one
                        check_reward_items(column.store.pylist or [])
                    raise ValueError(f"to_numpy: {name} cannot be stacked: {error}") from error
                if name == "rewards":  # numpy would turn [1.0, "x"] into strings
                    check_stacked_rewards(stacked[-1][1], column.store.pylist or [])
        for column, columns in stacked:
            column.adopt_store(columns)
        return self

    def get_return(self) -> float:
        """Undiscounted sum of the rewards after the lookback.

        Example:
            >>> SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 2.0],
            ...                    len_lookback_buffer=0).get_return()
            3.0
        """
        return reward_sum(self.rewards.get())

    def get_duration_s(self) -> float:
        """Wall seconds between the first and the last recorded step (0.0 before any step).

        Example:
            >>> SingleAgentEpisode().get_duration_s()
            0.0
        """
        if self._last_step_time is None or self._start_time is None:
            return 0.0
        return self._last_step_time - self._start_time

    def get_data_dict(self) -> dict[str, Any]:
        """Training columns, one row per step after the lookback (see ``SampleBatch``).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
            >>> ep.get_data_dict()["obs"]
            [0]
        """
        return data_dict(self)

    def get_sample_batch(self) -> SampleBatch:
        """:meth:`get_data_dict` as a :class:`SampleBatch`.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
            >>> len(ep.get_sample_batch())
            1
        """
        return episode_batch(self)

    # ------------------------------------------------------------------------------- chunking
    def cut(self: _Episode, len_lookback_buffer: int = 0) -> _Episode:
        """A successor chunk starting where this one ends (see ``episodes.episode.chunks.cut``).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
            >>> nxt = ep.cut(len_lookback_buffer=1); (nxt.t_started, len(nxt))
            (1, 0)
        """
        return cast(_Episode, chunks.cut(self, len_lookback_buffer))

    def slice(
        self: _Episode, slice_: builtins.slice, *, len_lookback_buffer: int | None = None
    ) -> _Episode:
        """A new episode for steps ``slice_.start .. slice_.stop`` (see ``chunks.slice_episode``).

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 1, 2],
            ...                         rewards=[0.0, 1.0, 2.0], len_lookback_buffer=0)
            >>> ep.slice(slice(1, 2)).get_observations()
            [1, 2]
        """
        piece = chunks.slice_episode(self, slice_, len_lookback_buffer=len_lookback_buffer)
        return cast(_Episode, piece)

    def __getitem__(self: _Episode, item: builtins.slice) -> _Episode:
        if not isinstance(item, slice):
            raise TypeError(
                f"episodes support only slices (ep[a:b]), got {type(item).__name__}; use the "
                "getters for single time steps"
            )
        return cast(_Episode, chunks.slice_episode(self, item))

    def concat_episode(self, other: SingleAgentEpisode) -> None:
        """Appends the successor chunk ``other`` in place (see ``chunks.concat``).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
            >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 1.0); ep.concat_episode(nxt); len(ep)
            2
        """
        chunks.concat(self, other)

    # ---------------------------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """A dict of plain Python/numpy values that :meth:`from_state` turns back into ``self``.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> SingleAgentEpisode.from_state(ep.get_state()).get_observations()
            [0]
        """
        return snapshot.get_state(self)

    @classmethod
    def from_state(cls: type[_Episode], state: dict[str, Any]) -> _Episode:
        """Rebuilds an episode from :meth:`get_state`, refusing incomplete or inconsistent states.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> SingleAgentEpisode.from_state(ep.get_state()).id_ == ep.id_
            True
        """
        return cast(_Episode, snapshot.from_state(cls, state))

    def __getstate__(self) -> dict[str, Any]:
        # The space checkers are closures (not picklable); they are rebuilt on unpickling.
        state = {name: getattr(self, name) for name in _OWN_STATE}
        # A subclass's own attributes travel too (its slots and its __dict__), as RLlib's do.
        state.update(subclass_attributes(self, SingleAgentEpisode))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Each column keeps the space it was pickled with, as from_state keeps it.
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._set_checkers()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SingleAgentEpisode):
            return NotImplemented
        return snapshot.episodes_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The episode as one object, so numpy holds episodes as items of object arrays.

        Having ``len`` and ``[...]``, an episode would pass for a sequence of its steps, and
        numpy's ``Could not convert object to sequence`` ended ``rng.choice(episodes, 2)``,
        ``rng.permutation(episodes)`` or ``np.array(episodes, dtype=object)``.

        Raises:
            TypeError: A ``dtype`` other than ``object``: an episode is no array of numbers
                (read its columns with the getters).

        Example:
            >>> eps = [SingleAgentEpisode(i, observations=[0]) for i in "abc"]
            >>> picked = np.random.default_rng(0).choice(eps, 2, replace=False)
            >>> picked.shape, [ep.id_ for ep in picked]
            ((2,), ['b', 'c'])
        """
        if dtype is not None and np.dtype(dtype) != object:
            raise TypeError(
                f"an episode is no array of {np.dtype(dtype)}: read its columns with the getters"
            )
        item = np.empty((), object)
        item[()] = self
        return item

    def __repr__(self) -> str:
        try:  # a list-mode episode may hold rewards that do not sum (None, a tensor)
            ret = f"{self.get_return():.4g}"
        except Exception:  # noqa: BLE001 - a repr never fails on what the rewards hold
            ret = "?"
        return (
            f"SingleAgentEpisode(len={len(self)}, done={self.is_done}, return={ret}, "
            f"id_={id_text(self.id_)})"
        )


_OWN_STATE = tuple(name for name in SingleAgentEpisode.__slots__ if name not in _DERIVED_SLOTS)

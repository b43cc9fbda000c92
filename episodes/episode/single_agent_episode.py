"""SingleAgentEpisode: one agent's trajectory chunk, column by column."""

from __future__ import annotations

import builtins
import inspect
import time
import uuid
from typing import Any

import gymnasium as gym
import numpy as np

from episodes import _accel
from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer import columns as _columns
from episodes.episode import chunks, state
from episodes.episode.sample_batch import SampleBatch, data_dict
from episodes.indexing import Index as Indices
from episodes.spaces.contains import checker_for

_now = time.perf_counter

REWARD_SPACE = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)


def _column(
    data: Any, lookback: int, space: gym.Space[Any] | None = None
) -> InfiniteLookbackBuffer:
    if isinstance(data, InfiniteLookbackBuffer):
        if space is not None and data.space is None:
            data.space = space
        return data
    if data is not None and not isinstance(data, list):
        data = list(data)
    return InfiniteLookbackBuffer(data, lookback=lookback, space=space)


class SingleAgentEpisode:
    """One agent's trajectory chunk: observations, infos, actions, rewards, model outputs.

    Observations and infos run from the reset observation ``o_0`` to ``o_T``; actions, rewards
    and every extra-model-output from ``t=1`` to ``T``, so a started episode always holds one
    more observation than actions. Every column is an :class:`InfiniteLookbackBuffer`, so
    getters can reach into the previous chunk's data (the lookback).

    Args:
        id_: Episode id (a uuid4 hex when None).
        observations: Observations, a list or a ready buffer.
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

    __slots__ = (
        "id_",
        "agent_id",
        "module_id",
        "multi_agent_episode_id",
        "observations",
        "infos",
        "actions",
        "rewards",
        "extra_model_outputs",
        "is_terminated",
        "is_truncated",
        "t_started",
        "t",
        "_observation_space",
        "_action_space",
        "_obs_check",
        "_action_check",
        "_custom_data",
        "_start_time",
        "_last_step_time",
    )

    def __init__(
        self,
        id_: str | None = None,
        *,
        observations: Any = None,
        observation_space: gym.Space[Any] | None = None,
        infos: Any = None,
        actions: Any = None,
        action_space: gym.Space[Any] | None = None,
        rewards: Any = None,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Any] | None = None,
        t_started: int | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_id: Any = None,
        module_id: Any = None,
        multi_agent_episode_id: Any = None,
    ):
        len_rewards = len(rewards) if rewards is not None else 0
        if len_lookback_buffer == "auto":
            lookback = len_rewards
        elif isinstance(len_lookback_buffer, (int, np.integer)) and not isinstance(
            len_lookback_buffer, bool
        ):
            if len_lookback_buffer < 0:
                raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}")
            lookback = min(int(len_lookback_buffer), len_rewards)
        else:
            raise ValueError(
                f"len_lookback_buffer must be 'auto' or an int >= 0, got {len_lookback_buffer!r}"
            )
        if infos is None:
            n_obs = len(observations) if observations is not None else 0
            infos = [{} for _ in range(n_obs)]
        self.id_ = id_ if id_ is not None else uuid.uuid4().hex
        self.agent_id = agent_id
        self.module_id = module_id
        self.multi_agent_episode_id = multi_agent_episode_id
        self.observations = _column(observations, lookback, observation_space)
        self.infos = _column(infos, lookback)
        self.actions = _column(actions, lookback, action_space)
        self.rewards = _column(rewards, lookback, REWARD_SPACE)
        self.extra_model_outputs = {
            key: _column(value, lookback) for key, value in (extra_model_outputs or {}).items()
        }
        self.observation_space = (
            observation_space if observation_space is not None else self.observations.space
        )
        self.action_space = action_space if action_space is not None else self.actions.space
        self.is_terminated = bool(terminated)
        self.is_truncated = bool(truncated)
        self.t_started = int(t_started or 0)
        self.t = self.t_started + len(self.rewards)
        self._custom_data: dict[str, Any] = {}
        self._start_time: float | None = None
        self._last_step_time: float | None = None
        self.validate()

    # ----------------------------------------------------------------------------- properties
    @property
    def observation_space(self) -> gym.Space[Any] | None:
        """Space of one observation."""
        return self._observation_space

    @observation_space.setter
    def observation_space(self, value: gym.Space[Any] | None) -> None:
        self._observation_space = self.observations.space = value
        self._obs_check = checker_for(value) if value is not None else None

    @property
    def action_space(self) -> gym.Space[Any] | None:
        """Space of one action."""
        return self._action_space

    @action_space.setter
    def action_space(self, value: gym.Space[Any] | None) -> None:
        self._action_space = self.actions.space = value
        self._action_check = checker_for(value) if value is not None else None

    @property
    def custom_data(self) -> dict[str, Any]:
        """A free dict carried through cut, slice, concat and state."""
        return self._custom_data

    @property
    def is_reset(self) -> bool:
        """True once the episode holds an observation."""
        return self.observations.len_incl_lookback() > self.observations.lookback

    @property
    def is_numpy(self) -> bool:
        """True after :meth:`to_numpy`."""
        return self.rewards.finalized

    @property
    def is_done(self) -> bool:
        """True if terminated or truncated."""
        return self.is_terminated or self.is_truncated

    def __len__(self) -> int:
        return self.t - self.t_started

    def env_steps(self) -> int:
        """Number of env steps in this chunk (``len(self)``)."""
        return self.t - self.t_started

    def agent_steps(self) -> int:
        """Number of agent steps in this chunk (``len(self)``)."""
        return self.t - self.t_started

    # -------------------------------------------------------------------------------- writing
    def add_env_reset(self, observation: Any, infos: dict[str, Any] | None = None) -> None:
        """Records the reset observation ``o_0``; only on an empty, fresh episode.

        Raises:
            AssertionError: The episode already holds data, is done, or ``t != 0``.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset([0.0, 1.0]); ep.is_reset
            True
        """
        if self.is_reset or self.observations.len_incl_lookback() or self.is_done:
            raise AssertionError(
                "add_env_reset needs an empty, not-done episode; this one already holds "
                f"{self.observations.len_incl_lookback()} observations (done={self.is_done})"
            )
        if not (self.t == self.t_started == 0):
            raise AssertionError(
                f"add_env_reset needs t == t_started == 0, got t={self.t}, "
                f"t_started={self.t_started}"
            )
        if self.is_numpy:
            if self._obs_check is not None and not self._obs_check(observation):
                _raise_not_in_space(self._observation_space, observation, "observation")
        self.observations.append(observation)
        self.infos.append(infos if infos is not None else {})
        self._start_time = time.perf_counter()

    def add_env_step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        infos: dict[str, Any] | None = None,
        *,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Any] | None = None,
    ) -> None:
        """Records one env step: the action taken, the reward and the next observation.

        Raises:
            AssertionError: The episode is done or not reset, or ``extra_model_outputs`` keys
                differ from the keys the episode already records. Nothing is changed.
            ValueError: A numpy'd episode with spaces gets an observation or action outside
                them. Nothing is changed.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 1.0, extra_model_outputs={"vf_preds": 0.3}); ep.t
            1
        """
        if self.is_terminated or self.is_truncated:
            raise AssertionError("the episode is done: it accepts no more steps")
        try:
            obs_items = self.observations._items
            act_items = self.actions._items
            reward_items = self.rewards._items
            if obs_items is not None and act_items is not None and reward_items is not None:
                # List mode, the common case while sampling: append straight to the lists.
                if not obs_items:
                    raise AssertionError("add_env_step needs add_env_reset (or observations) first")
                obs_items.append(observation)
                act_items.append(action)
                reward_items.append(reward)
            else:
                obs_cols = self.observations._columns
                act_cols = self.actions._columns
                reward_cols = self.rewards._columns
                if obs_cols is not None and act_cols is not None and reward_cols is not None:
                    # Numpy mode: the space checks, then straight into the growable columns.
                    if not obs_cols.size:
                        raise AssertionError(
                            "add_env_step needs add_env_reset (or observations) first"
                        )
                    obs_check, action_check = self._obs_check, self._action_check
                    if obs_check is not None and not obs_check(observation):
                        _raise_not_in_space(self._observation_space, observation, "observation")
                    if action_check is not None and not action_check(action):
                        _raise_not_in_space(self._action_space, action, "action")
                    obs_cols.append(observation)
                    act_cols.append(action)
                    reward_cols.append(reward)
                else:  # mixed modes (a column finalized on its own): through the buffers
                    self._check_step(observation, action)  # every space check before any write
                    _append(self.observations, observation)
                    _append(self.actions, action)
                    _append(self.rewards, reward)
            emo = self.extra_model_outputs
            if extra_model_outputs is not None:
                # Optimistic: one dict lookup per key instead of comparing key sets every
                # step. A new or missing key undoes this step's writes and takes the checked
                # path.
                if len(extra_model_outputs) == len(emo):
                    try:
                        for key, value in extra_model_outputs.items():
                            column = emo[key]
                            items = column._items
                            if items is not None:
                                items.append(value)
                            else:
                                column._columns.append(value)  # type: ignore[union-attr]
                    except KeyError as unknown:
                        _undo_appends(emo, extra_model_outputs, unknown.args[0])
                        self._add_new_extras(extra_model_outputs)
                else:
                    self._add_new_extras(extra_model_outputs)
            elif emo:
                self._add_new_extras({})
            info_items = self.infos._items
            if info_items is not None:
                info_items.append(infos if infos is not None else {})
            else:
                self.infos.append(infos if infos is not None else {})
        except _NotInSpaceError:
            raise  # raised before any write
        except (ValueError, TypeError) as error:
            # A numpy column refused its value (wrong shape or type) after others took theirs.
            self._undo_partial_step(error)
        self.t += 1
        # Both flags are False here (checked above), so only a finishing step writes them.
        if terminated or truncated:
            self.is_terminated = bool(terminated)
            self.is_truncated = bool(truncated)
        self._last_step_time = now = _now()
        if self._start_time is None:
            self._start_time = now

    def _add_new_extras(self, extra_model_outputs: dict[str, Any]) -> None:
        try:
            # This step's action is already appended: the steps before it are one fewer.
            self._check_new_keys(extra_model_outputs, len(self.actions) - 1)
        except AssertionError:
            # Leave the episode as it was: take back this step's observation/action/reward.
            for column in (self.observations, self.actions, self.rewards):
                column.pop()
            raise
        emo = self.extra_model_outputs
        for key, value in extra_model_outputs.items():
            if key in emo:
                emo[key].append(value)
            else:
                emo[key] = InfiniteLookbackBuffer([value])

    def _check_step(self, observation: Any, action: Any) -> None:
        # Numpy (or mixed) mode: check against the spaces before anything is written.
        if not self.observations.len_incl_lookback():
            raise AssertionError("add_env_step needs add_env_reset (or observations) first")
        if self.rewards._columns is not None:
            obs_check, action_check = self._obs_check, self._action_check
            if obs_check is not None and not obs_check(observation):
                _raise_not_in_space(self._observation_space, observation, "observation")
            if action_check is not None and not action_check(action):
                _raise_not_in_space(self._action_space, action, "action")

    def _undo_partial_step(self, error: Exception) -> None:
        """Takes back what a failed step wrote, then raises a ValueError naming the column.

        Each column got at most one item this step, so the columns holding more steps than
        the fewest are exactly the ones written to.
        """
        # In write order, so the first column left short is the one that refused its value.
        columns = self._named_columns()
        # Observations and infos hold one item more than the steps (the reset observation).
        steps = {
            name: len(column) - (name in ("observations", "infos"))
            for name, column in columns.items()
        }
        before = min(steps.values())
        refused = [name for name, n in steps.items() if n == before]
        for name, n in steps.items():
            if n > before:
                columns[name].pop()
        raise ValueError(
            f"add_env_step: the value for {refused[0]} cannot be stored in the episode's "
            f"numpy column ({error}); nothing was recorded"
        ) from error

    def _named_columns(self) -> dict[str, InfiniteLookbackBuffer]:
        """Every column under the name errors use, in the order ``add_env_step`` writes them."""
        return {
            "observations": self.observations,
            "actions": self.actions,
            "rewards": self.rewards,
            **{f"extra_model_outputs[{k!r}]": c for k, c in self.extra_model_outputs.items()},
            "infos": self.infos,
        }

    def _check_new_keys(self, given: dict[str, Any], steps_before: int) -> None:
        known, new = set(self.extra_model_outputs), set(given)
        missing = known - new
        if missing:
            raise AssertionError(
                f"extra_model_outputs is missing keys {sorted(missing)} that this episode "
                f"records; every step must give all of {sorted(known)}"
            )
        if steps_before > 0:
            raise AssertionError(
                f"extra_model_outputs keys {sorted(new - known)} are new, but the episode "
                f"already holds {steps_before} steps without them; give every key from "
                "the first step of the chunk"
            )

    # -------------------------------------------------------------------------------- getters
    def get_observations(
        self,
        indices: Indices = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
        one_hot_discrete: bool = False,
    ) -> Any:
        """Reads observations with the buffer index rules (see ``InfiniteLookbackBuffer.get``).

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1, 1],
            ...                         len_lookback_buffer=1)
            >>> ep.get_observations(-1, neg_index_as_lookback=True)
            0
        """
        return self.observations.get(
            indices,
            neg_index_as_lookback=neg_index_as_lookback,
            fill=fill,
            one_hot_discrete=one_hot_discrete,
        )

    def get_infos(
        self, indices: Indices = None, *, neg_index_as_lookback: bool = False, fill: Any = None
    ) -> Any:
        """Reads infos with the buffer index rules.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0, {"a": 1}); ep.get_infos(0)
            {'a': 1}
        """
        return self.infos.get(indices, neg_index_as_lookback=neg_index_as_lookback, fill=fill)

    def get_actions(
        self,
        indices: Indices = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
        one_hot_discrete: bool = False,
    ) -> Any:
        """Reads actions with the buffer index rules; the connector idiom is fast.

        Example:
            >>> ep = SingleAgentEpisode(action_space=gym.spaces.Discrete(2))
            >>> ep.add_env_reset(0); ep.add_env_step(1, 1, 0.0)
            >>> ep.get_actions(slice(-2, 1), neg_index_as_lookback=True, fill=0,
            ...                one_hot_discrete=True)[-1]
            array([0., 1.], dtype=float32)
        """
        return self.actions.get(
            indices,
            neg_index_as_lookback=neg_index_as_lookback,
            fill=fill,
            one_hot_discrete=one_hot_discrete,
        )

    def get_rewards(
        self,
        indices: Indices = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
        one_hot_discrete: bool = False,
    ) -> Any:
        """Reads rewards with the buffer index rules.

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[2.0],
            ...                         len_lookback_buffer=0)
            >>> ep.get_rewards(slice(0, 3), fill=0.0)
            [2.0, array(0., dtype=float32), array(0., dtype=float32)]
        """
        return self.rewards.get(
            indices,
            neg_index_as_lookback=neg_index_as_lookback,
            fill=fill,
            one_hot_discrete=one_hot_discrete,
        )

    def get_extra_model_outputs(
        self,
        key: str,
        indices: Indices = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
    ) -> Any:
        """Reads one extra-model-output column with the buffer index rules.

        Raises:
            KeyError: ``key`` is not recorded (the message names the known keys).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 0.0, extra_model_outputs={"logp": -0.7})
            >>> ep.get_extra_model_outputs("logp")
            [-0.7]
        """
        column = self.extra_model_outputs.get(key)
        if column is None:
            raise KeyError(
                f"no extra-model-output {key!r}; known keys: {sorted(self.extra_model_outputs)}"
            )
        return column.get(indices, neg_index_as_lookback=neg_index_as_lookback, fill=fill)

    # -------------------------------------------------------------------------------- setters
    def set_observations(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites observations (buffer ``set`` rules).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.set_observations(new_data=5, at_indices=0); ep.get_observations(0)
            5
        """
        self.observations.set(
            new_data, at_indices=at_indices, neg_index_as_lookback=neg_index_as_lookback
        )

    def set_actions(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites actions (buffer ``set`` rules).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 0.0)
            >>> ep.set_actions(new_data=[1]); ep.get_actions()
            [1]
        """
        self.actions.set(
            new_data, at_indices=at_indices, neg_index_as_lookback=neg_index_as_lookback
        )

    def set_rewards(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites rewards (buffer ``set`` rules).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 0.0)
            >>> ep.set_rewards(new_data=2.0, at_indices=-1); ep.get_rewards()
            [2.0]
        """
        self.rewards.set(
            new_data, at_indices=at_indices, neg_index_as_lookback=neg_index_as_lookback
        )

    def set_extra_model_outputs(
        self,
        *,
        key: str,
        new_data: Any,
        at_indices: Indices = None,
        neg_index_as_lookback: bool = False,
    ) -> None:
        """Overwrites an existing extra-model-output column (buffer ``set`` rules).

        Raises:
            AssertionError: ``key`` is unknown (the message names the known keys).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 0.0, extra_model_outputs={"v": 0.0})
            >>> ep.set_extra_model_outputs(key="v", new_data=[1.0]); ep.get_extra_model_outputs("v")
            [1.0]
        """
        column = self.extra_model_outputs.get(key)
        if column is None:
            raise AssertionError(
                f"cannot set unknown extra-model-output {key!r}; known keys: "
                f"{sorted(self.extra_model_outputs)}"
            )
        column.set(new_data, at_indices=at_indices, neg_index_as_lookback=neg_index_as_lookback)

    # --------------------------------------------------------------------------------- checks
    def validate(self) -> None:
        """Checks the length invariants between columns.

        Raises:
            AssertionError: A column has the wrong number of items (the message says which).

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
            and all(len(column) == expected for column in self.extra_model_outputs.values())
        )
        if not consistent:
            self._raise_inconsistent(n_obs)
        if n_rewards != self.t - self.t_started:
            raise AssertionError(
                f"t - t_started = {self.t - self.t_started} but there are {len(self.rewards)} "
                "rewards after the lookback"
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
    def to_numpy(self) -> SingleAgentEpisode:
        """Turns every column but infos into numpy arrays; returns ``self``.

        Raises:
            ValueError: A column's items cannot be stacked (differing shapes or structures);
                the episode stays in list mode.

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[0.5])
            >>> ep.to_numpy().get_observations(slice(None, None), neg_index_as_lookback=False)
            array([1])
        """
        self.validate()
        # Every column is stacked before any is switched, so a column that cannot be stacked
        # leaves the whole episode in list mode. Infos stay lists.
        stacked = []
        for name, column in self._named_columns().items():
            if name != "infos" and not column.finalized:
                try:
                    stacked.append((column, column.stacked()))
                except ValueError as error:
                    raise ValueError(f"to_numpy: {name} cannot be stacked: {error}") from error
        for column, columns in stacked:
            column.adopt_columns(columns)
        return self

    def get_return(self) -> float:
        """Undiscounted sum of the rewards after the lookback.

        Example:
            >>> SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 2.0],
            ...                    len_lookback_buffer=0).get_return()
            3.0
        """
        rewards = self.rewards.get()
        return float(np.sum(rewards)) if len(rewards) else 0.0

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
        return SampleBatch(data_dict(self))

    # ------------------------------------------------------------------------------- chunking
    def cut(self, len_lookback_buffer: int = 0) -> SingleAgentEpisode:
        """A successor chunk starting where this one ends (see ``episodes.episode.chunks.cut``).

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
            >>> nxt = ep.cut(len_lookback_buffer=1); (nxt.t_started, len(nxt))
            (1, 0)
        """
        return chunks.cut(self, len_lookback_buffer)

    def slice(
        self, slice_: builtins.slice, *, len_lookback_buffer: int | None = None
    ) -> SingleAgentEpisode:
        """A new episode for steps ``slice_.start .. slice_.stop`` (see ``chunks.slice_episode``).

        Example:
            >>> ep = SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 1, 2],
            ...                         rewards=[0.0, 1.0, 2.0], len_lookback_buffer=0)
            >>> ep.slice(slice(1, 2)).get_observations()
            [1, 2]
        """
        return chunks.slice_episode(self, slice_, len_lookback_buffer=len_lookback_buffer)

    def __getitem__(self, item: builtins.slice) -> SingleAgentEpisode:
        if not isinstance(item, slice):
            raise TypeError(
                f"episodes support only slices (ep[a:b]), got {type(item).__name__}; use the "
                "getters for single time steps"
            )
        return chunks.slice_episode(self, item)

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
        return state.get_state(self)

    @classmethod
    def from_state(cls, episode_state: dict[str, Any]) -> SingleAgentEpisode:
        """Rebuilds an episode from :meth:`get_state`, refusing incomplete or inconsistent states.

        Example:
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> SingleAgentEpisode.from_state(ep.get_state()).id_ == ep.id_
            True
        """
        return state.from_state(cls, episode_state)

    def __getstate__(self) -> dict[str, Any]:
        # The space checkers are closures (not picklable); they are rebuilt on unpickling.
        return {
            name: getattr(self, name)
            for name in self.__slots__
            if name not in ("_obs_check", "_action_check")
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.observation_space = state["_observation_space"]
        self.action_space = state["_action_space"]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SingleAgentEpisode):
            return NotImplemented
        return state.episodes_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"SingleAgentEpisode(len={len(self)}, done={self.is_done}, "
            f"return={self.get_return():.4g}, id_={self.id_})"
        )


def _undo_appends(
    emo: dict[str, InfiniteLookbackBuffer], values: dict[str, Any], stop: str
) -> None:
    """Pops what the optimistic append loop wrote for the keys before ``stop``."""
    for key in values:
        if key == stop:
            return
        emo[key].pop()


def _append(column: InfiniteLookbackBuffer, item: Any) -> None:
    # Straight to the numpy storage when there is one; skips a method layer per column.
    storage = column._columns
    if storage is not None:
        storage.append(item)
    else:
        column.append(item)


class _NotInSpaceError(ValueError):
    """A value given to a numpy'd episode lies outside the episode's space."""


def _raise_not_in_space(space: Any, value: Any, what: str) -> None:
    raise _NotInSpaceError(f"{what} {value!r} is not in the episode's {what} space {space}")


def _install_speedups() -> None:
    """Puts the C ``add_env_step`` in place when the accelerator is built.

    The C method handles the plain list-mode and numpy-mode step and passes every other call,
    unchanged, to the Python method above, which stays reachable as ``_add_env_step_python``
    (the reference the tests compare the C path against).
    """
    python_step = SingleAgentEpisode.add_env_step
    setattr(SingleAgentEpisode, "_add_env_step_python", python_step)  # noqa: B010
    if _accel.speedups is None:
        return
    # A C method states its signature in a leading "name($self, ...)\n--\n\n" line, without
    # annotations (inspect cannot parse them there).
    parameters = list(inspect.signature(python_step).parameters.values())[1:]
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    arguments = str(inspect.Signature(bare))[1:]
    signature = f"add_env_step($self, {arguments}\n--\n\n"
    fast_step = _accel.speedups.bind(
        episode_type=SingleAgentEpisode,
        buffer_type=InfiniteLookbackBuffer,
        columns_type=_columns.Columns,
        slow=python_step,
        clock=_now,
        integers=_columns._INTEGERS,
        max_pending=_columns._MAX_PENDING,
        doc=signature + inspect.cleandoc(python_step.__doc__ or ""),
    )
    setattr(SingleAgentEpisode, "add_env_step", fast_step)  # noqa: B010


_install_speedups()

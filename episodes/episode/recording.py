"""Recording steps: ``add_env_reset`` and ``add_env_step``, mixed into the episode class.

Every check runs before the first write, except one: a numpy column judges the value it is
given (shape, dtype) only when it stores it, so a step that a column refuses is taken back
column by column and reported as a ``ValueError`` naming that column.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode.reward_values import is_real, needs_real_check
from episodes.indexing import as_flag
from episodes.structs import short_repr, sorted_keys

if TYPE_CHECKING:
    from episodes.spaces.contains import Checker

_now = time.perf_counter
# Types whose falsy values RLlib's ``infos or {}`` turns into ``{}`` (see ``given_info``).
_FALSY_TYPES = (dict, list, tuple, set, str, bytes, int, float, np.number, np.bool_)
# Exact classes that ``is_real`` accepts, tested by identity first on the per-step path.
_PLAIN_REALS = frozenset((float, int, bool, np.float64, np.float32))


def _outside(space: Any, value: Any, what: str) -> ValueError:
    return ValueError(
        f"{what} {short_repr(value)} is not in the episode's {what} space {short_repr(space)}"
    )


class StepRecorder:
    """``add_env_reset`` / ``add_env_step`` over the episode's column buffers.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
        >>> ep.add_env_step(1, 0, 1.0, terminated=True)
        >>> ep.get_observations(), ep.get_rewards(), ep.is_done
        ([0, 1], [1.0], True)
    """

    # Empty slots keep the episode free of a __dict__; hidden from type checkers, which would
    # otherwise refuse the assignments to the episode's own slots below.
    if not TYPE_CHECKING:
        __slots__ = ()

    # Provided by the episode class.
    observations: InfiniteLookbackBuffer
    infos: InfiniteLookbackBuffer
    actions: InfiniteLookbackBuffer
    rewards: InfiniteLookbackBuffer
    extra_model_outputs: dict[str, InfiniteLookbackBuffer]
    _is_terminated: bool
    _is_truncated: bool
    t: int
    t_started: int
    _obs_check: Checker | None
    _action_check: Checker | None
    _observation_space: Any
    _action_space: Any
    _start_time: float | None
    _last_step_time: float | None

    @property
    def is_done(self) -> bool:
        """True if terminated or truncated.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
            ...                         truncated=True)
            >>> ep.is_done, ep.is_terminated, SingleAgentEpisode().is_done
            (True, False, False)
        """
        return self._is_terminated or self._is_truncated

    @property
    def is_terminated(self) -> bool:
        """True if the episode ended in a terminal state; only a bool may be assigned.

        Raises:
            TypeError: On assignment, a value that is no ``bool`` or numpy bool (``"no"``,
                ``1``, None), which a state, a dataset or a replay buffer would each read
                differently; the episode is unchanged.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(observations=[0])
            >>> ep.is_terminated = np.True_; ep.is_terminated, ep.is_done
            (True, True)
        """
        return self._is_terminated

    @is_terminated.setter
    def is_terminated(self, value: bool | np.bool_) -> None:
        self._is_terminated = as_flag(value, "is_terminated")

    @property
    def is_truncated(self) -> bool:
        """True if the episode was cut off (a time limit); only a bool may be assigned.

        Raises:
            TypeError: On assignment, a value that is no ``bool`` or numpy bool; the episode
                is unchanged.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(observations=[0])
            >>> ep.is_truncated = "no"
            Traceback (most recent call last):
            ...
            TypeError: is_truncated must be a bool, got str ('no')
        """
        return self._is_truncated

    @is_truncated.setter
    def is_truncated(self, value: bool | np.bool_) -> None:
        self._is_truncated = as_flag(value, "is_truncated")

    def add_env_reset(self, observation: Any, infos: dict[str, Any] | None = None) -> None:
        """Records the reset observation ``o_0``; only on an empty, fresh episode.

        Raises:
            AssertionError: The episode already holds data, is done, or ``t != 0``.
            ValueError: A numpy'd episode with a space gets an observation outside it.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset([0.0, 1.0]); ep.is_reset
            True
        """
        # Visible observations only: an episode built with lookback data and nothing else
        # starts after its lookback, as RLlib's does.
        stored = len(self.observations)
        if stored or self.is_done:
            raise AssertionError(
                "add_env_reset needs an empty, not-done episode; this one already holds "
                f"{stored} observations (done={self.is_done})"
            )
        if not (self.t == self.t_started == 0):
            raise AssertionError(
                f"add_env_reset needs t == t_started == 0, got t={self.t}, "
                f"t_started={self.t_started}"
            )
        if self.observations.store.is_numpy:
            self._check_in_space(
                self._obs_check, self._observation_space, observation, "observation"
            )
        self.observations.append(observation)
        self.infos.append(infos if infos.__class__ is dict else given_info(infos))
        self._start_time = _now()

    def add_env_step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        infos: dict[str, Any] | None = None,
        *,
        terminated: bool | np.bool_ = False,
        truncated: bool | np.bool_ = False,
        extra_model_outputs: dict[str, Any] | None = None,
    ) -> None:
        """Records one env step: the action taken, the reward and the next observation.

        Raises:
            AssertionError: The episode is done or not reset, or ``extra_model_outputs`` keys
                differ from the keys the episode already records. Nothing is changed.
            TypeError: ``terminated`` or ``truncated`` is not a bool. Nothing is changed.
            ValueError: A numpy'd episode with spaces gets an observation or action outside
                them, or a numpy column cannot hold a value. Nothing is changed.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 1.0, extra_model_outputs={"vf_preds": 0.3}); ep.t
            1
        """
        if self._is_terminated or self._is_truncated:
            raise AssertionError("the episode is done: it accepts no more steps")
        if extra_model_outputs is not None and not isinstance(extra_model_outputs, dict):
            raise TypeError(
                "extra_model_outputs must be a dict of key -> value, got "
                f"{type(extra_model_outputs).__name__}"
            )
        finishing = False
        if terminated is not False or truncated is not False:
            terminated = as_flag(terminated, "terminated")
            truncated = as_flag(truncated, "truncated")
            finishing = terminated or truncated
        obs_store = self.observations.store
        act_store = self.actions.store
        rew_store = self.rewards.store
        obs: Any = obs_store.pylist
        act: Any = act_store.pylist
        rew: Any = rew_store.pylist
        if obs is None or act is None or rew is None:
            # Numpy (or mixed) mode: the reset and the spaces are checked before any write,
            # inline (this is the per-step path); plain Python numbers skip is_real's ABC check.
            if len(obs_store) <= self.observations.lookback:
                raise AssertionError("add_env_step needs add_env_reset (or observations) first")
            check = self._obs_check
            if check is not None and not check(observation):
                raise _outside(self._observation_space, observation, "observation")
            check = self._action_check
            if check is not None and not check(action):
                raise _outside(self._action_space, action, "action")
            if (
                reward.__class__ not in _PLAIN_REALS
                and not is_real(reward)
                and needs_real_check(rew_store)
            ):
                # The first step decides an untyped column's dtype: a string would make it <U1.
                # An object column (ints beyond int64) would store a list or array as a value.
                raise ValueError(
                    "add_env_step: the value for rewards cannot be stored in the episode's "
                    f"numpy column ({short_repr(reward)} is no real number); nothing was recorded"
                )
            obs, act, rew = obs_store, act_store, rew_store
        elif len(obs) <= self.observations.lookback:  # lookback alone is no reset
            raise AssertionError("add_env_step needs add_env_reset (or observations) first")
        # List mode, the common case while sampling, appends straight to the lists.
        try:
            obs.append(observation)
            act.append(action)
            rew.append(reward)
            recorded = self.extra_model_outputs
            if extra_model_outputs is not None and len(extra_model_outputs) == len(recorded):
                # Optimistic: one dict lookup per key instead of comparing key sets every
                # step; a new key undoes this step's extra writes and takes the checked path.
                # Only the lookup tells a new key: a KeyError a value raises as it converts
                # (a user's ``__array__``) is that value's refusal, as any other error is.
                for key, value in extra_model_outputs.items():
                    column = recorded.get(key)
                    if column is None:
                        self._undo_extras(extra_model_outputs, key)
                        self._add_new_extras(extra_model_outputs)
                        break
                    store = column.store
                    items = store.pylist
                    (store if items is None else items).append(value)
            elif extra_model_outputs is not None or recorded:
                self._add_new_extras(extra_model_outputs or {})
            info_store = self.infos.store
            info_list = info_store.pylist
            (info_store if info_list is None else info_list).append(
                infos if infos.__class__ is dict else given_info(infos)
            )
        except BaseException as error:
            # A column refused its value after others took theirs: a numpy column's wrong
            # shape or type, or whatever else converting the value raised (a tensor that needs
            # grad, a user's ``__array__``, an interrupt). The step is taken back in every case.
            refusal = self._undo_partial_step(error, extra_model_outputs)
            if refusal is None:
                raise
            raise refusal from error
        self.t += 1
        # Both flags are False until a finishing step writes them (checked above).
        if finishing:
            self._is_terminated = terminated
            self._is_truncated = truncated
        self._last_step_time = now = _now()
        if self._start_time is None:
            self._start_time = now

    @staticmethod
    def _check_in_space(check: Checker | None, space: Any, value: Any, what: str) -> None:
        if check is not None and not check(value):
            raise _outside(space, value, what)

    def _undo_extras(self, given: dict[str, Any], stop: Any) -> None:
        # Pops what the optimistic loop wrote for the keys before ``stop``.
        recorded = self.extra_model_outputs
        for key in given:
            if key == stop:
                return
            recorded[key].pop()

    def _add_new_extras(self, given: dict[str, Any]) -> None:
        try:
            # This step's action is already appended: the steps before it are one fewer.
            self._check_new_keys(given, len(self.actions) - 1)
        except AssertionError:
            # Leave the episode as it was: take back this step's observation/action/reward.
            for column in (self.observations, self.actions, self.rewards):
                column.pop()
            raise
        recorded = self.extra_model_outputs
        # New columns are built whole before any joins the episode: a refused one leaves no
        # empty column behind.
        fresh: dict[str, InfiniteLookbackBuffer] = {}
        for key, value in given.items():
            if key not in recorded:
                column = InfiniteLookbackBuffer([] if self.rewards.finalized else [value])
                if self.rewards.finalized:  # a numpy'd episode's columns are all numpy (§7)
                    try:  # the first item chooses the layout, as in a column declared empty
                        column.finalize()
                        column.append(value)
                    except (ValueError, TypeError) as error:
                        raise _RefusedColumn(f"extra-model-output {key!r}", error) from error
                fresh[key] = column
        for key, value in given.items():
            if key in recorded:
                recorded[key].append(value)
        recorded.update(fresh)

    def _check_new_keys(self, given: dict[str, Any], steps_before: int) -> None:
        known, new = set(self.extra_model_outputs), set(given)
        missing = known - new
        if missing:
            raise AssertionError(
                f"extra_model_outputs is missing keys {sorted_keys(missing)} that this episode "
                f"records; every step must give all of {sorted_keys(known)}"
            )
        if steps_before > 0:
            raise AssertionError(
                f"extra_model_outputs keys {sorted_keys(new - known)} are new, but the episode "
                f"already holds {steps_before} steps without them; give every key from "
                "the first step of the chunk"
            )

    def _undo_partial_step(
        self, error: BaseException, given: dict[str, Any] | None
    ) -> ValueError | None:
        """Takes back what a failed step wrote; the ValueError naming the column, to raise.

        Each column got at most one item this step, so the columns holding more steps than
        the fewest are exactly the ones written to; the refused column is the first of the
        others in the order the step writes them (the extra outputs in ``given``'s order).
        None for an error that is not a refusal of the value (``ValueError`` or ``TypeError``):
        the caller raises that one as it is.
        """
        columns = self.named_columns()
        # Observations and infos hold one item more than the steps (the reset observation).
        steps = {
            name: len(column) - (name in ("observations", "infos"))
            for name, column in columns.items()
        }
        before = min(steps.values())
        for name, n in steps.items():
            if n > before:
                columns[name].pop()
        if not isinstance(error, (ValueError, TypeError)):
            return None
        if given is not None and given.keys() != self.extra_model_outputs.keys():
            # Keys that do not match the recorded ones are refused first, whichever value the
            # optimistic loop met first, as the checked path refuses them.
            self._check_new_keys(given, before)
        # A given key equal to a recorded one (np.str_("vf") and "vf", 1.0 and 1) is named as
        # the column names it.
        recorded = {key: key for key in self.extra_model_outputs}
        extras = [f"extra_model_outputs[{recorded.get(key, key)!r}]" for key in given or ()]
        order = ["observations", "actions", "rewards", *extras, "infos"]
        refused = next(name for name in order if steps.get(name) == before)
        if isinstance(error, _RefusedColumn):
            refused, error = error.column, error.error
        return ValueError(
            f"add_env_step: the value for {refused} cannot be stored in the episode's "
            f"numpy column ({error}); nothing was recorded"
        )

    def _extra_buffers(self) -> list[InfiniteLookbackBuffer]:
        """The extra-model-output columns; an ``AssertionError`` naming one that is no buffer.

        ``extra_model_outputs`` is a plain dict, so a column added by assignment can be an
        array, which every later read would fail on with an error naming no key.
        """
        for key, column in self.extra_model_outputs.items():
            if not isinstance(column, InfiniteLookbackBuffer):
                raise AssertionError(
                    f"extra_model_outputs[{key!r}] is a {type(column).__name__}, not an "
                    f"InfiniteLookbackBuffer: assign extra_model_outputs[{key!r}] = "
                    "InfiniteLookbackBuffer(values, lookback=episode.actions.lookback), one "
                    "value per stored action, lookback included"
                )
        return list(self.extra_model_outputs.values())

    def named_columns(self) -> dict[str, InfiniteLookbackBuffer]:
        """Every column under the name errors use, in the order ``add_env_step`` writes them.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> list(SingleAgentEpisode().named_columns())
            ['observations', 'actions', 'rewards', 'infos']
        """
        return {
            "observations": self.observations,
            "actions": self.actions,
            "rewards": self.rewards,
            **{f"extra_model_outputs[{k!r}]": c for k, c in self.extra_model_outputs.items()},
            "infos": self.infos,
        }


class _RefusedColumn(ValueError):
    """A new column refused its first value (it is not in the episode, so it cannot be found)."""

    def __init__(self, column: str, error: Exception):
        super().__init__(column, error)
        self.column = column
        self.error = error


def given_info(infos: Any) -> Any:
    """The info dict a step records for ``infos``: ``{}`` for None and other falsy values.

    As RLlib's ``infos or {}``: ``[]``, ``()``, ``0``, ``""`` or ``False`` (numpy's zeros and
    ``False`` too) record ``{}``; an array or tensor, whose truth value may be ambiguous, and
    any other object are recorded as given.

    Example:
        >>> given_info(None), given_info([]), given_info(0), given_info({"a": 1})
        ({}, {}, {}, {'a': 1})
    """
    if infos is None or (isinstance(infos, _FALSY_TYPES) and not infos):
        return {}
    return infos


def id_text(id_: Any) -> str:
    """An episode id as its repr shows it, never raising.

    A short plain id as is (as RLlib prints it); any other (long, with commas or parentheses,
    not a str) as its shortened repr.

    Example:
        >>> id_text("3f2a"), id_text("a, b"), id_text(7)
        ('3f2a', "'a, b'", '7')
    """
    if type(id_) is str and len(id_) <= 64 and _PLAIN_ID.fullmatch(id_):
        return id_
    return short_repr(id_, limit=80)


_PLAIN_ID = re.compile(r"[\w.:/@#+-]*")

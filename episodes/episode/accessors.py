"""Reading and overwriting the episode's columns: the ``get_*`` and ``set_*`` methods.

They apply the buffer index rules (see :meth:`InfiniteLookbackBuffer.get`) to one column each;
the class is mixed into :class:`~episodes.episode.SingleAgentEpisode`.
"""

from __future__ import annotations

from typing import Any, NoReturn

import gymnasium as gym  # noqa: F401 - the doctests below use it

from episodes.buffer import InfiniteLookbackBuffer
from episodes.indexing import Index as Indices
from episodes.structs import sorted_keys


class ColumnAccessors:
    """Getters and setters over the episode's column buffers.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0],
        ...                         len_lookback_buffer=1)
        >>> ep.set_actions(new_data=[5], at_indices=[0])
        >>> ep.get_actions(), ep.get_actions(-1, neg_index_as_lookback=True), ep.get_rewards()
        ([5], 1, [2.0])
    """

    __slots__ = ()
    # An episode is no sequence of steps: ``ep[i]`` takes slices only, so ``iter(ep)`` (a list
    # given one episode, ``list(ep)``) would fail on ``ep[0]`` with words about slices. None:
    # "object is not iterable", and ``isinstance(ep, Iterable)`` is False.
    __iter__ = None
    __reversed__ = None  # else reversed() walks ep[len - 1] .. ep[0], which refuse ints

    # Provided by the episode class.
    observations: InfiniteLookbackBuffer
    infos: InfiniteLookbackBuffer
    actions: InfiniteLookbackBuffer
    rewards: InfiniteLookbackBuffer
    extra_model_outputs: dict[str, InfiniteLookbackBuffer]

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
            >>> from episodes import SingleAgentEpisode
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
            >>> from episodes import SingleAgentEpisode
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
            >>> from episodes import SingleAgentEpisode
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
            >>> from episodes import SingleAgentEpisode
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
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 0.0, extra_model_outputs={"logp": -0.7})
            >>> ep.get_extra_model_outputs("logp")
            [-0.7]
        """
        column = self.extra_model_outputs.get(key)
        if column is None:
            raise KeyError(
                f"no extra-model-output {key!r}; known keys: "
                f"{sorted_keys(self.extra_model_outputs)}"
            )
        return column.get(indices, neg_index_as_lookback=neg_index_as_lookback, fill=fill)

    # -------------------------------------------------------------------------------- setters
    def set_observations(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites observations (buffer ``set`` rules).

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.set_observations(new_data=5, at_indices=0); ep.get_observations(0)
            5
        """
        _set_naming(self.observations, "observations", new_data, at_indices, neg_index_as_lookback)

    def set_actions(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites actions (buffer ``set`` rules).

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 0.0)
            >>> ep.set_actions(new_data=[1]); ep.get_actions()
            [1]
        """
        _set_naming(self.actions, "actions", new_data, at_indices, neg_index_as_lookback)

    def set_rewards(
        self, *, new_data: Any, at_indices: Indices = None, neg_index_as_lookback: bool = False
    ) -> None:
        """Overwrites rewards (buffer ``set`` rules).

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0); ep.add_env_step(1, 0, 0.0)
            >>> ep.set_rewards(new_data=2.0, at_indices=-1); ep.get_rewards()
            [2.0]
        """
        _set_naming(self.rewards, "rewards", new_data, at_indices, neg_index_as_lookback)

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
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(); ep.add_env_reset(0)
            >>> ep.add_env_step(1, 0, 0.0, extra_model_outputs={"v": 0.0})
            >>> ep.set_extra_model_outputs(key="v", new_data=[1.0]); ep.get_extra_model_outputs("v")
            [1.0]
        """
        column = self.extra_model_outputs.get(key)
        if column is None:
            raise AssertionError(
                f"cannot set unknown extra-model-output {key!r}; known keys: "
                f"{sorted_keys(self.extra_model_outputs)} (a setter overwrites a column the "
                f"episode has: to add one, assign extra_model_outputs[{key!r}] = "
                "InfiniteLookbackBuffer(values, lookback=episode.actions.lookback), one value "
                "per stored action, lookback included)"
            )
        _set_naming(
            column, f"extra-model-output {key!r}", new_data, at_indices, neg_index_as_lookback
        )

    # ------------------------------------------------------------------ temporary step data
    def add_temporary_timestep_data(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Removed, as in RLlib 2.60: keep such data in ``custom_data`` instead.

        Raises:
            ValueError: Always, naming the replacement.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> SingleAgentEpisode().add_temporary_timestep_data("k", 1)
            Traceback (most recent call last):
            ...
            ValueError: add_temporary_timestep_data was removed: use episode.custom_data[key] = ...
        """
        raise ValueError(
            "add_temporary_timestep_data was removed: use episode.custom_data[key] = ..."
        )

    def get_temporary_timestep_data(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Removed, as in RLlib 2.60: read ``custom_data`` instead.

        Raises:
            ValueError: Always, naming the replacement.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> SingleAgentEpisode().get_temporary_timestep_data("k")
            Traceback (most recent call last):
            ...
            ValueError: get_temporary_timestep_data was removed: read episode.custom_data[key]
        """
        raise ValueError("get_temporary_timestep_data was removed: read episode.custom_data[key]")


def _set_naming(
    column: InfiniteLookbackBuffer,
    name: str,
    new_data: Any,
    at_indices: Indices,
    neg_index_as_lookback: bool,
) -> None:
    """``column.set(...)``; a refused value's ``ValueError`` names the column (same type)."""
    try:
        column.set(new_data, at_indices=at_indices, neg_index_as_lookback=neg_index_as_lookback)
    except ValueError as err:
        err.args = (f"set {name}: {err}", *err.args[1:])
        raise

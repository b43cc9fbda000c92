"""Episode state: a plain dict snapshot, its inverse, and field-by-field equality."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from episodes.buffer import InfiniteLookbackBuffer
from episodes.spaces import space_from_dict, space_to_dict
from episodes.structs import data_equal

if TYPE_CHECKING:
    from episodes.episode.single_agent_episode import SingleAgentEpisode

COLUMNS = ("observations", "infos", "actions", "rewards")
STATE_KEYS = (
    "id_",
    "agent_id",
    "module_id",
    "multi_agent_episode_id",
    *COLUMNS,
    "extra_model_outputs",
    "is_terminated",
    "is_truncated",
    "t_started",
    "t",
    "observation_space",
    "action_space",
    "start_time",
    "last_step_time",
    "custom_data",
)


def get_state(episode: SingleAgentEpisode) -> dict[str, Any]:
    """A snapshot of every field as plain Python/numpy values (spaces as JSON-safe dicts).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> sorted(get_state(SingleAgentEpisode()))[:3]
        ['action_space', 'actions', 'agent_id']
    """
    return {
        "id_": episode.id_,
        "agent_id": episode.agent_id,
        "module_id": episode.module_id,
        "multi_agent_episode_id": episode.multi_agent_episode_id,
        **{name: getattr(episode, name).get_state() for name in COLUMNS},
        "extra_model_outputs": {
            key: column.get_state() for key, column in episode.extra_model_outputs.items()
        },
        "is_terminated": episode.is_terminated,
        "is_truncated": episode.is_truncated,
        "t_started": episode.t_started,
        "t": episode.t,
        "observation_space": space_to_dict(episode.observation_space),
        "action_space": space_to_dict(episode.action_space),
        "start_time": episode._start_time,
        "last_step_time": episode._last_step_time,
        "custom_data": copy.deepcopy(episode.custom_data),
    }


def from_state(cls: type[SingleAgentEpisode], state: dict[str, Any]) -> SingleAgentEpisode:
    """Rebuilds an episode from :func:`get_state`'s dict.

    Raises:
        KeyError: The state misses keys (all are named).
        ValueError: The state is inconsistent (column lengths, ``t``), or malformed.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> from_state(SingleAgentEpisode, get_state(ep)) == ep
        True
    """
    if not isinstance(state, dict):
        raise TypeError(f"an episode state must be a dict, got {type(state).__name__}")
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise KeyError(f"episode state is missing keys {missing}")
    extra = state["extra_model_outputs"]
    if not isinstance(extra, dict):
        raise ValueError("episode state's extra_model_outputs must be a dict of buffer states")
    try:
        columns = {name: InfiniteLookbackBuffer.from_state(state[name]) for name in COLUMNS}
        extra_columns = {k: InfiniteLookbackBuffer.from_state(v) for k, v in extra.items()}
    except (KeyError, TypeError) as err:
        raise ValueError(f"episode state holds a malformed column: {err}") from err
    custom_data = state["custom_data"]
    if not isinstance(custom_data, dict):
        raise ValueError(f"custom_data must be a dict, got {type(custom_data).__name__}")
    try:
        episode = cls(
            state["id_"],
            observations=columns["observations"],
            observation_space=space_from_dict(state["observation_space"]),
            infos=columns["infos"],
            actions=columns["actions"],
            action_space=space_from_dict(state["action_space"]),
            rewards=columns["rewards"],
            extra_model_outputs=extra_columns,
            terminated=bool(state["is_terminated"]),
            truncated=bool(state["is_truncated"]),
            t_started=int(state["t_started"]),
            agent_id=state["agent_id"],
            module_id=state["module_id"],
            multi_agent_episode_id=state["multi_agent_episode_id"],
        )
    except AssertionError as err:
        raise ValueError(f"inconsistent episode state: {err}") from err
    if episode.t != state["t"]:
        raise ValueError(
            f"inconsistent episode state: t={state['t']} but t_started={episode.t_started} "
            f"plus {len(episode.rewards)} rewards gives {episode.t}"
        )
    episode._start_time = state["start_time"]
    episode._last_step_time = state["last_step_time"]
    episode._custom_data = copy.deepcopy(custom_data)
    return episode


def episodes_equal(a: SingleAgentEpisode, b: SingleAgentEpisode) -> bool:
    """Field-by-field equality (timing fields excluded).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> episodes_equal(SingleAgentEpisode("x"), SingleAgentEpisode("x"))
        True
    """
    scalars = (
        "id_",
        "agent_id",
        "module_id",
        "multi_agent_episode_id",
        "is_terminated",
        "is_truncated",
        "t_started",
        "t",
    )
    return (
        all(getattr(a, name) == getattr(b, name) for name in scalars)
        and a.observation_space == b.observation_space
        and a.action_space == b.action_space
        and all(getattr(a, name) == getattr(b, name) for name in COLUMNS)
        and a.extra_model_outputs.keys() == b.extra_model_outputs.keys()
        and all(a.extra_model_outputs[k] == b.extra_model_outputs[k] for k in a.extra_model_outputs)
        and data_equal(a.custom_data, b.custom_data)
    )

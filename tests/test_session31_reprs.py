"""Messages and reprs that name a user's value stay short (session 31).

An error or a repr used to embed the value whole: MBs for a long list, a long id, a big
dataset or a deep strategy. Each case builds the oversized value, takes the message (or the
repr) and checks it is short and still says what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import ConnectorPipeline, FrameStack
from episodes.indexing import as_int
from episodes.io.reader import DatasetInfo, EpisodeSummary
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

N = 100_000
BOUND = 2_000


def _message(make: Callable[[], Any]) -> str:
    try:
        make()
    except Exception as error:  # noqa: BLE001 - the message is what is checked
        return str(error)
    raise AssertionError("no error was raised")


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )  # fmt: skip


def _locate() -> str:
    buf = EpisodeReplayBuffer(100)
    buf.add(_episode())
    return _message(lambda: buf.locate("a", np.arange(N)))


def _set_indices() -> str:
    buf = InfiniteLookbackBuffer(list(range(10)))
    return _message(lambda: buf.set([1, 2], at_indices=list(range(5)) * (N // 5)))


def _numpy_episode(space: gym.Space[Any], first: Any) -> SingleAgentEpisode:
    episode = SingleAgentEpisode(observation_space=space)
    episode.add_env_reset(first)
    episode.to_numpy()
    return episode


def _step_out_of_space() -> str:
    episode = _numpy_episode(gym.spaces.Box(0, 1, (N,), np.float32), np.zeros(N, np.float32))
    return _message(lambda: episode.add_env_step([5.0] * N, 0, 1.0))


def _step_out_of_dict_space() -> str:
    space = gym.spaces.Dict({f"k{i}": gym.spaces.Discrete(2) for i in range(2_000)})
    episode = _numpy_episode(space, {f"k{i}": 0 for i in range(2_000)})
    return _message(lambda: episode.add_env_step({f"k{i}": 5 for i in range(2_000)}, 0, 1.0))


def _buffer_out_of_space() -> str:  # buffer/space_checks.py
    episode = _numpy_episode(gym.spaces.Text(5), "ab")
    return _message(lambda: episode.set_observations(new_data=["x" * N], at_indices=slice(0, 1)))


def _numpy_reward() -> str:
    episode = SingleAgentEpisode()
    episode.add_env_reset(0)
    episode.to_numpy()
    return _message(lambda: episode.add_env_step(1, 0, [1.0] * N))


def _item_structure() -> str:
    buf = InfiniteLookbackBuffer([{"a": 1}])
    buf.finalize()
    return _message(lambda: buf.append({"b": list(range(N))}))


def _column_keys() -> str:
    converter = pytest.importorskip("episodes.converter")
    return _message(lambda: converter.ColumnKeys(values=list(range(N))))


def _column_keys_str() -> str:
    converter = pytest.importorskip("episodes.converter")
    return _message(lambda: converter.ColumnKeys(distribution="x" * N))


def _pipeline() -> str:
    return _message(lambda: ConnectorPipeline([[0] * N]))  # type: ignore[list-item]


def _connector_repr() -> str:
    return repr(FrameStack(2, fill=[0.0] * N))


def _episode_repr_long_id() -> str:
    return repr(SingleAgentEpisode("x" * N))


def _dataset_info_repr() -> str:
    summary = EpisodeSummary("a", 1, 1, 0.0, True, False)
    return repr(DatasetInfo("d", 2, 20_000, 20_000, 0, [summary] * 20_000))


def _strategy_repr() -> str:
    strategies = pytest.importorskip("episodes.testing.strategies")
    return repr(strategies.spaces(max_depth=8))


def _as_int() -> str:
    return _message(lambda: as_int("x" * N))


def _update_priorities() -> str:
    buf = PrioritizedEpisodeReplayBuffer(100)
    buf.add(_episode())
    return _message(lambda: buf.update_priorities([1.0], "x" * N))


def _locate_unknown_id() -> str:
    buf = EpisodeReplayBuffer(100)
    buf.add(_episode())
    return _message(lambda: buf.locate("y" * N, np.arange(1)))


CASES: list[tuple[str, Callable[[], str], str]] = [
    ("replay locate", _locate, "outside episode 'a'"),
    ("lookback set", _set_indices, "cannot set 2 items"),
    ("step out of space", _step_out_of_space, "is not in the episode's observation space"),
    ("step out of Dict space", _step_out_of_dict_space, "is not in the episode's observation"),
    ("buffer out of space", _buffer_out_of_space, "is not in the buffer's space"),
    ("numpy reward", _numpy_reward, "is no real number"),
    ("item structure", _item_structure, "does not match the column's item structure"),
    ("ColumnKeys", _column_keys, "ColumnKeys.values must be a str"),
    ("ColumnKeys str", _column_keys_str, "needs a trailing comma"),
    ("pipeline item", _pipeline, "a connector must be callable"),
    ("connector repr", _connector_repr, "FrameStack("),
    ("episode repr", _episode_repr_long_id, "SingleAgentEpisode(len=0"),
    ("DatasetInfo repr", _dataset_info_repr, "num_episodes=20000"),
    ("spaces strategy repr", _strategy_repr, "max_depth=8"),
    ("as_int", _as_int, "index must be an int, got str"),
    ("update_priorities", _update_priorities, "indices must be a batch's item indices"),
    ("locate unknown id", _locate_unknown_id, "is not stored"),
]


@pytest.mark.parametrize(("make", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_message_is_short_and_names_the_problem(make: Callable[[], str], names: str) -> None:
    text = make()
    assert len(text) < BOUND, text[:300]
    assert names in text


@pytest.mark.parametrize("id_", ["a", "3f2a9c", "env-0/run.1"])
def test_episode_repr_keeps_a_plain_id_as_rllib_prints_it(id_: str) -> None:
    assert repr(SingleAgentEpisode(id_)).endswith(f"id_={id_})")


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "BadStr()"


@pytest.mark.parametrize(("id_", "shown"), [("a, len=99)", "id_='a, len=99)')"), (7, "id_=7)")])
def test_episode_repr_quotes_an_ambiguous_id(id_: Any, shown: str) -> None:
    assert repr(SingleAgentEpisode(id_)).endswith(shown)


def test_episode_repr_never_raises_on_the_id() -> None:
    assert repr(SingleAgentEpisode(_BadStr())).endswith("id_=BadStr())")

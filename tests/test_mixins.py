"""Methods the episode and the replay buffers take from mixins carry the class's name."""

import inspect
import pickle
import sys

import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


@pytest.mark.parametrize(
    "host", [SingleAgentEpisode, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
)
def test_public_methods_are_named_after_a_class_users_call(host):
    users_classes = {"SingleAgentEpisode", "EpisodeReplayBuffer", "PrioritizedEpisodeReplayBuffer"}
    for name, value in inspect.getmembers(host, inspect.isroutine):
        if not name.startswith("_"):
            assert value.__qualname__.split(".")[0] in users_classes, (name, value.__qualname__)


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: SingleAgentEpisode().add_env_reset(), "SingleAgentEpisode.add_env_reset()"),
        (
            lambda: SingleAgentEpisode().get_rewards(1, 2, 3, 4, 5, 6, 7),
            "SingleAgentEpisode.get_rewards()",
        ),
        (
            lambda: EpisodeReplayBuffer(10).get_added_timesteps(1, 2),
            "EpisodeReplayBuffer.get_added_timesteps()",
        ),
    ],
    ids=["recording", "accessors", "replay-access"],
)
def test_argument_errors_name_the_class(call, expected):
    with pytest.raises(TypeError) as info:
        call()
    if sys.version_info >= (3, 11):  # older Pythons name the function alone
        assert str(info.value).startswith(expected)
    else:
        assert str(info.value).startswith(expected.split(".")[1])


@pytest.mark.parametrize(
    "function",
    [
        SingleAgentEpisode.get_observations,
        SingleAgentEpisode.add_env_step,
        EpisodeReplayBuffer.get_counters,
        PrioritizedEpisodeReplayBuffer.get_transitions,
    ],
    ids=lambda f: f.__qualname__,
)
def test_renamed_methods_still_pickle_by_reference(function):
    # multiprocessing and ProcessPoolExecutor.map send functions by module and qualified name.
    assert pickle.loads(pickle.dumps(function)) is function

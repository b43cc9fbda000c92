"""Round 25 (serialization hunt): what copies and pickles of the library's objects do."""

from __future__ import annotations

import copy
import pickle
import sys

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.connectors.joining import TextJoinError
from episodes.io import DatasetWriter, EpisodeWriter
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import CircularBuffer
from episodes.structs import data_equal
from episodes.testing import outputs_equal


@pytest.mark.parametrize("writer_class", [DatasetWriter, EpisodeWriter])
@pytest.mark.parametrize(
    "how", [pickle.dumps, copy.copy, copy.deepcopy], ids=["pickle", "copy", "deepcopy"]
)
def test_an_open_writer_refuses_to_be_copied(tmp_path, writer_class, how) -> None:
    # A copy shared the original's file descriptors: its close() closed them, and the
    # original's next commit landed in whatever file reused their numbers.
    with writer_class(tmp_path / "d") as writer:
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            how(writer)
        writer.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
    assert (tmp_path / "d").exists()


def test_a_text_join_error_survives_pickle_and_copies() -> None:
    error = TextJoinError(1, 0, [np.dtype("int64"), np.dtype("<U1")])
    for copied in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(copied) is TextJoinError and str(copied) == str(error)
        assert (copied.text, copied.odd, copied.dtypes, copied.why) == (
            error.text, error.odd, error.dtypes, error.why,
        )  # fmt: skip


@pytest.mark.parametrize(
    "value",
    [np.datetime64("NaT"), np.array(["NaT", "2020-01-01"], "datetime64[D]"), np.timedelta64("NaT")],
    ids=["datetime scalar", "datetime array", "timedelta scalar"],
)
def test_nat_equals_nat_as_nan_equals_nan(value) -> None:
    assert data_equal(value, copy.deepcopy(value))
    assert outputs_equal({"t": value}, {"t": copy.deepcopy(value)})
    ep = SingleAgentEpisode(
        observations=[0, 1], actions=[0], rewards=[1.0], infos=[{}, {"t": value}]
    )
    assert ep == copy.deepcopy(ep) == SingleAgentEpisode.from_state(ep.get_state())
    assert not data_equal(np.datetime64("NaT"), np.datetime64("2020-01-01"))


def test_a_shallow_copy_of_a_replay_buffer_owns_its_data() -> None:
    def episode(id_: str) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            id_, observations=np.zeros((6, 2), np.float32), actions=[0] * 5, rewards=[1.0] * 5,
            terminated=True, len_lookback_buffer=0,
        )  # fmt: skip

    original = EpisodeReplayBuffer(10)
    original.add([episode("a"), episode("b")])
    state = original.get_state()
    shallow = copy.copy(original)
    shallow.add(episode("c"))  # evicts "a" in the copy only
    assert original.get_episode_ids() == ["a", "b"]
    assert data_equal(original.get_state(), state)
    EpisodeReplayBuffer(10).set_state(original.get_state())


def test_a_shallow_copy_of_a_circular_buffer_owns_its_ring() -> None:
    original = CircularBuffer(max_len=2, batch_size=1)
    original.append(torch.tensor([[1.0]]))
    original.append(torch.tensor([[2.0]]))
    shallow = copy.copy(original)
    shallow.append(torch.tensor([[99.0]]))
    assert (original[0].item(), original[1].item()) == (2.0, 1.0)
    assert (shallow[0].item(), shallow[1].item()) == (99.0, 2.0)


def test_a_shallow_copy_of_a_replay_buffer_shares_a_space_deepcopy_refuses() -> None:
    import threading

    import gymnasium as gym

    class LockedBox(gym.spaces.Box):
        def __init__(self) -> None:
            super().__init__(-1.0, 1.0, (2,), np.float32)
            self.lock = threading.Lock()

    space = LockedBox()
    original = EpisodeReplayBuffer(10)
    original.add(
        SingleAgentEpisode(
            "a",
            observations=np.zeros((3, 2), np.float32),
            actions=[0, 1],
            rewards=[1.0, 1.0],
            observation_space=space,
            len_lookback_buffer=0,
        )  # fmt: skip
    )
    shallow = copy.copy(original)
    assert shallow.get_num_timesteps() == 2 and shallow.get_state()["num_timesteps"] == 2


def test_nat_of_another_kind_is_not_equal() -> None:
    assert not outputs_equal(np.timedelta64("NaT"), np.datetime64("NaT"))
    assert not outputs_equal(
        np.array(["NaT"], "timedelta64[D]"), np.array(["NaT"], "datetime64[D]")
    )


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11's")
def test_a_text_join_error_keeps_its_notes_through_pickle() -> None:
    error = TextJoinError(1, 0, [np.dtype("int64"), np.dtype("<U1")])
    error.add_note("while joining episode 'a'")
    copied = pickle.loads(pickle.dumps(error))
    assert copied.__notes__ == ["while joining episode 'a'"]

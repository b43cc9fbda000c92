"""An interrupt just before the writes of a first add leaves the buffer free to take any layout."""

import numpy as np
import pytest

import episodes.replay.buffer as buffer_module
from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(id_, obs):
    return SingleAgentEpisode(
        id_, observations=[obs] * 3, actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    ).to_numpy()


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_a_ctrl_c_at_the_deferral_leaves_a_first_add_undone(monkeypatch, cls):
    def ctrl_c():  # a SIGINT handled as the deferral starts
        raise KeyboardInterrupt

    buf = cls(100, seed=0)
    monkeypatch.setattr(buffer_module, "deferred_interrupts", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        buf.add(_episode("a", np.zeros(3, np.float32)))
    monkeypatch.undo()
    assert buf.get_episode_ids() == [] and buf.get_num_timesteps() == 0
    buf.add(_episode("b", np.zeros(5)))  # another layout, as into a fresh buffer
    assert buf.get_num_timesteps() == 2
    assert buf.sample(4, n_step=1)["obs"].shape == (4, 5)


def test_an_add_under_a_handler_of_yours_never_touches_it(monkeypatch):
    import signal

    import episodes.replay.store as store_module

    calls = []
    monkeypatch.setattr(store_module, "_set_handler", lambda *args: calls.append(args))
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        buf = EpisodeReplayBuffer(100, seed=0)
        buf.add(_episode("a", np.zeros(3, np.float32)))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == []  # not even for a moment: a SIGINT then would be the user's


def test_an_add_under_the_default_handler_defers_and_restores_it():
    import signal

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", np.zeros(3, np.float32)))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_float_capacity_assigned_later_still_bounds_the_buffer():
    buf = EpisodeReplayBuffer(1000, seed=0)
    buf.capacity = np.float64(4.0)  # the attribute is public, as in RLlib
    for i in range(4):
        buf.add(_episode(f"e{i}", np.zeros(3, np.float32)))
    assert buf.get_num_timesteps() <= 4


def test_from_dataset_hints_validate_only_for_pieces_that_do_not_join(tmp_path):
    from episodes.io import DatasetWriter

    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_episode("a", np.zeros(4, np.float32)))
        writer.write(_episode("b", np.zeros(5, np.float32)))  # another shape: no damage
    with pytest.raises(ValueError) as raised:
        EpisodeReplayBuffer.from_dataset(tmp_path / "d")
    assert "episode 'b'" in str(raised.value)
    assert "episodes validate" not in str(raised.value)

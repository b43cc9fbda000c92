"""Replay hunt, round 24: a bad device is refused before the contents; save names the episode.

- ``sample(device=...)`` checked the device after gathering the batch: an empty buffer gave
  ``EmptyBufferError`` for ``device="abc"``, and ``"cuda"`` on a CPU build escaped as torch's
  bare ``AssertionError`` after the whole batch was built.
- ``save`` passed a refused info's error through without saying which stored episode held it,
  and a negative ``t_started`` (which ``add`` takes) was not among what the docs say a save
  refuses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import UnstorableValueError  # noqa: E402
from episodes.replay import (  # noqa: E402
    EpisodeReplayBuffer,
    PrioritizedEpisodeReplayBuffer,
)
from episodes.replay.errors import DeviceError, EmptyBufferError  # noqa: E402


def _episode(id_: str, steps: int = 3, **kwargs) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
        **kwargs,
    )


UNAVAILABLE = [] if torch.cuda.is_available() else ["cuda"]


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("filled", [False, True], ids=["empty", "filled"])
@pytest.mark.parametrize(
    ("device", "error"),
    [("abc", DeviceError), (3.5, TypeError)] + [(d, DeviceError) for d in UNAVAILABLE],
)
def test_a_bad_device_is_refused_before_the_contents(kind, filled, device, error) -> None:
    buffer = kind(100, seed=0)
    if filled:
        buffer.add(_episode("a"))
    before = (buffer.rng.bit_generator.state, buffer.get_num_timesteps())
    for unit in ({}, {"batch_length_T": 2}):
        with pytest.raises(error, match="device"):
            buffer.sample(4, device=device, **unit)
    assert (buffer.rng.bit_generator.state, buffer.get_num_timesteps()) == before


def test_an_empty_buffer_with_a_good_device_is_still_empty() -> None:
    with pytest.raises(EmptyBufferError):
        EpisodeReplayBuffer(10).sample(2, device="cpu")


def test_a_device_error_is_a_runtime_error_too() -> None:
    with pytest.raises(RuntimeError):
        EpisodeReplayBuffer(10).sample(2, device="abc")


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"infos": [{}, {"seen": {1, 2}}, {}, {}]}, "infos"),
        ({"t_started": -5}, "t_started"),
    ],
    ids=["set-info", "negative-t"],
)
def test_save_names_the_stored_episode_a_dataset_refuses(tmp_path: Path, bad, words) -> None:
    buffer = EpisodeReplayBuffer(100, seed=0)
    for i in range(5):
        buffer.add(_episode(f"ep{i}", **(bad if i == 3 else {})))
    with pytest.raises(UnstorableValueError, match=r"stored episode 3 of 5.*'ep3'") as err:
        buffer.save(tmp_path / "save")
    assert words in str(err.value)
    assert not (tmp_path / "save").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_to_device_checks_a_torch_device_too() -> None:
    from episodes.replay.sampling import to_device

    with pytest.raises(DeviceError, match="not available"):
        to_device({"obs": np.zeros(2, np.float32)}, torch.device("cuda"))

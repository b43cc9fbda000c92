"""`get_transitions(..., device=)` gives a sample's torch columns, refusing bad devices first."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.errors import DeviceError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

torch = pytest.importorskip("torch")


def _buffer(kind):
    buf = kind(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[np.float32([t, -t]) for t in range(6)],
            actions=[1, 0, 1, 0, 1],
            rewards=[1.0, 2.0, 3.0, 4.0, 5.0],
            extra_model_outputs={"logp": np.float32([-0.1, -0.2, -0.3, -0.4, -0.5])},
            infos=[{"k": t} for t in range(6)],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    return buf


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("n_step", [1, 3])
def test_device_batch_equals_numpy_batch(kind, n_step):
    buf = _buffer(kind)
    items = buf.locate("a", [4, 0, 2])
    args = dict(n_step=n_step, gamma=0.5, include_infos=True, include_extra_model_outputs=True)
    plain = buf.get_transitions(items, **args)
    on_cpu = buf.get_transitions(items, device="cpu", **args)
    assert plain.keys() == on_cpu.keys()
    for key, value in plain.items():
        if value.dtype.kind == "O":  # infos stay object arrays, as in a sampled batch
            assert isinstance(on_cpu[key], np.ndarray)
            assert on_cpu[key].tolist() == value.tolist()
        else:
            assert isinstance(on_cpu[key], torch.Tensor), key
            assert on_cpu[key].device.type == "cpu"
            np.testing.assert_array_equal(on_cpu[key].numpy(), value)


BAD_DEVICES = [
    ("unknown name", "abc", DeviceError),
    ("meta device", "meta", ValueError),
    ("no device", 3.5, TypeError),
]


@pytest.mark.parametrize(
    ("device", "error"), [c[1:] for c in BAD_DEVICES], ids=[c[0] for c in BAD_DEVICES]
)
def test_bad_device_refused_and_buffer_unchanged(device, error):
    buf = _buffer(PrioritizedEpisodeReplayBuffer)
    before = buf.get_state()
    with pytest.raises(error, match="device"):
        buf.get_transitions([0, 1], device=device)
    assert pickle.dumps(buf.get_state()) == pickle.dumps(before)
    assert buf.get_transitions([0, 1])["obs"].tolist() == [[0.0, 0.0], [1.0, -1.0]]

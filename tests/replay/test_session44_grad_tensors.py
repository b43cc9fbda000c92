"""Replay ``add`` names a column of torch tensors that require grad, and stores nothing.

A hand-built episode (the runner records its policy's outputs detached) whose recurrent state
or other outputs still carry autograd was refused in torch's own words, a ``RuntimeError``
naming neither the chunk nor the column; now a ``TypeError`` naming both and the remedy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402


def _grad(n: int = 3) -> Any:
    return torch.zeros(n, requires_grad=True)


def _episode(id_: str, **columns: Any) -> SingleAgentEpisode:
    kwargs: dict[str, Any] = dict(
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[0.0, 1.0],
        len_lookback_buffer=0,
    )
    kwargs.update(columns)
    return SingleAgentEpisode(id_, **kwargs)


CASES = {
    "a flat extra": (
        {"extra_model_outputs": {"q": [_grad(), _grad()]}},
        r"extra_model_outputs\['q'\]: holds torch tensors that require grad",
    ),
    "an (h, c) state": (
        {"extra_model_outputs": {"state": [(_grad(), torch.zeros(3))] * 2}},
        r"extra_model_outputs\['state'\]\[0\]: holds torch tensors that require grad",
    ),
    "observations": (
        {"observations": [_grad(2) for _ in range(3)]},
        r"observations.*: holds torch tensors that require grad",
    ),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("name", list(CASES))
def test_grad_tensors_are_named_and_nothing_is_stored(cls, name):
    columns, words = CASES[name]
    buf = cls(100, seed=0)
    buf.add(_episode("kept"))
    before = buf.get_counters()
    with pytest.raises(TypeError, match=r"chunk 0 \(episode 'g'\): " + words) as refused:
        buf.add(_episode("g", **columns))
    assert "detach()" in str(refused.value)
    assert buf.get_episode_ids() == ["kept"] and buf.get_num_timesteps() == 2
    assert buf.get_counters() == before


def test_the_same_tensors_detached_are_stored():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("d", extra_model_outputs={"state": [(_grad().detach(), torch.ones(3))] * 2}))
    batch = buf.sample(4, include_extra_model_outputs=True)
    assert batch["state"][1].tolist() == [[1.0] * 3] * 4

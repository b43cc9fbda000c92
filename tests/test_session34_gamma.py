"""``gamma`` given as a 0-d array or tensor, as learners often hold it.

The counts and ``beta`` took 0-d arrays and tensors; ``gamma`` refused them with "must be a
float in [0, 1], got tensor(0.9900)", a value inside [0, 1].
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.indexing import discount_factor
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import compute_gae

TAKEN = {
    "numpy-0d": (np.array(0.5), 0.5),
    "numpy-0d-int": (np.array(1), 1.0),
    "torch-0d": (torch.tensor(0.25, dtype=torch.float64), 0.25),
    "torch-0d-float32": (torch.tensor(0.5), 0.5),
}
REFUSED = {
    "torch-bool": torch.tensor(True),
    "numpy-bool": np.array(True),
    "one-element": np.array([0.5]),
    "one-element-tensor": torch.tensor([0.5]),
    "complex": np.array(0.5 + 0j),
    "text": np.array("0.5"),
    "beyond-one": torch.tensor(2.0),
    "nan": torch.tensor(float("nan")),
}


@pytest.mark.parametrize(("gamma", "want"), TAKEN.values(), ids=TAKEN.keys())
def test_a_zero_d_array_or_tensor_is_its_number(gamma, want):
    assert discount_factor(gamma) == want
    assert type(discount_factor(gamma)) is float


@pytest.mark.parametrize("gamma", REFUSED.values(), ids=REFUSED.keys())
def test_other_arrays_and_bools_are_still_refused(gamma):
    with pytest.raises(ValueError, match=r"gamma must be a float in \[0, 1\]"):
        discount_factor(gamma)


def test_replay_and_gae_take_a_tensor_gamma_as_the_float():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 1, 0],
            rewards=[1.0, 2.0, 4.0],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    items = buf.locate(buf.get_episode_ids()[0], [0, 1, 2])
    want = buf.get_transitions(items, n_step=3, gamma=0.5)
    got = buf.get_transitions(items, n_step=3, gamma=torch.tensor(0.5, dtype=torch.float64))
    assert got["rewards"].tolist() == want["rewards"].tolist() == [3.0, 4.0, 4.0]
    assert np.array_equal(got["discounts"], want["discounts"])
    rewards, values = torch.rand(5, 3), torch.rand(5, 3)
    dones, last = torch.zeros(5, 3), torch.rand(3)
    args = dict(rewards=rewards, values=values, dones=dones, last_values=last)
    assert torch.equal(
        compute_gae(**args, gamma=torch.tensor(0.5), lam=np.array(0.75))[0],
        compute_gae(**args, gamma=0.5, lam=0.75)[0],
    )

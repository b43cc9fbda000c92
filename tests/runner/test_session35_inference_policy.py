"""A runner sampled under ``torch.inference_mode`` hands a grad-tracking policy normal tensors next.

The observation (and recurrent state) a call keeps for the next one was the inference tensor
that call made: a later call outside inference mode gave it to a policy that tracks grad, whose
forward failed ("Inference tensors cannot be saved for backward").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner


def _plain_runner():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 2)

    def policy(obs):
        assert not obs.is_inference() or torch.is_inference_mode_enabled()
        logits = layer(obs.float())
        return logits.argmax(-1), {"vf": logits[:, 0]}

    return EnvRunner(TorchCartPole(4), policy, seed=0)


def _recurrent_runner():
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(4, 3)

    def policy(obs, state):
        assert not state.is_inference() or torch.is_inference_mode_enabled()
        state = cell(obs.float(), state)
        return (state[:, 0] > 0).long(), {}, state

    return EnvRunner(TorchCartPole(4), policy, seed=0, initial_state=lambda n: torch.zeros(n, 3))


RUNNERS = {"feed-forward": _plain_runner, "recurrent": _recurrent_runner}
# What each of three calls runs under.
ORDERS = {
    "inference-then-grad": ["inference", "grad", "grad"],
    "grad-inference-grad": ["grad", "inference", "grad"],
    "inference-no-grad-grad": ["inference", "no_grad", "grad"],
}
MODES = {
    "inference": torch.inference_mode,
    "no_grad": torch.no_grad,
    "grad": torch.enable_grad,
}


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
@pytest.mark.parametrize("make", RUNNERS.values(), ids=RUNNERS.keys())
def test_calls_after_inference_mode_give_the_policy_normal_tensors(make, order):
    runner, expected = make(), make()
    for mode in order:
        with MODES[mode]():
            got = runner.sample(6)
        with torch.no_grad():
            want = expected.sample(6)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.get_observations(), b.get_observations())
            np.testing.assert_array_equal(a.get_actions(), b.get_actions())

"""ppo_recurrent's bootstrap value of an ongoing chunk is V(o_T | h_T): the value the policy
itself computed at that observation when the episode went on (the continuing chunk's first
``vf_preds``). It used the runner's live state, which in next-step mode has moved past the
env's window (the runner steps on while other envs make up their reset steps)."""

from __future__ import annotations

import numpy as np
import torch

from episodes.runner import EnvRunner
from tests.examples._load import load


def test_ongoing_chunks_bootstrap_with_the_state_at_their_last_observation():
    pr = load("ppo_recurrent")
    torch.manual_seed(0)
    model = pr.RecurrentActorCritic(2, 2, 16, 1)
    policy = pr.RecurrentSamplingPolicy(model, torch.device("cpu"))
    runner = EnvRunner(pr.make_env(8), policy, state_batch_axis=1, seed=0)
    checked = 0
    previous = list(runner.sample(32))
    for _ in range(3):
        pr.store_bootstrap_values(previous, runner, model, torch.device("cpu"))
        current = list(runner.sample(32))
        first_value = {
            ep.id_: ep.get_extra_model_outputs("vf_preds", 0) for ep in current if len(ep)
        }
        for ep in previous:
            if not ep.is_done and ep.id_ in first_value:
                got, want = ep.custom_data["bootstrap_value"], float(first_value[ep.id_])
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
                checked += 1
        previous = current
    assert checked >= 8

"""A torch env's uint16/uint32/uint64 observations convert on the block path too.

torch has no CPU ``index_select`` for these dtypes; the runner's device columns gather their
rows through the same bits as signed ints, so ``layout="per_env"`` gives the same storage as
the chunks taken one by one (bit for bit, dtype kept), and ``"per_chunk"`` keeps the dtype.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner
from tests.runner._tensor_env import TensorVectorEnv

pytestmark = pytest.mark.torch_2_3  # torch.uint16-64


class _CountingEnv(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def __init__(self, dtype: type, shape: tuple[int, ...], length: int, truncate: bool = False):
        info = np.iinfo(dtype)
        self.observation_space = gym.spaces.Box(0, info.max - 1, shape, dtype)
        self.top, self.shape, self.length, self.t = int(info.max) - 1, shape, length, 0
        self.truncate = truncate

    def _obs(self) -> np.ndarray:
        # Values near the top of the range: a sign error or a cast would show.
        return np.full(self.shape, self.top - self.t, self.observation_space.dtype)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        ended = self.t >= self.length
        return self._obs(), 1.0, ended and not self.truncate, ended and self.truncate, {}


def _policy(obs: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    n = obs.shape[0]
    outputs = {"vf_preds": torch.zeros(n), "action_logp": torch.zeros(n)}
    return torch.ones(n, dtype=torch.long), outputs


def _zeros(obs: torch.Tensor) -> torch.Tensor:
    return torch.zeros(len(obs))


# Same-step truncations bootstrap from final observations kept apart from the blocks: their
# rows are put into the batch by index, which torch also lacks for these dtypes (round 25).
ENDINGS = [
    pytest.param(gym.vector.AutoresetMode.NEXT_STEP, False, id="next-step-terminated"),
    pytest.param(gym.vector.AutoresetMode.SAME_STEP, True, id="same-step-truncated"),
]


@pytest.mark.parametrize(("mode", "truncate"), ENDINGS)
@pytest.mark.parametrize("shape", [(), (2,)], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_per_env_layout_equals_the_chunks_one_by_one(dtype, shape, mode, truncate):
    makers = [lambda n=n: _CountingEnv(dtype, shape, 2 + n, truncate) for n in range(3)]
    env = TensorVectorEnv(gym.vector.SyncVectorEnv(makers, autoreset_mode=mode))
    sample = EnvRunner(env, _policy, seed=0).sample(5)
    per_env = episodes_to_rollout(sample, gamma=0.9, value_fn=_zeros).storage
    per_chunk = episodes_to_rollout(sample, gamma=0.9, value_fn=_zeros, layout="per_chunk")
    one_by_one = episodes_to_rollout(
        sample.by_env(), gamma=0.9, value_fn=_zeros, device="cpu"
    ).storage
    dtype_name = getattr(torch, np.dtype(dtype).name)
    assert per_chunk.storage.observations.dtype == dtype_name
    assert per_env.observations.dtype == one_by_one.observations.dtype == dtype_name
    as_bytes = [s.observations.reshape(-1).view(torch.uint8) for s in (per_env, one_by_one)]
    assert torch.equal(*as_bytes)
